/* mutex.c -- the state behind an rmutex_t: creation (eager or on first use),
 * the registry of all of them, the local gate, hold bookkeeping, and what
 * happens to holds at thread exit, process exit and fork.
 *
 * An rmutex_t is caller-owned and fixed-size (64 bytes); its __state points
 * to a struct rm_mutex allocated here.  RMUTEX_INITIALIZER leaves __state
 * NULL and __name set; the first call creates the state and installs it
 * with a compare-and-swap, the loser of a race freeing its copy.  A
 * destroyed mutex points __state at a sentinel, so later use is EINVAL
 * rather than a use-after-free.
 *
 * The local gate serializes, per mutex and per process, the threads that
 * talk to Redis about this lock: a thread takes the gate, acquires in
 * Redis, holds, releases in Redis, and passes the gate to the next local
 * thread in FIFO order.  Threads of one process thus never race each other
 * in Redis (one EVAL and one subscription waiter per process per lock
 * instead of one per thread), and they are served in the order they
 * arrived.  The fair lock does not use the gate: its order must be kept
 * across processes, so every thread queues in Redis itself.
 *
 * Lock order: registry, then a mutex's mu, then the watchdog, the
 * multiplexer, the pool.  A mutex's mu is never held across a round trip. */
#include "mutex.h"
#include "identity.h"
#include "internal.h"
#include "runtime.h"
#include "watchdog.h"

#include <stdio.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rm_mutex *registry;
static char destroyed_sentinel;
#define DESTROYED ((void *)&destroyed_sentinel)

_Static_assert(sizeof(rmutex_t) == 64, "rmutex_t is 64 bytes: part of the ABI");
_Static_assert(sizeof(rmutexattr_t) == 64, "rmutexattr_t size is part of the ABI");

/* ---- waits ---- */

void rm_wait_timed(struct rm_wait *w, clockid_t clock, const struct timespec *abs)
{
    w->mode = RM_WAIT_TIMED;
    w->bad_abstime = 0;
    if (!abs) {
        w->bad_abstime = 1;
        w->deadline = 0;
        return;
    }
    if (abs->tv_sec < 0) { /* glibc: ETIMEDOUT before looking at tv_nsec */
        w->deadline = 0;
        return;
    }
    if (abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000) {
        w->bad_abstime = 1;
        return;
    }
    rm_nsec mono = rm_now();
    rm_nsec now = clock == CLOCK_MONOTONIC ? mono : rm_clock_ns(clock);
    if (abs->tv_sec >= (RM_FOREVER / 1000000000) - 1) {
        w->deadline = RM_FOREVER;
        return;
    }
    rm_nsec at = (rm_nsec)abs->tv_sec * 1000000000 + abs->tv_nsec;
    rm_nsec left = at - now;
    w->deadline = left > RM_FOREVER - mono ? RM_FOREVER : mono + left;
}

int rm_wait_check(const struct rm_wait *w)
{
    if (w->mode == RM_WAIT_TRY) return EBUSY;
    if (w->mode == RM_WAIT_FOREVER) return 0;
    if (w->bad_abstime) {
        rm_detail("abstime is NULL or its tv_nsec is outside [0, 1e9)");
        return EINVAL;
    }
    if (w->deadline != RM_FOREVER && rm_now() >= w->deadline) return ETIMEDOUT;
    return 0;
}

/* ---- attempts ---- */

void rm_attempts_wait(struct rm_attempts *a)
{
    if (!a->waited) RM_COUNT(waiting);
    a->waited = 1;
}

int rm_attempts_failed(struct rm_attempts *a, const struct rm_wait *w, int r, uint32_t *rng)
{
    if (r == RM_E_LOST) {
        /* Ask again at once (on a new connection): the answer says whether
         * the lost request took the lock.  trylock asks once more only. */
        a->unknown = 1;
        if (++a->lost > 1 && w->mode == RM_WAIT_TRY) return EAGAIN;
        if (w->mode == RM_WAIT_TIMED && rm_now() >= w->deadline) return ETIMEDOUT;
        return 0;
    }
    if (r != RM_E_UNSENT && r != RM_E_TRANSIENT) return r; /* Redis refused for good */
    if (w->mode == RM_WAIT_TRY) return EAGAIN;
    int e = rm_wait_check(w);
    if (e) return e;
    rm_attempts_wait(a);
    rm_nsec pause = rm_backoff(a->failures++, RM_MSEC(10), RM_MSEC(1000), rng);
    rm_sleep_until(rm_min(w->deadline, rm_after(pause)));
    return 0;
}

