/* table.c -- the listed mutexes, by address.
 *
 * DESIGN
 * ------
 * Every pthread_mutex_* call of the program, and of every library in it
 * (librmutex's own internal locks included), comes through the shim, and
 * nearly all of them are for mutexes that are not listed.  Their cost is
 * what matters (the benchmark's W7: an unlisted lock+unlock under the shim
 * against plain glibc).  So the listed addresses, all known once the
 * constructor has run, are kept in a sorted array, and the span
 * [lo, lo + span) that covers them in two words.  The fast path
 * (rm_shim_find in shim.h) loads those two words, subtracts and compares:
 * no thread-local access, no call, no hashing, and a branch that goes the
 * same way for every unlisted mutex.  While nothing is listed span is 0 and
 * the compare fails for every address.  Only an address inside the span
 * comes here, to a binary search.
 *
 * The table is written once, before it is published: the array first, then
 * (release) the pointer to it, then lo and span.  A reader that sees a span
 * covering its address but no array yet treats the mutex as unlisted, which
 * is right: the constructor has not finished, nobody is distributed yet.
 * It is never freed: listed mutexes are globals that live as long as the
 * process.  Listed condition variables, read-write locks and once controls
 * have a table and a span of their own each, checked the same way by the
 * pthread_cond_*, pthread_rwlock_* and pthread_once interposers. */
#include "shim.h"

#include <stddef.h>
#include <stdlib.h>

uintptr_t rm_shim_lo, rm_shim_span;
uintptr_t rm_shim_cond_lo, rm_shim_cond_span;
uintptr_t rm_shim_rw_lo, rm_shim_rw_span;
uintptr_t rm_shim_once_lo, rm_shim_once_span;

struct slot {
    uintptr_t addr;
    void *entry; /* struct rm_shim_mutex or struct rm_shim_cond */
};

struct table {
    size_t n;
    struct slot *v; /* sorted by addr */
};
static struct table *mutexes, *conds, *rwlocks, *onces;

static void *lookup(struct table **where, const void *m)
{
    const struct table *t = __atomic_load_n(where, __ATOMIC_ACQUIRE);
    if (!t) return NULL;
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uintptr_t a = t->v[mid].addr;
        if (a == (uintptr_t)m) return t->v[mid].entry;
        if (a < (uintptr_t)m) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

struct rm_shim_mutex *rm_shim_lookup(const void *m) { return lookup(&mutexes, m); }
struct rm_shim_cond *rm_shim_lookup_cond(const void *c) { return lookup(&conds, c); }
struct rm_shim_rwlock *rm_shim_lookup_rwlock(const void *l) { return lookup(&rwlocks, l); }
struct rm_shim_once *rm_shim_lookup_once(const void *o) { return lookup(&onces, o); }

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = ((const struct slot *)a)->addr, y = ((const struct slot *)b)->addr;
    return x < y ? -1 : x > y;
}

/* Sort v, then publish it: the table, then lo, then (release) span. */
static void publish(struct table **where, uintptr_t *lo_out, uintptr_t *span_out, struct slot *v,
                    size_t n)
{
    struct table *t = n ? malloc(sizeof *t) : NULL;
    if (!t) {
        free(v);
        return;
    }
    qsort(v, n, sizeof *v, by_addr);
    t->n = n;
    t->v = v;
    uintptr_t lo = v[0].addr, hi = v[n - 1].addr;
    __atomic_store_n(where, t, __ATOMIC_RELEASE);
    __atomic_store_n(lo_out, lo, __ATOMIC_RELAXED);
    __atomic_store_n(span_out, hi - lo + 1, __ATOMIC_RELEASE);
}

/* Every entry type starts with the program's object's address. */
_Static_assert(offsetof(struct rm_shim_mutex, addr) == 0, "addr first");
_Static_assert(offsetof(struct rm_shim_cond, addr) == 0, "addr first");
_Static_assert(offsetof(struct rm_shim_rwlock, addr) == 0, "addr first");
_Static_assert(offsetof(struct rm_shim_once, addr) == 0, "addr first");

/* Publish entries (each begins with its address); takes ownership of v. */
static void publish_entries(struct table **where, uintptr_t *lo, uintptr_t *span, void **v, size_t n)
{
    struct slot *s = n ? calloc(n, sizeof *s) : NULL;
    for (size_t i = 0; s && i < n; i++) s[i] = (struct slot){ (uintptr_t)*(void **)v[i], v[i] };
    free(v);
    publish(where, lo, span, s, s ? n : 0);
}

void rm_shim_publish(struct rm_shim_mutex **v, size_t n)
{
    publish_entries(&mutexes, &rm_shim_lo, &rm_shim_span, (void **)v, n);
}

void rm_shim_publish_conds(struct rm_shim_cond **v, size_t n)
{
    publish_entries(&conds, &rm_shim_cond_lo, &rm_shim_cond_span, (void **)v, n);
}

void rm_shim_publish_rwlocks(struct rm_shim_rwlock **v, size_t n)
{
    publish_entries(&rwlocks, &rm_shim_rw_lo, &rm_shim_rw_span, (void **)v, n);
}

void rm_shim_publish_onces(struct rm_shim_once **v, size_t n)
{
    publish_entries(&onces, &rm_shim_once_lo, &rm_shim_once_span, (void **)v, n);
}
