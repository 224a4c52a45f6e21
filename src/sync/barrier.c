/* barrier.c -- barriers: rbarrier_* across processes, cyclic.
 *
 * DESIGN
 * ------
 * Redis keeps the barrier (barrier.lua has the keys and the rules): its
 * count, its open generation and who arrived in it, the outcome of the
 * last few, and its participants -- the processes that initialized it,
 * each with a lease.  This file keeps what one process knows of a name
 * (struct rm_bname, shared by every handle of the name, like a read-write
 * lock's): its keys, its count, and the one watchdog entry that renews the
 * process's participant lease however many handles and waiting threads it
 * has (renew.lua's 'w' entry on the participants zset: one member per
 * process).  The first handle of a name joins (one round trip: a count
 * other than the live participants' is EINVAL there); the last one's
 * destroy leaves, without breaking anything.
 *
 * A wait, in order:
 *   1. join the barrier's channel (every message there is a broadcast, so
 *      no generation's end is missed from now on);
 *   2. arrive (one round trip), with an arrival id made for this wait
 *      ("<owner>:<seq>"): asked again after a lost reply, the script finds
 *      the id and answers the same, so no member counts twice.  The
 *      count-th arrival ends the generation and returns
 *      RBARRIER_SERIAL_THREAD at once;
 *   3. the others sleep until a message "* <g> d|b" (their generation g
 *      done or broken: no round trip), a (re)subscription, or the bound --
 *      the poll cap, or sooner the earliest participant lease the script
 *      saw -- and then look (op look: reclaim on server time first, so a
 *      dead participant breaks the generation within one lease of its
 *      death, even when nobody else calls).
 * Outcomes: 0 or RBARRIER_SERIAL_THREAD when the generation filled;
 * EOWNERDEAD when it was broken (a participant's lease passed while it was
 * open: a kill, a stall past the lease; or a member gave up) or its state
 * went from Redis (flushed, expired); EINVAL for another count.
 *
 * A timed wait that reaches its deadline withdraws (op withdraw): it
 * breaks its generation for the others and returns ETIMEDOUT -- or, when
 * the generation filled just before, its outcome.  The sleep is a
 * cancellation point (as a condition wait's): cancelled, the waiter
 * withdraws the same way from its cleanup handler.
 *
 * rmutex_shutdown cancels the participant entries (the watchdog frees its
 * entries); the next wait after a new start makes one again.
 *
 * fork(): the child is not a participant until it waits (an arrival joins
 * its process again: a new uuid), and then gets an entry of its own; the
 * parent's handles work in it unchanged.  A process that exits without
 * rbarrier_destroy is a participant until its lease runs out: if a
 * generation is open then, it breaks.
 *
 * Lock order: the registry, then a name's mu; never across a round trip,
 * and never while calling the watchdog (the fork handlers take its lock
 * before the registry's). */
#include "barrier.h"
#include "await.h"
#include "barrierattr.h"
#include "call.h"
#include "endpoint.h"
#include "internal.h"
#include "keys.h"
#include "registry.h"
#include "script.h"
#include "session.h"
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
#include <unistd.h>

_Static_assert(sizeof(rbarrier_t) == 64, "rbarrier_t is 64 bytes: part of the ABI");

/* One name in this process. */
struct rm_bname {
    struct rm_bname *next;             /* the registry (reg.mu) */
    unsigned refs;                     /* handles (reg.mu) */
    struct rm_barrier_keys keys;
    unsigned count;
    unsigned long lease_ms;            /* the participant lease */
    pthread_mutex_t mu;                /* what follows; never held across a round trip */
    pid_t part_pid;                    /* the process that participates, 0: none */
    struct rm_watchdog_entry *part;    /* its lease's entry, or NULL (not yet, or
                                          forgotten at a shutdown) */
};

/* A handle: one rbarrier_t. */
struct rm_barrier {
    struct rm_bname *ns;
    unsigned users;                    /* threads in a wait on it (ns->mu) */
};

