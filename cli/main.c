/* main.c -- the rmutex command: global options, then one subcommand.
 *
 *   rmutex [--url URL] [-v|-q] run [OPTIONS] NAME [--] COMMAND [ARG...]
 *   rmutex [--url URL] [-v|-q] run [OPTIONS] NAME -c 'SHELL COMMAND'
 *   rmutex [--url URL] unlock --force [--if-owner ID] NAME
 *   rmutex [--url URL] status [--json] NAME...
 *   rmutex [--url URL] wait [-w DURATION] [-E N] [--held] NAME
 *   rmutex [--url URL] list [--json] [PATTERN]
 *
 * The library does the locking; this file only parses the global options
 * and hands over to the subcommand's file (run.c, unlock.c, status.c),
 * which use what common.c has.  A password belongs in RMUTEX_URL rather
 * than on the command line, where ps(1) shows it: --url with one gets a
 * warning. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: rmutex [--url URL] [-v|-q] run [OPTIONS] NAME [--] COMMAND [ARG...]\n"
          "       rmutex [--url URL] [-v|-q] run [OPTIONS] NAME -c 'SHELL COMMAND'\n"
          "       rmutex [--url URL] unlock --force [--if-owner ID] NAME\n"
          "       rmutex [--url URL] status [--json] NAME...\n"
          "       rmutex [--url URL] wait [-w DURATION] [-E N] [--held] NAME\n"
          "       rmutex [--url URL] list [--json] [PATTERN]\n"
          "run options: -n/--nonblock, -w/--timeout DUR, -E/--conflict-exit-code N, -c CMD,\n"
          "  --verbose, --fair, --lease DUR, --robust, --max-time DUR, --kill-after DUR,\n"
          "  --on-lost term|kill|ignore\n"
          "Redis: --url, else RMUTEX_URL, else redis://127.0.0.1:6379.  See rmutex(1).\n",
          f);
}

int main(int argc, char **argv)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--url") && i + 1 < argc) {
            g.url = argv[++i];
        } else if (!strncmp(a, "--url=", 6)) {
            g.url = a + 6;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            g.verbose = 1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            g.quiet = 1;
        } else if (!strcmp(a, "--version")) {
            printf("rmutex %s\n", rmutex_version_string());
            return 0;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            err("unknown option %s", a);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[i], "run")) return cmd_run(argc - i, argv + i);
    if (!strcmp(argv[i], "unlock")) return cmd_unlock(argc - i, argv + i);
    if (!strcmp(argv[i], "status")) return cmd_status(argc - i, argv + i);
    if (!strcmp(argv[i], "wait")) return cmd_wait(argc - i, argv + i);
    if (!strcmp(argv[i], "list")) return cmd_list(argc - i, argv + i);
    err("unknown command '%s'", argv[i]);
    usage(stderr);
    return EXIT_USAGE;
}
