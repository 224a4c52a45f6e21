/* common.c -- what the subcommands share: the global options, durations,
 * messages, exit codes for the library's errors, configuring the library,
 * naming a lock's holder.
 *
 * DESIGN
 * ------
 * Every message is one line on stderr, "rmutex: " first.  say() is for
 * what -q silences, err() for errors, which it does not.  main.c only
 * parses the global options and hands over to a subcommand's file; the
 * subcommands call in here and never into one another or into main.c. */
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

void holder_name(const rmutex_lockinfo_t *in, char *buf, size_t size)
{
    if (!in->holder_known) {
        snprintf(buf, size, "%s", in->owner);
        return;
    }
    const char *prog = strrchr(in->holder_exe, '/');
    prog = prog ? prog + 1 : in->holder_exe;
    snprintf(buf, size, "pid %ld on %s%s%s%s", in->holder_pid, in->holder_host, *prog ? " (" : "",
             prog, *prog ? ")" : "");
}
