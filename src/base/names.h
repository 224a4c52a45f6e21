/* names.h -- per-name counters of this process: what rmutex_stats counts,
 * lock name by lock name, for the holder registry to publish. */
#ifndef RM_NAMES_H
#define RM_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* One name's counters (relaxed atomics, like rm_counters). */
struct rm_names_stats {
    _Atomic uint64_t acquisitions, contended, uncontended, locks_lost, renewals;
    struct rm_histogram wait_time, hold_time;
};

/* At most this many names have counters of their own in a process; the
 * counts of the names beyond share one entry (rm_names_get's "other"). */
#define RM_NAMES_MAX 4096

/* The counters of name, made on first use (never freed: a name keeps its
 * counts for the process's life), or the shared entry of the names beyond
 * RM_NAMES_MAX (or when memory is short).  Takes a mutex: not for a hot
 * path (lock.c keeps the pointer with the name's state). */
struct rm_names_stats *rm_names_get(const char *name);

/* The entry of name if it has one of its own, else NULL. */
struct rm_names_stats *rm_names_find(const char *name);

#define RM_NAMES_COUNT(ns, field) \
    atomic_fetch_add_explicit(&(ns)->field, 1, memory_order_relaxed)

/* The busiest max names (most acquisitions) with what they counted:
 * fn(name, counters, arg) for each, then fn(NULL, the sum of every other
 * name's) -- once, whether or not there are others.  The counters given
 * are a snapshot (each field read once). */
struct rm_names_snapshot {
    uint64_t acquisitions, contended, uncontended, locks_lost, renewals;
    rmutex_histogram_t wait_time, hold_time;
};
typedef void (*rm_names_fn)(const char *name, const struct rm_names_snapshot *s, void *arg);
void rm_names_busiest(size_t max, rm_names_fn fn, void *arg);

/* fork(): -1 lock the table (a leaf: taken last), 0 unlock, 1 the child:
 * every count from zero, as rm_stats_reset. */
void rm_names_atfork(int who);

#endif
