/* cond.c -- condition variables: pthread_cond_* across processes.
 *
 * DESIGN
 * ------
 * A condition is a name; its state is in Redis (cond.lua has the keys and
 * the rules), and an rcond_t only points to what this process knows of it:
 * the keys, the clock, and how many of its threads are in a wait on it (so
 * that rcond_destroy cannot free what they use).
 *
 * A wait, in order:
 *   1. join the condition's channel, matching "s <waiter>" (so no message
 *      for this waiter is lost from now on), where <waiter> is the owner
 *      field of the thread and a request id;
 *   2. register in Redis (op wait: a ticket, or EINVAL for a mutex the
 *      condition is not bound to, below), while still holding the mutex --
 *      so a signal by anyone who takes the mutex after step 4 finds this
 *      waiter registered;
 *   3. hand the waiter's lease to the watchdog (renewed with the held
 *      locks, in the same batches);
 *   4. let go of the mutex, at every level (mutex.c);
 *   5. sleep until a message, a (re)subscription or the poll bound (URL
 *      option poll, at most half the waiter lease), and ask Redis (op
 *      check) unless the message already says this waiter is released:
 *      "s <waiter>", or a broadcast "* <cut>" with its ticket below the
 *      cut.  A check that finds the waiter's entry gone (its lease ran out
 *      while the process was stopped, the keys were flushed) is a spurious
 *      wake-up, never a hang;
 *   6. leave (op leave: the release is used up; a timed-out waiter that was
 *      signalled at the last moment returns 0 and uses it), and take the
 *      mutex back through the handle it was given with (mutex.c), restoring
 *      a recursive count.  A waiter that knows it was released (its
 *      message, or a check, said so) needs no answer from its leave before
 *      the retake: the leave is sent ahead on a spare connection and its
 *      answer read after the retake (rm_call_send), so the two take one
 *      round trip; the leave is done before the wait returns either way.
 *      Unless the signal handed it the mutex (below): then it owns it.
 *
 * Wait morphing.  When a signal finds the picked waiter's mutex free, its
 * script takes the mutex for the waiter and publishes "s <waiter> g"
 * (cond.lua has the rules): the waiter owns the mutex on receipt and makes
 * its local hold as a successful lock does (mutex.c: the gate, the watchdog,
 * the count restored), with no round trip after its wake-up -- signal ->
 * holding is the pub/sub delivery plus one thread hop (for a waiter of the
 * signalling process, the signal's reply carries the message and the
 * signalling thread wakes it, if first: hand_over).  Its leave, which now
 * only forgets the grant, is handed to the watchdog (if it never lands, the
 * entry is purged as a dead waiter's a waiter lease later and its signal
 * passed on: a spurious wake-up at worst).  A waiter that did not read the
 * message (a deadline, a cancel, a poll) is answered "granted" by its check
 * or leave, and owns the mutex the same way: a timed-out one returns 0, a
 * cancelled one unwinds holding it (and passes its signal on, as any
 * cancelled waiter: POSIX says it must not consume it while others
 * wait).  Only waits on a non-fair, uncached, non-robust mutex register the
 * terms a grant needs, and in a cluster only when the mutex's lock key is in
 * the condition's slot (the script writes a key it is not given in
 * KEYS).  The trade, as the fair hand-off's: a waiter whose process died
 * after registering, while the condition's channel still had a subscriber,
 * holds the mutex for one hold lease (nobody renews it) instead of
 * none.  Should another thread of this process be in the mutex's local gate
 * when the grant arrives, the waiter gives the grant back and takes the mutex
 * as any locker would.
 *
 * Cancellation is enabled only in the sleep of step 5.  Its cleanup handler
 * does step 6 with "pass on": a signal the cancelled waiter got goes to the
 * next waiter; the thread then unwinds holding the mutex, as POSIX says.
 *
 * The mutex a condition is bound to.  POSIX binds a condition to the
 * mutex of its blocked waiters until the last of them is unblocked, and a
 * wait with another mutex meanwhile is EINVAL here.  Blocked means: its
 * ticket not yet released by a signal or a broadcast.  Only Redis knows
 * that, for every process at once, the moment it happens: a thread of
 * this process learns it later (a message, a check), so the process keeps
 * no binding of its own, and op wait decides (cond.lua).  The rule, for
 * every way a wait ends:
 *   - signalled or broadcast: unblocked at once, though it still has to
 *     leave and take its mutex back;
 *   - deadline passed, or cancelled: no ticket was released, so it binds
 *     until its leave has run (it can still be signalled until then);
 *   - its process died: it binds until its waiter lease runs out;
 *   - its entry gone (lease ran out while stopped, keys flushed): it binds
 *     nothing, and wakes spuriously.
 * A wait refused with EINVAL never let go of its mutex.
 *
 * Round trips: a wait costs 2 (register, leave) + 1 per poll or broadcast
 * it was not part of, plus the mutex's own release and acquisition -- the
 * leave in the time of the acquisition when it is sent ahead; a granted
 * wait costs 1 (register) plus the release, with nothing after the
 * wake-up; signal and broadcast cost 1 each, whatever the number of
 * waiters. */