rm_nsec rm_attempt_deadline(const struct rm_wait *w, int first)
{
    if (w->mode != RM_WAIT_TRY && !first) return w->deadline;
    return rm_max(w->deadline, rm_after(RM_MSEC(RM_SETTING(command_timeout_ms))));
}

int rm_notrecoverable(const struct rm_mutex *mx)
{
    rm_detail("%s is not recoverable: an EOWNERDEAD holder unlocked it without "
              "rmutex_consistent (rmutex_force_unlock clears it)", mx->keys.lock);
    return ENOTRECOVERABLE;
}

void rm_attempts_end(struct rm_attempts *a, int r)
{
    if (a->waited) RM_COUNT_SUB(waiting, 1);
    if (!r && a->waited) RM_COUNT(contended);
}

/* ---- creation, lookup, destruction ---- */

static int create(rmutex_t *m, const char *name, int kind, unsigned long lease_ms,
                  struct rm_mutex **out)
{
    int type = kind & 0xff;
    if (type != RMUTEX_NORMAL && type != RMUTEX_RECURSIVE && type != RMUTEX_ERRORCHECK) {
        rm_detail("unknown mutex type %d", type);
        return EINVAL;
    }
    if (kind & ~(0xff | RMUTEX_FLAG_ROBUST | RMUTEX_FLAG_FAIR)) {
        rm_detail("unknown mutex flags 0x%x", kind);
        return EINVAL;
    }
    struct rm_mutex *mx = calloc(1, sizeof *mx);
    if (!mx) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    int r = rm_keys_make(name, &mx->keys);
    if (r) {
        free(mx);
        return r;
    }
    mx->user = m;
    mx->type = type;
    mx->robust = !!(kind & RMUTEX_FLAG_ROBUST);
    mx->fair = !!(kind & RMUTEX_FLAG_FAIR);
    mx->lease_ms = lease_ms;
    mx->ops = mx->fair ? &rm_fair_ops : &rm_nonfair_ops;
    pthread_mutex_init(&mx->mu, NULL);
    *out = mx;
    return 0;
}

static void registry_add(struct rm_mutex *mx)
{
    pthread_mutex_lock(&registry_mu);
    mx->reg_prev = NULL;
    mx->reg_next = registry;
    if (registry) registry->reg_prev = mx;
    registry = mx;
    pthread_mutex_unlock(&registry_mu);
}

static void registry_remove(struct rm_mutex *mx)
{
    pthread_mutex_lock(&registry_mu);
    if (mx->reg_prev) mx->reg_prev->reg_next = mx->reg_next;
    else registry = mx->reg_next;
    if (mx->reg_next) mx->reg_next->reg_prev = mx->reg_prev;
    pthread_mutex_unlock(&registry_mu);
}

static void free_state(struct rm_mutex *mx)
{
    pthread_mutex_destroy(&mx->mu);
    rm_keys_free(&mx->keys);
    free(mx);
}

int rm_mutex_init(rmutex_t *m, const char *name, int kind, unsigned long lease_ms)
{
    struct rm_mutex *mx;
    int r = create(m, name, kind, lease_ms, &mx);
    if (r) return r;
    registry_add(mx);
    m->__name = NULL;
    m->__kind = kind;
    m->__spare = 0;
    memset(m->__reserved, 0, sizeof m->__reserved);
    __atomic_store_n(&m->__state, mx, __ATOMIC_RELEASE);
    return 0;
}

