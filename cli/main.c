/* main.c -- the rmutex command: global options, then one subcommand.
 *
 *   rmutex [--url URL] [-v|-q] run [OPTIONS] NAME [--] COMMAND [ARG...]
 *   rmutex [--url URL] [-v|-q] run [OPTIONS] NAME -c 'SHELL COMMAND'
 *   rmutex [--url URL] unlock --force [--if-owner ID] NAME
 *   rmutex [--url URL] status [--json] NAME...
 *   rmutex [--url URL] wait [-w DURATION] [-E N] [--held|--free] NAME
 *   rmutex [--url URL] list [--json] [PATTERN]
 *   rmutex [--url URL] deadlocks [--json]
 *   rmutex [--url URL] stats [--prom|--json]
 *   rmutex [--url URL] top [-n N]
 *   rmutex -V|--version, rmutex [COMMAND] -h|--help
 *
 * The library does the locking; this file only parses the global options
 * and hands over to the subcommand's file (run.c, unlock.c, status.c, deadlocks.c,
 * stats.c, top.c),
 * which use what common.c has.  A password belongs in RMUTEX_URL rather
 * than on the command line, where ps(1) shows it: --url with one gets a
 * warning. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: rmutex [GLOBAL OPTIONS] run [OPTIONS] NAME [--] COMMAND [ARG...]\n"
          "       rmutex [GLOBAL OPTIONS] run [OPTIONS] NAME -c 'SHELL COMMAND'\n"
          "       rmutex [GLOBAL OPTIONS] unlock --force [--if-owner ID] NAME\n"
          "       rmutex [GLOBAL OPTIONS] status [--json] NAME...\n"
          "       rmutex [GLOBAL OPTIONS] wait [-w DURATION] [-E N] [--held|--free] NAME\n"
          "       rmutex [GLOBAL OPTIONS] list [--json] [PATTERN]\n"
          "       rmutex [GLOBAL OPTIONS] deadlocks [--json]\n"
          "       rmutex [GLOBAL OPTIONS] stats [--prom|--json]\n"
          "       rmutex [GLOBAL OPTIONS] top [-n N]\n"
          "Locks held in Redis, shared by every machine that uses the same name and Redis:\n"
          "run a command under one, break one, look at them.  COMMAND --help for each.\n"
          "Global options:\n"
          "      --url URL    the Redis deployment; default RMUTEX_URL, else\n"
          "                   redis://127.0.0.1:6379 (a password on the command line shows in ps)\n"
          "  -v, --verbose    say more\n"
          "  -q, --quiet      errors only\n"
          "  -V, --version    the version\n"
          "  -h, --help       this text\n"
          "See rmutex(1).\n",
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
        } else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
            printf("rmutex %s\n", rmutex_version_string());
            return 0;
        } else if (wants_help(a)) {
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
    if (!strcmp(argv[i], "deadlocks")) return cmd_deadlocks(argc - i, argv + i);
    if (!strcmp(argv[i], "stats")) return cmd_stats(argc - i, argv + i);
    if (!strcmp(argv[i], "top")) return cmd_top(argc - i, argv + i);
    err("unknown command '%s'", argv[i]);
    usage(stderr);
    return EXIT_USAGE;
}
