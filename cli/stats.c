/* stats.c -- rmutex stats [--prom|--json]: every process's published
 * counters, per lock name.
 *
 * DESIGN
 * ------
 * Each process that uses rmutex publishes, on its holder-registry call,
 * the counters of its busiest lock names (at most RMUTEX_METRICS_NAMES,
 * the rest as one series named "") -- rmutex_metrics() reads them back
 * from every primary.  This prints them: a table for people; with --json
 * one object per process and name per line; with --prom Prometheus's text
 * exposition format (0.0.4), for a node exporter's textfile collector
 * (`rmutex stats --prom > dir/rmutex.prom.$$ && mv dir/rmutex.prom.$$
 * dir/rmutex.prom`) or a cron job.
 *
 * The Prometheus families: rmutex_acquisitions_total, _contended_ and
 * _uncontended_acquisitions_total, rmutex_lost_holds_total,
 * rmutex_renewals_total (counters), rmutex_wait_seconds and
 * rmutex_hold_seconds (histograms: the log2 buckets of microseconds as
 * le = 2^i us, cumulative, +Inf = _count), each series labelled name,
 * host, pid, program (the executable's base name).  Label values are
 * escaped as the format says (backslash, double quote, newline).  Series
 * are sorted by their labels, and two with the same labels (two processes
 * whose host, pid and program agree: containers) are summed, so no series
 * is printed twice; the cardinality is bounded by the publishers' bound:
 * (RMUTEX_METRICS_NAMES + 1) series per process and family. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct series_list {
    rmutex_metricinfo_t *s;
    size_t n, cap;
};

static int collect_one(const rmutex_metricinfo_t *m, void *arg)
{
    struct series_list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        rmutex_metricinfo_t *s = realloc(l->s, cap * sizeof *s);
        if (!s) return ENOMEM;
        l->s = s;
        l->cap = cap;
    }
    l->s[l->n++] = *m;
    return 0;
}

const char *program_of(const rmutex_metricinfo_t *m)
{
    const char *slash = strrchr(m->exe, '/');
    return slash ? slash + 1 : m->exe;
}

/* By the labels: name, host, pid, program. */
int metrics_compare(const void *a, const void *b)
{
    const rmutex_metricinfo_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (!c) c = strcmp(x->host, y->host);
    if (!c) c = (x->pid > y->pid) - (x->pid < y->pid);
    if (!c) c = strcmp(program_of(x), program_of(y));
    return c;
}

static void add_histogram(rmutex_histogram_t *to, const rmutex_histogram_t *h)
{
    to->count += h->count;
    to->sum_us += h->sum_us;
    for (int i = 0; i < RMUTEX_HISTOGRAM_BUCKETS; i++) to->bucket[i] += h->bucket[i];
}

void metrics_add(rmutex_metricinfo_t *to, const rmutex_metricinfo_t *m)
{
    to->acquisitions += m->acquisitions;
    to->contended += m->contended;
    to->uncontended += m->uncontended;
    to->locks_lost += m->locks_lost;
    to->renewals += m->renewals;
    add_histogram(&to->wait_time, &m->wait_time);
    add_histogram(&to->hold_time, &m->hold_time);
}

/* Sorted by labels, series with the same labels summed into one. */
static void sort_and_merge(struct series_list *l)
{
    if (!l->n) return;
    qsort(l->s, l->n, sizeof *l->s, metrics_compare);
    size_t k = 0;
    for (size_t i = 1; i < l->n; i++) {
        if (!metrics_compare(&l->s[k], &l->s[i])) metrics_add(&l->s[k], &l->s[i]);
        else l->s[++k] = l->s[i];
    }
    l->n = k + 1;
}

int metrics_collect(rmutex_metricinfo_t **out, size_t *n)
{
    struct series_list l = { 0 };
    int r = rmutex_metrics(collect_one, &l);
    if (r) {
        free(l.s);
        return r;
    }
    sort_and_merge(&l);
    *out = l.s;
    *n = l.n;
    return 0;
}

/* ---- Prometheus's text format ---- */

