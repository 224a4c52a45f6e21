/* top.c -- rmutex top [-n N]: the busiest locks, refreshed every second.
 *
 * DESIGN
 * ------
 * Two reads of every process's published counters (rmutex_metrics) a
 * second apart give each lock name's acquisitions per second: per process
 * series, the difference of its acquisitions between the two publications
 * the reads saw, over the time between those publications (the server's
 * "announced" times, not the reads': a process publishes about once a
 * second while it locks, so the reads' one second would catch zero, one
 * or two publications); a series not published again since keeps the
 * rate last found, and a series new in the second read starts at 0 (a
 * process that just published must not look like a burst).  Summed per
 * name.  So a rate is an average over about a second, seen up to a
 * second late.  Then, for the names
 * shown: the threads waiting now and the longest of their waits (the
 * announced waits, rmutex_waits: those longer than announce_wait), and
 * the holder (rmutex_inspect).  Busiest first: by rate, then by waiters.
 *
 * On a terminal the screen is redrawn each second until q or Ctrl-C (the
 * terminal's mode is put back); otherwise, or with -n N, each refresh is
 * printed as a block of plain lines (a header, then one line per lock,
 * then an empty line) and -n N stops after N of them: for scripts and
 * tests. */
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* One line: a lock name and what is known of it now. */
struct row {
    const char *name;
    double rate;
    size_t waiting;
    int64_t longest_ms;
};

struct read {
    rmutex_metricinfo_t *s;
    size_t n;
    double *rate; /* each series' acquisitions per second */
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static struct termios saved;
static int raw;

static void terminal_restore(void)
{
    if (raw) tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    raw = 0;
}

/* Keys without Enter (q), no echo; put back at exit. */
static void terminal_raw(void)
{
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved)) return;
    struct termios t = saved;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    if (!tcsetattr(STDIN_FILENO, TCSANOW, &t)) raw = 1;
}

/* Sleep until deadline (mono ns), or until q or a signal: 1 to stop. */
static int pause_until(int64_t deadline, int keys)
{
    while (!interrupted) {
        int64_t left = deadline - mono_ns();
        if (left <= 0) return 0;
        struct pollfd p = { STDIN_FILENO, POLLIN, 0 };
        int r = poll(&p, keys ? 1 : 0, (int)(left / 1000000) + 1);
        if (r > 0) {
            char c;
            ssize_t k = read(STDIN_FILENO, &c, 1);
            if (k == 1 && (c == 'q' || c == 'Q')) return 1;
            if (k == 0) keys = 0; /* end of input: keys no more */
        }
    }
    return 1;
}

static int take(struct read *rd)
{
    int r = metrics_collect(&rd->s, &rd->n);
    if (r) return r;
    if (!(rd->rate = calloc(rd->n ? rd->n : 1, sizeof *rd->rate))) {
        free(rd->s);
        return ENOMEM;
    }
    return 0;
}

static void read_free(struct read *rd)
{
    free(rd->s);
    free(rd->rate);
}

/* Find name's row in rows[0..*n), adding it when new. */
static struct row *row_of(struct row **rows, size_t *n, size_t *cap, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*rows)[i].name, name)) return &(*rows)[i];
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 32;
        struct row *r = realloc(*rows, c * sizeof *r);
        if (!r) return NULL;
        *rows = r;
        *cap = c;
    }
    (*rows)[*n] = (struct row){ name, 0, 0, 0 };
    return &(*rows)[(*n)++];
}