#include "call.h"
#include "condattr.h"
#include "endpoint.h"
#include "internal.h"
#include "keys.h"
#include "lock.h"
#include "mutex.h"
#include "session.h"
#include "registry.h"
#include "script.h"
#include "sub.h"
#include "thread.h"
#include "wait.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(rcond_t) == 64, "rcond_t is 64 bytes: part of the ABI");

struct rm_cond {
    struct rm_cond_keys keys;
    clockid_t clock;           /* of rcond_timedwait */
    pthread_mutex_t mu;        /* protects what follows; never held across I/O */
    unsigned waiters;          /* threads of this process in a wait on it */
    struct rm_cond *all_next, *all_prev;
};

static char destroyed_sentinel;
#define DESTROYED ((void *)&destroyed_sentinel)

/* Every condition of the process: a forked child forgets its waiters. */
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rm_cond *all;

/* fork(): the list is locked across it, and the child's conditions have
 * no waiter (the waiting threads were not copied).  Its own handlers: the
 * list's lock is never held with another of the library's. */
static void fork_prepare(void) { pthread_mutex_lock(&all_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&all_mu); }

static void fork_child(void)
{
    for (struct rm_cond *cs = all; cs; cs = cs->all_next) {
        pthread_mutex_init(&cs->mu, NULL); /* another thread may have held it */
        cs->waiters = 0;
    }
    pthread_mutex_unlock(&all_mu); /* taken by the prepare handler, in this thread */
}

__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- state ---- */

static int create(const char *name, clockid_t clock, struct rm_cond **out)
{
    struct rm_cond *cs = calloc(1, sizeof *cs);
    if (!cs) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    int r = rm_keys_cond(name, &cs->keys);
    if (r) {
        free(cs);
        return r;
    }
    cs->clock = clock;
    pthread_mutex_init(&cs->mu, NULL);
    pthread_mutex_lock(&all_mu);
    cs->all_next = all;
    if (all) all->all_prev = cs;
    all = cs;
    pthread_mutex_unlock(&all_mu);
    *out = cs;
    return 0;
}

static void free_state(struct rm_cond *cs)
{
    pthread_mutex_lock(&all_mu);
    if (cs->all_prev) cs->all_prev->all_next = cs->all_next;
    else all = cs->all_next;
    if (cs->all_next) cs->all_next->all_prev = cs->all_prev;
    pthread_mutex_unlock(&all_mu);
    pthread_mutex_destroy(&cs->mu);
    free(cs->keys.buf);
    free(cs);
}

/* The state of c, made on first use for RCOND_INITIALIZER (the loser of a
 * race frees its copy).  NULL with *err for a NULL, zeroed or destroyed c. */
