/* stats.c -- the process's counters and rmutex_stats().
 *
 * Counters are relaxed atomics bumped where things happen; they order
 * nothing and are read one by one, so a snapshot is not atomic as a whole.
 * The histograms (counters.def's RM_HISTOGRAM: a mutex's wait and hold
 * times) are log2 buckets of microseconds and a sum, two relaxed adds per
 * duration (rm_stats_record); their count is the buckets' sum, made here
 * when they are read, so a reader never sees a count its buckets lack. */
#include "internal.h"

#include <errno.h>
#include <string.h>

struct rm_counters rm_counters;

static void zero(struct rm_histogram *h)
{
    atomic_store_explicit(&h->sum_us, 0, memory_order_relaxed);
    for (int i = 0; i < RMUTEX_HISTOGRAM_BUCKETS; i++)
        atomic_store_explicit(&h->bucket[i], 0, memory_order_relaxed);
}

void rm_stats_reset(void)
{
#define RM_COUNTER(name) atomic_store_explicit(&rm_counters.name, 0, memory_order_relaxed);
#define RM_HISTOGRAM(name) zero(&rm_counters.name);
#include "counters.def"
#undef RM_COUNTER
#undef RM_HISTOGRAM
}

void rm_stats_read(struct rm_histogram *h, rmutex_histogram_t *out)
{
    out->count = 0;
    for (int i = 0; i < RMUTEX_HISTOGRAM_BUCKETS; i++) {
        out->bucket[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        out->count += out->bucket[i];
    }
    out->sum_us = atomic_load_explicit(&h->sum_us, memory_order_relaxed);
}

RMUTEX_API int rmutex_stats(rmutex_stats_t *out, size_t size)
{
    if (!out) return EINVAL;
    rmutex_stats_t s;
#define RM_COUNTER(name) s.name = atomic_load_explicit(&rm_counters.name, memory_order_relaxed);
#define RM_HISTOGRAM(name) rm_stats_read(&rm_counters.name, &s.name);
#include "counters.def"
#undef RM_COUNTER
#undef RM_HISTOGRAM
    memcpy(out, &s, size < sizeof s ? size : sizeof s);
    return 0;
}

_Static_assert(sizeof(rmutex_stats_t) == sizeof(struct rm_counters),
               "counters.def and rmutex_stats_t must list the same fields");
_Static_assert(sizeof(struct rm_histogram) == sizeof(rmutex_histogram_t),
               "struct rm_histogram is rmutex_histogram_t's layout");
