/* main.c -- the rmutex command: global options, then one subcommand.
 *
 *   rmutex [--url URL] [-v|-q] run [OPTIONS] NAME [--] COMMAND [ARG...]
 *   rmutex [--url URL] [-v|-q] run [OPTIONS] NAME -c 'SHELL COMMAND'
 *   rmutex [--url URL] unlock --force [--if-owner ID] NAME
 *   rmutex [--url URL] status [--json] NAME...
 *   rmutex [--url URL] wait [-w DURATION] [-E N] [--held] NAME
 *   rmutex [--url URL] list [--json] [PATTERN]
 *
 * The library does the locking; this file only parses and reports.  A
 * password belongs in RMUTEX_URL rather than on the command line, where
 * ps(1) shows it: --url with one gets a warning. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct global g;

int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void vmessage(const char *fmt, va_list ap)
{
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "rmutex: %s\n", line);
}

void say(const char *fmt, ...)
{
    if (g.quiet) return;
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
}

void err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
}

int parse_duration(const char *s, int64_t *ns)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) return -1;
    double unit = 1e9;
    if (!strcmp(end, "ms")) unit = 1e6;
    else if (!strcmp(end, "s") || !*end) unit = 1e9;
    else if (!strcmp(end, "m")) unit = 60e9;
    else if (!strcmp(end, "h")) unit = 3600e9;
    else return -1;
    if (v * unit > 9e18) return -1;
    *ns = (int64_t)(v * unit);
    return 0;
}

int exit_for(int rc)
{
    switch (rc) {
    case EACCES: return EXIT_NOPERM;
    case EINVAL: return EXIT_USAGE;
    case EAGAIN: case ETIMEDOUT: case ECONNREFUSED: return EXIT_UNAVAILABLE;
    default: return EXIT_PROTOCOL;
    }
}

int configure(void)
{
    if (!g.url) return 0;
    if (strchr(g.url, '@'))
        say("warning: a password given with --url shows in ps(1); prefer RMUTEX_URL");
    int r = rmutex_configure(g.url);
    if (r) {
        err("--url: %s", rmutex_detail());
        return EXIT_USAGE;
    }
    return 0;
}

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