static struct rm_cond *get(rcond_t *c, int *err)
{
    if (!c) {
        rm_detail("the condition is NULL");
        *err = EINVAL;
        return NULL;
    }
    void *st = __atomic_load_n(&c->rm_state_, __ATOMIC_ACQUIRE);
    if (st && st != DESTROYED) return st;
    const char *name = __atomic_load_n(&c->rm_name_, __ATOMIC_ACQUIRE);
    if (st == DESTROYED || !name) {
        rm_detail(st ? "the condition was destroyed" : "the condition was not initialized");
        *err = EINVAL;
        return NULL;
    }
    struct rm_cond *cs;
    if ((*err = create(name, c->rm_clock_ ? CLOCK_MONOTONIC : CLOCK_REALTIME, &cs))) return NULL;
    void *expected = NULL;
    if (!__atomic_compare_exchange_n(&c->rm_state_, &expected, cs, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        free_state(cs);
        if (expected == DESTROYED) {
            rm_detail("the condition was destroyed");
            *err = EINVAL;
            return NULL;
        }
        return expected;
    }
    return cs;
}

/* A thread of this process enters (+1) or leaves (-1) a wait on cs.  Which
 * mutex it may use is Redis's answer (the DESIGN): a thread here cannot
 * tell whether another one here is still blocked. */
static void count_waiter(struct rm_cond *cs, int delta)
{
    pthread_mutex_lock(&cs->mu);
    cs->waiters += (unsigned)delta;
    pthread_mutex_unlock(&cs->mu);
}

/* ---- cond.lua ---- */

#define NKEYS 4
#define NARGS 11
_Static_assert(NARGS <= RM_WATCHDOG_MAXARGS, "a leave may be deferred to the watchdog");

struct cond_req {
    const char *argv[NARGS];
    size_t lens[NARGS];
    char wlease[24];
    char glease[24];          /* wait: the mutex's hold lease if it may be granted */
};

/* The waiter's states (cond.lua's check and leave answer them too). */
enum { WAITING = 0, RELEASED = 1, GRANTED = 3 };

static void req_make(struct cond_req *q, const struct rm_cond *cs, struct rm_endpoint *ep,
                     const char *op, const char *waiter, size_t waiter_len, const char *mutex,
                     int pass_on)
{
    const struct rm_cond_keys *k = &cs->keys;
    snprintf(q->wlease, sizeof q->wlease, "%lu", RM_SETTING(waiter_lease_ms));
    q->glease[0] = 0;
    const char *v[NARGS] = {
        k->state, k->wait, k->alive, k->channel,
        op, waiter ? waiter : "", q->wlease, mutex ? mutex : "", pass_on ? "1" : "0",
        rm_endpoint_publish(ep), q->glease,
    };
    memcpy(q->argv, v, sizeof v);
    for (int i = 0; i < NARGS; i++) q->lens[i] = strlen(v[i]);
    q->lens[5] = waiter ? waiter_len : 0;
}

/* Call cond.lua until Redis answers or deadline (every op may be repeated:
 * a repeated wait finds its ticket, a repeated signal is at worst a
 * spurious wake-up), with the lock algorithms' retry rule (wait.c: asked
 * again at once after a lost reply, on a new connection, then with the
 * backoff of a server that cannot be reached).  0 and *out, an error
 * reply's errno, or ETIMEDOUT. */
static int call(struct rm_endpoint *ep, const struct cond_req *q, rm_nsec deadline,
                struct rm_thread *self, redisReply **out)
{
    struct rm_wait w = { RM_WAIT_TIMED, 0, deadline };
    struct rm_attempts at = { .quiet = 1 };
    for (int first = 1;; first = 0) {
        int r = rm_call(ep, RM_SCRIPT_COND, NKEYS, NARGS, q->argv, q->lens,
                        rm_wait_io_deadline(&w, first), 0, out, NULL);
        if (r >= 0) return r;
        if ((r = rm_wait_failed(&at, &w, r, &self->rng))) return r;
    }
}

static int integer_reply(redisReply *reply, long long *v)
{
    int ok = reply->type == REDIS_REPLY_INTEGER;
    if (ok) *v = reply->integer;
    freeReplyObject(reply);
    if (ok) return 0;
    rm_detail("unexpected reply from cond.lua");
    return EIO;
}

/* ---- signal and broadcast ---- */

/* The signal picked a waiter of this process and answered the message it
 * published to it (text, "s <waiter>" or "s <waiter> g"): that thread is
 * woken with it now, by this one, unless the multiplexer read the
 * server's copy first (the PUBLISH is written during the script, the
 * reply after it).  The same text from either copy means the same to the
 * waiter (message_releases); the later copy finds it woken or gone. */
static void hand_over(struct rm_endpoint *ep, const struct rm_cond *cs, const char *text,
                      size_t len)
{
    if (rm_endpoint_deliver(ep, cs->keys.slot, cs->keys.channel, text, len))
        RM_COUNT(cond_signals_local);
}

static int wake(rcond_t *c, const char *op)
{
    int r;
    struct rm_cond *cs = get(c, &r);
    if (!cs) return r;
    struct rm_endpoint *ep;
    if ((r = rm_session_enter(&ep))) return r;
    struct cond_req q;
    redisReply *reply;
    long long woke = 0;
    struct rm_thread *self = rm_thread_self();
    /* A signal names its caller: a waiter of this process that it picks is
     * woken from here (cond.lua's give, below). */
    req_make(&q, cs, ep, op, op[0] == 's' ? self->owner : NULL, self->owner_len, NULL, 0);
    r = call(ep, &q, rm_call_deadline(), self, &reply);
    if (!r && reply->type == REDIS_REPLY_STRING) {
        hand_over(ep, cs, reply->str, reply->len);
        freeReplyObject(reply);
        woke = 1;
    } else if (!r) {
        r = integer_reply(reply, &woke);
    }
    rm_session_leave();
    if (r == ETIMEDOUT) {
        rm_detail("Redis did not answer the %s of %s within the command timeout; it may or "
                  "may not have been delivered", op, cs->keys.name);
        return EAGAIN;
    }
    if (woke && op[0] == 's') RM_COUNT(cond_signals);
    if (woke && op[0] == 'b') RM_COUNT(cond_broadcasts);
    return r;
}

/* ---- waiting ---- */

/* One wait, on the waiting thread's stack (kept small: the caller may
 * have a PTHREAD_STACK_MIN stack, and the mutex's lock path runs below). */
struct waiting {
    struct rm_cond *cs;
    struct rm_mutex *mx;
    struct rm_thread *self;
    struct rm_endpoint *ep;
    char member[96];          /* "<owner> <request id>" */
    char match[100];          /* "s <member>" */
    size_t member_len;
    uint64_t acq;             /* the request id: a grant's acquisition number */
    rm_nsec sent;             /* when the registration, or the last look that found
                                 it waiting, was sent: a grant is later */
    long long ticket;
    unsigned depth;           /* the mutex's count, to restore */
    int joined;               /* 1 on the channel, -1 polling */
    struct rm_waiter waiter;
    struct rm_watchdog_entry *alive;
    struct rm_registry_wait announced; /* in the holder registry while it sleeps */
};

/* Ask Redis how the waiter stands: RELEASED, GRANTED, WAITING, 2 unknown
 * (its entry is gone), or -1 (no answer: ask at the next bound). */
static int check(struct waiting *wt, rm_nsec deadline)
{
    struct cond_req q;
    redisReply *reply;
    long long v;
    req_make(&q, wt->cs, wt->ep, "check", wt->member, wt->member_len, NULL, 0);
    rm_nsec asked = rm_clock_now();
    if (call(wt->ep, &q, deadline, wt->self, &reply) || integer_reply(reply, &v)) return -1;
    if (v == WAITING) wt->sent = asked; /* not granted before this look: a grant is later */
    return (int)v;
}

/* q with its own copy of every string (one block, returned for free()),
 * so that it outlives the condition's state: once the waiter no longer
 * counts (count_waiter), rcond_destroy may free the keys q pointed to.
 * NULL (q unchanged) when out of memory. */
static char *req_own(struct cond_req *q)
{
    size_t n = 0;
    for (int i = 0; i < NARGS; i++) n += q->lens[i] + 1;
    char *buf = malloc(n), *p = buf;
    if (!buf) return NULL;
    for (int i = 0; i < NARGS; i++) {
        memcpy(p, q->argv[i], q->lens[i]);
        p[q->lens[i]] = 0;
        q->argv[i] = p;
        p += q->lens[i] + 1;
    }
    return buf;
}

/* The leave, asked until answered (it may be repeated: a repeated leave
 * finds nothing to do); *released as for finish(), and GRANTED when a
 * signal handed the waiter its mutex. */
static void leave(struct rm_endpoint *ep, const struct cond_req *q, int *released)
{
    long long answer = 0;
    int r = rm_call_release(ep, RM_SCRIPT_COND, NKEYS, NARGS, q->argv, q->lens, rm_call_deadline(),
                            rm_clock_after(RM_MSEC(RM_SETTING(waiter_lease_ms))), &answer);
    *released = !r && (answer == RELEASED || answer == GRANTED) ? (int)answer : 0;
}

/* Leave the condition (pass_on: give a signal this waiter got but will not
 * use to the next one) and take the mutex back.  *released: Redis said the
 * waiter had been released (used up now), RELEASED or GRANTED.  A waiter
 * that already knows it was released (known RELEASED) and passes nothing
 * on needs no answer before its retake: its leave is sent ahead and read
 * after the retake (call.c), one round trip for the two; one that got no
 * plain answer there is asked again.  One that knows it was granted (known
 * GRANTED) owns the mutex already: its leave (forgetting the grant's mark)
 * goes to the watchdog, and it makes its hold with no round trip (a leave
 * that answers GRANTED does the same).  Either way the leave is done or
 * handed on when the wait returns.  Returns the retake's result. */
static int finish(struct waiting *wt, int pass_on, int known, int *released)
{
    *released = 0;
    rm_registry_wait_end(&wt->announced);
    if (wt->alive) rm_watchdog_cancel(wt->alive);
    struct cond_req q;
    struct rm_call_sent ahead;
    req_make(&q, wt->cs, wt->ep, "leave", wt->member, wt->member_len, NULL, pass_on);
    if (known == GRANTED)
        rm_watchdog_defer(wt->ep, RM_SCRIPT_COND, NKEYS, NARGS, q.argv, q.lens,
                          rm_clock_after(RM_MSEC(RM_SETTING(waiter_lease_ms))));
    char *own = known == RELEASED && !pass_on ? req_own(&q) : NULL;
    int sent = own && !rm_call_send(wt->ep, RM_SCRIPT_COND, NKEYS, NARGS, q.argv, q.lens,
                                    rm_call_deadline(), &ahead);
    if (wt->joined > 0) rm_sub_leave(&wt->waiter);
    if (known == GRANTED) *released = GRANTED;
    else if (!sent) leave(wt->ep, &q, released);
    count_waiter(wt->cs, -1);
    int r = *released == GRANTED
                ? rm_mutex_wait_own(wt->mx, wt->self, wt->ep, wt->acq, wt->sent, wt->depth)
                : rm_mutex_wait_retake(wt->mx, wt->self, wt->ep, wt->depth);
    if (sent) {
        redisReply *reply;
        if (rm_call_collect(&ahead, rm_call_deadline(), &reply)) leave(wt->ep, &q, released);
        else freeReplyObject(reply);
        *released = 1;
    }
    free(own);
    rm_mutex_wait_end(wt->mx);
    rm_session_leave();
    return r;
}

static void cancelled(void *arg)
{
    int released, ignored;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
    finish(arg, 1, 0, &released);
    free(arg);
}

static void sleep_cancellable(rm_nsec until, int cancel_state)
{
    int ignored;
    pthread_setcancelstate(cancel_state, &ignored);
    rm_clock_sleep_until(until); /* clock_nanosleep: a cancellation point */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
}

/* A message that releases this waiter without asking Redis: its signal
 * (GRANTED when it says "g": the mutex is the waiter's), or a broadcast
 * cut above its ticket (RELEASED); else WAITING. */
static int message_releases(const struct waiting *wt)
{
    const char *m = wt->waiter.msg;
    if (m[0] == 's') /* matched on "s <member>" */
        return !strcmp(m + wt->member_len + 2, " g") ? GRANTED : RELEASED;
    return m[0] == '*' && m[1] == ' ' && wt->ticket < strtoll(m + 2, NULL, 10) ? RELEASED
                                                                             : WAITING;
}

/* Steps 1-3 of the DESIGN: join, register, lease.  0, or the error with
 * nothing left registered. */
static int enqueue(struct waiting *wt, const struct rm_wait *w)
{
    struct rm_cond *cs = wt->cs;
    wt->acq = ++wt->self->seq;
    wt->member_len = (size_t)snprintf(wt->member, sizeof wt->member, "%.*s %llu",
                                      (int)wt->self->owner_len, wt->self->owner,
                                      (unsigned long long)wt->acq);
    int n = snprintf(wt->match, sizeof wt->match, "s %s", wt->member);
    wt->joined = rm_endpoint_join(wt->ep, cs->keys.slot, cs->keys.channel, &wt->waiter,
                                  wt->match, (size_t)n) ? -1 : 1;

    struct cond_req q;
    redisReply *reply;
    req_make(&q, cs, wt->ep, "wait", wt->member, wt->member_len, wt->mx->keys.lock, 0);
    unsigned long glease = rm_mutex_wait_grantable(wt->mx, wt->ep, cs->keys.slot);
    if (glease) q.lens[NARGS - 1] = (size_t)snprintf(q.glease, sizeof q.glease, "%lu", glease);
    wt->sent = rm_clock_now();
    int r = call(wt->ep, &q, w->deadline, wt->self, &reply);
    if (!r) {
        redisReply **e = reply->element;
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
            e[0]->type != REDIS_REPLY_INTEGER) {
            rm_detail("unexpected reply from cond.lua");
            r = EIO;
        } else if (e[0]->integer == 1) {
            rm_detail("%s has a waiter blocked with %.*s, not with %s", cs->keys.name,
                      (int)e[1]->len, e[1]->str, wt->mx->keys.lock);
            r = EINVAL;
        } else {
            wt->ticket = e[1]->integer;
        }
        freeReplyObject(reply);
    }
    if (!r) {
        wt->alive = rm_watchdog_waiter(wt->ep, cs->keys.alive, cs->keys.wait, cs->keys.state, NULL,
                                       wt->member, wt->member_len, RM_SETTING(waiter_lease_ms));
        if (!wt->alive) {
            rm_detail("out of memory");
            r = ENOMEM;
        }
    }
    if (r) {
        long long ignored;
        if (wt->joined > 0) rm_sub_leave(&wt->waiter);
        req_make(&q, cs, wt->ep, "leave", wt->member, wt->member_len, NULL, 1);
        if (r != EINVAL)
            rm_call_release(wt->ep, RM_SCRIPT_COND, NKEYS, NARGS, q.argv, q.lens,
                            rm_call_deadline(), rm_clock_after(RM_MSEC(RM_SETTING(waiter_lease_ms))),
                            &ignored);
    }
    return r;
}