static struct {
    pthread_mutex_t mu;
    struct rm_bname *head;
} reg = { .mu = PTHREAD_MUTEX_INITIALIZER };

static char destroyed_sentinel;
#define DESTROYED ((void *)&destroyed_sentinel)

/* fork() (runtime.c's handlers, in the library's lock order: after the
 * session's and the watchdog's): the registry is locked across it; the
 * child has no entry and no waiter (the watchdog forgot the entries, the
 * threads were not copied). */
void rm_barrier_atfork(int who)
{
    if (who < 0) {
        pthread_mutex_lock(&reg.mu);
        return;
    }
    if (who > 0)
        for (struct rm_bname *ns = reg.head; ns; ns = ns->next) {
            pthread_mutex_init(&ns->mu, NULL);
            ns->part = NULL;
            ns->part_pid = 0;
        }
    pthread_mutex_unlock(&reg.mu);
}

void rm_barrier_shutdown(void)
{
    /* One entry at a time, cancelled with no lock of ours held (the fork
     * handlers take the watchdog's lock, then the registry's). */
    for (;;) {
        struct rm_watchdog_entry *e = NULL;
        pthread_mutex_lock(&reg.mu);
        for (struct rm_bname *ns = reg.head; ns && !e; ns = ns->next) {
            pthread_mutex_lock(&ns->mu);
            if (ns->part_pid == getpid()) e = ns->part;
            ns->part = NULL;
            pthread_mutex_unlock(&ns->mu);
        }
        pthread_mutex_unlock(&reg.mu);
        if (!e) return;
        rm_watchdog_cancel(e);
    }
}

static unsigned long lease_of(const struct rm_bname *ns)
{
    return ns->lease_ms ? ns->lease_ms : RM_SETTING(lease_ms);
}

/* ---- barrier.lua ---- */

#define NKEYS 4
#define NARGS 10
_Static_assert(NARGS <= RM_WATCHDOG_MAXARGS, "a withdrawal may be deferred to the watchdog");

struct barrier_req {
    const char *argv[NARGS];
    size_t lens[NARGS];
    char count[24], lease[24];
};

/* The call op of ns by the calling process (uuid, from self's owner) for
 * arrival id (NULL: none). */
static void req_make(struct barrier_req *q, const struct rm_bname *ns, struct rm_endpoint *ep,
                     const char *op, const struct rm_thread *self, const char *id, size_t id_len)
{
    const struct rm_barrier_keys *k = &ns->keys;
    const char *colon = strrchr(self->owner, ':');
    const char *v[NARGS] = {
        k->state, k->parts, k->arrived, k->channel,
        op, self->owner, id ? id : "", q->count, q->lease, rm_endpoint_publish(ep),
    };
    memcpy(q->argv, v, sizeof v);
    for (int i = 0; i < NARGS; i++) q->lens[i] = strlen(v[i]);
    q->lens[5] = (size_t)(colon - self->owner);
    q->lens[6] = id ? id_len : 0;
    q->lens[7] = (size_t)snprintf(q->count, sizeof q->count, "%u", ns->count);
    q->lens[8] = (size_t)snprintf(q->lease, sizeof q->lease, "%lu", lease_of(ns));
}

/* The integers of an answer {a, b[, c]}: 0, or EIO. */
static int answer_of(redisReply *reply, long long v[3])
{
    int ok = reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 && reply->elements <= 3;
    v[1] = v[2] = 0;
    for (size_t i = 0; ok && i < reply->elements; i++) {
        ok = reply->element[i]->type == REDIS_REPLY_INTEGER;
        if (ok) v[i] = reply->element[i]->integer;
    }
    freeReplyObject(reply);
    if (ok) return 0;
    rm_detail("unexpected reply from barrier.lua");
    return EIO;
}