static int busiest_first(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    if (x->rate != y->rate) return x->rate < y->rate ? 1 : -1;
    if (x->waiting != y->waiting) return x->waiting < y->waiting ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* The rows from two reads (both sorted by labels) and the waits; b's
 * rates are set on the way. */
static struct row *rows_make(const struct read *a, struct read *b, const struct waits *ws,
                             size_t *n)
{
    struct row *rows = NULL;
    size_t cap = 0;
    *n = 0;
    size_t i = 0;
    for (size_t k = 0; k < b->n; k++) {
        const rmutex_metricinfo_t *m = &b->s[k];
        while (i < a->n && metrics_compare(&a->s[i], m) < 0) i++;
        struct row *r = row_of(&rows, n, &cap, m->name);
        if (!r) break;
        if (i < a->n && !metrics_compare(&a->s[i], m)) {
            const rmutex_metricinfo_t *was = &a->s[i];
            int64_t ms = m->published_ms - was->published_ms;
            b->rate[k] = ms > 0 && m->acquisitions >= was->acquisitions
                             ? (double)(m->acquisitions - was->acquisitions) * 1000 / (double)ms
                             : a->rate[i]; /* not published since: the rate known */
        }
        r->rate += b->rate[k];
    }
    for (size_t k = 0; k < ws->n; k++) {
        if (ws->w[k].kind == RMUTEX_WAIT_COND) continue; /* a condition is no lock */
        struct row *r = row_of(&rows, n, &cap, ws->w[k].name);
        if (!r) break;
        r->waiting++;
        if (ws->w[k].waited_ms > r->longest_ms) r->longest_ms = ws->w[k].waited_ms;
    }
    if (*n) qsort(rows, *n, sizeof *rows, busiest_first);
    return rows;
}

/* The lines a screen has room for (20 when not a terminal). */
static size_t room(int tty)
{
    struct winsize w;
    if (tty && !ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) && w.ws_row > 4) return w.ws_row - 3u;
    return 20;
}

static void print_rows(const struct row *rows, size_t n, int tty)
{
    time_t now = time(NULL);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&now));
    if (tty) fputs("\033[H\033[2J", stdout);
    printf("rmutex top  %s  %zu lock%s%s\n", when, n, n == 1 ? "" : "s", tty ? "  (q: quit)" : "");
    printf("%-32s %9s %7s %12s  %s\n", "NAME", "ACQ/S", "WAITING", "LONGEST WAIT", "HOLDER");
    size_t shown = n < room(tty) ? n : room(tty);
    for (size_t i = 0; i < shown; i++) {
        char longest[24] = "-", holder[160] = "-";
        if (rows[i].waiting) span(rows[i].longest_ms, longest, sizeof longest);
        rmutex_lockinfo_t in;
        if (*rows[i].name && !rmutex_inspect(rows[i].name, &in, sizeof in) && in.held) {
            struct holder h = HOLDER_OF(&in);
            holder_name(&h, holder, sizeof holder);
        }
        printf("%-32s %9.1f %7zu %12s  %s\n", *rows[i].name ? rows[i].name : "(other)",
               rows[i].rate, rows[i].waiting, longest, holder);
    }
    if (!tty) putchar('\n');
    fflush(stdout);
}

static void top_usage(FILE *f)
{
    fputs("usage: rmutex [GLOBAL OPTIONS] top [-n N]\n"
          "The busiest locks, refreshed every second: acquisitions per second (from every\n"
          "process's published counters, read a second apart), threads waiting now and the\n"
          "longest wait (waits longer than announce_wait), the holder.  q or Ctrl-C quits.\n"
          "  -n N   stop after N refreshes; when stdout is not a terminal, each refresh is\n"
          "         printed as plain lines followed by an empty line\n"
          "Exit: 0; 64 usage; 69 Redis unreachable; 76 a Redis error; 77 login or ACL\n"
          "refused.\n",
          f);
}

int cmd_top(int argc, char **argv)
{
    long iterations = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (wants_help(argv[i])) {
            top_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            iterations = strtol(argv[++i], &end, 10);
            if (*end || iterations <= 0) {
                err("top: -n wants a positive number, not %s", argv[i]);
                return EXIT_USAGE;
            }
        } else {
            err("top: unknown argument %s", argv[i]);
            return EXIT_USAGE;
        }
    }
    int r = configure();
    if (r) return r;
    int tty = isatty(STDOUT_FILENO);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (tty) terminal_raw();
    struct read prev, cur;
    if ((r = take(&prev))) {
        terminal_restore();
        return redis_failed("top", NULL, r);
    }
    for (long k = 0; !iterations || k < iterations; k++) {
        if (pause_until(mono_ns() + 1000000000, raw)) break;
        struct waits ws;
        if ((r = take(&cur))) break;
        if ((r = waits_collect(NULL, &ws))) {
            read_free(&cur);
            break;
        }
        size_t n;
        struct row *rows = rows_make(&prev, &cur, &ws, &n);
        print_rows(rows, n, tty);
        free(rows);
        waits_free(&ws);
        read_free(&prev);
        prev = cur;
    }
    read_free(&prev);
    terminal_restore();
    if (r) return redis_failed("top", NULL, r);
    return 0;
}