/* Step 5: RELEASED (or spuriously: its entry is gone), GRANTED, or WAITING:
 * the deadline passed first. */
static int sleep_until_released(struct waiting *wt, const struct rm_wait *w, int cancel_state)
{
    unsigned long wlease = RM_SETTING(waiter_lease_ms);
    rm_nsec bound = rm_clock_min(RM_MSEC(RM_SETTING(poll_ms)), RM_MSEC(wlease) / 2);
    for (;;) {
        rm_nsec until = rm_clock_min(w->deadline, rm_clock_after(bound));
        int why = RM_WAKE_TIMEOUT;
        if (wt->joined > 0) why = rm_sub_wait_cancellable(&wt->waiter, until, cancel_state);
        else sleep_cancellable(until, cancel_state);
        int st = why == RM_WAKE_MESSAGE ? message_releases(wt) : WAITING;
        if (st != WAITING) return st;
        if (why == RM_WAKE_REFUSED) { /* no message will come: poll */
            rm_sub_leave(&wt->waiter);
            wt->joined = -1;
        } else if (why == RM_WAKE_MOVED) {
            RM_COUNT(resubscribes_moved);
            wt->joined = rm_endpoint_rejoin(wt->ep, wt->cs->keys.slot, &wt->waiter) ? -1 : 1;
        }
        if (w->deadline != RM_FOREVER && rm_clock_now() >= w->deadline) return WAITING;
        st = check(wt, rm_clock_min(w->deadline, rm_call_deadline()));
        if (st == 2) RM_COUNT(cond_spurious);
        if (st == RELEASED || st == 2) return RELEASED;
        if (st == GRANTED) return GRANTED;
    }
}