struct rm_mutex *rm_mutex_get(rmutex_t *m, int *err)
{
    if (!m) {
        rm_detail("the mutex is NULL");
        *err = EINVAL;
        return NULL;
    }
    void *st = __atomic_load_n(&m->__state, __ATOMIC_ACQUIRE);
    if (st && st != DESTROYED) return st;
    if (st == DESTROYED || !m->__name) {
        rm_detail(st ? "the mutex was destroyed" : "the mutex was not initialized");
        *err = EINVAL;
        return NULL;
    }
    /* A static initializer: create the state now. */
    struct rm_mutex *mx;
    if ((*err = create(m, m->__name, m->__kind, 0, &mx))) return NULL;
    void *expected = NULL;
    if (!__atomic_compare_exchange_n(&m->__state, &expected, mx, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        free_state(mx);
        if (expected == DESTROYED) {
            *err = EINVAL;
            return NULL;
        }
        return expected;
    }
    registry_add(mx);
    return mx;
}

int rm_mutex_destroy(rmutex_t *m)
{
    int err;
    struct rm_mutex *mx = rm_mutex_get(m, &err);
    if (!mx) return err;
    pthread_mutex_lock(&mx->mu);
    int busy = mx->owner || mx->gate || mx->users;
    pthread_mutex_unlock(&mx->mu);
    if (busy) {
        rm_detail("the mutex is held or waited for by a thread of this process");
        return EBUSY;
    }
    __atomic_store_n(&m->__state, DESTROYED, __ATOMIC_RELEASE);
    registry_remove(mx);
    free_state(mx);
    return 0;
}

/* ---- the gate ---- */

int rm_gate_enter(struct rm_mutex *mx, struct rm_thread *self, const struct rm_wait *w)
{
    pthread_mutex_lock(&mx->mu);
    if (!mx->gate && !mx->gq_head) {
        mx->gate = self->tid;
        pthread_mutex_unlock(&mx->mu);
        return 0;
    }
    int r = rm_wait_check(w);
    if (r) {
        pthread_mutex_unlock(&mx->mu);
        return r;
    }
    struct rm_gate_waiter me = { .tid = self->tid };
    rm_cond_init(&me.cv);
    if (mx->gq_tail) mx->gq_tail->next = &me;
    else mx->gq_head = &me;
    mx->gq_tail = &me;
    RM_COUNT(waiting);
    while (!me.granted) {
        if (rm_cond_wait_until(&me.cv, &mx->mu, w->deadline) == ETIMEDOUT && !me.granted) {
            /* Give up our place. */
            struct rm_gate_waiter **p = &mx->gq_head, *prev = NULL;
            while (*p != &me) prev = *p, p = &(*p)->next;
            *p = me.next;
            if (mx->gq_tail == &me) mx->gq_tail = prev;
            r = ETIMEDOUT;
            break;
        }
    }
    RM_COUNT_SUB(waiting, 1);
    pthread_mutex_unlock(&mx->mu);
    pthread_cond_destroy(&me.cv);
    return r;
}

static void gate_pass_locked(struct rm_mutex *mx)
{
    struct rm_gate_waiter *next = mx->gq_head;
    if (!next) {
        mx->gate = 0;
        return;
    }
    mx->gq_head = next->next;
    if (!mx->gq_head) mx->gq_tail = NULL;
    mx->gate = next->tid;
    next->granted = 1;
    pthread_cond_signal(&next->cv);
}

void rm_gate_leave(struct rm_mutex *mx)
{
    pthread_mutex_lock(&mx->mu);
    gate_pass_locked(mx);
    pthread_mutex_unlock(&mx->mu);
}

/* ---- holds ---- */

unsigned long rm_mutex_lease(const struct rm_mutex *mx)
{
    return mx->lease_ms ? mx->lease_ms : RM_SETTING(lease_ms);
}

static void hold_end_locked(struct rm_mutex *mx, struct rm_thread *self)
{
    if (mx->held_prev) mx->held_prev->held_next = mx->held_next;
    else self->held = mx->held_next;
    if (mx->held_next) mx->held_next->held_prev = mx->held_prev;
    mx->held_next = mx->held_prev = NULL;
    mx->owner = 0;
    mx->depth = 0;
    mx->inconsistent = 0;
    mx->wd = NULL;
    RM_COUNT_SUB(held, 1);
}

int rm_hold_take(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                 uint64_t acq, uint64_t token, int dead, rm_nsec valid_until, rm_nsec due)
{
    unsigned long lease = rm_mutex_lease(mx);
    struct rm_wd_entry *wd = NULL;
    if (!mx->lease_ms) {
        wd = rm_wd_hold(ep, &mx->keys, self->owner, self->owner_len, acq, lease, valid_until,
                        due, mx->user);
        if (!wd) {
            rm_detail("out of memory");
            return ENOMEM;
        }
    }
    dead = dead && mx->robust;
    RM_COUNT(acquisitions);
    pthread_mutex_lock(&mx->mu);
    mx->owner = self->tid;
    mx->depth = 1;
    mx->token = token;
    mx->inconsistent = dead;
    mx->wd = wd;
    mx->lease_end = valid_until;
    mx->held_prev = NULL;
    mx->held_next = self->held;
    if (self->held) self->held->held_prev = mx;
    self->held = mx;
    pthread_mutex_unlock(&mx->mu);
    rm_thread_arm_exit(self);
    RM_COUNT(held);
    if (dead) rm_detail("the previous holder of %s died holding it (its lease ran out)", mx->keys.lock);
    return dead ? EOWNERDEAD : 0;
}

int rm_hold_drop(struct rm_mutex *mx, struct rm_thread *self, rm_nsec *lease_end)
{
    pthread_mutex_lock(&mx->mu);
    struct rm_wd_entry *wd = mx->wd;
    *lease_end = wd ? rm_after(RM_MSEC(rm_mutex_lease(mx))) : mx->lease_end;
    hold_end_locked(mx, self);
    pthread_mutex_unlock(&mx->mu);
    if (wd && rm_wd_cancel(wd)) {
        rm_detail("the lease of %s was lost before this unlock", mx->keys.lock);
        return 1;
    }
    return 0;
}

void rm_latch_ms(const struct rm_mutex *mx, char *buf, size_t size)
{
    RM_UNUSED(mx);
    snprintf(buf, size, "%lu", RM_SETTING(command_timeout_ms));
}

void rm_mutex_abandon(struct rm_mutex *mx, struct rm_thread *t)
{
    pthread_mutex_lock(&mx->mu);
    struct rm_wd_entry *wd = mx->wd;
    hold_end_locked(mx, t);
    gate_pass_locked(mx);
    pthread_mutex_unlock(&mx->mu);
    if (wd) rm_wd_cancel(wd);
    rm_log("thread %llu exited holding %s; its lease will run out",
           (unsigned long long)t->tid, mx->keys.lock);
}

void rm_mutex_release_all_at_exit(void)
{
    rm_nsec deadline = rm_after(RM_MSEC(1000));
    /* The registry lock is held across these round trips: the process is
     * exiting, and a mutex must not be destroyed under us meanwhile. */
    pthread_mutex_lock(&registry_mu);
    for (struct rm_mutex *mx = registry; mx; mx = mx->reg_next) {
        pthread_mutex_lock(&mx->mu);
        uint64_t owner = mx->owner;
        struct rm_wd_entry *wd = owner ? mx->wd : NULL;
        if (owner) mx->wd = NULL;
        pthread_mutex_unlock(&mx->mu);
        if (wd) rm_wd_cancel(wd);
        /* The holding thread may still run; it is about to be gone with the
         * process, and its unlock now gets EPERM from Redis. */
        struct rm_endpoint *ep;
        if (owner && rm_now() < deadline && !rm_runtime_enter(&ep)) {
            char name[64];
            size_t n = rm_owner_of(owner, name, sizeof name);
            mx->ops->release_owner(mx, ep, name, n, deadline);
            rm_runtime_leave();
        }
    }
    pthread_mutex_unlock(&registry_mu);
}

void rm_mutex_atfork(int who)
{
    if (who < 0) {
        pthread_mutex_lock(&registry_mu);
        return;
    }
    if (who == 0) {
        pthread_mutex_unlock(&registry_mu);
        return;
    }
    for (struct rm_mutex *mx = registry; mx; mx = mx->reg_next) {
        pthread_mutex_init(&mx->mu, NULL);
        mx->users = 0;
        mx->gate = 0;
        mx->gq_head = mx->gq_tail = NULL;
        mx->owner = 0;
        mx->depth = 0;
        mx->inconsistent = 0;
        mx->wd = NULL;
        mx->held_next = mx->held_prev = NULL;
    }
    pthread_mutex_unlock(&registry_mu); /* taken by the prepare handler, in this thread */
}
