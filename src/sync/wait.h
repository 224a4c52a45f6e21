/* wait.h -- how long an acquiring call may wait, and the bookkeeping of its
 * attempts, shared by the gate and the lock algorithms. */
#ifndef RM_WAIT_H
#define RM_WAIT_H

#include <stdint.h>
#include <time.h>

#include "clock.h"

/* How long an acquiring call may wait.  The deadline is computed once, at
 * entry; abstime is only judged when the call would block (glibc order). */
enum { RM_WAIT_TRY, RM_WAIT_FOREVER, RM_WAIT_TIMED };
struct rm_wait {
    int mode;
    int bad_abstime; /* EINVAL if we would block */
    rm_nsec deadline;
};

/* Prepare w for a timed wait on clock until abstime. */
void rm_wait_timed(struct rm_wait *w, clockid_t clock, const struct timespec *abstime);

/* Called when the caller is about to block (and again after each wait):
 * 0 to go on, EBUSY for trylock, EINVAL for a bad abstime, ETIMEDOUT once
 * the deadline has passed. */
int rm_wait_check(const struct rm_wait *w);

/* rm_wait_check after Redis answered that lock is busy ("is " why): an
 * EBUSY or ETIMEDOUT comes with a detail that says the lock is held, and
 * a timed wait makes no attempt at or past its deadline (its reply could
 * not come in time). */
int rm_wait_busy(const struct rm_wait *w, const char *lock, const char *why);

/* The bookkeeping of one acquiring call's attempts, shared by the lock
 * algorithms' loops. */
struct rm_attempts {
    int lost;          /* replies lost so far */
    int unknown;       /* the last attempt's outcome is unknown */
    int waited;        /* the call has waited (counted in stats.waiting) */
    unsigned failures; /* attempts that found Redis unreachable, for backoff */
};

/* The call is about to wait: count it in stats.waiting (once). */
void rm_wait_begin(struct rm_attempts *a);

/* An attempt ended without an answer from Redis (r: RM_E_LOST, RM_E_UNSENT,
 * RM_E_TRANSIENT) or with an error (a positive errno).  Returns 0 to try
 * again (after a jittered backoff when Redis is unreachable), or the code
 * the call gives up with: EAGAIN for trylock, ETIMEDOUT / EINVAL as w
 * says, or the error itself. */
int rm_wait_failed(struct rm_attempts *a, const struct rm_wait *w, int r, uint32_t *rng);

/* The I/O deadline of an attempt: the first is made whatever the deadline
 * (POSIX: never a timeout when the lock can be taken at once), later ones
 * stop at it. */
rm_nsec rm_wait_io_deadline(const struct rm_wait *w, int first);

/* The call ends with r: undo the waiting count, count a contended success. */
void rm_wait_end(struct rm_attempts *a, int r);

#endif
