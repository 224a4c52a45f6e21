/* fair.c -- the fair lock: threads are served in the order they asked,
 * across processes.
 *
 * DESIGN
 * ------
 * Redisson's RFairLock orders waiters in a list and judges them dead by a
 * chain of client-clock deadlines, which costs: a crashed waiter stalls the
 * queue for minutes, live waiters are evicted behind a long hold, scripts
 * loop over the whole queue.  This lock
 * keeps Redisson's lock hash (so it still excludes RLock and the non-fair
 * rmutex on the same name) and puts its own queue beside it (fair.lua has
 * the key layout and the invariants):
 *
 *  - Order: a waiter's place is a ticket (INCR) taken at its first
 *    enqueue and kept for the whole call; the queue is a zset by ticket.
 *    A waiter that lost its entry while alive -- taken for dead because
 *    its renewals came late (a stalled process, an overloaded machine), or
 *    its grant lapsed before it confirmed -- sends its ticket back with its
 *    next look and is queued at it again: it loses the hand-offs made while
 *    it was out, not its place (at the tail it would wait for the whole
 *    queue again, and under the same load lapse again).
 *  - Liveness: each queued waiter has a deadline in a second zset, server
 *    time + waiter lease (URL option waiter_lease, 3 s), pushed forward by
 *    its process's watchdog every lease/3 in the same batched calls as the
 *    held locks.  Holds of any length evict nobody alive; a dead waiter's
 *    deadline passes within one lease, and waiters that died together all
 *    pass at once.  Deadlines come from Redis TIME only.
 *  - Hand-off: whoever leaves the lock free (release, a cancel that passes
 *    on a grant, an acquire that finds it free) grants it to the first live
 *    waiter in the same script: writes its field into the lock hash, takes a
 *    fencing token, and publishes one message naming it on the lock's fair
 *    channel of the waiter's process (rmutex_fair_channel:{NAME}:<uuid>:
 *    one subscription per process and lock, in the multiplexer), which
 *    wakes exactly that thread (a release that granted a thread of its own
 *    process also gets the message in its reply and wakes it itself, if
 *    first: hand_over below).  What the grant is depends on whether that
 *    PUBLISH reached anyone:
 *      reached (the process's multiplexer is subscribed): the grant is a
 *        full hold at once -- PEXPIRE the waiter's own hold lease (each
 *        waiter leaves it in rmutex_fair_lease:{NAME} when it queues), the
 *        owner mark confirmed -- and the woken thread owns it on receipt:
 *        rmutex_lock returns with no further round trip.  A Redis stall
 *        right after the hand-off meets a full lease, as after any
 *        acquisition (tests/fair: AStallLongerThanTheWaiterLease...).
 *      reached nobody (the process is gone, or its connection is): a short
 *        grant, PEXPIRE no longer than the waiter's remaining liveness,
 *        owner mark "?" (unconfirmed); if the waiter is alive after all its
 *        next look (a poll, the watchdog's wake, the resubscription)
 *        confirms it into a full hold (the acquire op finds its field)
 *        before rmutex_lock returns.  A grant nobody confirms lapses with
 *        the waiter lease, passes on, and is not an EOWNERDEAD case.
 *    The trade: a waiter that died while its process's subscription still
 *    stands -- the process is stopped or hung, not dead; or it was killed
 *    and Redis has not yet read its connection's close -- holds the queue
 *    for one hold lease instead of at most one waiter lease, which is what
 *    a holder that dies costs anyway.  Any subscriber of the channel counts
 *    (a monitoring PSUBSCRIBE too).  The alternatives cost more: a confirm
 *    call before returning costs the hand-off a round trip and Redis a
 *    script (BENCHMARKS.md: 1.76 RTT, 177 us of Redis CPU per acquisition);
 *    a confirm sent without waiting and a reclaim by the grantee's liveness
 *    entry both lose to the very stall the hold must survive (the stall ages
 *    the liveness deadline, and lets a short grant lapse, before either
 *    lands).
 *    The woken thread owns the grant only when the message is newer than
 *    its last attempt (its token is above the fencing counter that busy
 *    answer saw: a message delayed while the process was stopped may name
 *    a grant that has lapsed since) and the hold is known good for two
 *    thirds of its lease from now (it was written after that attempt was
 *    sent); otherwise, and when it must wait for replica acknowledgement
 *    or the lock is not recoverable, it confirms with one call as above.
 *  - No barging: with waiters queued, the lock is never found free by a
 *    newcomer (it was granted on release), and trylock never queues: EBUSY.
 *  - Giving up (deadline, error, lost reply) always runs the cancel
 *    operation, which leaves the queue and passes on a grant that raced the
 *    timeout.  When Redis cannot be reached, the watchdog retries it.
 *
 * Caching (rmutexattr_setcache; cache.c has the rules): a cached fair
 * handle's threads take turns through the local gate and the process
 * queues as "<uuid>:0"; a grant with others queued behind it starts the
 * cache asked, and while the lock stays contended the threads queue as
 * themselves (cached_lock below).
 *
 * A waiter whose wait ends without a grant message (subscription not yet
 * confirmed, message lost, poll bound) asks Redis again with the same
 * acquisition id and its ticket: the script confirms a grant it finds, or
 * refreshes the waiter's place.  A subscribed waiter is told whatever
 * concerns it alone: its grant by its message; a message lost before its
 * channel's subscription was confirmed, or while the connection was down,
 * by the wake-up at the (re)subscription (sub.c); its place lost, or a
 * grant it did not hear, by its process's watchdog, whose renewal finds it
 * no longer queued and wakes it (within lease/3).  What no message
 * announces to anyone -- a lock left free by a grant that lapsed or a hold
 * that ran out, dead waiters still to purge -- is settled by the first
 * look of any waiter.  So of a process's waiters for a lock only the one
 * that has waited longest looks every half waiter lease (and when the hold
 * it saw runs out); the k-th after it looks every k + 1 poll periods, a
 * last resort, so a process's looks grow with the log of its waiters, not
 * with their number (queue_for has the figures). */
