/* mutex.c -- handles: the state behind an rmutex_t, made eagerly or on
 * first use, and what a condition wait does to the mutex it waits with.
 *
 * An rmutex_t is caller-owned and fixed-size (64 bytes); its rm_state_ points
 * to a struct rm_mutex allocated here, which refers to the name's shared
 * struct rm_lock (lock.c).  RMUTEX_INITIALIZER leaves rm_state_ NULL and
 * rm_name_ set; the first call creates the state and installs it with a
 * compare-and-swap, the loser of a race freeing its copy.  A destroyed
 * mutex points rm_state_ at a sentinel, so later use is EINVAL rather than a
 * use-after-free. */
#include "mutex.h"
#include "call.h"
#include "endpoint.h"
#include "fair.h"
#include "nonfair.h"
#include "hold.h"
#include "thread.h"
#include "internal.h"
#include "watchdog.h"

#include <stdio.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static char destroyed_sentinel;

/* Every handle: a forked child forgets the callers its parent's threads
 * had in them, and a handle stays reachable from here for as long as it
 * exists (an rmutex_t on the stack or the heap that is never destroyed is
 * the program's business, but leak checkers should not blame its state on
 * the library any more than they do for a pthread mutex). */
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rm_mutex *all;

static void all_add(struct rm_mutex *mx)
{
    pthread_mutex_lock(&all_mu);
    mx->all_prev = NULL;
    mx->all_next = all;
    if (all) all->all_prev = mx;
    all = mx;
    pthread_mutex_unlock(&all_mu);
}

static void all_remove(struct rm_mutex *mx)
{
    pthread_mutex_lock(&all_mu);
    if (mx->all_prev) mx->all_prev->all_next = mx->all_next;
    else all = mx->all_next;
    if (mx->all_next) mx->all_next->all_prev = mx->all_prev;
    pthread_mutex_unlock(&all_mu);
}

void rm_mutex_atfork(int who)
{
    if (who < 0) pthread_mutex_lock(&all_mu);
    else if (who == 0) pthread_mutex_unlock(&all_mu);
    else { /* the child: this thread took it; no other thread is in a call */
        for (struct rm_mutex *mx = all; mx; mx = mx->all_next) mx->users = 0;
        pthread_mutex_unlock(&all_mu); /* (not re-initialized: TSan would think it held) */
    }
}
#define DESTROYED ((void *)&destroyed_sentinel)

_Static_assert(sizeof(rmutex_t) == 64, "rmutex_t is 64 bytes: part of the ABI");
_Static_assert(sizeof(rmutexattr_t) == 64, "rmutexattr_t size is part of the ABI");

/* ---- creation, lookup, destruction ---- */

static int create(rmutex_t *m, const char *name, int kind, unsigned long lease_ms,
                  struct rm_mutex **out)
{
    int type = kind & 0xff;
    if (type != RMUTEX_NORMAL && type != RMUTEX_RECURSIVE && type != RMUTEX_ERRORCHECK) {
        rm_detail("unknown mutex type %d", type);
        return EINVAL;
    }
    if (kind & ~(0xff | RMUTEX_FLAG_ROBUST | RMUTEX_FLAG_FAIR | RMUTEX_FLAG_CACHE |
                 RMUTEX_FLAG_DEADLOCK_DETECT)) {
        rm_detail("unknown mutex flags 0x%x", kind);
        return EINVAL;
    }
    if ((kind & RMUTEX_FLAG_CACHE) && lease_ms) {
        rm_detail("a cached mutex needs a renewed lease (lease 0)");
        return EINVAL;
    }
    struct rm_mutex *mx = calloc(1, sizeof *mx);
    if (!mx) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    int r = rm_lock_get(name, &mx->lock);
    if (r) {
        free(mx);
        return r;
    }
    mx->keys = mx->lock->keys;
    mx->user = m;
    mx->type = type;
    mx->robust = !!(kind & RMUTEX_FLAG_ROBUST);
    mx->fair = !!(kind & RMUTEX_FLAG_FAIR);
    mx->cache = !!(kind & RMUTEX_FLAG_CACHE);
    mx->detect = (kind & RMUTEX_FLAG_DEADLOCK_DETECT) && type == RMUTEX_ERRORCHECK;
    mx->lease_ms = lease_ms;
    mx->ops = mx->fair ? &rm_fair_ops : &rm_nonfair_ops;
    all_add(mx);
    *out = mx;
    return 0;
}

