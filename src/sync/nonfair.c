/* nonfair.c -- the non-fair lock: Redisson's RLock protocol.
 *
 * DESIGN
 * ------
 * Keys (keys.c): the lock is a hash named after the lock with one field,
 * "<process-uuid>:<thread>" = the acquisition's number, and a PEXPIRE
 * lease; a release deletes it and PUBLISHes "0" on
 * redisson_lock__channel:{NAME}.  That is what a Redisson RLock reads and
 * writes (Redisson keeps its hold count in its own field's value; neither
 * reads the other's), so Java services using RLock and C programs using
 * rmutex exclude each other on the same name.  An uncontended pair is
 * three commands each way; what only some callers need costs only them:
 * the fencing counter is INCRed when a holder asks for a token
 * (fence.lua, rmutex_fence), the owner mark (robustness: a hold that
 * lapses leaves it behind for a lease, and the next robust taker learns
 * its owner died) is written by robust handles only, and the
 * not-recoverable mark when robust state is abandoned.  The scripts
 * (src/lua) state their own contracts.
 *
 * Acquire: one thread per process goes to Redis for a given lock at a time
 * (the local gate, lock.c).  It calls acquire.lua; if the lock is busy it
 * joins the lock's channel in the multiplexer, tries once more (a release
 * between the first try and the join would otherwise be missed), then
 * sleeps until a release message, a (re)subscription, or the poll bound:
 * the lock's remaining lease (PTTL) and the poll cap (2 s), whichever is
 * shorter -- pub/sub loses messages, so no wait is longer than that.
 *
 * Lost replies: a script call whose reply is lost may have run.  The
 * acquire is idempotent per owner (acquire.lua answers "yours" to a thread
 * that already holds it), so it is simply asked again, with the same
 * request id, until Redis answers -- "held by me" is success, "busy" is
 * failure, never a second count.  When the caller must give up first
 * (trylock, a deadline), a clean-up release naming that request id is left
 * to the watchdog; it frees the lock only if the hold is that very
 * acquisition (the field's value names it).  A release whose reply was
 * lost is asked again; finding the hold gone then means the first try did
 * it (rm_call_release), so no latch key is written per release.
 *
 * Release: the hold is taken out of the watchdog before release.lua is
 * sent, so no renewal follows an unlock.  If the watchdog had already found
 * the hold lost, nothing is sent and the unlock returns EPERM.  When Redis
 * cannot be reached in the command timeout the release is handed to the
 * watchdog to retry until the lease would have run out anyway.
 *
 * Caching (cache.c): a handle made with rmutexattr_setcache acquires as the
 * process ("<uuid>:0") and the cache keeps the hold between its threads'
 * holds; a thread in the gate that finds the cache makes its hold from it
 * with no round trip; finding it parked, the acquire itself takes it back
 * (acquire.lua is given the parked acquisition) or, taken over meanwhile,
 * acquires anew.  A busy answer for a lock whose holder is a caching
 * process also asks that holder for it (acquire.lua publishes "2"). */
#include "cache.h"
#include "call.h"
#include "conn.h"
#include "hold.h"
#include "thread.h"
#include "internal.h"
#include "handle.h"
#include "nonfair.h"
#include "endpoint.h"
#include "pool.h"
#include "registry.h"
#include "script.h"
#include "sub.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>


/* ---- release.lua ---- */

struct release_req {
    const char *argv[10]; /* all of it may be deferred to the watchdog */
    size_t lens[10];
    char acq[RM_CONN_UINT];
};

_Static_assert(10 <= RM_WATCHDOG_MAXARGS, "release.lua's calls must fit a deferred call");

/* The release of owner's hold of k (only of acquisition acq when not 0). */
static void release_req_make(struct release_req *q, const struct rm_keys *k, int robust,
                             struct rm_endpoint *ep, const char *owner, size_t owner_len,
                             int notrec, uint64_t acq)
{
    q->acq[0] = 0;
    if (acq) rm_conn_uint(q->acq, acq);
    const char *v[] = { k->lock, k->channel, k->owner, k->notrec,
                        owner, notrec ? "1" : "0", RM_CALL_NOTREC_MS, q->acq,
                        rm_endpoint_publish(ep), robust ? "1" : "0" };
    memcpy(q->argv, v, sizeof v);
    for (int i = 0; i < 10; i++) q->lens[i] = strlen(v[i]);
    q->lens[4] = owner_len;
}

/* The release of acquisition acq (0: any) of owner's hold of k, as an
 * unlock returns it (rm_call_unlock): 0, RM_E_GONE or the error. */
static int nf_release(struct rm_endpoint *ep, const struct rm_keys *k, int robust,
                      const char *owner, size_t owner_len, int notrec, uint64_t acq,
                      rm_nsec deadline, rm_nsec give_up_at)
{
    struct release_req q;
    release_req_make(&q, k, robust, ep, owner, owner_len, notrec, acq);
    return rm_call_unlock(ep, RM_SCRIPT_RELEASE, 4, 10, q.argv, q.lens, deadline, give_up_at);
}

