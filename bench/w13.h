/* w13.h -- what W13's files share: real reader crowds (w13_readers.c),
 * read/write pairs, and the hand-off part (w13_handoff.c). */
#ifndef BENCH_W13_H
#define BENCH_W13_H

#include <rmutex.h>
#include <stdint.h>

/* procs forked processes of threads reading threads each (64 KiB stacks),
 * every thread holding a read of name, taken through the library, until
 * crowd_stop.  lease_ms > 0: a fixed lease (rrwlockattr_setlease: no
 * renewal, nothing sent while they hold); 0: renewed by each process's
 * watchdog, as this process is configured at the fork.  Returns once
 * every thread holds (NULL, with an error line, when one failed or they
 * took longer than two minutes; nothing is left running then). */
struct crowd;
struct crowd *crowd_start(const char *name, int procs, int threads, unsigned long lease_ms);
/* Every process reads its rmutex_stats now (mark 0: a window's start, 1:
 * its end; the deltas are summed over the processes).  0 or -1. */
int crowd_mark(struct crowd *c, int mark);
/* The summed deltas of the last window. */
struct crowd_totals {
    uint64_t renewal_calls, renewals, lost;
};
struct crowd_totals crowd_totals(const struct crowd *c);
/* Every thread unlocks, every process exits; 0 when all went well. */
int crowd_stop(struct crowd *c);

/* Read (writer 0) or write lock+unlock pairs of l for seconds and at least
 * n pairs: pairs/s to *rate (may be NULL).  0, or -1 with an error line. */
int rw_pairs(rrwlock_t *l, int writer, long n, double seconds, double *rate);

/* W13's hand-off part: a waiting writer behind a read hold, a waiting
 * reader behind a write hold, a waiting mutex locker behind a mutex hold. */
void w13_handoff_run(void);

#endif
