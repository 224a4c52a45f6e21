/* cache.c -- lock caching (rmutexattr_setcache).
 *
 * DESIGN
 * ------
 * A cached lock is acquired in Redis by the process, not by a thread: its
 * field is "<process-uuid>:0" (no thread has number 0), and the process
 * keeps it after its threads' unlocks for as long as nobody else wants it.
 * The cache (struct rm_cache, hung on the lock as l->cache) owns that
 * Redis hold: one watchdog entry renews it, whether a thread is inside or
 * not.  A thread's lock of a cached lock goes through the local gate as
 * always (FIFO within the process) and, finding the cache, makes its hold
 * from it: a struct rm_hold that shares the cache's watchdog entry, no
 * round trip.  Exclusion in Redis never lapses while a thread is inside:
 * the Redis hold outlives every local hold taken from it.
 *
 * Demand.  A process that finds the lock busy and held by a field ending
 * in ":0" publishes "2" on the lock's channel (acquire.lua; Redisson's
 * listeners ignore anything but 0 and 1, rmutex's waiters anything but 0).
 * The caching process hears it through its multiplexer: the cache's
 * waiter on the channel is a notified one (sub.h), whose call only sets
 * c->demanded and pokes the keeper thread.  Then:
 *
 *   - a thread inside gives the lock back at its unlock (release.lua, which
 *     publishes the usual "0" that wakes the asker), once the cache has held
 *     it for the minimum hold time (cache_min_hold, 5 ms): two processes
 *     that both want it take turns in batches, never one round trip per
 *     turn, so caching is never slower than no caching under contention;
 *   - with nobody inside, the keeper gives it back at once -- unless its
 *     last unlock was less than IN_USE (50 us) ago: a thread relocking in
 *     a loop leaves it idle only for a moment, and the minimum hold applies
 *     to it as to a thread inside;
 *   - having given it back on request at an unlock (it was in use), the
 *     process's own threads wait a courtesy (1 ms, at most the minimum
 *     hold) before they go to Redis for it: the askers learn of the release
 *     by pub/sub, a round trip behind a local thread that is already awake,
 *     and would otherwise rarely win.  (A cache the keeper gave back was
 *     unused: nobody here is racing for it.)
 *
 * Parking.  Asking costs the asker two pub/sub deliveries and the holder's
 * release round trip.  So a non-fair cache nobody here has used for
 * cache_park (1 ms) is parked by the keeper (park.lua, holding the gate):
 * its field's value becomes "p<acquisition>", a promise that nobody of
 * this process is inside.  Another process's acquire that finds only a
 * parked field takes the lock over in its own call (acquire.lua) -- no
 * request, no wait -- and this process learns of it when it next looks:
 * the next local lock takes a parked cache back before it serves anyone:
 * its acquire (acquire.lua, in the gate) names the parked acquisition,
 * unparks it if it is still the process's, and else is the process's new
 * acquisition -- so a cache taken over costs its process's next lock no
 * more than an uncached lock costs (park.lua unparks for a handle of the
 * name that does not cache); the watchdog's renewal finds it gone within
 * lease/3 too, and counts no lost lock (the entry is marked parked: the
 * process let it go).  A relocking thread never
 * leaves the cache unused that long, so it pays nothing; the keeper looks
 * at an in-use cache every cache_park.  A parked robust cache drops its
 * owner mark: nobody holds it, so a death of the process is no owner death.
 *
 * A demand message is lost when the pub/sub connection drops or before the
 * cache's subscription is confirmed: the asker's poll (the lock's PTTL, at
 * most the poll cap) asks again, so a lost demand costs time, never
 * liveness.  A client that never asks (Redisson's RLock) gets the lock
 * when the cache has been unused for the idle time (cache_idle, 100 ms):
 * the keeper gives back any cache idle that long, and the release's "0"
 * wakes every kind of waiter.
 *
 * The keeper is one thread per process (signals blocked, started with the
 * first cache).  It sleeps until the earliest deadline of any cache (the
 * end of a minimum hold with demand pending, the end of an idle time) or a
 * poke, then looks at each cache under its lock's mu: a cache with nobody
 * inside and a reason to go is taken off the lock, and the keeper holds
 * the gate (RM_GATE_KEEPER) while it releases it in Redis, so that no
 * local thread slips in between; the threads queued meanwhile then go to
 * Redis as for any lock.
 *
 * Fair mutexes (fair.c).  The process's threads take turns through the
 * gate and the process waits in the fair queue as one member,
 * "<uuid>:0|<acquisition>"; its place is FIFO with other processes'
 * waiters.  A queued waiter is demand: each try of a waiter that finds a
 * ":0" holder publishes "2" (fair.lua), and a grant made with others
 * already queued behind says so ("queued"), so the cache starts asked.
 * An asked fair cache has no minimum hold and no courtesy: it serves no
 * further local lock, the thread inside gives it back at its unlock (or
 * the keeper at once, if nobody is inside), and fair.lua's release hands
 * it to the first waiter; the process's other threads then queue behind
 * it in Redis (while the lock stays contended, fair.c caches it no more:
 * cached_lock).  What is not FIFO: a local lock that comes while a request
 * is on its way (one pub/sub delivery, or a poll when it was lost) is
 * still served from the cache.
 *
 * Fencing: each thread's hold of a cached lock is a new owner and gets a
 * greater token.  The cache reserves a range of RANGE tokens from the
 * counter (fence.lua INCRBY, only while its Redis hold is there) when its
 * first holder asks and hands them out locally; a later owner elsewhere
 * INCRs past the range.
 *
 * What stays as without caching: a lost hold (the watchdog's renewal
 * finds the field gone) is EPERM at the unlock of the thread inside and
 * ends the cache; so is one that the unlock itself finds gone: an unlock
 * past the cache's known-good time (its process was stopped, renewals
 * failed, and the watchdog has not looked yet) gives the cache back, and
 * that release tells whether Redis still had it (EPERM and the lost-lock
 * callback when not); and a cache whose renewal is overdue (less than half a
 * lease known good) serves no new local hold -- it is given back and the
 * lock sought in Redis; a thread that exits inside ends the cache too and lets
 * its lease run out (robust: the next taker gets EOWNERDEAD); an
 * EOWNERDEAD holder's unlock without rmutex_consistent gives the lock back
 * marked not recoverable.  One thing differs: a process that dies while
 * caching a robust lock, even with nobody inside, leaves EOWNERDEAD to the
 * next robust taker (Redis does not hear of local unlocks).  fork(): the
 * child caches nothing; the parent's caches stay the parent's.
 *
 * Lock order: a lock's mu, then the watchdog, the multiplexer, and the
 * keeper's mu last (the multiplexer's notify takes it, under its own). */