#include "cache.h"
#include "call.h"
#include "conn.h"
#include "hold.h"
#include "thread.h"
#include "internal.h"
#include "handle.h"
#include "fair.h"
#include "endpoint.h"
#include "pool.h"
#include "registry.h"
#include "script.h"
#include "sub.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#define NKEYS 10
#define NARGS 21
/* A release Redis cannot hear in time is handed to the watchdog whole. */
_Static_assert(NARGS <= RM_WATCHDOG_MAXARGS, "fair.lua's calls must fit a deferred call");


/* The arguments of one fair.lua call. */
struct fair_req {
    const char *argv[NARGS];
    size_t lens[NARGS];
    char acq[RM_CONN_UINT], hold[RM_CONN_UINT], wlease[RM_CONN_UINT], ticket[RM_CONN_UINT];
};

static void fair_req_make(struct fair_req *q, const struct rm_keys *k, int robust,
                          unsigned long lease_ms, struct rm_endpoint *ep, const char *op,
                          const char *owner, size_t owner_len, uint64_t acq, int try_only,
                          int notrec, uint64_t ticket)
{
    size_t nacq = rm_conn_uint(q->acq, acq), nhold = rm_conn_uint(q->hold, lease_ms);
    size_t nwlease = rm_conn_uint(q->wlease, RM_SETTING(waiter_lease_ms));
    size_t nticket = rm_conn_uint(q->ticket, ticket);
    const char *v[NARGS] = {
        k->lock, k->queue, k->alive, k->seq, k->token, k->owner, k->notrec, k->fchannel,
        k->channel, k->lease,
        op, owner, q->acq, q->hold, q->wlease, robust ? "1" : "0", try_only ? "1" : "0",
        notrec ? "1" : "0", RM_CALL_NOTREC_MS, rm_endpoint_publish(ep), q->ticket,
    };
    memcpy(q->argv, v, sizeof v);
    for (int i = 0; i < NARGS; i++) q->lens[i] = strlen(v[i]);
    q->lens[NKEYS + 1] = owner_len;
    q->lens[NKEYS + 2] = nacq;
    q->lens[NKEYS + 3] = nhold;
    q->lens[NKEYS + 4] = nwlease;
    q->lens[NKEYS + 10] = nticket;
}

static void req_make(struct fair_req *q, const struct rm_mutex *mx, struct rm_endpoint *ep,
                     const char *op, const struct rm_who *me, int try_only, uint64_t ticket)
{
    fair_req_make(q, &mx->keys, mx->robust, rm_handle_lease(mx), ep, op, me->owner,
                  me->owner_len, me->acq, try_only, 0, ticket);
}