static int wait_common(rcond_t *c, rmutex_t *m, struct rm_wait *w, int cancel_state)
{
    int r;
    struct waiting *wt = calloc(1, sizeof *wt); /* the caller's stack may be small */
    if (!wt) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    if (!(wt->cs = get(c, &r)) || !(wt->mx = rm_mutex_get(m, &r))) goto out;
    if (w->bad_abstime) {
        rm_detail("abstime is NULL or its tv_nsec is outside [0, 1e9)");
        r = EINVAL;
        goto out;
    }
    wt->self = rm_thread_self();
    if ((r = rm_mutex_wait_begin(wt->mx, wt->self))) goto out;
    count_waiter(wt->cs, 1);
    if (w->deadline != RM_FOREVER && rm_clock_now() >= w->deadline) {
        r = ETIMEDOUT;
        goto uncount;
    }
    if ((r = rm_session_enter(&wt->ep))) goto uncount;
    if ((r = enqueue(wt, w))) {
        rm_session_leave();
        goto uncount;
    }
    RM_COUNT(cond_waits);
    if (rm_mutex_wait_release(wt->mx, wt->self, wt->ep, &wt->depth))
        rm_log("%s: the mutex's hold was lost before the wait let go of it", wt->cs->keys.name);

    wt->announced = (struct rm_registry_wait){ .ep = wt->ep, .owner = wt->self->owner,
                                               .lock = wt->cs->keys.name,
                                               .kind = RM_REGISTRY_WAIT_COND };
    rm_registry_wait_begin(&wt->announced);
    int released;
    pthread_cleanup_push(cancelled, wt);
    released = sleep_until_released(wt, w, cancel_state);
    pthread_cleanup_pop(0);
    int used;
    r = finish(wt, 0, released, &used);
    if (!r && !released && !used) r = ETIMEDOUT;
    free(wt);
    return r;

uncount:
    count_waiter(wt->cs, -1);
    rm_mutex_wait_end(wt->mx);
out:
    free(wt);
    return r;
}

