/* metrics.c -- rmutex_metrics: every process's published counters.
 *
 * DESIGN
 * ------
 * Each process publishes, in its holder-registry entry, the counters of
 * its busiest lock names (registry.c: "stat:<name>" = "<acquisitions>
 * <contended> <uncontended> <lost> <renewals> <wait sum us> <hold sum
 * us>" then " w<i>:<n>" / " h<i>:<n>" for the histograms' buckets that are
 * not empty; "stat:" for its other names together).  This reads them back:
 * every entry on every primary (waits.c's walk), each "stat:" field parsed
 * into a rmutex_metricinfo_t with its process's description.  A field
 * that does not parse is skipped, not an error: an entry written by
 * another version of the library may say more.  For operators: `rmutex
 * stats` prints them (Prometheus's text format with --prom), `rmutex top`
 * diffs two reads. */
#include "waits.h"
#include "inspect.h"
#include "internal.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct walk {
    rmutex_metrics_fn fn;
    void *arg;
    rmutex_metricinfo_t *info;
};

/* The next unsigned number of *p (after spaces), moving *p past it. */
static int number(const char **p, const char *end, uint64_t *out)
{
    while (*p < end && **p == ' ') ++*p;
    if (*p == end || **p < '0' || **p > '9') return -1;
    uint64_t v = 0;
    while (*p < end && **p >= '0' && **p <= '9') v = v * 10 + (uint64_t)(*(*p)++ - '0');
    *out = v;
    return 0;
}

/* A bucket " w<i>:<n>" / " h<i>:<n>" into its histogram. */
static int bucket(const char **p, const char *end, rmutex_metricinfo_t *m)
{
    while (*p < end && **p == ' ') ++*p;
    if (*p == end) return 1; /* the end */
    rmutex_histogram_t *h = **p == 'w' ? &m->wait_time : **p == 'h' ? &m->hold_time : NULL;
    uint64_t i, n;
    ++*p;
    if (!h || number(p, end, &i) || *p == end || *(*p)++ != ':' || number(p, end, &n) ||
        i >= RMUTEX_HISTOGRAM_BUCKETS)
        return -1;
    h->bucket[i] += n;
    h->count += n;
    return 0;
}

/* A "stat:" field's value into m's counters; -1 when it is not one. */
static int parse(const char *p, size_t len, rmutex_metricinfo_t *m)
{
    const char *end = p + len;
    uint64_t *first[] = { &m->acquisitions, &m->contended, &m->uncontended, &m->locks_lost,
                          &m->renewals, &m->wait_time.sum_us, &m->hold_time.sum_us };
    memset(&m->wait_time, 0, sizeof m->wait_time);
    memset(&m->hold_time, 0, sizeof m->hold_time);
    for (size_t i = 0; i < sizeof first / sizeof first[0]; i++)
        if (number(&p, end, first[i])) return -1;
    int r;
    while (!(r = bucket(&p, end, m))) {}
    return r < 0 ? -1 : 0;
}

static int field_is(const redisReply *f, const char *name)
{
    return f->type == REDIS_REPLY_STRING && f->len == strlen(name) && !memcmp(f->str, name, f->len);
}

/* One entry: its process, then fn for each "stat:" field. */
static int each_series(const char *key, const redisReply *h, long long server_ms, void *arg)
{
    struct walk *x = arg;
    rmutex_metricinfo_t *m = x->info;
    memset(m, 0, sizeof *m);
    rm_waits_describe(h, &(struct rm_waits_process)RM_WAITS_PROCESS(m));
    const char *brace = strchr(key, '{');
    snprintf(m->process, sizeof m->process, "%.*s", brace ? (int)strcspn(brace + 1, "}") : 0,
             brace ? brace + 1 : "");
    m->server_time_ms = server_ms;
    for (size_t i = 0; i + 1 < h->elements; i += 2)
        if (field_is(h->element[i], "announced") && h->element[i + 1]->type == REDIS_REPLY_STRING)
            m->published_ms = strtoll(h->element[i + 1]->str, NULL, 10);
    static const char prefix[] = "stat:";
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i], *v = h->element[i + 1];
        size_t name_len = f->len - (sizeof prefix - 1);
        if (f->type != REDIS_REPLY_STRING || f->len < sizeof prefix - 1 ||
            memcmp(f->str, prefix, sizeof prefix - 1) || name_len >= sizeof m->name ||
            v->type != REDIS_REPLY_STRING || parse(v->str, v->len, m))
            continue;
        memcpy(m->name, f->str + sizeof prefix - 1, name_len);
        m->name[name_len] = 0;
        int r = x->fn(m, x->arg);
        if (r) return r;
    }
    return 0;
}

RMUTEX_API int rmutex_metrics(rmutex_metrics_fn fn, void *arg)
{
    struct walk x = { fn, arg, NULL };
    if (fn && !(x.info = malloc(sizeof *x.info))) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    int r = rm_waits_each_entry(fn != NULL, each_series, &x);
    free(x.info);
    return r;
}