/* Call op until Redis answers or deadline: 0 and v, or the error. */
static int call(struct rm_bname *ns, struct rm_endpoint *ep, struct rm_thread *self,
                const char *op, const char *id, size_t id_len, rm_nsec deadline, long long v[3])
{
    struct barrier_req q;
    redisReply *reply;
    req_make(&q, ns, ep, op, self, id, id_len);
    int r = rm_await_call(ep, RM_SCRIPT_BARRIER, NKEYS, NARGS, q.argv, q.lens, deadline, self,
                          &reply);
    return r ? r : answer_of(reply, v);
}

/* The process's participant lease is renewed from now on (once per name
 * and process: a forked child makes its own).  0 or ENOMEM.  (The entry
 * is made with no lock of ours held: the watchdog's lock is taken after
 * ours nowhere.) */
static int keep_participating(struct rm_bname *ns, struct rm_endpoint *ep, struct rm_thread *self)
{
    pthread_mutex_lock(&ns->mu);
    int need = !ns->part || ns->part_pid != getpid(); /* (a child's copy is not its own) */
    pthread_mutex_unlock(&ns->mu);
    if (!need) return 0;
    const char *colon = strrchr(self->owner, ':');
    struct rm_watchdog_entry *e = rm_watchdog_waiter(ep, ns->keys.parts, ns->keys.state,
                                                     ns->keys.arrived, NULL, self->owner,
                                                     (size_t)(colon - self->owner), lease_of(ns));
    if (!e) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    pthread_mutex_lock(&ns->mu);
    int made = ns->part && ns->part_pid == getpid(); /* by another thread, meanwhile */
    if (!made) {
        ns->part = e;
        ns->part_pid = getpid();
    }
    pthread_mutex_unlock(&ns->mu);
    if (made) rm_watchdog_cancel(e);
    return 0;
}

/* ---- names and handles ---- */

static void name_free(struct rm_bname *n)
{
    pthread_mutex_destroy(&n->mu);
    free(n->keys.buf);
    free(n);
}

/* A thread of this process enters (+1) or leaves (-1) a wait through h. */
static void count_user(struct rm_barrier *h, int delta)
{
    pthread_mutex_lock(&h->ns->mu);
    h->users += (unsigned)delta;
    pthread_mutex_unlock(&h->ns->mu);
}

/* The name's state, made and joined when it is the process's first
 * handle of it (NULL and *err: a bad name, another count, no answer). */
static struct rm_bname *name_get(const char *name, unsigned count, unsigned long lease_ms,
                                 int *err)
{
    if (!name) { /* (the other bad names match no known one: the keys refuse them) */
        rm_detail("the barrier name is NULL");
        *err = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&reg.mu);
    for (struct rm_bname *n = reg.head; n; n = n->next)
        if (!strcmp(n->keys.name, name)) {
            if (n->count != count) {
                pthread_mutex_unlock(&reg.mu);
                rm_detail("the barrier %s has count %u in this process, not %u", name, n->count,
                          count);
                *err = EINVAL;
                return NULL;
            }
            n->refs++;
            pthread_mutex_unlock(&reg.mu);
            return n;
        }
    pthread_mutex_unlock(&reg.mu);

    struct rm_bname *n = calloc(1, sizeof *n);
    if (!n) {
        rm_detail("out of memory");
        *err = ENOMEM;
        return NULL;
    }
    if ((*err = rm_keys_barrier(name, &n->keys))) {
        free(n);
        return NULL;
    }
    n->count = count;
    n->lease_ms = lease_ms;
    n->refs = 1;
    pthread_mutex_init(&n->mu, NULL);
    struct rm_endpoint *ep;
    struct rm_thread *self = rm_thread_self();
    long long v[3];
    if (!(*err = rm_session_enter(&ep))) {
        *err = call(n, ep, self, "join", NULL, 0, rm_call_deadline(), v);
        if (!*err && v[0] == 1) {
            rm_detail("the barrier %s has count %lld, not %u", name, v[1], count);
            *err = EINVAL;
        }
        if (!*err) *err = keep_participating(n, ep, self);
        rm_session_leave();
    }
    if (*err == ETIMEDOUT) *err = EAGAIN; /* (the detail says Redis did not answer) */
    if (*err) {
        if (n->part) rm_watchdog_cancel(n->part);
        name_free(n);
        return NULL;
    }
    pthread_mutex_lock(&reg.mu);
    for (struct rm_bname *o = reg.head; o; o = o->next)
        if (!strcmp(o->keys.name, name) && o->count == count) {
            /* Another thread made it meanwhile: one entry per name. */
            o->refs++;
            pthread_mutex_unlock(&reg.mu);
            rm_watchdog_cancel(n->part);
            name_free(n);
            return o;
        }
    n->next = reg.head;
    reg.head = n;
    pthread_mutex_unlock(&reg.mu);
    return n;
}