static void free_state(struct rm_mutex *mx)
{
    all_remove(mx);
    rm_lock_put(mx->lock);
    free(mx);
}

int rm_mutex_init(rmutex_t *m, const char *name, int kind, unsigned long lease_ms)
{
    struct rm_mutex *mx;
    int r = create(m, name, kind, lease_ms, &mx);
    if (r) return r;
    m->rm_name_ = NULL;
    m->rm_kind_ = kind;
    m->rm_spare_ = 0;
    memset(m->rm_reserved_, 0, sizeof m->rm_reserved_);
    __atomic_store_n(&m->rm_state_, mx, __ATOMIC_RELEASE);
    return 0;
}

struct rm_mutex *rm_mutex_get(rmutex_t *m, int *err)
{
    if (!m) {
        rm_detail("the mutex is NULL");
        *err = EINVAL;
        return NULL;
    }
    void *st = __atomic_load_n(&m->rm_state_, __ATOMIC_ACQUIRE);
    if (st && st != DESTROYED) return st;
    const char *name = __atomic_load_n(&m->rm_name_, __ATOMIC_ACQUIRE); /* after rm_kind_ (swap) */
    if (st == DESTROYED || !name) {
        rm_detail(st ? "the mutex was destroyed" : "the mutex was not initialized");
        *err = EINVAL;
        return NULL;
    }
    /* A static initializer: create the state now. */
    struct rm_mutex *mx;
    if ((*err = create(m, name, __atomic_load_n(&m->rm_kind_, __ATOMIC_RELAXED), 0, &mx)))
        return NULL;
    void *expected = NULL;
    if (!__atomic_compare_exchange_n(&m->rm_state_, &expected, mx, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        free_state(mx);
        if (expected == DESTROYED) {
            *err = EINVAL;
            return NULL;
        }
        return expected;
    }
    return mx;
}

int rm_mutex_destroy(rmutex_t *m)
{
    int err;
    struct rm_mutex *mx = rm_mutex_get(m, &err);
    if (!mx) return err;
    struct rm_lock *l = mx->lock;
    pthread_mutex_lock(&l->mu);
    /* Busy: a thread is in a call through this handle, or holds the name
     * through it.  (A hold taken through another handle of the name is
     * that handle's business.) */
    int busy = mx->users || (l->hold && l->hold->via == mx);
    pthread_mutex_unlock(&l->mu);
    if (busy) {
        rm_detail("the mutex is held through this handle, or waited for, by a thread of this "
                  "process");
        return EBUSY;
    }
    __atomic_store_n(&m->rm_state_, DESTROYED, __ATOMIC_RELEASE);
    free_state(mx);
    return 0;
}

/* ---- holds' parameters ---- */

/* ---- a condition wait ---- */

int rm_mutex_wait_begin(struct rm_mutex *mx, struct rm_thread *self)
{
    struct rm_lock *l = mx->lock;
    pthread_mutex_lock(&l->mu);
    struct rm_hold *h = rm_hold_of(l, self);
    if (h) mx->users++;
    pthread_mutex_unlock(&l->mu);
    if (h) return 0;
    rm_detail("the calling thread does not hold %s", l->keys.lock);
    return EPERM;
}

int rm_mutex_wait_release(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                          unsigned *depth)
{
    struct rm_lock *l = mx->lock;
    pthread_mutex_lock(&l->mu);
    struct rm_hold *h = rm_hold_of(l, self);
    RM_ASSERT(h); /* begin found it, and only this thread ends it */
    struct rm_mutex *via = h->via;
    int notrec = via->robust && h->inconsistent;
    *depth = h->depth;
    h->depth = 1;
    pthread_mutex_unlock(&l->mu);
    return via->ops->unlock(via, self, ep, notrec);
}

int rm_mutex_wait_retake(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                         unsigned depth)
{
    struct rm_wait w = { RM_WAIT_FOREVER, 0, RM_FOREVER };
    int r = mx->ops->lock(mx, self, ep, &w);
    if (r && r != EOWNERDEAD) return r;
    pthread_mutex_lock(&mx->lock->mu);
    struct rm_hold *h = rm_hold_of(mx->lock, self);
    if (h) h->depth = depth;
    pthread_mutex_unlock(&mx->lock->mu);
    return r;
}

unsigned long rm_mutex_wait_grantable(const struct rm_mutex *mx, const struct rm_endpoint *ep,
                                      int slot)
{
    if (mx->fair || mx->cache || mx->robust) return 0;
    if (rm_endpoint_clustered(ep) && mx->keys.slot != slot) return 0;
    return rm_handle_lease(mx);
}

int rm_mutex_wait_own(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                      uint64_t acq, rm_nsec granted_after, unsigned depth)
{
    struct rm_wait try_only = { RM_WAIT_TRY, 0, 0 };
    struct rm_lock *l = mx->lock;
    rm_nsec lease = RM_MSEC(rm_handle_lease(mx));
    /* The grant's lease ran from a moment after granted_after (the waiter's
     * last look that found it still waiting); known here only that far
     * back.  Older than a renewal period: the hold would be due for renewal
     * (or look expired) at once -- take it as any locker does instead: the
     * acquire finds the field it was handed and makes it this hold. */
    if (rm_clock_now() - granted_after > lease / 3) return rm_mutex_wait_retake(mx, self, ep, depth);
    if (!rm_lock_gate_enter(l, self, &try_only)) {
        struct rm_grant g = { 0, 0, granted_after + lease, granted_after + lease / 3, acq };
        struct rm_hold_terms terms = rm_handle_terms(mx);
        if (!rm_hold_take(l, &terms, self, ep, &g)) {
            pthread_mutex_lock(&l->mu);
            rm_hold_of(l, self)->depth = depth;
            pthread_mutex_unlock(&l->mu);
            return 0;
        }
        rm_lock_gate_leave(l);
    }
    /* Another thread of this process is in the gate, acquiring (it would
     * wait on our hold), or out of memory: give the grant back and take the
     * mutex as any locker does, behind that thread. */
    mx->ops->release_owner(mx, ep, self->owner, self->owner_len, acq, rm_call_deadline());
    return rm_mutex_wait_retake(mx, self, ep, depth);
}

void rm_mutex_wait_end(struct rm_mutex *mx)
{
    pthread_mutex_lock(&mx->lock->mu);
    mx->users--;
    pthread_mutex_unlock(&mx->lock->mu);
}

/* ---- process exit ---- */

struct exit_release {
    struct rm_endpoint *ep;
    rm_nsec deadline;
};

static void release_at_exit(struct rm_lock *l, void *arg)
{
    struct exit_release *x = arg;
    pthread_mutex_lock(&l->mu);
    struct rm_hold *h = l->hold;
    if (h && h->shared) h = NULL; /* the cache's: rm_cache_release_all gave it back */
    struct rm_watchdog_entry *wd = h ? h->wd : NULL;
    struct rm_mutex *via = h ? h->via : NULL;
    uint64_t owner = h ? h->tid : 0, acq = h ? h->acq : 0;
    if (h) h->wd = NULL;
    pthread_mutex_unlock(&l->mu);
    if (wd) rm_watchdog_cancel(wd);
    /* The holding thread may still run; it is about to be gone with the
     * process, and its unlock now gets EPERM from Redis. */
    if (owner && rm_clock_now() < x->deadline) {
        char name[64];
        size_t n = rm_thread_owner_of(owner, name, sizeof name);
        via->ops->release_owner(via, x->ep, name, n, acq, x->deadline);
    }
}

void rm_mutex_release_all_at_exit(struct rm_endpoint *ep)
{
    /* The registry lock is held across these round trips: the process is
     * exiting, and a lock must not be freed under us meanwhile. */
    struct exit_release x = { ep, rm_clock_after(RM_MSEC(1000)) };
    rm_lock_each(release_at_exit, &x);
}

struct rm_mutex *rm_mutex_query(rmutex_t *m, const void *out, struct rm_thread **self, int *r)
{
    struct rm_mutex *mx = rm_mutex_get(m, r);
    if (!mx) return NULL;
    if (!out) {
        rm_detail("the output pointer is NULL");
        *r = EINVAL;
        return NULL;
    }
    *self = rm_thread_self();
    *r = 0;
    return mx;
}
