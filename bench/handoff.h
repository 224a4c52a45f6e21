/* handoff.h -- hand-off latency between this process, holding, and a
 * forked process waiting to take the same thing (W13, W15). */
#ifndef BENCH_HANDOFF_H
#define BENCH_HANDOFF_H

#include <hiredis/hiredis.h>

/* What is handed off, in kinds 0..n-1 (a direction, a lock type).  Both
 * processes open their own subjects (open(ctx), in the holder and again in
 * the forked waiter; NULL with an error line on failure).  take and let_go
 * are called with waiter 0 by the holder, 1 by the waiter: 0 or an errno.
 * waiting(c, ctx, kind): 0 once the waiter is seen waiting in Redis, -1
 * if it is not within a while; NULL, or a kind that keeps no queue: not
 * looked at (the waiter has called; then 10 ms more). */
struct handoff_ops {
    void *(*open)(void *ctx);
    void (*close)(void *subjects);
    int (*take)(void *subjects, int kind, int waiter);
    int (*let_go)(void *subjects, int kind, int waiter);
    int (*waiting)(redisContext *c, void *ctx, int kind);
};

/* opt.reps repetitions of 60 runs of each kind, taking turns run by run
 * (20 with --quick): this process takes, the forked waiter calls take,
 * this process lets go; the time from let_go returning to the waiter's
 * take returning, CLOCK_MONOTONIC in both processes.  Per kind and
 * repetition the p50 and p90, printed under id with label[kind] and added
 * as rows "hand-off <figure[kind]>, p50/p90" in ms against the RTT.  The
 * caller has configured the library. */
void handoff_measure(const char *id, const struct handoff_ops *ops, void *ctx, int nkind,
                     const char *const *label, const char *const *figure);

/* The same, and per kind a row "hand-off <figure>, p50 from the unlock
 * call" in µs against *floor_us (the pub/sub floor of the run): from
 * let_go's call, not its return -- what a release costs end to end. */
void handoff_measure_floor(const char *id, const struct handoff_ops *ops, void *ctx, int nkind,
                           const char *const *label, const char *const *figure,
                           const double *floor_us);

/* Until the zset key has a member (two seconds at most): 0, or -1 with an
 * error line. */
int handoff_queued(redisContext *c, const char *key);

#endif
