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
#include "hold.h"
#include "lock.h"
#include "wait.h"

struct rm_thread;
struct rm_watchdog_entry;
struct rm_mutex;

/* An unlock through mx found its hold gone in Redis (RM_E_GONE): tell the
 * holder (lost-lock callback, locks_lost) and return EPERM. */
int rm_mutex_report_lost(const struct rm_mutex *mx);

/* Set the detail for a robust handle refused with ENOTRECOVERABLE. */
int rm_mutex_notrecoverable(const struct rm_mutex *mx);

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
    unsigned long lease_ms;  /* 0: default lease, renewed by the watchdog */
    const struct rm_lock_ops *ops;
    unsigned users;          /* threads inside a call through it; under lock->mu */
    struct rm_mutex *all_next, *all_prev; /* every handle (mutex.c) */
};

/* The state of m, created on first use for a static initializer.  NULL
 * with EINVAL in *err for a NULL, zeroed or destroyed m. */
struct rm_mutex *rm_mutex_get(rmutex_t *m, int *err);

/* The handle m and the calling thread, for a call that only reads or
 * fences the hold (api.c): NULL with *r set when m or out is bad. */
struct rm_mutex *rm_api_query(rmutex_t *m, const void *out, struct rm_thread **self, int *r);

/* Create m's state from a name and attributes; destroy it. */
int rm_mutex_init(rmutex_t *m, const char *name, int kind, unsigned long lease_ms);
int rm_mutex_destroy(rmutex_t *m);

/* The lease of a hold of mx, in ms. */
unsigned long rm_mutex_lease(const struct rm_mutex *mx);

/* The terms of a hold taken through mx (hold.c). */
struct rm_hold_terms rm_mutex_terms(struct rm_mutex *mx);

/* A condition wait (cond.c) lets go of the mutex and takes it back:
 * begin: EPERM unless self holds mx's name; counts the caller as a user
 * of mx (destroy is EBUSY) until end.  release: unlock at every level,
 * *depth the count to restore; the hold's own errors (EPERM: its lease was
 * lost) are returned, the mutex is let go of all the same.  retake: lock
 * through mx (a fair mutex through its queue), waiting as long as it takes,
 * and restore depth; 0, EOWNERDEAD or the lock's error. */
int rm_mutex_wait_begin(struct rm_mutex *mx, struct rm_thread *self);
int rm_mutex_wait_release(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                          unsigned *depth);
int rm_mutex_wait_retake(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                         unsigned depth);
void rm_mutex_wait_end(struct rm_mutex *mx);

/* fork(): -1 lock the list of handles, 0 unlock, 1 child: no handle has
 * a caller any more. */
void rm_mutex_atfork(int who);

/* At exit: release in Redis, on ep, every hold of this process, within
 * ~1 s. */
void rm_mutex_release_all_at_exit(struct rm_endpoint *ep);

extern const struct rm_lock_ops rm_nonfair_ops;

/* release.lua for acquisition acq (0: any) of owner's hold of k, as an
 * unlock returns it (rm_call_unlock): 0, RM_E_GONE or the error. */
int rm_nonfair_release(struct rm_endpoint *ep, const struct rm_keys *k, int robust,
                       const char *owner, size_t owner_len, int notrec, uint64_t acq,
                       rm_nsec deadline, rm_nsec give_up_at);
extern const struct rm_lock_ops rm_fair_ops;

/* fair.lua's release of the same (the lock passes to the first live
 * waiter). */
int rm_fair_release(struct rm_endpoint *ep, const struct rm_keys *k, int robust,
                    const char *owner, size_t owner_len, int notrec, uint64_t acq,
                    rm_nsec deadline, rm_nsec give_up_at);

#endif