#include "cache.h"
#include "call.h"
#include "conn.h"
#include "endpoint.h"
#include "hold.h"
#include "internal.h"
#include "lock.h"
#include "handle.h"
#include "script.h"
#include "sub.h"
#include "thread.h"
#include "token.h"
#include "wait.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct rm_hold_share share;

/* Tokens a cache reserves at a time. */
#define RANGE 64

/* A cache with nobody inside counts as in use -- the minimum hold applies
 * to it -- when its last unlock is more recent than this: a thread that
 * relocks in a loop leaves it idle for a moment between two holds. */
#define IN_USE RM_USEC(50)

/* After giving a lock back on request, this process's threads let the
 * askers (woken by pub/sub, a round trip away) have it before they go to
 * Redis for it themselves: the lesser of this and the minimum hold. */
#define COURTESY RM_MSEC(1)

struct rm_cache {
    struct rm_cache *next, *prev; /* the keeper's list (kp.mu) */
    _Atomic unsigned refs;     /* the lock's link, the keeper's list, pins */
    struct rm_lock *lock;      /* a reference */
    struct rm_endpoint *ep;
    struct rm_watchdog_entry *wd; /* renews "<uuid>:0" */
    struct rm_waiter ear;      /* notified of requests ("2") */
    int joined;                /* ear is on the channel */
    _Atomic int demanded;      /* another process asked, or the channel moved */
    int told;                  /* the keeper was poked for this request (lock's mu) */
    int robust;
    int fair;                  /* acquired through the fair queue (fair.lua) */
    const struct rm_lock_ops *ops; /* the algorithm it was acquired by: its release */
    unsigned long lease_ms;
    uint64_t acq;              /* the Redis acquisition it keeps */
    /* Under the lock's mu: */
    int parked;                /* park.lua: another process may take it over */
    rm_nsec taken_at;          /* when it was acquired in Redis */
    rm_nsec last_used;         /* the last local unlock */
    uint64_t tok_next, tok_end; /* reserved tokens: (tok_next, tok_end] are free */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, stop, poked, failed;
    int scanning;              /* looking at its caches (kp.mu let go) */
    rm_nsec wake;              /* when it looks next, unless poked */
    pthread_t thread;
    struct rm_cache *head;
} kp = { .mu = PTHREAD_MUTEX_INITIALIZER, .wake = RM_FOREVER };