static void prom_escaped(const char *s)
{
    for (; *s; s++) {
        if (*s == '\\') fputs("\\\\", stdout);
        else if (*s == '"') fputs("\\\"", stdout);
        else if (*s == '\n') fputs("\\n", stdout);
        else putchar(*s);
    }
}

/* name{labels[,le="..."]} -- le NULL: none. */
static void prom_sample(const char *family, const char *suffix, const rmutex_metricinfo_t *m,
                        const char *le)
{
    printf("%s%s{name=\"", family, suffix);
    prom_escaped(m->name);
    printf("\",host=\"");
    prom_escaped(m->host);
    printf("\",pid=\"%ld\",program=\"", m->pid);
    prom_escaped(program_of(m));
    putchar('"');
    if (le) printf(",le=\"%s\"", le);
    putchar('}');
}

static void prom_header(const char *family, const char *type, const char *help)
{
    printf("# HELP %s %s\n# TYPE %s %s\n", family, help, family, type);
}

static void prom_counter(const rmutex_metricinfo_t *s, size_t n, const char *family,
                         const char *help, size_t offset)
{
    prom_header(family, "counter", help);
    for (size_t i = 0; i < n; i++) {
        prom_sample(family, "", &s[i], NULL);
        printf(" %llu\n", (unsigned long long)*(const uint64_t *)((const char *)&s[i] + offset));
    }
}

static void prom_histogram(const rmutex_metricinfo_t *s, size_t n, const char *family,
                           const char *help, size_t offset)
{
    prom_header(family, "histogram", help);
    for (size_t i = 0; i < n; i++) {
        const rmutex_histogram_t *h = (const void *)((const char *)&s[i] + offset);
        uint64_t below = 0;
        char le[32];
        /* bucket[b] holds [2^(b-1), 2^b) us; the last one is open. */
        for (int b = 0; b < RMUTEX_HISTOGRAM_BUCKETS - 1; b++) {
            below += h->bucket[b];
            snprintf(le, sizeof le, "%.9g", (double)(1ull << b) / 1e6);
            prom_sample(family, "_bucket", &s[i], le);
            printf(" %llu\n", (unsigned long long)below);
        }
        prom_sample(family, "_bucket", &s[i], "+Inf");
        printf(" %llu\n", (unsigned long long)h->count);
        prom_sample(family, "_sum", &s[i], NULL);
        printf(" %.6f\n", (double)h->sum_us / 1e6);
        prom_sample(family, "_count", &s[i], NULL);
        printf(" %llu\n", (unsigned long long)h->count);
    }
}

#define AT(field) offsetof(rmutex_metricinfo_t, field)

static void print_prom(const rmutex_metricinfo_t *s, size_t n)
{
    prom_counter(s, n, "rmutex_acquisitions_total", "Holds granted (recursive relocks not counted).",
                 AT(acquisitions));
    prom_counter(s, n, "rmutex_contended_acquisitions_total",
                 "Mutex acquisitions that waited (another holder, in this process or another).",
                 AT(contended));
    prom_counter(s, n, "rmutex_uncontended_acquisitions_total",
                 "Mutex acquisitions that did not wait.", AT(uncontended));
    prom_counter(s, n, "rmutex_lost_holds_total",
                 "Holds found gone before their unlock (expired, deleted, force-unlocked).",
                 AT(locks_lost));
    prom_counter(s, n, "rmutex_renewals_total", "Leases renewed by the watchdog.", AT(renewals));
    prom_histogram(s, n, "rmutex_wait_seconds",
                   "Mutex lock calls that waited: call to return with the lock.", AT(wait_time));
    prom_histogram(s, n, "rmutex_hold_seconds", "Mutex holds: lock returned to unlock called.",
                   AT(hold_time));
}

/* ---- JSON and the table ---- */

