/* names.c -- per-name counters: acquisitions, waits and holds, name by name.
 *
 * DESIGN
 * ------
 * rmutex_stats counts for the whole process.  An operator wants to know
 * which lock is busy, which one makes threads wait: so the same counts
 * (acquisitions, contended and uncontended acquisitions, lost holds,
 * renewals, the wait-time and hold-time histograms) are kept per lock name
 * too, here, and the holder registry publishes the busiest names on its
 * periodic call (registry.c) for `rmutex stats` and `rmutex top`.
 *
 * An entry is made the first time a name's state is made in the process
 * (lock.c, not on the lock path, which reaches its entry through the
 * name's state: relaxed atomic adds, no lock, no lookup) and lives as long
 * as the process, so a name's counts never go back while the process runs,
 * even when every handle of it is destroyed and made again.  The table is
 * bounded: past RM_NAMES_MAX names (a program that makes a name per
 * request), new names share one "other" entry, and memory stays bounded
 * (about 600 bytes a name).  The watchdog finds a name's entry by name
 * (rm_names_find: a hash lookup under this file's mutex, once per renewal
 * round and hold) to count its renewals and losses.
 *
 * rm_names_busiest picks the names with the most acquisitions (a bounded
 * selection, the rest summed into "other"), so what a process publishes,
 * and a scrape's cardinality, stay bounded however many names it uses. */
#include "names.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024

struct entry {
    struct rm_names_stats s;
    struct entry *next;        /* the hash chain */
    struct entry *all;         /* every entry, newest first */
    char name[];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct entry *buckets[NBUCKETS];
static struct entry *all;
static size_t entries;
static struct rm_names_stats other;

static unsigned bucket_of(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 16777619u;
    return h % NBUCKETS;
}

static struct entry *find_locked(const char *name)
{
    struct entry *e = buckets[bucket_of(name)];
    while (e && strcmp(e->name, name)) e = e->next;
    return e;
}

struct rm_names_stats *rm_names_find(const char *name)
{
    pthread_mutex_lock(&mu);
    struct entry *e = find_locked(name);
    pthread_mutex_unlock(&mu);
    return e ? &e->s : NULL;
}

struct rm_names_stats *rm_names_get(const char *name)
{
    pthread_mutex_lock(&mu);
    struct entry *e = find_locked(name);
    if (!e && entries < RM_NAMES_MAX) {
        size_t len = strlen(name);
        /* malloc + memset, not calloc (glibc's calloc skips the thread cache) */
        if ((e = malloc(sizeof *e + len + 1))) {
            memset(e, 0, sizeof *e);
            memcpy(e->name, name, len + 1);
            unsigned b = bucket_of(name);
            e->next = buckets[b];
            buckets[b] = e;
            e->all = all;
            all = e;
            entries++;
        }
    }
    pthread_mutex_unlock(&mu);
    return e ? &e->s : &other;
}

static uint64_t load(_Atomic uint64_t *v) { return atomic_load_explicit(v, memory_order_relaxed); }

static void snapshot(struct rm_names_stats *s, struct rm_names_snapshot *out)
{
    out->acquisitions = load(&s->acquisitions);
    out->contended = load(&s->contended);
    out->uncontended = load(&s->uncontended);
    out->locks_lost = load(&s->locks_lost);
    out->renewals = load(&s->renewals);
    rm_stats_read(&s->wait_time, &out->wait_time);
    rm_stats_read(&s->hold_time, &out->hold_time);
}

static void add_histogram(rmutex_histogram_t *to, const rmutex_histogram_t *h)
{
    to->count += h->count;
    to->sum_us += h->sum_us;
    for (int i = 0; i < RMUTEX_HISTOGRAM_BUCKETS; i++) to->bucket[i] += h->bucket[i];
}

static void add(struct rm_names_snapshot *to, const struct rm_names_snapshot *s)
{
    to->acquisitions += s->acquisitions;
    to->contended += s->contended;
    to->uncontended += s->uncontended;
    to->locks_lost += s->locks_lost;
    to->renewals += s->renewals;
    add_histogram(&to->wait_time, &s->wait_time);
    add_histogram(&to->hold_time, &s->hold_time);
}

static int busier(struct entry *a, struct entry *b)
{
    uint64_t x = load(&a->s.acquisitions), y = load(&b->s.acquisitions);
    return x != y ? x > y : strcmp(a->name, b->name) < 0;
}

void rm_names_busiest(size_t max, rm_names_fn fn, void *arg)
{
    struct entry **top = max ? malloc(max * sizeof *top) : NULL;
    if (!top) max = 0;
    size_t n = 0;
    struct rm_names_snapshot rest, s;
    pthread_mutex_lock(&mu);
    snapshot(&other, &rest);
    /* top[0..n) busiest first; an entry pushed out of it joins the rest. */
    for (struct entry *e = all; e; e = e->all) {
        struct entry *out = e;
        size_t i = n;
        if (n < max) n++, out = NULL;
        else if (max && busier(e, top[max - 1])) out = top[--i];
        if (out != e) {
            while (i > 0 && busier(e, top[i - 1])) top[i] = top[i - 1], i--;
            top[i] = e;
        }
        if (out) {
            snapshot(&out->s, &s);
            add(&rest, &s);
        }
    }
    for (size_t i = 0; i < n; i++) {
        snapshot(&top[i]->s, &s);
        fn(top[i]->name, &s, arg);
    }
    pthread_mutex_unlock(&mu);
    fn(NULL, &rest, arg);
    free(top);
}

void rm_names_atfork(int who)
{
    if (who < 0) {
        pthread_mutex_lock(&mu);
        return;
    }
    if (who > 0) { /* the child counts from zero, as rm_stats_reset */
        memset(&other, 0, sizeof other);
        for (struct entry *e = all; e; e = e->all) memset(&e->s, 0, sizeof e->s);
    }
    pthread_mutex_unlock(&mu);
}