static _Atomic uint64_t next_acq;

static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
static void init_cv(void) { rm_clock_cond_init(&kp.cv); }

uint64_t rm_cache_next_acq(void) { return atomic_fetch_add(&next_acq, 1) + 1; }

static void cache_put(struct rm_cache *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    rm_lock_put(c->lock);
    free(c);
}

/* Make the keeper look by due (kp.mu held): a poke only when it would not
 * look in time anyway -- a context switch per acquisition is dear on a
 * busy lock. */
static void look_by_locked(rm_nsec due)
{
    if (kp.scanning || due < kp.wake) {
        kp.poked = 1;
        pthread_cond_signal(&kp.cv);
    }
}

/* c was taken back from parked: the keeper, which last looked at it
 * parked, looks again within cache_park, to park it again once unused. */
static void taken_back(struct rm_cache *c)
{
    c->parked = 0;
    rm_watchdog_set_parked(c->wd, 0);
    pthread_mutex_lock(&kp.mu);
    look_by_locked(rm_clock_after(RM_MSEC(RM_SETTING(cache_park_ms))));
    pthread_mutex_unlock(&kp.mu);
}

static void poke(void)
{
    pthread_mutex_lock(&kp.mu);
    kp.poked = 1;
    pthread_cond_signal(&kp.cv);
    pthread_mutex_unlock(&kp.mu);
}

/* The multiplexer's call, under its lock: a request, or the channel is no
 * longer heard here (moved, refused) -- then give the lock back as soon as
 * allowed too, rather than keep it with no ear. */
static void heard(void *arg, int why)
{
    struct rm_cache *c = arg;
    if (why == RM_WAKE_SUBSCRIBED || why == RM_WAKE_TIMEOUT) return;
    if (why == RM_WAKE_MESSAGE) RM_COUNT(cache_requests);
    atomic_store(&c->demanded, 1);
    poke();
}

static int list_remove(struct rm_cache *c)
{
    pthread_mutex_lock(&kp.mu);
    int listed = c->prev || kp.head == c;
    if (listed) {
        if (c->prev) c->prev->next = c->next;
        else kp.head = c->next;
        if (c->next) c->next->prev = c->prev;
        c->next = c->prev = NULL;
    }
    pthread_mutex_unlock(&kp.mu);
    return listed;
}

/* Release acquisition acq of the process's field of l in Redis, by the
 * protocol it was acquired with (ops: the algorithm's table). */
static int release_in_redis(struct rm_endpoint *ep, struct rm_lock *l,
                            const struct rm_lock_ops *ops, int robust, int notrec, uint64_t acq,
                            rm_nsec deadline, rm_nsec known_good)
{
    char owner[64];
    size_t n = rm_thread_owner_of(0, owner, sizeof owner);
    return ops->release(ep, &l->keys, robust, owner, n, notrec, acq, deadline, known_good);
}

/* c is off its lock: stop renewing it, stop listening, give it back in
 * Redis unless lost or abandoned (then its lease runs out).  Drops the
 * list's and the lock's references.  Returns the release's answer (0,
 * RM_E_GONE: found gone in Redis, or an error), EPERM when the watchdog
 * had found it lost. */
static int finish(struct rm_cache *c, int release, int notrec)
{
    if (list_remove(c)) cache_put(c);
    rm_nsec known_good = c->wd ? rm_watchdog_valid_until(c->wd) : 0;
    int lost = c->wd ? rm_watchdog_cancel(c->wd) : 1;
    int r = 0;
    if (lost) {
        r = EPERM; /* (rm_hold_drop said why, for an unlock) */
    } else if (release) {
        r = release_in_redis(c->ep, c->lock, c->ops, c->robust, notrec, c->acq,
                             rm_call_deadline(), known_good);
    }
    if (c->joined) rm_sub_leave(&c->ear);
    cache_put(c);
    return r;
}

/* ---- parking ---- */

/* When c, unused since last_used, should be parked: RM_FOREVER if never
 * (a fair lock's waiters queue and ask instead; cache_park=0). */
static rm_nsec park_due(const struct rm_cache *c)
{
    unsigned long ms = RM_SETTING(cache_park_ms);
    return c->parked || c->fair || !ms ? RM_FOREVER : c->last_used + RM_MSEC(ms);
}

