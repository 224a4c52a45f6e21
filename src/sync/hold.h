/* hold.h -- one acquisition of a lock by one thread of this process. */
#ifndef RM_HOLD_H
#define RM_HOLD_H

#include <stdint.h>

#include "clock.h"
#include "internal.h"

struct rm_endpoint;
struct rm_hold_share;
struct rm_lock;
struct rm_mutex;
struct rm_thread;
struct rm_watchdog_entry;

/* What a hold needs to know of the handle it is taken through. */
struct rm_hold_terms {
    struct rm_mutex *via;   /* the handle; opaque here */
    rmutex_t *user;         /* for the lost-lock callback */
    unsigned long lease_ms; /* the hold's lease */
    int renewed;            /* the watchdog renews it (no fixed lease) */
    int robust;
    /* A hold of the process's cached Redis hold (cache.c): renewed by the
     * cache's entry, which the hold shares instead of making its own, and
     * ended by the cache's own rule when its thread exits inside. */
    struct rm_watchdog_entry *shared_wd;
    const struct rm_hold_share *share;
};

/* What a shared hold's owner (the cache, a layer above) does when the
 * hold's thread exits inside it: detach_locked takes the owner off l (its
 * mu held, in the same breath as the hold and the gate let go, so that no
 * other thread slips into it), then abandon, with no lock held, lets its
 * lease run out as a thread's hold's would. */
struct rm_hold_share {
    void *(*detach_locked)(struct rm_lock *l);
    void (*abandon)(void *owner);
};

/* An acquisition Redis granted: its fencing token, whether the previous
 * holder lapsed, how long it is known good, when its first renewal is due. */
struct rm_grant {
    uint64_t token;
    int dead;
    rm_nsec valid_until, due;
    uint64_t acq;           /* the acquisition's request id (its owner mark) */
};

struct rm_hold {
    struct rm_lock *lock;   /* a reference, given back when the hold is freed */
    struct rm_mutex *via;   /* the handle it was taken through (read only while current) */
    unsigned long lease_ms; /* its lease */
    uint64_t tid;           /* the holding thread */
    uint64_t acq;           /* the acquisition that made it: its release names it */
    /* Under lock->mu: */
    unsigned depth;         /* RECURSIVE levels */
    uint64_t token;         /* fencing token */
    int inconsistent;       /* acquired with EOWNERDEAD, not yet consistent */
    struct rm_watchdog_entry *wd; /* the watchdog's entry; NULL for a fixed lease */
    int shared;             /* wd is the process's cache's (cache.c), not the hold's own */
    const struct rm_hold_share *share; /* when shared: its thread's exit (cache.c) */
    rm_nsec lease_end;      /* fixed lease: when it runs out at the latest */
    rm_nsec since;          /* when it began (the acquiring request's send), for
                               the hold-time histogram */
    /* The holding thread's list; only that thread touches it. */
    struct rm_hold *next, *prev;
};

/* The hold of l that is current and self's, or NULL.  l->mu held. */
struct rm_hold *rm_hold_of(struct rm_lock *l, const struct rm_thread *self);

/* self's acquisition g of l, on the terms of the handle it came through,
 * succeeded in Redis: start the watchdog's renewal when the hold is
 * renewed, and record the hold as l's current one.  A hold
 * it replaces (another thread's, lost) is left to its thread, which learns
 * at its unlock or exit that it is no longer current.  Returns 0,
 * EOWNERDEAD (robust and dead), or ENOMEM (nothing recorded; the caller
 * gives the lock back). */
int rm_hold_take(struct rm_lock *l, const struct rm_hold_terms *terms, struct rm_thread *self,
                 struct rm_endpoint *ep, const struct rm_grant *g);

/* self gives up its current hold of l (its last level): the hold is
 * ended locally and its renewal stopped (not a shared one's: the cache
 * decides).  Returns 1 if the watchdog had
 * found it lost (then nothing must be sent), else 0 with *lease_end set to
 * until when the hold is known good (its lease cannot have run out before:
 * the last acknowledged renewal's send time plus the lease, or the fixed
 * lease's end) and *acq to the acquisition the
 * release must name (a release that arrives late must not end a later
 * hold of the same thread). */
int rm_hold_drop(struct rm_lock *l, struct rm_thread *self, rm_nsec *lease_end, uint64_t *acq);

/* self unlocks l without holding it: if self has a hold of l that another
 * hold replaced (it was lost, then taken by another thread), end it now.
 * Returns 1 if there was one. */
int rm_hold_forget(struct rm_lock *l, struct rm_thread *self);

/* Thread t exits (the destructor armed by its first hold): each current hold stops being renewed and its lease runs
 * out (the next robust locker gets EOWNERDEAD), the gate goes to the next
 * local waiter; replaced holds are just freed.  A hold ends exactly once,
 * and only its own thread's. */
void rm_hold_thread_exit(struct rm_thread *t);

#endif
