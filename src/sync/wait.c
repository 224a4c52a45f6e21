/* wait.c -- the waits of the acquiring calls.
 *
 * Every acquiring call (lock, trylock, timedlock, clocklock) turns its
 * arguments into one struct rm_wait at entry: a mode and a CLOCK_MONOTONIC
 * deadline, so steps of the wall clock during the wait do not move it, and
 * a bad abstime is remembered but judged only when the call would block
 * (glibc's order).  The gate (lock.c), the lock algorithms and the
 * condition variables ask it the same questions: may I block, may I try
 * again, how long may this attempt's I/O take.
 *
 * The lock algorithms' acquisition loop is here, once (rm_wait_acquire):
 * attempt, try again after a lost or unsent request, stop or wait when
 * busy, attempt again -- the algorithm gives its attempt and its wait as
 * steps, and cleans up after itself (a queue place, a subscription, an
 * acquisition that may have happened unknown to it).
 *
 * A call that waits is listed in the holder registry while it waits
 * (rm_registry_wait_begin: a record on this stack, no Redis call; the
 * watchdog announces it once it has lasted announce_wait ms), and one
 * whose mutex asks for deadlock detection looks for a cycle of waits
 * through its lock once it has waited rm_deadlock_threshold, then once a
 * second (deadlock.c): its waits are cut at the next look.  The record
 * leaves the registry however the call ends, cancellation included: an
 * algorithm's wait step may be a cancellation point (a semaphore's), and
 * its own cleanup handler does not know this frame's record, so a handler
 * of this frame takes it out before the stack it lives on is gone. */
#include "wait.h"
#include "call.h"
#include "deadlock.h"
#include "internal.h"
#include "registry.h"
#include "thread.h"

#include <errno.h>
#include <pthread.h>

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
    rm_nsec mono = rm_clock_now();
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
    if (w->deadline != RM_FOREVER && rm_clock_now() >= w->deadline) return ETIMEDOUT;
    return 0;
}

int rm_wait_busy(const struct rm_wait *w, const char *lock, const char *why)
{
    int r = rm_wait_check(w);
    if (r == EBUSY || r == ETIMEDOUT)
        rm_detail("%s is %s%s", lock, why, r == ETIMEDOUT ? " (still at the deadline)" : "");
    return r;
}

void rm_wait_begin(struct rm_attempts *a)
{
    if (!a->waited && !a->quiet) RM_COUNT(waiting);
    a->waited = 1;
}

int rm_wait_failed(struct rm_attempts *a, const struct rm_wait *w, int r, uint32_t *rng)
{
    if (r == RM_E_LOST) {
        /* Ask again at once (on a new connection): the answer says whether
         * the lost request took the lock.  trylock asks once more only.
         * A connection that is closed under every request (a proxy, a
         * server shedding clients) is then asked with the backoff of one
         * that cannot be reached, not in a tight loop. */
        a->unknown = 1;
        if (++a->lost > 1 && w->mode == RM_WAIT_TRY) return EAGAIN;
        if (w->mode == RM_WAIT_TIMED && rm_clock_now() >= w->deadline) {
            rm_detail("the deadline passed before Redis answered");
            return ETIMEDOUT;
        }
        if (a->lost == 1) return 0;
    } else {
        if (r != RM_E_UNSENT && r != RM_E_TRANSIENT) return r; /* Redis refused for good */
        if (w->mode == RM_WAIT_TRY) return EAGAIN;
        int e = rm_wait_check(w);
        if (e) return e;
    }
    rm_wait_begin(a);
    /* A server that answers "not now" (TRYAGAIN during a slot migration,
     * CLUSTERDOWN during a failover, LOADING) is asked again sooner than
     * one that cannot be reached. */
    int soon = r == RM_E_TRANSIENT;
    rm_nsec pause = rm_clock_backoff(a->failures++, RM_MSEC(soon ? 2 : 10),
                                     RM_MSEC(soon ? 100 : 1000), rng);
    rm_clock_sleep_until(rm_clock_min(w->deadline, rm_clock_after(pause)));
    return 0;
}

rm_nsec rm_wait_io_deadline(const struct rm_wait *w, int first)
{
    if (w->mode != RM_WAIT_TRY && !first) return w->deadline;
    return rm_clock_max(w->deadline, rm_clock_after(RM_MSEC(RM_SETTING(command_timeout_ms))));
}

void rm_wait_end(struct rm_attempts *a, int r)
{
    if (a->quiet) return;
    if (a->waited) RM_COUNT_SUB(waiting, 1);
    if (!r && a->waited) RM_COUNT(contended);
}