/* Park c's Redis hold, or take it back (park.lua), with nobody inside
 * (the caller has the gate).  1 done (taking back: also when it was not
 * parked after all), 0 not the process's hold any more (taken over by
 * another process, lost), -1 no answer (it may have run) or an error. */
static int park_call(struct rm_cache *c, int park)
{
    const struct rm_keys *k = &c->lock->keys;
    char owner[64], acq[RM_CONN_UINT], lease[RM_CONN_UINT];
    size_t n = rm_thread_owner_of(0, owner, sizeof owner);
    const char *argv[] = { k->lock, k->owner, owner, acq, park ? "park" : "unpark",
                           c->robust ? "1" : "0", lease };
    size_t lens[] = { strlen(k->lock), strlen(k->owner), n, rm_conn_uint(acq, c->acq),
                      park ? 4 : 6, 1, rm_conn_uint(lease, c->lease_ms) };
    for (int tries = 0; tries < 2; tries++) {
        redisReply *reply;
        int r = rm_call(c->ep, RM_SCRIPT_PARK, 2, 7, argv, lens, rm_call_deadline(), 0, &reply,
                        NULL);
        if (r > 0) return -1;
        if (r) continue; /* lost reply: both operations may be asked again */
        int answer = reply->type == REDIS_REPLY_INTEGER ? (int)reply->integer : -1;
        freeReplyObject(reply);
        return answer == 0 || answer == 1 ? answer : -1;
    }
    return -1;
}

/* ---- the keeper ---- */

/* Look at c (pinned): give it back if nobody is inside and it should go.
 * Returns when to look again. */
static rm_nsec look_at(struct rm_cache *c, rm_nsec now)
{
    struct rm_lock *l = c->lock;
    pthread_mutex_lock(&l->mu);
    if (l->cache != c) {
        pthread_mutex_unlock(&l->mu);
        return RM_FOREVER;
    }
    int idle = !l->hold && !l->gate && !l->gq_head;
    int asked = atomic_load(&c->demanded);
    rm_nsec min_end = c->taken_at + RM_MSEC(RM_SETTING(cache_min_hold_ms));
    rm_nsec idle_end = c->last_used + RM_MSEC(RM_SETTING(cache_idle_ms));
    rm_nsec unused_from = c->last_used + IN_USE;
    int lost = rm_watchdog_lost(c->wd);
    /* A fair lock's waiter gets it at once: no minimum hold. */
    int give = lost || (asked && (c->fair || now >= min_end || now >= unused_from)) ||
               now >= idle_end;
    if (idle && give) {
        l->cache = NULL;
        l->gate = RM_GATE_KEEPER;
        pthread_mutex_unlock(&l->mu);
        rm_log("giving back the cached %s (%s)", l->keys.lock,
               lost ? "lost" : asked ? "asked for" : "idle");
        finish(c, 1, 0);
        rm_lock_gate_leave(l);
        return RM_FOREVER;
    }
    rm_nsec park_at = park_due(c);
    if (idle && !lost && now >= park_at) {
        /* Unused a while: park it, holding the gate so that no local
         * thread slips in meanwhile; the next local lock takes it back. */
        l->gate = RM_GATE_KEEPER;
        pthread_mutex_unlock(&l->mu);
        /* Before the call: a takeover may follow the park at once. */
        rm_watchdog_set_parked(c->wd, 1);
        int r = park_call(c, 1);
        pthread_mutex_lock(&l->mu);
        int gone = l->cache == c && r == 0; /* not ours: taken over or lost */
        if (gone) l->cache = NULL;
        else if (l->cache == c) c->parked = 1; /* also with no answer: it may be */
        pthread_mutex_unlock(&l->mu);
        if (r == 1) RM_COUNT(cache_parks);
        if (gone) finish(c, 0, 0);
        rm_lock_gate_leave(l);
        return gone ? RM_FOREVER : idle_end;
    }
    pthread_mutex_unlock(&l->mu);
    /* In use: its unlock gives it back once the minimum hold is up; look
     * again then in case it was left unused before that, and to park it
     * (the unlock does not tell the keeper). */
    if (!idle) {
        rm_nsec next = asked && !c->fair && min_end > now ? min_end
                                                          : now + RM_MSEC(RM_SETTING(cache_idle_ms));
        return park_at == RM_FOREVER ? next : rm_clock_min(next, now + RM_MSEC(RM_SETTING(cache_park_ms)));
    }
    if (asked) return rm_clock_min(rm_clock_min(min_end, unused_from), idle_end);
    return rm_clock_min(idle_end, park_at);
}

