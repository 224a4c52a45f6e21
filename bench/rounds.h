/* rounds.h -- uncontended pairs of several subjects, timed in interleaved
 * rounds with their cost in round trips and in Redis time (W13, W15). */
#ifndef BENCH_ROUNDS_H
#define BENCH_ROUNDS_H

#include <hiredis/hiredis.h>

/* A subject: pairs(arg, seconds, &rate) makes pairs (each one counted in
 * rmutex_stats' acquisitions) for seconds and gives their rate: 0, or -1
 * with an error line. */
struct subject {
    int (*pairs)(void *arg, double seconds, double *rate);
    void *arg;
};

/* One subject's figures: pairs/s, round trips per pair (rmutex_stats),
 * Redis time per pair (INFO commandstats: EVALSHA time of the stretch /
 * its pairs), stray: EVALSHA calls beyond 2 per pair (another caller's,
 * counted in). */
struct stretch {
    double rate, trips, redis_us, stray;
};

/* One repetition over n subjects (n <= 8): 5 rounds of a stretch of
 * seconds / 5 for each, the order turned by one every round, so that a
 * burst of other load on the machine hits a stretch of each rather than
 * all of one; per subject the median of its rounds, figure by figure.
 * c: a connection of the caller's for INFO.  0 or -1. */
int rounds_measure(redisContext *c, int n, const struct subject *s, double seconds, struct stretch *out);

/* The pairs part of W13 and W15: opt.reps repetitions (ok 0: none, the
 * rows say error), each a raw hiredis EVALSHA loop of about seconds then
 * rounds_measure; a progress line per repetition under id.  Rows per
 * subject: "<name[i]> <pair[i]> pairs, 1 thread" (pairs/s against
 * EVALSHA/2), ÷ the loop just before, ÷ subject 0's (the mutex pair,
 * "the mutex pair's") of the same repetition, round trips per pair, Redis
 * time per pair and ÷ subject 0's.  Returns ok and 0 when all went well; subject 0's median
 * Redis time per pair to *ref_us (may be NULL). */
int rounds_report(const char *id, int ok, redisContext *c, int n, const struct subject *s,
                  const char *const *name, const char *const *pair, double seconds, double *ref_us);

#endif