/* Give back (or have the watchdog give back) acquisition acq of owner.
 * Returns what rm_call_release returns. */
static int give_back(struct rm_mutex *mx, const char *owner, size_t owner_len,
                     struct rm_endpoint *ep, uint64_t acq, rm_nsec deadline)
{
    struct release_req q;
    long long answer;
    release_req_make(&q, &mx->keys, mx->robust, ep, owner, owner_len, 0, acq);
    return rm_call_release(ep, RM_SCRIPT_RELEASE, 4, 10, q.argv, q.lens, deadline,
                           rm_clock_after(RM_MSEC(rm_handle_lease(mx))), &answer);
}

/* ---- acquire.lua ---- */

/* One attempt.  Returns 0 with g filled when Redis answered, else the
 * status (RM_E_*, or an errno from an error reply). */
static int attempt(struct rm_mutex *mx, const struct rm_who *me, struct rm_endpoint *ep,
                   rm_nsec deadline, int flags, struct rm_outcome *g)
{
    char lease[RM_CONN_UINT], acqs[RM_CONN_UINT], backs[RM_CONN_UINT];
    const char *argv[] = { mx->keys.lock, mx->keys.owner, mx->keys.notrec, mx->keys.channel,
                           lease, me->owner, mx->robust ? "1" : "0", acqs,
                           rm_endpoint_publish(ep), backs };
    size_t lens[] = { strlen(argv[0]), strlen(argv[1]), strlen(argv[2]), strlen(argv[3]),
                      rm_conn_uint(lease, rm_handle_lease(mx)),
                      me->owner_len, 1,
                      rm_conn_uint(acqs, me->acq),
                      strlen(argv[8]), me->back ? rm_conn_uint(backs, me->back) : 0 };
    redisReply *reply;
    struct rm_ack ack;
    g->sent = rm_clock_now();
    int r = rm_call(ep, RM_SCRIPT_ACQUIRE, 4, me->back ? 10 : 9, argv, lens, deadline, flags,
                    &reply, &ack);
    if (r) return r;
    redisReply **e = reply->element;
    size_t n = reply->elements;
    if (reply->type != REDIS_REPLY_ARRAY || n < 1 || e[0]->type != REDIS_REPLY_INTEGER ||
        (e[0]->integer == RM_CALL_ACQUIRED &&
         (n < 2 || n > 3 || e[1]->type != REDIS_REPLY_INTEGER || (n == 3 && !me->back))) ||
        (e[0]->integer == RM_CALL_BUSY && (n != 2 || e[1]->type != REDIS_REPLY_INTEGER))) {
        freeReplyObject(reply);
        rm_detail("unexpected reply from acquire.lua");
        return EIO;
    }
    g->state = (int)e[0]->integer;
    g->back = 0;
    if (g->state == RM_CALL_ACQUIRED) {
        g->dead = e[1]->integer == 1;
        g->back = n == 3;
    } else if (g->state == RM_CALL_BUSY) {
        g->pttl = e[1]->integer;
    }
    freeReplyObject(reply);
    if (g->state == RM_CALL_ACQUIRED && rm_ack_short(&ack)) {
        rm_ack_shortfall_detail(&ack, mx->keys.lock,
                                give_back(mx, me->owner, me->owner_len, ep,
                                          g->back ? me->back : me->acq, rm_call_deadline()));
        g->state = RM_CALL_SHORTFALL;
    }
    if (g->state == RM_CALL_NOTRECOVERABLE) rm_handle_notrecoverable(mx);
    return 0;
}

/* The acquire did not take the parked cache's hold back: it is gone (taken
 * over) or the call gave up -- then, if the last try's answer was lost, it
 * may have been taken back: the watchdog releases it. */
static void drop_parked(struct rm_mutex *mx, struct rm_who *me, struct rm_endpoint *ep,
                        int unknown)
{
    if (unknown) {
        struct release_req q;
        release_req_make(&q, &mx->keys, mx->robust, ep, me->owner, me->owner_len, 0, me->back);
        rm_watchdog_defer(ep, RM_SCRIPT_RELEASE, 4, 10, q.argv, q.lens,
                          rm_clock_after(RM_MSEC(rm_handle_lease(mx))));
    }
    rm_cache_drop_parked(mx->lock, me->back);
    me->back = 0;
}

/* The acquisition loop's steps (rm_wait_acquire): an attempt, and a wait
 * on the lock's channel. */
struct acquiring {
    struct rm_mutex *mx;
    struct rm_who *me;
    struct rm_endpoint *ep;
    int try_only;
    int joined;               /* 1 on the channel, -1 could not join: poll */
    struct rm_waiter waiter;
};

static int step_attempt(void *ctx, rm_nsec deadline, struct rm_outcome *g)
{
    struct acquiring *x = ctx;
    int r = attempt(x->mx, x->me, x->ep, deadline, x->try_only ? RM_POOL_FAILFAST : 0, g);
    if (!r && x->me->back && !g->back) drop_parked(x->mx, x->me, x->ep, 0);
    return r;
}