/* A handle of ns is gone: the last one leaves the participants. */
static void name_put(struct rm_bname *n)
{
    pthread_mutex_lock(&reg.mu);
    if (--n->refs) {
        pthread_mutex_unlock(&reg.mu);
        return;
    }
    struct rm_bname **p = &reg.head;
    while (*p != n) p = &(*p)->next;
    *p = n->next;
    pthread_mutex_unlock(&reg.mu);
    /* Only a process that participates leaves, and cancels only its own
     * entry: a forked child's copy of the parent's is not one. */
    int mine = n->part_pid == getpid();
    if (mine && n->part) rm_watchdog_cancel(n->part);
    struct rm_endpoint *ep;
    if (mine && !rm_session_enter(&ep)) {
        long long ignored;
        struct barrier_req q;
        req_make(&q, n, ep, "leave", rm_thread_self(), NULL, 0);
        rm_call_release(ep, RM_SCRIPT_BARRIER, NKEYS, NARGS, q.argv, q.lens, rm_call_deadline(),
                        rm_clock_after(RM_MSEC(lease_of(n))), &ignored);
        rm_session_leave();
    }
    name_free(n);
}

static struct rm_barrier *get(rbarrier_t *b, int *err)
{
    void *st = b ? __atomic_load_n(&b->rm_state_, __ATOMIC_ACQUIRE) : NULL;
    if (st && st != DESTROYED) return st;
    rm_detail(!b ? "the barrier is NULL" : st ? "the barrier was destroyed"
                                                : "the barrier was not initialized");
    *err = EINVAL;
    return NULL;
}

RMUTEX_API int rbarrier_init(rbarrier_t *b, const char *name, unsigned count,
                             const rbarrierattr_t *attr)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    unsigned long lease;
    int r;
    if (!b) {
        rm_detail("the barrier is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    if (count == 0) {
        rm_detail("a barrier's count must be at least 1");
        return rm_entry_leave(&e, EINVAL);
    }
    if ((r = rm_barrierattr_read(attr, &lease))) return rm_entry_leave(&e, r);
    struct rm_barrier *h = calloc(1, sizeof *h);
    if (!h) {
        rm_detail("out of memory");
        return rm_entry_leave(&e, ENOMEM);
    }
    if (!(h->ns = name_get(name, count, lease, &r))) {
        free(h);
        return rm_entry_leave(&e, r);
    }
    b->rm_name_ = h->ns->keys.name;
    b->rm_count_ = count;
    b->rm_flags_ = 0;
    memset(b->rm_reserved_, 0, sizeof b->rm_reserved_);
    __atomic_store_n(&b->rm_state_, h, __ATOMIC_RELEASE);
    return rm_entry_leave(&e, 0);
}

RMUTEX_API int rbarrier_destroy(rbarrier_t *b)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_barrier *h = get(b, &r);
    if (!h) return rm_entry_leave(&e, r);
    pthread_mutex_lock(&h->ns->mu);
    unsigned users = h->users;
    pthread_mutex_unlock(&h->ns->mu);
    if (users) {
        rm_detail("a thread of this process waits on the barrier");
        return rm_entry_leave(&e, EBUSY);
    }
    __atomic_store_n(&b->rm_state_, DESTROYED, __ATOMIC_RELEASE);
    name_put(h->ns);
    free(h);
    return rm_entry_leave(&e, 0);
}

/* ---- waiting ---- */