static void json_histogram(const char *key, const rmutex_histogram_t *h)
{
    printf(",\"%s\":{\"count\":%llu,\"sum_us\":%llu,\"buckets\":[", key,
           (unsigned long long)h->count, (unsigned long long)h->sum_us);
    for (int b = 0; b < RMUTEX_HISTOGRAM_BUCKETS; b++)
        printf("%s%llu", b ? "," : "", (unsigned long long)h->bucket[b]);
    printf("]}");
}

static void print_json(const rmutex_metricinfo_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        printf("{\"name\":");
        json_str(s[i].name);
        putchar(',');
        json_process(s[i].host, s[i].pid, s[i].exe, s[i].cmd);
        printf(",\"program\":");
        json_str(program_of(&s[i]));
        printf(",\"acquisitions\":%llu,\"contended\":%llu,\"uncontended\":%llu,"
               "\"lost_holds\":%llu,\"renewals\":%llu",
               (unsigned long long)s[i].acquisitions, (unsigned long long)s[i].contended,
               (unsigned long long)s[i].uncontended, (unsigned long long)s[i].locks_lost,
               (unsigned long long)s[i].renewals);
        json_histogram("wait_time", &s[i].wait_time);
        json_histogram("hold_time", &s[i].hold_time);
        printf(",\"published_ago_ms\":%lld}\n",
               (long long)(s[i].server_time_ms - s[i].published_ms));
    }
}

/* The mean of h in a few characters, "-" when empty. */
static void mean(const rmutex_histogram_t *h, char *buf, size_t size)
{
    if (!h->count) snprintf(buf, size, "-");
    else if (h->sum_us / h->count < 10000)
        snprintf(buf, size, "%.2fms", (double)h->sum_us / (double)h->count / 1000);
    else span((int64_t)(h->sum_us / h->count / 1000), buf, size);
}

static void print_table(const rmutex_metricinfo_t *s, size_t n)
{
    printf("%-24s %-28s %10s %9s %5s %9s %9s %9s\n", "NAME", "PROCESS", "ACQUIRED", "WAITED",
           "LOST", "RENEWED", "MEAN WAIT", "MEAN HOLD");
    for (size_t i = 0; i < n; i++) {
        char who[160], w[24], h[24];
        snprintf(who, sizeof who, "pid %ld on %s (%s)", s[i].pid, s[i].host, program_of(&s[i]));
        mean(&s[i].wait_time, w, sizeof w);
        mean(&s[i].hold_time, h, sizeof h);
        printf("%-24s %-28s %10llu %9llu %5llu %9llu %9s %9s\n", *s[i].name ? s[i].name : "(other)",
               who, (unsigned long long)s[i].acquisitions, (unsigned long long)s[i].contended,
               (unsigned long long)s[i].locks_lost, (unsigned long long)s[i].renewals, w, h);
    }
}

static void stats_usage(FILE *f)
{
    fputs("usage: rmutex [GLOBAL OPTIONS] stats [--prom|--json]\n"
          "Every process's published counters, per lock name: acquisitions, waits, lost\n"
          "holds, renewals, wait and hold times.  Each process publishes its 64 busiest\n"
          "names (the rest as one series, name \"\") on its registry call, about once a\n"
          "second while it locks and every lease/3 while it holds.\n"
          "      --prom   Prometheus's text format (0.0.4), for a textfile collector\n"
          "      --json   one JSON object per process and name, one per line\n"
          "Exit: 0; 64 usage; 69 Redis unreachable; 76 a Redis error; 77 login or ACL\n"
          "refused.\n",
          f);
}

int cmd_stats(int argc, char **argv)
{
    int prom = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (wants_help(argv[i])) {
            stats_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--prom")) {
            prom = 1;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            err("stats: unknown argument %s", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (prom && json) {
        err("stats: --prom or --json, not both");
        return EXIT_USAGE;
    }
    int r = configure();
    if (r) return r;
    rmutex_metricinfo_t *s;
    size_t n;
    if ((r = metrics_collect(&s, &n))) return redis_failed("stats", NULL, r);
    if (prom) print_prom(s, n);
    else if (json) print_json(s, n);
    else print_table(s, n);
    free(s);
    return fflush(stdout) ? EXIT_OSERR : 0;
}