/* Busy: join the lock's channel at the first wait and look again at once
 * (a release between the attempt and the join would otherwise be missed);
 * then sleep until a release message, a (re)subscription, or the poll
 * bound: the holder's remaining lease, at most the poll cap. */
static int step_wait(void *ctx, const struct rm_outcome *g, rm_nsec deadline)
{
    struct acquiring *x = ctx;
    if (!x->joined) {
        x->joined = rm_endpoint_join(x->ep, x->mx->keys.slot, x->mx->keys.channel, &x->waiter,
                                     NULL, 0) ? -1 : 1;
        if (x->joined > 0) return 0;
    }
    rm_nsec bound = RM_MSEC(RM_SETTING(poll_ms));
    if (g->pttl >= 0 && RM_MSEC(g->pttl + 1) < bound) bound = RM_MSEC(g->pttl + 1);
    rm_nsec until = rm_clock_min(deadline, rm_clock_after(bound));
    int why = x->joined > 0 ? rm_sub_wait(&x->waiter, until) : RM_WAKE_TIMEOUT;
    if (why == RM_WAKE_REFUSED) return rm_sub_refused(&x->waiter);
    if (why == RM_WAKE_MOVED) { /* look again now; join where it is served */
        RM_COUNT(resubscribes_moved);
        rm_sub_leave(&x->waiter);
        x->joined = 0;
    } else if (x->joined < 0) {
        rm_clock_sleep_until(until);
    }
    return 0;
}

static const struct rm_acquire_steps steps = { step_attempt, step_wait };

static int acquire(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                   struct rm_wait *w, struct rm_who *me, struct rm_outcome *g)
{
    struct acquiring x = { .mx = mx, .me = me, .ep = ep, .try_only = w->mode == RM_WAIT_TRY };
    int unknown;
    const struct rm_wait_subject subject = { ep, RM_REGISTRY_WAIT_MUTEX, rm_handle_detects(mx) };
    int r = rm_wait_acquire(w, &steps, &x, mx->keys.lock, "held by another thread or process",
                            &self->rng, g, &unknown, &subject);
    /* Giving up after a lost reply: the lock may be ours without our
     * knowing; let the watchdog release that acquisition, if it happened. */
    if (r && unknown) {
        struct release_req q;
        release_req_make(&q, &mx->keys, mx->robust, ep, me->owner, me->owner_len, 0, me->acq);
        rm_watchdog_defer(ep, RM_SCRIPT_RELEASE, 4, 10, q.argv, q.lens,
                          rm_clock_after(RM_MSEC(rm_handle_lease(mx))));
    }
    if (r && me->back) drop_parked(mx, me, ep, unknown);
    if (x.joined > 0) rm_sub_leave(&x.waiter);
    return r;
}

/* ---- the ops ---- */

static int nf_lock(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                   struct rm_wait *w)
{
    struct rm_who me;
    int cached, r;
    if (rm_cache_enter(mx, self, ep, w, &me, &cached, &r)) return r;
    struct rm_outcome g = { 0 };
    rm_nsec lease = RM_MSEC(rm_handle_lease(mx));
    if (!(r = acquire(mx, self, ep, w, &me, &g))) {
        /* No token yet: rmutex_fence takes one when asked. */
        struct rm_grant held = { 0, g.dead, g.sent + lease, g.sent + lease / 3,
                                 g.back ? me.back : me.acq };
        if (cached) {
            /* The parked cache taken back goes on; else a new one. */
            if (!g.back || !rm_cache_resume(mx, self, ep, me.back, &r))
                r = rm_cache_start(mx, self, ep, &held, 0);
        } else {
            struct rm_hold_terms terms = rm_handle_terms(mx);
            r = rm_hold_take(mx->lock, &terms, self, ep, &held);
            if (r == ENOMEM) give_back(mx, me.owner, me.owner_len, ep, me.acq, rm_call_deadline());
        }
    }
    if (r && r != EOWNERDEAD) rm_lock_gate_leave(mx->lock);
    return r;
}

static int nf_unlock(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                     int notrec)
{
    rm_nsec lease_end;
    uint64_t acq;
    int r = EPERM;
    if (rm_cache_holding(mx->lock, self)) return rm_cache_unlock(mx, self, ep, notrec);
    if (!rm_hold_drop(mx->lock, self, &lease_end, &acq))
        r = nf_release(ep, &mx->keys, mx->robust, self->owner, self->owner_len, notrec,
                               acq, rm_call_deadline(), lease_end);
    rm_lock_gate_leave(mx->lock);
    return r == RM_E_GONE ? rm_handle_report_lost(mx) : r;
}

static void nf_release_owner(struct rm_mutex *mx, struct rm_endpoint *ep, const char *owner,
                             size_t owner_len, uint64_t acq, rm_nsec deadline)
{
    nf_release(ep, &mx->keys, mx->robust, owner, owner_len, 0, acq, deadline, deadline);
}

const struct rm_lock_ops rm_nonfair_ops = { nf_lock, nf_unlock, nf_release_owner, nf_release };