/* One wait, off the caller's stack (which may be PTHREAD_STACK_MIN). */
struct waiting {
    struct rm_barrier *h;
    struct rm_bname *ns;
    struct rm_endpoint *ep;
    struct rm_thread *self;
    char id[96];                 /* "<owner>:<seq>" */
    size_t id_len;
    long long gen;               /* its generation, once known */
    int joined;                  /* 1 on the channel, -1 polling */
    struct rm_waiter waiter;
    struct rm_registry_wait announced; /* in the holder registry while it sleeps */
};

/* What an answer of arrive, look or withdraw makes of the wait: 1 still
 * waiting (v[1] its generation, v[2] the bound), else *rc set. */
static int settle(struct waiting *bw, const long long v[3], int *rc)
{
    const char *name = bw->ns->keys.name;
    switch (v[0]) {
    case 0:
        *rc = v[2] ? RBARRIER_SERIAL_THREAD : 0;
        return 0;
    case 1:
        bw->gen = v[1];
        return 1;
    case 2:
        rm_detail("the generation of %s was broken: a participant died or stalled past its "
                  "lease, or a member gave up", name);
        *rc = EOWNERDEAD;
        return 0;
    case 3:
        rm_detail("the barrier %s has count %lld, not %u", name, v[1], bw->ns->count);
        *rc = EINVAL;
        return 0;
    case 5:
        rm_detail("the wait on %s timed out; its generation is broken for the others", name);
        *rc = ETIMEDOUT;
        return 0;
    default:
        rm_detail("the state of %s went from Redis (flushed or expired) during the wait", name);
        *rc = EOWNERDEAD;
        return 0;
    }
}

/* The message that woke bw, when it says how bw's generation ended:
 * 1 and *rc, else 0 (look). */
static int message_settles(struct waiting *bw, int *rc)
{
    const char *m = bw->waiter.msg;
    char *end;
    if (m[0] != '*' || m[1] != ' ') return 0;
    long long g = strtoll(m + 2, &end, 10);
    if (g != bw->gen || end[0] != ' ' || (end[1] != 'd' && end[1] != 'b')) return 0;
    long long v[3] = { end[1] == 'd' ? 0 : 2, g, 0 };
    return !settle(bw, v, rc);
}

/* Withdraw bw (its deadline passed, or it was cancelled): its generation
 * breaks unless it had filled.  The answer's code, or ETIMEDOUT when
 * Redis did not answer (the watchdog then withdraws it within a lease). */
static int withdraw(struct waiting *bw)
{
    struct barrier_req q;
    long long v[3] = { 5, 0, 0 };
    redisReply *reply;
    req_make(&q, bw->ns, bw->ep, "withdraw", bw->self, bw->id, bw->id_len);
    int r = rm_await_call(bw->ep, RM_SCRIPT_BARRIER, NKEYS, NARGS, q.argv, q.lens,
                          rm_call_deadline(), bw->self, &reply);
    if (!r && !answer_of(reply, v)) {
        int rc = ETIMEDOUT;
        if (v[0] == 0) settle(bw, v, &rc);
        else rm_detail("the wait on %s timed out; its generation is broken for the others",
                       bw->ns->keys.name);
        return rc;
    }
    if (r) rm_watchdog_defer(bw->ep, RM_SCRIPT_BARRIER, NKEYS, NARGS, q.argv, q.lens,
                             rm_clock_after(RM_MSEC(lease_of(bw->ns))));
    rm_detail("the wait on %s timed out", bw->ns->keys.name);
    return ETIMEDOUT;
}

static void wait_end(struct waiting *bw)
{
    rm_registry_wait_end(&bw->announced);
    if (bw->joined > 0) rm_sub_leave(&bw->waiter);
    rm_session_leave();
    count_user(bw->h, -1);
}

static void cancelled(void *arg)
{
    struct waiting *bw = arg;
    int ignored;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
    withdraw(bw);
    wait_end(bw);
    free(bw);
}

/* Steps 3 of the DESIGN, from the answer v of the arrival: sleep and
 * look until the generation ends or the deadline passes. */
