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
 * process. */
#include "shim.h"

#include <stdlib.h>

uintptr_t rm_shim_lo, rm_shim_span;

struct table {
    size_t n;
    struct rm_shim_mutex **v; /* sorted by addr */
};
static struct table *table;

struct rm_shim_mutex *rm_shim_lookup(const void *m)
{
    const struct table *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
    if (!t) return NULL;
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const void *a = t->v[mid]->addr;
        if (a == m) return t->v[mid];
        if ((uintptr_t)a < (uintptr_t)m) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)(*(struct rm_shim_mutex *const *)a)->addr;
    uintptr_t y = (uintptr_t)(*(struct rm_shim_mutex *const *)b)->addr;
    return x < y ? -1 : x > y;
}

void rm_shim_publish(struct rm_shim_mutex **v, size_t n)
{
    if (!n) {
        free(v);
        return;
    }
    struct table *t = malloc(sizeof *t);
    if (!t) {
        free(v);
        return;
    }
    qsort(v, n, sizeof *v, by_addr);
    t->n = n;
    t->v = v;
    uintptr_t lo = (uintptr_t)v[0]->addr, hi = (uintptr_t)v[n - 1]->addr;
    __atomic_store_n(&table, t, __ATOMIC_RELEASE);
    __atomic_store_n(&rm_shim_lo, lo, __ATOMIC_RELAXED);
    __atomic_store_n(&rm_shim_span, hi - lo + 1, __ATOMIC_RELEASE);
}