rm_nsec rm_wait_queue_bound(unsigned long rank, long long pttl, unsigned long waiter_lease_ms)
{
    const rm_nsec last_resort = RM_MSEC(3600000);
    rm_nsec bound = RM_MSEC(RM_SETTING(poll_ms));
    if (rank == 0) {
        bound = rm_clock_min(bound, RM_MSEC(waiter_lease_ms) / 2);
        if (pttl >= 0 && RM_MSEC(pttl + 1) < bound) bound = RM_MSEC(pttl + 1);
        return bound;
    }
    return rank < (unsigned long)(last_resort / bound) ? bound * (rm_nsec)(rank + 1) : last_resort;
}

/* The calling thread's acquisition waits: since its first busy answer's
 * request was sent (a mutex's lock call reads it: api.c). */
static void mark_began(const struct rm_outcome *o)
{
    struct rm_thread *self = rm_thread_self();
    if (!self->wait_began) self->wait_began = o->sent ? o->sent : rm_clock_now();
}

/* Waits of a detecting call: when to look for a deadlock next. */
static rm_nsec next_look(const struct rm_wait_subject *subject, const struct rm_registry_wait *rw,
                         rm_nsec now)
{
    if (!subject || !subject->detect || !rw->since) return RM_FOREVER;
    rm_nsec first = rw->since + rm_deadlock_threshold();
    return first > now ? first : now + RM_MSEC(1000);
}

/* A cancelled wait step: the registry must not keep a record on a stack
 * that unwinds. */
static void wait_cancelled(void *arg)
{
    struct rm_registry_wait *rw = arg;
    if (rw->ep) rm_registry_wait_ended(rw, ECANCELED);
}

/* The algorithm's wait step, rw taken out of the registry if it is
 * cancelled (a frame of its own: the cleanup's setjmp sees only this). */
static int wait_step(const struct rm_acquire_steps *s, void *ctx, const struct rm_outcome *o,
                     rm_nsec until, struct rm_registry_wait *rw)
{
    int r;
    pthread_cleanup_push(wait_cancelled, rw);
    r = s->wait(ctx, o, until);
    pthread_cleanup_pop(0);
    return r;
}

int rm_wait_acquire(struct rm_wait *w, const struct rm_acquire_steps *s, void *ctx,
                    const char *lock, const char *why_busy, uint32_t *rng, struct rm_outcome *o,
                    int *unknown, const struct rm_wait_subject *subject)
{
    struct rm_attempts at = { 0 };
    struct rm_registry_wait rw = { 0 };
    rm_nsec look = RM_FOREVER;
    int busy = 0, r;
    for (int first = 1;; first = 0) {
        /* Busy until the deadline: no attempt whose reply could not come
         * in time (its I/O would end at the deadline: a lost reply). */
        if (busy && (r = rm_wait_busy(w, lock, why_busy))) break;
        busy = 0;
        r = s->attempt(ctx, rm_wait_io_deadline(w, first), o);
        if (r) {
            if (r == RM_E_LOST) rm_log("reply to acquire of %s lost; asking again", lock);
            if ((r = rm_wait_failed(&at, w, r, rng))) break;
            continue;
        }
        if (at.unknown) RM_COUNT(indeterminate);
        at.unknown = 0;
        if (o->state == RM_CALL_ACQUIRED) break;
        if (o->state == RM_CALL_NOTRECOVERABLE) {
            r = ENOTRECOVERABLE;
            break;
        }
        if (o->state == RM_CALL_SHORTFALL) {
            r = RMUTEX_ENOREPLICAS;
            break;
        }
        if ((r = rm_wait_busy(w, lock, why_busy))) break;
        busy = 1;
        rm_wait_begin(&at);
        mark_began(o);
        if (subject && !rw.ep) {
            struct rm_thread *self = rm_thread_self();
            rw = (struct rm_registry_wait){ .ep = subject->ep, .owner = self->owner, .lock = lock,
                                            .kind = subject->kind, .detect = subject->detect,
                                            .deadline = w->mode == RM_WAIT_TIMED ? w->deadline : 0 };
            rm_registry_wait_begin(&rw);
            look = next_look(subject, &rw, rm_clock_now());
        }
        if (look <= rm_clock_now()) {
            if (rm_deadlock_closed(subject->ep, lock, rw.owner, rm_clock_now() - rw.since)) {
                r = EDEADLK;
                break;
            }
            look = next_look(subject, &rw, rm_clock_now());
        }
        if ((r = wait_step(s, ctx, o, rm_clock_min(w->deadline, look), &rw))) break;
    }
    *unknown = at.unknown;
    if (rw.ep) rm_registry_wait_ended(&rw, r);
    rm_wait_end(&at, r);
    return r;
}