static int sleep_until_settled(struct waiting *bw, const struct rm_wait *w, long long v[3],
                               int cancel_state)
{
    int rc = 0;
    while (settle(bw, v, &rc)) {
        rm_nsec until = rm_await_bound(v[2], &bw->waiter, bw->joined, w->deadline);
        int why = rm_await_sleep(bw->ep, bw->ns->keys.slot, &bw->waiter, &bw->joined, until,
                                 cancel_state);
        if (why == RM_WAKE_MESSAGE && message_settles(bw, &rc)) return rc;
        if (w->deadline != RM_FOREVER && rm_clock_now() >= w->deadline) return withdraw(bw);
        int r = call(bw->ns, bw->ep, bw->self, "look", bw->id, bw->id_len,
                     rm_clock_min(w->deadline, rm_call_deadline()), v);
        if (r == EACCES || r == EINVAL || r == ENOMEM) return r;
        if (r) v[0] = 1, v[1] = bw->gen, v[2] = -1; /* no answer: look at the next bound */
    }
    return rc;
}

static int wait_common(rbarrier_t *b, struct rm_wait *w, int cancel_state)
{
    int r;
    struct rm_barrier *h = get(b, &r);
    if (!h) return r;
    if (w->bad_abstime) {
        rm_detail("abstime is NULL or its tv_nsec is outside [0, 1e9)");
        return EINVAL;
    }
    struct waiting *bw = calloc(1, sizeof *bw);
    if (!bw) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    bw->h = h;
    bw->ns = h->ns;
    bw->self = rm_thread_self();
    count_user(h, 1);
    if ((r = rm_session_enter(&bw->ep))) {
        count_user(h, -1);
        free(bw);
        return r;
    }
    bw->id_len = (size_t)snprintf(bw->id, sizeof bw->id, "%s:%llu", bw->self->owner,
                                  (unsigned long long)++bw->self->seq);
    bw->joined = rm_endpoint_join(bw->ep, bw->ns->keys.slot, bw->ns->keys.channel, &bw->waiter,
                                  "#", 1) ? -1 : 1;
    long long v[3];
    r = call(bw->ns, bw->ep, bw->self, "arrive", bw->id, bw->id_len, w->deadline, v);
    /* An arrival makes the process a participant (again: a forked child, a
     * process reclaimed after a stall), whatever its answer: its lease is
     * renewed from now on, and its last destroy leaves.  (Out of memory, it
     * is not: the next wait tries again; arriving gave it one lease.) */
    if (!r || r == ETIMEDOUT) keep_participating(bw->ns, bw->ep, bw->self);
    if (r == ETIMEDOUT) {
        r = withdraw(bw); /* it may have arrived: a lost reply */
    } else if (!r && v[0] == 1) {
        bw->announced = (struct rm_registry_wait){ .ep = bw->ep, .owner = bw->self->owner,
                                                   .lock = bw->ns->keys.name,
                                                   .kind = RM_REGISTRY_WAIT_BARRIER };
        rm_registry_wait_begin(&bw->announced);
        pthread_cleanup_push(cancelled, bw);
        r = sleep_until_settled(bw, w, v, cancel_state);
        pthread_cleanup_pop(0);
    } else if (!r) {
        settle(bw, v, &r);
    }
    wait_end(bw);
    free(bw);
    return r;
}

RMUTEX_API int rbarrier_wait(rbarrier_t *b)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    struct rm_wait w = { RM_WAIT_FOREVER, 0, RM_FOREVER };
    return rm_entry_leave(&e, wait_common(b, &w, e.cancel_state));
}

RMUTEX_API int rbarrier_clockwait(rbarrier_t *b, clockid_t clock, const struct timespec *abstime)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) {
        rm_detail("the clock forms accept CLOCK_REALTIME and CLOCK_MONOTONIC only");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_wait w;
    rm_wait_timed(&w, clock, abstime);
    return rm_entry_leave(&e, wait_common(b, &w, e.cancel_state));
}