/* ---- entry points ---- */

RMUTEX_API int rcond_init(rcond_t *c, const char *name, const rcondattr_t *attr)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    clockid_t clock;
    struct rm_cond *cs;
    int r;
    if (!c) {
        rm_detail("the condition is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    if ((r = rm_condattr_clock(attr, &clock)) || (r = create(name, clock, &cs)))
        return rm_entry_leave(&e, r);
    memset(c, 0, sizeof *c);
    c->rm_clock_ = clock == CLOCK_MONOTONIC;
    __atomic_store_n(&c->rm_state_, cs, __ATOMIC_RELEASE);
    return rm_entry_leave(&e, 0);
}

RMUTEX_API int rcond_destroy(rcond_t *c)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_cond *cs = get(c, &r);
    if (!cs) return rm_entry_leave(&e, r);
    pthread_mutex_lock(&cs->mu);
    int busy = cs->waiters > 0;
    pthread_mutex_unlock(&cs->mu);
    if (busy) {
        rm_detail("a thread of this process waits on %s", cs->keys.name);
        return rm_entry_leave(&e, EBUSY);
    }
    __atomic_store_n(&c->rm_state_, DESTROYED, __ATOMIC_RELEASE);
    free_state(cs);
    return rm_entry_leave(&e, 0);
}

