/* mutex.h -- a handle (the state behind one rmutex_t), the waits of the
 * acquiring calls, and the lock algorithms' interface. */
#ifndef RM_MUTEX_H
#define RM_MUTEX_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "clock.h"
#include "internal.h"
#include "keys.h"
#include "lock.h"

struct rm_thread;
struct rm_wd_entry;
struct rm_mutex;

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

/* The bookkeeping of one acquiring call's attempts, shared by the lock
 * algorithms' loops. */
struct rm_attempts {
    int lost;          /* replies lost so far */
    int unknown;       /* the last attempt's outcome is unknown */
    int waited;        /* the call has waited (counted in stats.waiting) */
    unsigned failures; /* attempts that found Redis unreachable, for backoff */
};

/* The call is about to wait: count it in stats.waiting (once). */
void rm_attempts_wait(struct rm_attempts *a);

/* An attempt ended without an answer from Redis (r: RM_E_LOST, RM_E_UNSENT,
 * RM_E_TRANSIENT) or with an error (a positive errno).  Returns 0 to try
 * again (after a jittered backoff when Redis is unreachable), or the code
 * the call gives up with: EAGAIN for trylock, ETIMEDOUT / EINVAL as w
 * says, or the error itself. */
int rm_attempts_failed(struct rm_attempts *a, const struct rm_wait *w, int r, uint32_t *rng);

/* The I/O deadline of an attempt: the first is made whatever the deadline
 * (POSIX: never a timeout when the lock can be taken at once), later ones
 * stop at it. */
rm_nsec rm_attempt_deadline(const struct rm_wait *w, int first);

/* Set the detail for a robust handle refused with ENOTRECOVERABLE. */
int rm_notrecoverable(const struct rm_mutex *mx);

/* The call ends with r: undo the waiting count, count a contended success. */
void rm_attempts_end(struct rm_attempts *a, int r);

/* A lock algorithm.  lock() is called by the thread that does not own the
 * mutex, after the type checks; it returns 0 or EOWNERDEAD with the hold
 * recorded (owner, depth 1, token), or an error with nothing held.
 * unlock() is called by the owner for its last level; notrecoverable asks
 * it to mark the name not recoverable (robust, EOWNERDEAD, no consistent). */
struct rm_endpoint;
struct rm_lock_ops {
    int (*lock)(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                struct rm_wait *w);
    int (*unlock)(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                  int notrecoverable);
    /* Release the hold of owner (any thread of this process) in Redis
     * before deadline, or hand it to the watchdog: process exit. */
    void (*release_owner)(struct rm_mutex *mx, struct rm_endpoint *ep, const char *owner,
                          size_t owner_len, rm_nsec deadline);
};

/* One rmutex_t.  Its lock (the name's state: gate, hold) is shared with
 * every other handle of the same name; the type, robustness, fairness and
 * lease are the handle's own. */
struct rm_mutex {
    rmutex_t *user;          /* for the lost-lock callback */
    struct rm_lock *lock;    /* a reference */
    struct rm_keys keys;     /* the lock's keys (a copy of the pointers) */
    struct rm_mutex *lock_next; /* the lock's handles (lock.c) */
    int type;                /* RMUTEX_NORMAL / RECURSIVE / ERRORCHECK */
    int robust, fair;
    unsigned long lease_ms;  /* 0: default lease, renewed by the watchdog */
    const struct rm_lock_ops *ops;
    unsigned users;          /* threads inside a call through it; under lock->mu */
};

/* The state of m, created on first use for a static initializer.  NULL
 * with EINVAL in *err for a NULL, zeroed or destroyed m. */
struct rm_mutex *rm_mutex_get(rmutex_t *m, int *err);

/* Create m's state from a name and attributes; destroy it. */
int rm_mutex_init(rmutex_t *m, const char *name, int kind, unsigned long lease_ms);
int rm_mutex_destroy(rmutex_t *m);

/* How long a release's answer is latched in Redis (ms, as a string): as
 * long as the releasing call retries, the command timeout.  (The retries the
 * watchdog makes later answer nobody, so they need no latch.) */
void rm_latch_ms(const struct rm_mutex *mx, char *buf, size_t size);

/* The lease of a hold of mx, in ms. */
unsigned long rm_mutex_lease(const struct rm_mutex *mx);

/* At exit: release in Redis every hold of this process, within ~1 s. */
void rm_mutex_release_all_at_exit(void);

extern const struct rm_lock_ops rm_nonfair_ops;
extern const struct rm_lock_ops rm_fair_ops;

#endif
