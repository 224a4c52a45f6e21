/* lock.h -- one lock name's state in this process, shared by every handle
 * (rmutex_t) initialized with that name: the local gate and the hold. */
#ifndef RM_LOCK_H
#define RM_LOCK_H

#include <pthread.h>
#include <stdint.h>

#include "clock.h"
#include "keys.h"

struct rm_names_stats;
struct rm_cache;
struct rm_hold;
struct rm_thread;
struct rm_wait;

/* A thread waiting for the local gate; on its own stack. */
struct rm_gate_waiter {
    struct rm_gate_waiter *next;
    pthread_cond_t cv;
    uint64_t tid;
    int granted;
};

struct rm_lock {
    struct rm_keys keys;       /* keys.lock is the name */
    unsigned refs;             /* handles and holds; under the registry's lock */
    struct rm_lock *reg_next;  /* the registry's bucket chain */

    pthread_mutex_t mu;        /* protects what follows; never held across I/O */
    /* The local gate: one thread of this process at a time talks to Redis
     * about this name for the non-fair lock (acquiring, holding,
     * releasing); the others queue FIFO. */
    uint64_t gate;             /* tid that has the gate, 0: free */
    struct rm_gate_waiter *gq_head, *gq_tail;
    struct rm_hold *hold;      /* this process's current hold, NULL: none */
    struct rm_cache *cache;    /* the process's cached Redis hold (cache.c), NULL: none */
    rm_nsec courtesy_until;    /* cache.c: gave it back on request; threads wait till then */
    _Atomic int fair_queued;   /* fair.c: a cached fair lock is contended; do not cache it */
    struct rm_names_stats *stats; /* the name's counters (names.c), for the process's life */
};

/* The gate's holder while the cache keeper gives a cache back (no thread
 * of the process has that number). */
#define RM_GATE_KEEPER UINT64_MAX

/* The lock of name, made on first use; one more reference (a handle's).
 * Returns 0, EINVAL for a bad name, ENOMEM. */
int rm_lock_get(const char *name, struct rm_lock **out);

/* One more reference (a hold's) / one less; the last frees l. */
void rm_lock_ref(struct rm_lock *l);
void rm_lock_put(struct rm_lock *l);

/* Call fn for every lock, under the registry's lock (fn may take l->mu). */
void rm_lock_each(void (*fn)(struct rm_lock *l, void *arg), void *arg);

/* Gate: enter (waiting as w allows, FIFO), and pass it on. */
int rm_lock_gate_enter(struct rm_lock *l, struct rm_thread *self, const struct rm_wait *w);
void rm_lock_gate_leave(struct rm_lock *l);
/* The same with l->mu held by the caller. */
void rm_lock_gate_leave_locked(struct rm_lock *l);

/* fork(): -1 lock the registry, 0 unlock, 1 child: every lock forgets its
 * gate, its waiters and its hold. */
void rm_lock_atfork(int who);

#endif