/* Leave the queue and pass on any grant acquisition me->acq got; in the
 * background if Redis does not answer now. */
static int cancel(struct rm_mutex *mx, const struct rm_who *me, struct rm_endpoint *ep)
{
    struct fair_req q;
    long long answer;
    req_make(&q, mx, ep, "cancel", me, 0, 0);
    return rm_call_release(ep, RM_SCRIPT_FAIR, NKEYS, NARGS, q.argv, q.lens, rm_call_deadline(),
                           rm_clock_after(RM_MSEC(rm_handle_lease(mx))), &answer);
}


/* One acquire call, naming the place o->ticket that an earlier call gave
 * this acquisition (0: none yet).  0 with o filled when Redis answered,
 * else a status. */
static int attempt(struct rm_mutex *mx, const struct rm_who *me, struct rm_endpoint *ep,
                   int try_only, rm_nsec deadline, struct rm_outcome *o)
{
    struct fair_req q;
    redisReply *reply;
    req_make(&q, mx, ep, "acquire", me, try_only, o->ticket);
    rm_nsec sent = rm_clock_now();
    struct rm_ack ack;
    int r = rm_call(ep, RM_SCRIPT_FAIR, NKEYS, NARGS, q.argv, q.lens, deadline,
                    try_only ? RM_POOL_FAILFAST : 0, &reply, &ack);
    if (r) return r;
    redisReply **e = reply->element;
    int ok = reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
             e[0]->type == REDIS_REPLY_INTEGER;
    if (ok) o->state = (int)e[0]->integer;
    if (ok && o->state == RM_CALL_ACQUIRED && reply->elements == 4) {
        o->token = (uint64_t)e[1]->integer;
        o->dead = e[2]->integer == 1;
        o->queued = e[3]->integer == 1;
        o->valid_until = sent + RM_MSEC(rm_handle_lease(mx));
        o->due = sent + RM_MSEC(rm_handle_lease(mx)) / 3;
    } else if (ok && o->state == RM_CALL_BUSY && reply->elements >= 2 && reply->elements <= 4) {
        o->pttl = e[1]->integer;
        if (reply->elements >= 3 && e[2]->type == REDIS_REPLY_INTEGER && e[2]->integer > 0)
            o->ticket = (uint64_t)e[2]->integer;
        o->token = reply->elements == 4 && e[3]->type == REDIS_REPLY_INTEGER
                       ? (uint64_t)e[3]->integer : UINT64_MAX;
    } else if (!ok || o->state != RM_CALL_NOTRECOVERABLE) {
        rm_detail("unexpected reply from fair.lua");
        r = EIO;
    }
    freeReplyObject(reply);
    if (!r && o->state == RM_CALL_ACQUIRED && rm_ack_short(&ack)) {
        rm_ack_shortfall_detail(&ack, mx->keys.lock, cancel(mx, me, ep));
        o->state = RM_CALL_SHORTFALL;
    }
    if (!r && o->state == RM_CALL_NOTRECOVERABLE) rm_handle_notrecoverable(mx);
    return r;
}

/* The watchdog found the waiter (a struct rm_waiter) no longer queued. */
static void look_again(void *waiter) { rm_sub_poke(waiter); }

/* The acquisition loop's steps (rm_wait_acquire): an attempt, which
 * queues the caller when the lock is busy, and a wait for its grant. */
struct queuing {
    struct rm_mutex *mx;
    const struct rm_who *me;
    struct rm_endpoint *ep;
    int try_only;
    int joined;               /* 1 on the process's channel, -1 could not: poll */
    int queued;               /* a busy answer put it in the queue */
    unsigned long wlease;
    struct rm_watchdog_entry *alive; /* keeps it alive in the queue */
    const char *member;       /* "<owner>|<acquisition>" */
    size_t mlen;
    struct rm_waiter waiter;
    rm_nsec sent;             /* when the last attempt was sent */
    uint64_t counter;         /* the fencing counter its busy answer saw */
    int owns;                 /* a grant owned on receipt, in owned */
    struct rm_outcome owned;
};

