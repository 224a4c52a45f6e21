/* cache.h -- lock caching: a process keeps a lock's Redis hold between its
 * threads' holds (rmutexattr_setcache). */
#ifndef RM_CACHE_H
#define RM_CACHE_H

#include <stdint.h>

#include "clock.h"

struct rm_cache;
struct rm_endpoint;
struct rm_grant;
struct rm_lock;
struct rm_mutex;
struct rm_thread;

/* Who acquires a lock in Redis: a thread, or (a cached lock) the process. */
struct rm_who {
    const char *owner;  /* the thread's owner field, or buf */
    size_t owner_len;
    uint64_t acq;       /* the acquisition's number */
    uint64_t back;      /* not 0: the acquisition of the process's parked
                           cache, to take back if it is still there
                           (acquire.lua) instead of acquiring anew */
    char buf[64];       /* "<uuid>:0" */
};

/* The start of every lock of a gated mutex (non-fair, or fair and cached):
 * self enters the gate as w allows and, if the process caches the lock,
 * takes its hold from the cache.  Returns 1 when that settled the call
 * (*r: its result; the gate is left unless 0 or EOWNERDEAD), else 0 with
 * self in the gate and *me the owner to acquire as: the process when mx
 * caches and a cache can start (*cached = 1), else self. */
struct rm_wait;
int rm_cache_enter(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                   const struct rm_wait *w, struct rm_who *me, int *cached, int *r);

/* A lock of mx, with self in the gate: if the process caches mx's
 * lock, self's hold is made from the cache (no round trip) and 1 is
 * returned with *r = 0 or ENOMEM; else 0 (a cache found lost is ended
 * first), after the courtesy wait when the process just gave the lock
 * back on request (not for trylock; not past w's deadline).  A parked
 * cache must be taken back first: through a caching handle, 0 is
 * returned with *back = its acquisition, for the acquire to take it back
 * in its own call (then rm_cache_resume); through another handle, here
 * (park.lua, one round trip). */
int rm_cache_lock(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                  const struct rm_wait *w, uint64_t *back, int *r);

/* The acquire took the parked cache's hold (acquisition back) back: make
 * self's hold from the cache (1, *r as rm_cache_lock's).  0 when the
 * cache is no longer there (the process is exiting): the caller starts
 * one afresh with that hold. */
int rm_cache_resume(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                    uint64_t back, int *r);

/* The acquire found the parked cache's hold (acquisition back) gone --
 * another process took the lock over -- or gave up: end that cache
 * without a release. */
void rm_cache_drop_parked(struct rm_lock *l, uint64_t back);

/* May a cache start now (its keeper thread runs or can be started)? */
int rm_cache_can_start(void);

/* The next acquisition number of the process's owner field ("<uuid>:0"). */
uint64_t rm_cache_next_acq(void);

/* self acquired mx's lock in Redis as the process (grant g, owner
 * "<uuid>:0"), in the gate: start caching it, and make self's hold of it;
 * asked: others already wait for it (a fair lock's queue), so it goes back
 * at the unlock.  Returns what rm_hold_take returns; on ENOMEM the lock is
 * given back. */
int rm_cache_start(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                   const struct rm_grant *g, int asked);

/* Is self's current hold of l one of the cache's? */
int rm_cache_holding(struct rm_lock *l, struct rm_thread *self);

/* The unlock of such a hold (its last level), in the gate: the cache
 * keeps the lock unless another process asked for it (and the minimum
 * hold time has passed), it was lost (EPERM), or notrec.  Leaves the gate. */
int rm_cache_unlock(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                    int notrec);

/* rmutex_fence for self's current shared hold h of l, which has no token
 * yet: one from the cache's reserved range, reserving more when it is
 * used up.  l->mu held (released across a round trip).  0 with h->token
 * set, EPERM, or the call's error. */
struct rm_hold;
int rm_cache_token_locked(struct rm_lock *l, struct rm_thread *self, struct rm_hold *h);

/* Give back every cache now, within deadline.  stop (rmutex_shutdown, no
 * call in progress): stop the keeper, end and free every cache.  Else
 * (the process's exit, other threads may still run): take each cache off
 * its lock and release it in Redis, freeing nothing. */
void rm_cache_release_all(struct rm_endpoint *ep, rm_nsec deadline, int stop);

/* fork(): 1 in the child: no thread, no cache (the parent's are its). */
void rm_cache_atfork_child(void);

#endif
