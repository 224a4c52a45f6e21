/* stats.c -- the process's counters and rmutex_stats().
 *
 * Counters are relaxed atomics bumped where things happen; they order
 * nothing and are read one by one, so a snapshot is not atomic as a whole. */
#include "internal.h"

#include <errno.h>
#include <string.h>

struct rm_counters rm_counters;

void rm_stats_reset(void)
{
#define RM_COUNTER(name) atomic_store_explicit(&rm_counters.name, 0, memory_order_relaxed);
#include "counters.def"
#undef RM_COUNTER
}

RMUTEX_API int rmutex_stats(rmutex_stats_t *out, size_t size)
{
    if (!out) return EINVAL;
    rmutex_stats_t s;
#define RM_COUNTER(name) s.name = atomic_load_explicit(&rm_counters.name, memory_order_relaxed);
#include "counters.def"
#undef RM_COUNTER
    memcpy(out, &s, size < sizeof s ? size : sizeof s);
    return 0;
}

_Static_assert(sizeof(rmutex_stats_t) == sizeof(struct rm_counters),
               "counters.def and rmutex_stats_t must list the same fields");