/* The grant message in x->waiter.msg ("<waiter> <token> <dead> <ms>
 * <notrec> <queued> <owned>", fair.lua): 1 with x->owned filled when it
 * is a full hold this thread may own with no further call -- fair.lua
 * made it one, nothing asks for a look (not recoverable; a replica
 * acknowledgement to wait for), it is newer than this waiter's last
 * attempt, and it is known good for two thirds of its lease from now at
 * least.  Newer: its token is above the counter that attempt's busy
 * answer saw (a message held up while its process was stopped can name a
 * grant that has lapsed since, and the attempt after it found the lock
 * busy).  So it was written after that attempt was sent and lasts until
 * the sending + its lease at least. */
static int grant_owned(struct queuing *x)
{
    const char *m = x->waiter.msg;
    unsigned long long token;
    unsigned long ms;
    int dead, notrec, queued, owned;
    if (strncmp(m, x->member, x->mlen) || m[x->mlen] != ' ') return 0;
    if (sscanf(m + x->mlen, "%llu %d %lu %d %d %d", &token, &dead, &ms, &notrec, &queued,
               &owned) != 6 || owned != 1 || notrec || ms == 0 || token <= x->counter)
        return 0;
    if (RM_SETTING(replicas) || RM_SETTING(min_replicas)) return 0;
    rm_nsec life = RM_MSEC(ms), until = x->sent + life;
    if (until - rm_clock_now() < life / 3 * 2) return 0;
    x->owns = 1;
    x->owned = (struct rm_outcome){ .state = RM_CALL_ACQUIRED, .token = token, .dead = dead == 1,
                                    .queued = queued == 1, .valid_until = until,
                                    .due = x->sent + life / 3 };
    return 1;
}

static int step_attempt(void *ctx, rm_nsec deadline, struct rm_outcome *o)
{
    struct queuing *x = ctx;
    if (x->owns) {
        *o = x->owned;
        return 0;
    }
    x->sent = rm_clock_now();
    int r = attempt(x->mx, x->me, x->ep, x->try_only, deadline, o);
    if (!r && o->state == RM_CALL_BUSY) {
        x->queued = !x->try_only;
        x->counter = o->token;
    }
    return r;
}

/* Queued: keep alive in the queue (the watchdog), then sleep until the
 * grant's message, a (re)subscription, a wake from the watchdog, or the
 * bound: how soon to look again if no message comes (DESIGN above,
 * rm_wait_queue_bound); a waiter that is not subscribed as often as the
 * first.  A grant message
 * names this waiter: the next attempt confirms the grant into a full hold
 * before the call returns. */
static int step_wait(void *ctx, const struct rm_outcome *o, rm_nsec deadline)
{
    struct queuing *x = ctx;
    if (!x->alive) {
        x->alive = rm_watchdog_waiter(x->ep, x->mx->keys.alive, x->mx->keys.queue,
                                      x->mx->keys.seq, x->mx->keys.lease, x->member, x->mlen,
                                      x->wlease);
        if (!x->alive) {
            rm_detail("out of memory");
            return ENOMEM;
        }
        if (x->joined > 0) rm_watchdog_set_wake(x->alive, look_again, &x->waiter);
    }
    unsigned long rank = x->joined > 0 ? rm_sub_rank(&x->waiter) : 0;
    rm_nsec bound = rm_wait_queue_bound(rank, o->pttl, x->wlease);
    rm_nsec until = rm_clock_min(deadline, rm_clock_after(bound));
    int why = x->joined > 0 ? rm_sub_wait(&x->waiter, until) : RM_WAKE_TIMEOUT;
    if (why == RM_WAKE_REFUSED) return rm_sub_refused(&x->waiter);
    if (why == RM_WAKE_MESSAGE) grant_owned(x);
    if (why == RM_WAKE_MOVED) {
        rm_watchdog_set_wake(x->alive, NULL, NULL); /* the waiter is remade */
        x->joined = rm_endpoint_rejoin(x->ep, x->mx->keys.slot, &x->waiter) ? -1 : 1;
        if (x->joined > 0) rm_watchdog_set_wake(x->alive, look_again, &x->waiter);
    } else if (x->joined <= 0) {
        rm_clock_sleep_until(until);
    }
    return 0;
}

static const struct rm_acquire_steps steps = { step_attempt, step_wait };

/* Queue as me until granted (or trylock's one try), as w allows: 0 with o
 * filled (the lock is me's in Redis), or an error with me out of the
 * queue and nothing held. */