RMUTEX_API int rcond_signal(rcond_t *c)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    return rm_entry_leave(&e, wake(c, "signal"));
}

RMUTEX_API int rcond_broadcast(rcond_t *c)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    return rm_entry_leave(&e, wake(c, "broadcast"));
}

RMUTEX_API int rcond_wait(rcond_t *c, rmutex_t *m)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    struct rm_wait w = { RM_WAIT_FOREVER, 0, RM_FOREVER };
    return rm_entry_leave(&e, wait_common(c, m, &w, e.cancel_state));
}

RMUTEX_API int rcond_clockwait(rcond_t *c, rmutex_t *m, clockid_t clock,
                               const struct timespec *abstime)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) {
        rm_detail("clockwait accepts CLOCK_REALTIME and CLOCK_MONOTONIC only");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_wait w;
    rm_wait_timed(&w, clock, abstime);
    return rm_entry_leave(&e, wait_common(c, m, &w, e.cancel_state));
}

RMUTEX_API int rcond_timedwait(rcond_t *c, rmutex_t *m, const struct timespec *abstime)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_cond *cs = get(c, &r);
    if (!cs) return rm_entry_leave(&e, r);
    struct rm_wait w;
    rm_wait_timed(&w, cs->clock, abstime);
    return rm_entry_leave(&e, wait_common(c, m, &w, e.cancel_state));
}
