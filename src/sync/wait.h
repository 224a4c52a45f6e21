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
    int quiet;         /* not an acquisition (a condition's call): count nothing */
    unsigned failures; /* attempts that found Redis unreachable, for backoff */
};

/* What an acquiring attempt learnt, whatever the algorithm: the state
 * (RM_CALL_*), and what each state brings. */
struct rm_outcome {
    int state;
    int dead;          /* acquired: the previous holder died (robust) */
    int back;          /* acquired: the parked cache's hold, taken back (nonfair.c) */
    int queued;        /* acquired: others wait behind this hold (fair.c) */
    uint64_t token;    /* acquired by a fair hand-off: its fencing token;
                          busy (fair.c): the fencing counter then */
    long long pttl;    /* busy: the holder's remaining lease, -1 unknown */
    uint64_t ticket;   /* busy: the waiter's place, kept for the whole call (fair.c) */
    rm_nsec sent;      /* when the attempt was sent */
    rm_nsec valid_until, due; /* acquired: known good until; first renewal due */
};

/* How long a queued waiter (a fair lock's, a read-write lock's) sleeps
 * without a message before it looks again: the process's first waiter
 * (rank 0 among its waiters of the name) every half waiter lease and when
 * the hold it saw (pttl ms, -1 unknown) runs out, at most the poll cap;
 * the k-th after it every k + 1 poll periods, a last resort (an hour at
 * most).  When every waiter looked every half lease, 1 000 waiters on two
 * cores made thousands of looks a second, hand-offs slowed several-fold
 * and renewals came too late: live waiters were purged as dead. */
rm_nsec rm_wait_queue_bound(unsigned long rank, long long pttl, unsigned long waiter_lease_ms);

/* One lock algorithm's steps in the acquisition loop (rm_wait_acquire). */
struct rm_acquire_steps {
    /* One attempt, its I/O bounded by deadline: 0 with o->state (the
     * detail set for RM_CALL_NOTRECOVERABLE), or a status (RM_E_*, an
     * errno). */
    int (*attempt)(void *ctx, rm_nsec deadline, struct rm_outcome *o);
    /* Busy: wait until there is a reason to look again (a message, a
     * (re)subscription, its poll bound), deadline at the latest.  0 to
     * attempt again, or the errno to give up with. */
    int (*wait)(void *ctx, const struct rm_outcome *o, rm_nsec deadline);
};

/* What an acquiring call waits for, for the holder registry (a wait
 * longer than announce_wait is announced: registry.c) and, with detect
 * (an ERRORCHECK mutex's rmutexattr_setdeadlock_detect), for deadlock
 * detection (deadlock.c).  kind: RM_REGISTRY_WAIT_*. */
struct rm_endpoint;
struct rm_wait_subject {
    struct rm_endpoint *ep;
    char kind;
    int detect;
};

/* The acquisition loop of every lock algorithm: attempt; on no answer, try
 * again with rm_wait_failed's rule; on busy, stop as w says (EBUSY for
 * trylock, ETIMEDOUT at the deadline: the detail says lock is held,
 * why_busy), else wait and attempt again; a timed wait makes no attempt
 * at or past its deadline.  Returns 0 (acquired: o as the last attempt
 * left it), ENOTRECOVERABLE, RMUTEX_ENOREPLICAS or the code it gave up
 * with; *unknown: the last attempt's reply was lost (the lock may be the
 * caller's without its knowing: the algorithm cleans up).  subject (may
 * be NULL: nobody is told) says what the wait is for: once it has waited,
 * the call is listed in the registry until it ends; with detect, it gives
 * up with EDEADLK when its wait closes a cycle of waits that has lasted
 * rm_deadlock_threshold (it then looks once a second). */
int rm_wait_acquire(struct rm_wait *w, const struct rm_acquire_steps *s, void *ctx,
                    const char *lock, const char *why_busy, uint32_t *rng, struct rm_outcome *o,
                    int *unknown, const struct rm_wait_subject *subject);

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