static int queue_for(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                     struct rm_wait *w, const struct rm_who *me, struct rm_outcome *o)
{
    /* The queue member: "<owner>|<acquisition>". */
    char member[sizeof self->owner + 1 + RM_CONN_UINT];
    memcpy(member, me->owner, me->owner_len);
    member[me->owner_len] = '|';
    size_t mlen = me->owner_len + 1 + rm_conn_uint(member + me->owner_len + 1, me->acq);
    struct queuing x = { .mx = mx, .me = me, .ep = ep, .try_only = w->mode == RM_WAIT_TRY,
                         .wlease = RM_SETTING(waiter_lease_ms), .member = member, .mlen = mlen };

    /* Subscribe before the first attempt: a grant can follow the enqueue at
     * once.  Until the subscription is confirmed the bounded wait (and the
     * wake-up on confirmation) covers a message we could not hear. */
    if (!x.try_only) {
        /* On the heap: the caller's stack may be PTHREAD_STACK_MIN. */
        const char *colon = strrchr(self->owner, ':');
        size_t f = strlen(mx->keys.fchannel), u = (size_t)(colon - self->owner);
        char *channel = malloc(f + u + 2); /* "<fair channel>:<process uuid>" */
        if (channel) {
            memcpy(channel, mx->keys.fchannel, f);
            channel[f] = ':';
            memcpy(channel + f + 1, self->owner, u);
            channel[f + 1 + u] = 0;
            x.joined = rm_endpoint_join(ep, mx->keys.slot, channel, &x.waiter, member, mlen) ? -1 : 1;
            free(channel);
        } else {
            x.joined = -1; /* poll */
        }
    }
    int unknown;
    const struct rm_wait_subject subject = { ep, RM_REGISTRY_WAIT_FAIR, rm_handle_detects(mx) };
    int r = rm_wait_acquire(w, &steps, &x, mx->keys.lock, "held, or others are queued for it",
                            &self->rng, o, &unknown, &subject);
    if (x.alive) rm_watchdog_cancel(x.alive);
    if (x.joined > 0) rm_sub_leave(&x.waiter);
    /* Queued, or maybe granted without knowing: leave and pass it on. */
    if (r && (x.queued || unknown)) cancel(mx, me, ep);
    return r;
}

/* The lock as a thread of this process, without the cache: 0, EOWNERDEAD
 * (held) or an error. */
static int thread_lock(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                       struct rm_wait *w, struct rm_outcome *o)
{
    struct rm_who me = { .owner = self->owner, .owner_len = self->owner_len, .acq = ++self->seq };
    int r = queue_for(mx, self, ep, w, &me, o);
    if (r) return r;
    struct rm_hold_terms terms = rm_handle_terms(mx);
    struct rm_grant g = { o->token, o->dead, o->valid_until, o->due, me.acq };
    r = rm_hold_take(mx->lock, &terms, self, ep, &g);
    if (r == ENOMEM) cancel(mx, &me, ep);
    return r;
}

/* A cached fair mutex (cache.c): the process's threads take turns through
 * the local gate, and the process queues in Redis as "<uuid>:0" -- one
 * place in the queue at a time, FIFO with the other processes' waiters.
 * A queued waiter elsewhere is a request: the cache is given back at the
 * next unlock, with no minimum hold (fair.lua's hand-off passes it to the
 * first waiter), and serves no local lock once it has been asked.
 *
 * Under contention that buys nothing and costs a hand-over through the
 * gate per lock: a cache granted with others queued behind it goes back
 * at once.  So such a grant marks the lock contended (l->fair_queued), and
 * until one of its threads gets it with nobody queued behind, the
 * process's threads queue in Redis each for itself, as uncached ones do;
 * caching resumes with the lock after that. */
static int cached_lock(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                       struct rm_wait *w)
{
    struct rm_lock *l = mx->lock;
    struct rm_outcome o = { 0 };
    if (atomic_load(&l->fair_queued)) {
        int r = thread_lock(mx, self, ep, w, &o);
        if (!r || r == EOWNERDEAD) atomic_store(&l->fair_queued, o.queued);
        return r;
    }
    struct rm_who me;
    int cached, r;
    if (rm_cache_enter(mx, self, ep, w, &me, &cached, &r)) return r;
    if (!(r = queue_for(mx, self, ep, w, &me, &o))) {
        struct rm_grant g = { o.token, o.dead, o.valid_until, o.due, me.acq };
        atomic_store(&l->fair_queued, o.queued);
        if (cached) {
            r = rm_cache_start(mx, self, ep, &g, o.queued);
        } else {
            struct rm_hold_terms terms = rm_handle_terms(mx);
            r = rm_hold_take(mx->lock, &terms, self, ep, &g);
            if (r == ENOMEM) cancel(mx, &me, ep);
        }
    }
    if (r && r != EOWNERDEAD) rm_lock_gate_leave(mx->lock);
    return r;
}

