/* handle.h -- a handle (the state behind one rmutex_t) and the lock
 * algorithms' interface (struct rm_lock_ops): what the algorithms
 * (nonfair.c, fair.c) and the cache see of a mutex.  Header only: the
 * handles themselves are made and found by mutex.c, above the algorithms
 * whose tables it picks. */
#ifndef RM_HANDLE_H
#define RM_HANDLE_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "clock.h"
#include "internal.h"
#include "keys.h"
#include "hold.h"
#include "lock.h"
#include "wait.h"
#include "watchdog.h"

#include <errno.h>

struct rm_thread;
struct rm_watchdog_entry;
struct rm_mutex;

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
    /* Release acquisition acq of owner (any thread of this process) in
     * Redis before deadline, or hand it to the watchdog: process exit. */
    void (*release_owner)(struct rm_mutex *mx, struct rm_endpoint *ep, const char *owner,
                          size_t owner_len, uint64_t acq, rm_nsec deadline);
    /* The release script's call for acquisition acq (0: any) of owner's
     * hold of k, as an unlock returns it (rm_call_unlock): 0, RM_E_GONE or
     * the error.  (The cache, which holds as the process, releases
     * through it.) */
    int (*release)(struct rm_endpoint *ep, const struct rm_keys *k, int robust, const char *owner,
                   size_t owner_len, int notrec, uint64_t acq, rm_nsec deadline,
                   rm_nsec known_good);
};

/* One rmutex_t.  Its lock (the name's state: gate, hold) is shared with
 * every other handle of the same name; the type, robustness, fairness and
 * lease are the handle's own. */
struct rm_mutex {
    rmutex_t *user;          /* for the lost-lock callback */
    struct rm_lock *lock;    /* a reference */
    struct rm_keys keys;     /* the lock's keys (a copy of the pointers) */
    int type;                /* RMUTEX_NORMAL / RECURSIVE / ERRORCHECK */
    int robust, fair;
    int cache;               /* keep the Redis hold after the last unlock (cache.c) */
    int detect;              /* an ERRORCHECK mutex's wait that closes a cycle of
                                waits gives up with EDEADLK (deadlock.c) */
    unsigned long lease_ms;  /* 0: default lease, renewed by the watchdog */
    const struct rm_lock_ops *ops;
    unsigned users;          /* threads inside a call through it; under lock->mu */
    struct rm_mutex *all_next, *all_prev; /* every handle (mutex.c) */
};

/* Whether a wait through mx gives up with EDEADLK when it closes a cycle
 * of waits (deadlock.c): an ERRORCHECK mutex that asks, or every one with
 * the setting deadlock_detect=1. */
static inline int rm_handle_detects(const struct rm_mutex *mx)
{
    return mx->detect || (mx->type == RMUTEX_ERRORCHECK && RM_SETTING(deadlock_detect));
}

/* The lease of a hold of mx, in ms. */
static inline unsigned long rm_handle_lease(const struct rm_mutex *mx)
{
    return mx->lease_ms ? mx->lease_ms : RM_SETTING(lease_ms);
}

/* The terms of a hold taken through mx (hold.c). */
static inline struct rm_hold_terms rm_handle_terms(struct rm_mutex *mx)
{
    struct rm_hold_terms t = { .via = mx, .user = mx->user, .lease_ms = rm_handle_lease(mx),
                               .renewed = !mx->lease_ms, .robust = mx->robust };
    return t;
}

/* Set the detail for a robust handle refused with ENOTRECOVERABLE. */
static inline int rm_handle_notrecoverable(const struct rm_mutex *mx)
{
    rm_detail("%s is not recoverable: an EOWNERDEAD holder unlocked it without "
              "rmutex_consistent (rmutex_force_unlock clears it)", mx->keys.lock);
    return ENOTRECOVERABLE;
}

/* An unlock through mx found its hold gone in Redis (RM_E_GONE): tell the
 * holder (lost-lock callback, locks_lost) and return EPERM. */
static inline int rm_handle_report_lost(const struct rm_mutex *mx)
{
    rm_watchdog_report_lost(mx->user, mx->keys.lock);
    return EPERM;
}

#endif