static void *keeper_main(void *arg)
{
    RM_UNUSED(arg);
    struct rm_cache **pinned = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&kp.mu);
    while (!kp.stop) {
        while (!kp.poked && !kp.stop && rm_clock_now() < kp.wake)
            if (rm_clock_cond_wait_until(&kp.cv, &kp.mu, kp.wake) == ETIMEDOUT) break;
        if (kp.stop) break;
        kp.poked = 0;
        size_t n = 0;
        for (struct rm_cache *c = kp.head; c; c = c->next) n++;
        if (n > cap) {
            struct rm_cache **p = realloc(pinned, n * sizeof *p);
            if (!p) { /* look again soon */
                kp.wake = rm_clock_after(RM_MSEC(100));
                continue;
            }
            pinned = p;
            cap = n;
        }
        n = 0;
        for (struct rm_cache *c = kp.head; c; c = c->next) {
            atomic_fetch_add(&c->refs, 1);
            pinned[n++] = c;
        }
        kp.scanning = 1;
        pthread_mutex_unlock(&kp.mu);
        rm_nsec wake = RM_FOREVER, now = rm_clock_now();
        for (size_t i = 0; i < n; i++) {
            rm_nsec t = look_at(pinned[i], now);
            if (t < wake) wake = t;
            cache_put(pinned[i]);
        }
        pthread_mutex_lock(&kp.mu);
        kp.scanning = 0;
        kp.wake = wake;
    }
    pthread_mutex_unlock(&kp.mu);
    free(pinned);
    return NULL;
}

int rm_cache_enter(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                   const struct rm_wait *w, struct rm_who *me, int *cached, int *r)
{
    if ((*r = rm_lock_gate_enter(mx->lock, self, w))) {
        if (*r == EBUSY) rm_detail("%s is held or being acquired by another thread of this process",
                                   mx->keys.lock);
        return 1;
    }
    /* The process's cache of the lock, if it has one: no round trip. */
    me->back = 0;
    if (rm_cache_lock(mx, self, ep, w, &me->back, r)) {
        if (*r && *r != EOWNERDEAD) rm_lock_gate_leave(mx->lock);
        return 1;
    }
    *cached = me->back || (mx->cache && rm_cache_can_start());
    if (*cached) {
        me->owner_len = rm_thread_owner_of(0, me->buf, sizeof me->buf);
        me->owner = me->buf;
        me->acq = rm_cache_next_acq();
    } else {
        me->owner = self->owner;
        me->owner_len = self->owner_len;
        me->acq = ++self->seq;
    }
    return 0;
}

int rm_cache_can_start(void)
{
    pthread_once(&cv_once, init_cv);
    pthread_mutex_lock(&kp.mu);
    if (!kp.started && !kp.stop && !kp.failed) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        kp.started = !pthread_create(&kp.thread, NULL, keeper_main, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!kp.started) {
            kp.failed = 1; /* not again: every lock would pay for it */
            rm_log("cannot start the cache keeper; not caching");
        }
    }
    int ok = kp.started && !kp.stop;
    pthread_mutex_unlock(&kp.mu);
    return ok;
}

/* ---- a thread's lock and unlock ---- */

/* May a thread's hold be made from c, through mx (l->mu held)?  Not when
 * the watchdog found it lost or its server's connection dropped since its
 * last renewal (a restart may have wiped it), nor when its renewal is overdue (less than
 * half a lease known good: Redis may be out of reach, and the lease could
 * run out under a holder that never asked Redis), nor for a handle whose
 * hold would differ from the cache's (another robustness, a fixed lease). */
static int usable_locked(const struct rm_cache *c, const struct rm_mutex *mx, rm_nsec now)
{
    /* A fair lock asked for goes to the waiter before any local thread
     * that comes after the request. */
    if (c->fair && atomic_load(&c->demanded)) return 0;
    return !rm_watchdog_lost(c->wd) && !rm_watchdog_unverified(c->wd) &&
           mx->robust == c->robust && !mx->lease_ms &&
           rm_watchdog_valid_until(c->wd) - now > RM_MSEC(c->lease_ms) / 2;
}

/* self's hold of mx's lock, made from c (self in the gate, c not
 * parked). */