static int fair_lock(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                     struct rm_wait *w)
{
    if (mx->cache) return cached_lock(mx, self, ep, w);
    struct rm_outcome o = { 0 };
    return thread_lock(mx, self, ep, w, &o);
}

/* fair.lua's release of acquisition acq (0: any) of owner's hold of k
 * (the lock passes to the first live waiter), as an unlock returns it:
 * 0, RM_E_GONE or the error. */
struct handing {
    struct rm_endpoint *ep;
    const struct rm_keys *k;
    const char *owner; /* the releaser's "<uuid>:<thread>" */
    size_t owner_len;
};

/* The release granted the lock to a thread of this process and answered
 * the grant's message: that thread is woken with it now, by this one,
 * unless the server's copy, across the pub/sub connection and the
 * multiplexer's thread, got there first (sub.c: it is written during the
 * script, the reply after it).  The waiter owns the grant on the same
 * rules from either copy (grant_owned); the later one finds it gone. */
static void hand_over(void *arg, const char *text, size_t len)
{
    const struct handing *h = arg;
    const char *colon = memrchr(h->owner, ':', h->owner_len);
    size_t f = strlen(h->k->fchannel), u = colon ? (size_t)(colon - h->owner) : 0;
    char *channel = u ? malloc(f + u + 2) : NULL; /* "<fair channel>:<process uuid>" */
    if (!channel) return; /* the server's copy will do */
    memcpy(channel, h->k->fchannel, f);
    channel[f] = ':';
    memcpy(channel + f + 1, h->owner, u);
    channel[f + 1 + u] = 0;
    if (rm_endpoint_deliver(h->ep, h->k->slot, channel, text, len)) RM_COUNT(fair_handoffs_local);
    free(channel);
}

static int fair_release(struct rm_endpoint *ep, const struct rm_keys *k, int robust,
                        const char *owner, size_t owner_len, int notrec, uint64_t acq,
                        rm_nsec deadline, rm_nsec give_up_at)
{
    struct fair_req q;
    fair_req_make(&q, k, robust, 0, ep, "release", owner, owner_len, acq, 0, notrec, 0);
    struct handing h = { ep, k, owner, owner_len };
    const struct rm_call_said said = { hand_over, &h };
    return rm_call_unlock_said(ep, RM_SCRIPT_FAIR, NKEYS, NARGS, q.argv, q.lens, deadline,
                               give_up_at, &said);
}

static int fair_unlock(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                       int notrec)
{
    rm_nsec lease_end;
    uint64_t acq;
    struct rm_lock *l = mx->lock;
    if (rm_cache_holding(l, self)) return rm_cache_unlock(mx, self, ep, notrec);
    /* A cached handle's thread that could not start a cache holds the
     * gate too (whichever handle of the name it unlocks through). */
    pthread_mutex_lock(&l->mu);
    int gated = l->gate == self->tid;
    pthread_mutex_unlock(&l->mu);
    int r = EPERM;
    if (!rm_hold_drop(l, self, &lease_end, &acq))
        r = fair_release(ep, &mx->keys, mx->robust, self->owner, self->owner_len, notrec, acq,
                            rm_call_deadline(), lease_end);
    if (gated) rm_lock_gate_leave(l);
    return r == RM_E_GONE ? rm_handle_report_lost(mx) : r;
}

static void fair_release_owner(struct rm_mutex *mx, struct rm_endpoint *ep, const char *owner,
                               size_t owner_len, uint64_t acq, rm_nsec deadline)
{
    fair_release(ep, &mx->keys, mx->robust, owner, owner_len, 0, acq, deadline, deadline);
}

const struct rm_lock_ops rm_fair_ops = { fair_lock, fair_unlock, fair_release_owner, fair_release };
