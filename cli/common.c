/* common.c -- what the subcommands share: the global options, durations,
 * messages, configuring the library, how a failed call to Redis is told
 * and exited with, outages told as they happen, naming a lock's holder.
 *
 * DESIGN
 * ------
 * main.c only parses the global options and hands over to a subcommand's
 * file; the subcommands call in here and never into one another or into
 * main.c.
 *
 * Every message is one line on stderr, "rmutex: " first, written whole:
 * no buffer of ours cuts a long text from Redis short.  say() is for what
 * -q silences, err() for errors, which it does not.
 *
 * A call that talks to Redis and fails is reported by redis_failed(): the
 * library's detail (rmutex_detail()) made readable, and an exit code from
 * the error and that detail.  The detail is the only place that tells some
 * cases apart, so the few phrases looked for are here and nowhere else:
 *   - WRONGTYPE, "not an integer": a key of the lock holds data that is not
 *     a lock's (the name collides with other data): 76, not the usage code
 *     the library's EINVAL otherwise means, and without the script's
 *     location Redis appends (it is ours, not the user's business);
 *   - a dial that met a server answering in another protocol: that server
 *     is not Redis; one that accepted and then said nothing or hung up:
 *     said so, with the address as the user gave it (password masked).
 * A refused login (wrong or missing password, a disabled ACL user, an ACL
 * without the commands) is EACCES from the library: 77 at once, a
 * configuration error that waiting would not cure.
 *
 * While run or wait waits, outages are told as they happen, whatever
 * stderr is (a terminal or cron's mail): one line when Redis cannot be
 * reached, one when it can again (the library's outage callback, once per
 * change).  Not silenced by -q: they say why nothing is happening. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct global g;

int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* One line, in one write when it can be (stderr is unbuffered). */
static void vmessage(const char *fmt, va_list ap)
{
    char *line;
    if (vasprintf(&line, fmt, ap) >= 0) {
        fprintf(stderr, "rmutex: %s\n", line);
        free(line);
        return;
    }
    fputs("rmutex: (out of memory for a message)\n", stderr);
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

int wants_help(const char *arg)
{
    return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

int configure(void)
{
    const char *url = g.url ? g.url : getenv("RMUTEX_URL");
    if (!url || !*url) return 0;
    if (g.url && strchr(g.url, '@'))
        say("warning: a password given with --url shows in ps(1); prefer RMUTEX_URL");
    int r = rmutex_configure(url);
    if (r) {
        err("%s: %s", g.url ? "--url" : "RMUTEX_URL", rmutex_detail());
        return EXIT_USAGE;
    }
    /* What the library warns of at once: TLS without checks (insecure=1). */
    if (!strncmp(rmutex_detail(), "warning: ", 9)) say("%s", rmutex_detail());
    return 0;
}

/* The URL in force as the user gave it, without its options and with its
 * password masked: "redis://app:***@cache:6379/2".  Malloc'd. */
static char *url_shown(void)
{
    const char *u = g.url ? g.url : getenv("RMUTEX_URL");
    if (!u || !*u) u = "redis://127.0.0.1:6379";
    size_t len = strcspn(u, "?");
    const char *auth = strstr(u, "://");
    auth = auth && (size_t)(auth - u) < len ? auth + 3 : u;
    const char *at = memchr(auth, '@', len - (size_t)(auth - u));
    char *s = NULL;
    if (!at) {
        s = strndup(u, len);
    } else {
        const char *colon = memchr(auth, ':', (size_t)(at - auth));
        const char *secret = colon ? colon + 1 : auth;
        if (asprintf(&s, "%.*s***%.*s", (int)(secret - u), u, (int)(len - (size_t)(at - u)), at) < 0)
            s = NULL;
    }
    return s;
}

static const char *after(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(s, prefix, n) ? NULL : s + n;
}

/* An outage's detail as a user reads it.  Malloc'd (NULL: use detail). */
static char *outage_text(const char *detail)
{
    const char *rest = after(detail, "protocol error from Redis: ");
    int silent = after(detail, "reading from Redis: ") || after(detail, "waiting for Redis's reply: ");
    if (!rest && !silent) return NULL;
    char *url = url_shown(), *s = NULL;
    if (url && rest && asprintf(&s, "the server at %s is not Redis (%s)", url, rest) < 0) s = NULL;
    if (url && silent &&
        asprintf(&s, "the server at %s accepted the connection but gave no answer (%s)", url,
                 detail) < 0)
        s = NULL;
    free(url);
    return s;
}

static volatile int down_now;

static void on_outage(int down, const char *detail, void *arg)
{
    (void)arg;
    down_now = down;
    if (isatty(2)) fputs("\r\033[K", stderr); /* over a waiting line (run.c) */
    if (!down) {
        err("Redis reachable again");
        return;
    }
    char *text = outage_text(detail);
    err("Redis unreachable: %s", text ? text : detail);
    free(text);
}

void report_outages(void) { rmutex_set_outage_callback(on_outage, NULL); }

int redis_down(void) { return down_now; }

/* A key of the lock holds another type of value than the lock's. */
static int wrong_type(const char *detail)
{
    return strstr(detail, "WRONGTYPE") || strstr(detail, "not an integer");
}

int redis_failed(const char *what, const char *name, int rc)
{
    const char *detail = rmutex_detail();
    const char *sep = name ? ": " : "";
    name = name ? name : "";
    if (rc == EINVAL && wrong_type(detail)) {
        /* Redis's text without the script's location ("script: <sha>, on
         * @user_script:88."): that is ours, not the user's. */
        const char *text = after(detail, "Redis answered: ");
        text = text ? text : detail;
        const char *loc = strstr(text, " script: ");
        err("%s: %s%sthe name is taken by data that is not a lock (Redis answered: %.*s)", what,
            name, sep, (int)(loc ? (size_t)(loc - text) : strlen(text)), text);
        return EXIT_PROTOCOL;
    }
    int unreachable = rc == EAGAIN || rc == ETIMEDOUT || rc == ECONNREFUSED;
    char *text = unreachable ? outage_text(detail) : NULL;
    err("%s: %s%s%s", what, name, sep, text ? text : detail);
    free(text);
    return unreachable     ? EXIT_UNAVAILABLE
           : rc == EACCES ? EXIT_NOPERM
           : rc == EINVAL ? EXIT_USAGE
                          : EXIT_PROTOCOL;
}

void holder_name(const struct holder *h, char *buf, size_t size)
{
    if (!h->known) {
        snprintf(buf, size, "%s", h->owner);
        return;
    }
    const char *prog = strrchr(h->exe, '/');
    prog = prog ? prog + 1 : h->exe;
    snprintf(buf, size, "pid %ld on %s%s%s%s", h->pid, h->host, *prog ? " (" : "", prog,
             *prog ? ")" : "");
}

/* s as a JSON string (the names and ids are printable; escape what JSON
 * needs). */
void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* A duration for people: 850ms, 12.3s, 4m05s, 2h07m, 3d04h. */
void span(int64_t ms, char *buf, size_t size)
{
    int64_t s = ms / 1000;
    if (ms < 1000) snprintf(buf, size, "%lldms", (long long)ms);
    else if (s < 60) snprintf(buf, size, "%.1fs", (double)ms / 1000);
    else if (s < 3600) snprintf(buf, size, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
    else if (s < 86400) snprintf(buf, size, "%lldh%02lldm", (long long)(s / 3600), (long long)(s / 60 % 60));
    else snprintf(buf, size, "%lldd%02lldh", (long long)(s / 86400), (long long)(s / 3600 % 24));
}

void json_process(const char *host, long pid, const char *exe, const char *cmd)
{
    printf("\"host\":");
    json_str(host);
    printf(",\"pid\":%ld,\"exe\":", pid);
    json_str(exe);
    printf(",\"cmd\":");
    json_str(cmd);
}

void json_wait(const rmutex_waitinfo_t *w)
{
    printf("\"owner\":");
    json_str(w->owner);
    printf(",\"kind\":\"%s\",\"waited_ms\":%lld,\"detect\":%s,", wait_kind_name(w->kind),
           (long long)w->waited_ms, w->detect ? "true" : "false");
    json_process(w->host, w->pid, w->exe, w->cmd);
}

static int collect_one(const rmutex_waitinfo_t *w, void *arg)
{
    struct waits *ws = arg;
    if (ws->n == ws->cap) {
        size_t cap = ws->cap ? 2 * ws->cap : 16;
        rmutex_waitinfo_t *a = realloc(ws->w, cap * sizeof *a);
        if (!a) return ENOMEM;
        ws->w = a;
        ws->cap = cap;
    }
    ws->w[ws->n++] = *w;
    return 0;
}

int waits_collect(const char *name, struct waits *ws)
{
    memset(ws, 0, sizeof *ws);
    int r = rmutex_waits(name, collect_one, ws);
    if (r) waits_free(ws);
    return r;
}

void waits_free(struct waits *ws)
{
    free(ws->w);
    memset(ws, 0, sizeof *ws);
}

struct holder waiter_process(const rmutex_waitinfo_t *w)
{
    struct holder h = { w->owner, w->pid != 0, w->pid, w->host, w->exe, w->cmd, w->lib, -1 };
    return h;
}

const char *wait_kind_name(char kind)
{
    switch (kind) {
    case RMUTEX_WAIT_MUTEX: return "mutex";
    case RMUTEX_WAIT_FAIR: return "fair";
    case RMUTEX_WAIT_READ: return "read";
    case RMUTEX_WAIT_WRITE: return "write";
    case RMUTEX_WAIT_COND: return "cond";
    case RMUTEX_WAIT_SEM: return "sem";
    case RMUTEX_WAIT_BARRIER: return "barrier";
    case RMUTEX_WAIT_ONCE: return "once";
    default: return "?";
    }
}