static void serve(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                  struct rm_cache *c, int *r)
{
    /* self has the gate: nobody else takes c off the lock meanwhile (the
     * keeper waits for a free gate; an exiting process's clean-up frees
     * nothing). */
    struct rm_hold_terms terms = rm_handle_terms(mx);
    terms.shared_wd = c->wd;
    terms.share = &share;
    struct rm_grant g = { 0, 0, 0, 0, c->acq };
    *r = rm_hold_take(mx->lock, &terms, self, ep, &g);
    if (!*r) {
        rm_watchdog_set_user(c->wd, mx->user);
        RM_COUNT(cache_hits);
    }
}

int rm_cache_lock(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                  const struct rm_wait *w, uint64_t *back, int *r)
{
    struct rm_lock *l = mx->lock;
    pthread_mutex_lock(&l->mu);
    struct rm_cache *c = l->cache;
    if (!c) {
        rm_nsec until = l->courtesy_until;
        pthread_mutex_unlock(&l->mu);
        if (w->mode != RM_WAIT_TRY && until > rm_clock_now())
            rm_clock_sleep_until(rm_clock_min(until, w->deadline));
        return 0;
    }
    if (!usable_locked(c, mx, rm_clock_now())) { /* give it back; go to Redis as for any lock */
        l->cache = NULL;
        pthread_mutex_unlock(&l->mu);
        finish(c, 1, 0);
        return 0;
    }
    if (c->parked && mx->cache && !mx->fair) {
        /* Take it back before anyone here uses it: another process may
         * have taken the lock over meanwhile.  The acquire does it, so
         * that finding it taken over costs no second round trip. */
        *back = c->acq;
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    if (c->parked) { /* (a handle that does not cache: as itself, here) */
        pthread_mutex_unlock(&l->mu);
        int answer = park_call(c, 0);
        pthread_mutex_lock(&l->mu);
        if (l->cache != c) { /* the process is exiting */
            pthread_mutex_unlock(&l->mu);
            return 0;
        }
        if (answer != 1) {
            l->cache = NULL;
            pthread_mutex_unlock(&l->mu);
            finish(c, answer < 0, 0); /* no answer: give it back, whichever it is */
            return 0;
        }
        taken_back(c);
    }
    pthread_mutex_unlock(&l->mu);
    serve(mx, self, ep, c, r);
    return 1;
}

/* Take c, the cache of acquisition back, off l (l->mu held): NULL if l
 * has no such cache any more. */
static struct rm_cache *take_off_locked(struct rm_lock *l, uint64_t back)
{
    struct rm_cache *c = l->cache;
    if (!c || c->acq != back) return NULL;
    l->cache = NULL;
    return c;
}

int rm_cache_resume(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                    uint64_t back, int *r)
{
    struct rm_lock *l = mx->lock;
    pthread_mutex_lock(&l->mu);
    struct rm_cache *c = l->cache, *stale = NULL;
    if (!c || c->acq != back) {
        c = NULL; /* the process is exiting */
    } else if (rm_watchdog_lost(c->wd)) {
        /* Renewals failed meanwhile, yet the hold was there: a new cache
         * with a watchdog entry of its own keeps it. */
        stale = take_off_locked(l, back);
        c = NULL;
    } else {
        taken_back(c);
    }
    pthread_mutex_unlock(&l->mu);
    if (stale) finish(stale, 0, 0);
    if (!c) return 0;
    serve(mx, self, ep, c, r);
    return 1;
}

void rm_cache_drop_parked(struct rm_lock *l, uint64_t back)
{
    pthread_mutex_lock(&l->mu);
    struct rm_cache *c = take_off_locked(l, back);
    pthread_mutex_unlock(&l->mu);
    if (c) finish(c, 0, 0);
}

int rm_cache_start(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                   const struct rm_grant *g, int asked)
{
    struct rm_lock *l = mx->lock;
    char owner[64];
    size_t n = rm_thread_owner_of(0, owner, sizeof owner);
    struct rm_cache *c = calloc(1, sizeof *c);
    if (c) {
        c->wd = rm_watchdog_hold(ep, l->keys.lock, l->keys.owner, mx->robust, owner, n, rm_handle_lease(mx),
                                 g->valid_until, g->due, mx->user, 0);
        if (!c->wd) free(c), c = NULL;
    }
    if (!c) {
        release_in_redis(ep, l, mx->ops, mx->robust, 0, g->acq, rm_call_deadline(),
                         g->valid_until);
        rm_detail("out of memory");
        return ENOMEM;
    }
    rm_lock_ref(l);
    c->lock = l;
    c->ep = ep;
    c->robust = mx->robust;
    c->fair = mx->fair;
    c->ops = mx->ops;
    c->lease_ms = rm_handle_lease(mx);
    c->acq = g->acq;
    c->refs = 2; /* the lock's link and the list's */
    c->taken_at = c->last_used = rm_clock_now();
    /* Asked already (others queued for a fair lock): it goes back at the
     * unlock, and needs no ear.  Else listen for requests; without an ear
     * nobody's request is heard: give it back at the unlock. */
    if (!asked)
        c->joined = !rm_endpoint_join_notify(ep, l->keys.slot, l->keys.channel, &c->ear, "2", 1,
                                             heard, c);
    if (!c->joined) c->demanded = 1;
    pthread_mutex_lock(&l->mu);
    l->cache = c;
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_lock(&kp.mu);
    c->next = kp.head;
    if (kp.head) kp.head->prev = c;
    kp.head = c;
    /* The keeper looks at it once its idle time is up or to park it; an
     * asked cache is given back by its unlock (which pokes the keeper if
     * it cannot). */
    if (!asked)
        look_by_locked(rm_clock_min(c->last_used + RM_MSEC(RM_SETTING(cache_idle_ms)), park_due(c)));
    pthread_mutex_unlock(&kp.mu);
    RM_COUNT(cache_starts);

    struct rm_hold_terms terms = rm_handle_terms(mx);
    terms.shared_wd = c->wd;
    terms.share = &share;
    int r = rm_hold_take(l, &terms, self, ep, g);
    if (r == ENOMEM) {
        pthread_mutex_lock(&l->mu);
        l->cache = NULL;
        pthread_mutex_unlock(&l->mu);
        finish(c, 1, 0);
    }
    return r;
}

int rm_cache_holding(struct rm_lock *l, struct rm_thread *self)
{
    pthread_mutex_lock(&l->mu);
    struct rm_hold *h = rm_hold_of(l, self);
    int shared = h && h->shared;
    pthread_mutex_unlock(&l->mu);
    return shared;
}

int rm_cache_unlock(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                    int notrec)
{
    struct rm_lock *l = mx->lock;
    rm_nsec lease_end;
    uint64_t acq;
    RM_UNUSED(ep);
    int lost = rm_hold_drop(l, self, &lease_end, &acq);
    pthread_mutex_lock(&l->mu);
    struct rm_cache *c = l->cache;
    int give = 0, asked = 0, r = 0;
    if (c) {
        rm_nsec now = rm_clock_now();
        asked = atomic_load(&c->demanded);
        /* Past its known-good time (the process was stopped, renewals
         * failed) the hold may be gone with nobody told yet: the release
         * asks Redis -- released, or found gone and reported lost. */
        int overdue = now >= lease_end || rm_watchdog_unverified(c->wd);
        give = lost || notrec || overdue ||
               (asked && (c->fair || now >= c->taken_at + RM_MSEC(RM_SETTING(cache_min_hold_ms))));
        if (give) {
            l->cache = NULL;
            if (asked && !c->fair) l->courtesy_until = now + rm_clock_min(COURTESY, RM_MSEC(RM_SETTING(cache_min_hold_ms)));
        } else {
            c->last_used = now;
            rm_watchdog_set_user(c->wd, NULL); /* lost while unused: nobody to tell */
            if (c->told) asked = 0; /* the keeper knows */
            else if (asked) c->told = 1;
        }
    }
    pthread_mutex_unlock(&l->mu);
    if (!c) { /* ended by the process's exit */
        rm_detail("%s is no longer held (the process is exiting)", l->keys.lock);
        r = EPERM;
    } else if (give) {
        r = finish(c, 1, notrec);
        RM_COUNT(cache_returns);
    } else if (asked) {
        poke(); /* the keeper gives it back once it is unused or the minimum hold is up */
    }
    rm_lock_gate_leave(l);
    return r == RM_E_GONE ? rm_handle_report_lost(mx) : r;
}

/* ---- fencing ---- */

int rm_cache_token_locked(struct rm_lock *l, struct rm_thread *self, struct rm_hold *h)
{
    struct rm_cache *c = l->cache;
    if (!c) {
        rm_detail("%s is no longer held (the process is exiting)", l->keys.lock);
        return EPERM;
    }
    if (c->tok_next < c->tok_end) {
        h->token = ++c->tok_next;
        return 0;
    }
    /* Only the thread inside asks, and it cannot leave meanwhile: c stays. */
    uint64_t acq = c->acq, top = 0;
    char owner[64];
    size_t n = rm_thread_owner_of(0, owner, sizeof owner);
    pthread_mutex_unlock(&l->mu);
    int r = rm_token_take(c->ep, l->keys.lock, l->keys.token, owner, n, acq, RANGE, &top);
    pthread_mutex_lock(&l->mu);
    if (r) return r;
    if (l->cache != c || rm_hold_of(l, self) != h) {
        rm_detail("%s is no longer held (the process is exiting)", l->keys.lock);
        return EPERM;
    }
    c->tok_end = top;
    c->tok_next = top - RANGE + 1;
    h->token = c->tok_next;
    return 0;
}

/* ---- thread exit, process exit, shutdown, fork ---- */

/* A thread exits inside the process's cached hold of l (hold.c's thread
 * exit, through the hold's share): take the cache off l (l->mu held),
 * then, unlocked, let its lease run out as a thread's hold's would. */
static void *detach_locked(struct rm_lock *l)
{
    struct rm_cache *c = l->cache;
    l->cache = NULL;
    return c;
}

static void abandon(void *owner)
{
    struct rm_cache *c = owner;
    rm_log("a thread exited inside the cached %s; its lease will run out", c->lock->keys.lock);
    finish(c, 0, 0);
}

static const struct rm_hold_share share = { detach_locked, abandon };

/* At exit, with the process's other threads still running: take c off
 * its lock and give it back in Redis, but free nothing -- a thread may be
 * inside, its hold sharing c's watchdog entry, or between reading l->cache
 * and taking its hold.  (Its unlock then finds no cache: EPERM.) */
static void release_at_exit(struct rm_cache *c, rm_nsec deadline)
{
    struct rm_lock *l = c->lock;
    pthread_mutex_lock(&l->mu);
    int mine = l->cache == c;
    if (mine) l->cache = NULL;
    pthread_mutex_unlock(&l->mu);
    if (!mine || rm_clock_now() >= deadline) return;
    release_in_redis(c->ep, l, c->ops, c->robust, 0, c->acq, deadline, deadline);
}

void rm_cache_release_all(struct rm_endpoint *ep, rm_nsec deadline, int stop)
{
    RM_UNUSED(ep);
    pthread_once(&cv_once, init_cv);
    if (!stop) {
        /* The process is exiting: the list stays as it is (leaked). */
        pthread_mutex_lock(&kp.mu);
        size_t n = 0;
        for (struct rm_cache *c = kp.head; c; c = c->next) n++;
        struct rm_cache **all = n ? malloc(n * sizeof *all) : NULL;
        n = 0;
        if (all)
            for (struct rm_cache *c = kp.head; c; c = c->next) {
                atomic_fetch_add(&c->refs, 1); /* never given back: nothing is freed */
                all[n++] = c;
            }
        pthread_mutex_unlock(&kp.mu);
        for (size_t i = 0; i < n; i++) release_at_exit(all[i], deadline);
        free(all);
        return;
    }
    /* rmutex_shutdown: no call is in progress (no thread is inside or in a
     * gate), so every cache can be ended and freed. */
    pthread_mutex_lock(&kp.mu);
    int join = kp.started;
    kp.stop = 1;
    pthread_cond_signal(&kp.cv);
    pthread_mutex_unlock(&kp.mu);
    if (join) pthread_join(kp.thread, NULL);
    for (;;) {
        pthread_mutex_lock(&kp.mu);
        struct rm_cache *c = kp.head;
        if (c) atomic_fetch_add(&c->refs, 1);
        pthread_mutex_unlock(&kp.mu);
        if (!c) break;
        struct rm_lock *l = c->lock;
        pthread_mutex_lock(&l->mu);
        int mine = l->cache == c;
        if (mine) l->cache = NULL;
        pthread_mutex_unlock(&l->mu);
        if (mine) finish(c, rm_clock_now() < deadline, 0);
        else if (list_remove(c)) cache_put(c);
        cache_put(c);
    }
    pthread_mutex_lock(&kp.mu);
    kp.started = kp.stop = 0;
    kp.wake = RM_FOREVER;
    pthread_mutex_unlock(&kp.mu);
}

void rm_cache_atfork_child(void)
{
    /* The keeper and the caches are the parent's: forget them (freed by
     * nobody; only what is async-signal-safe happens here). */
    memset(&kp.mu, 0, sizeof kp.mu);
    pthread_mutex_init(&kp.mu, NULL);
    rm_clock_cond_init(&kp.cv);
    kp.started = kp.stop = kp.poked = kp.scanning = 0;
    kp.wake = RM_FOREVER;
    kp.head = NULL;
}
