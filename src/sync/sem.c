/* sem.c -- counting semaphores: rsem_* across processes.
 *
 * DESIGN
 * ------
 * Redis keeps the semaphore (sem.lua: the free value, each process's
 * permits and their lease, the fair queue, what a lost lease gave back);
 * this file keeps what one process knows of it, per name (struct
 * rm_semname, shared by every handle of the name): how many permits the
 * process holds, as the scripts' answers add up (a wait adds what it took,
 * a post subtracts what it gave back of the process's own), and ONE
 * watchdog entry while that count is above 0 -- rm_watchdog_permits: the
 * process's lease in the leases zset, renewed in the watchdog's batch
 * whatever the number of permits and threads.  A handle with a fixed
 * lease (rsemattr_setlease) starts no entry: its permits lapse on their
 * own.  A handle with reclaim off (rsemattr_setreclaim(0)) takes permits
 * for good: no count, no lease (sem_post by another process is how they
 * come back, as POSIX's).
 *
 * A process whose lease passes (killed, stalled past it) has its permits
 * given back by the next script on the name -- and every waiter that
 * finds none is told when the earliest lease runs out and looks again
 * then, so a dead holder's permits reach the next waiter within one lease,
 * eagerly.  The server notes what it gave back in the lost hash; the
 * process's later posts absorb it first and answer EPERM (the permit is
 * back already: counted once), and the lost-lock callback is told (by the
 * watchdog when its renewal finds the lease gone, else by that post), with
 * m NULL and the semaphore's name, as for a read-write lock's reads.
 *
 * Waiting is the lock algorithms' loop (wait.c, rm_wait_acquire): the
 * attempt is sem.lua's wait, which takes n permits or answers how long to
 * wait (the earliest lease) and, fair, queues the caller at a ticket kept
 * for the whole call (its liveness renewed by the watchdog; a waiter that
 * gives up leaves the queue).  The wait is on the channel rmutex_sem:{NAME}
 * joined before the first attempt (no lost wake-up): a fair waiter for the
 * message that names it ("-<id>"), a non-fair one for "0" (one waiter of
 * the process looks) and "1" (all look); bounded by rm_wait_queue_bound.
 * rsem_wait and its timed forms are cancellation points, as sem_wait is:
 * only while the thread sleeps; a cancelled waiter leaves the queue.
 *
 * Lost replies.  Each wait and post names itself (an id); the script keeps
 * a minute-long grant key for it, so an attempt asked again after a lost
 * reply ("a") learns it went instead of taking (or adding) twice, and a
 * wait that gives up after a lost reply has the watchdog undo it.  A post
 * Redis does not answer within the command timeout is handed to the
 * watchdog (deferred) and answers 0.
 *
 * rm_sem_post_deferred (sem.h) is the async-signal-safe post: an atomic
 * add to the handle's pending count and a write(2) to an eventfd made at
 * rsem_init; the process's poster thread (started there, signals blocked)
 * does the posts.  The exit hook and rsem_destroy flush what is pending.
 *
 * fork(): the child holds nothing (a new process uuid), its handles are
 * idle and its poster starts again at its next call.  At exit the process
 * gives back every permit it holds at once (sem.lua's release).
 *
 * Lock order: reg.mu, then a name's mu; never across a round trip. */
#include "sem.h"
#include "ack.h"
#include "call.h"
#include "clock.h"
#include "conn.h"
#include "endpoint.h"
#include "inspect.h"
#include "internal.h"
#include "keys.h"
#include "pool.h"
#include "registry.h"
#include "script.h"
#include "semattr.h"
#include "session.h"
#include "sub.h"
#include "thread.h"
#include "wait.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* ---- state ---- */

/* One name in this process. */
struct rm_semname {
    struct rm_semname *next;     /* the registry (reg.mu) */
    unsigned refs;               /* handles (reg.mu) */
    struct rm_sem_keys keys;
    pthread_mutex_t mu;          /* what follows; never held across a round trip */
    long held;                   /* the process's permits, as the answers add up */
    struct rm_watchdog_entry *wd; /* renews their lease; NULL: none, or fixed leases */
    int loss_told;               /* the loss was reported: once per loss */
};

/* A handle: one rsem_t. */
struct rm_sem {
    struct rm_sem *next, *prev;  /* every handle of the process (reg.mu) */
    struct rm_semname *ns;
    unsigned initial;
    int fair, reclaim;
    unsigned long lease_ms;      /* 0: renewed by the watchdog */
    unsigned users;              /* threads in a wait through it (ns->mu) */
    int posting;                 /* the poster is posting through it (reg.mu) */
    _Atomic unsigned long pending; /* deferred posts (rm_sem_post_deferred) */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t posted;       /* a handle's posting went to 0 */
    struct rm_semname *names;
    struct rm_sem *handles;
} reg = { .mu = PTHREAD_MUTEX_INITIALIZER, .posted = PTHREAD_COND_INITIALIZER };

/* The deferred posts' thread and its eventfd (one per process). */
static struct {
    pthread_mutex_t mu;
    _Atomic int fd;              /* -1: none yet in this process */
    _Atomic pid_t pid;           /* the process they were made for */
    int atexit_done;
} poster = { .mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static char destroyed_sentinel;
#define DESTROYED ((void *)&destroyed_sentinel)

_Static_assert(sizeof(rsem_t) == 64, "rsem_t is 64 bytes: part of the ABI");

static struct rm_semname *name_get(const char *name, int *err)
{
    pthread_mutex_lock(&reg.mu);
    for (struct rm_semname *n = reg.names; n; n = n->next)
        if (!strcmp(n->keys.name, name)) {
            n->refs++;
            pthread_mutex_unlock(&reg.mu);
            return n;
        }
    struct rm_semname *n = calloc(1, sizeof *n);
    if (!n || (*err = rm_keys_sem(name, &n->keys))) {
        pthread_mutex_unlock(&reg.mu);
        if (!n) {
            rm_detail("out of memory");
            *err = ENOMEM;
        }
        free(n);
        return NULL;
    }
    pthread_mutex_init(&n->mu, NULL);
    n->refs = 1;
    n->next = reg.names;
    reg.names = n;
    pthread_mutex_unlock(&reg.mu);
    return n;
}

/* (reg.mu held) A name no handle refers to stays while the process holds
 * permits of it: its count and watchdog entry live there. */
static void name_put_locked(struct rm_semname *n)
{
    if (--n->refs) return;
    pthread_mutex_lock(&n->mu);
    int keep = n->held > 0 || n->wd;
    pthread_mutex_unlock(&n->mu);
    if (keep) {
        n->refs = 1; /* (kept for the process's life: its permits are counted here) */
        return;
    }
    struct rm_semname **p = &reg.names;
    while (*p != n) p = &(*p)->next;
    *p = n->next;
    free(n->keys.buf);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

/* ---- the poster: deferred posts ---- */

static int post_common(struct rm_sem *h, unsigned n);

/* Post what is pending on every handle (the poster's thread, and exit). */
static void flush_pending(void)
{
    for (;;) {
        struct rm_sem *h = NULL;
        pthread_mutex_lock(&reg.mu);
        for (struct rm_sem *x = reg.handles; x; x = x->next)
            if (!x->posting && atomic_load(&x->pending)) {
                h = x;
                h->posting = 1;
                break;
            }
        pthread_mutex_unlock(&reg.mu);
        if (!h) return;
        unsigned long n = atomic_exchange(&h->pending, 0);
        while (n) {
            unsigned k = n > RSEM_VALUE_MAX ? RSEM_VALUE_MAX : (unsigned)n;
            int r = post_common(h, k);
            if (r && r != EPERM) rm_log("deferred post of %s: %s", h->ns->keys.name, rmutex_detail());
            n -= k;
        }
        pthread_mutex_lock(&reg.mu);
        h->posting = 0;
        pthread_cond_broadcast(&reg.posted);
        pthread_mutex_unlock(&reg.mu);
    }
}

static void *poster_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    pthread_setname_np(pthread_self(), "rmutex-sempost");
    for (;;) {
        uint64_t v;
        ssize_t got = read(fd, &v, sizeof v);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno != EAGAIN) return NULL; /* (closed: a fork child's copy) */
        int cancel_state;
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
        flush_pending();
    }
}

static void flush_at_exit(void) { flush_pending(); }

/* The eventfd and the poster thread of this process: made once, and again
 * in a forked child.  0 or an errno. */
static int poster_ensure(void)
{
    pid_t me = getpid();
    if (atomic_load(&poster.pid) == me) return 0;
    pthread_mutex_lock(&poster.mu);
    int r = 0;
    if (atomic_load(&poster.pid) != me) {
        int fd = eventfd(0, EFD_CLOEXEC);
        pthread_t t;
        pthread_attr_t at;
        sigset_t all, old;
        sigfillset(&all);
        if (fd < 0) {
            r = errno == EMFILE || errno == ENFILE ? EAGAIN : ENOMEM;
            rm_detail("cannot make the deferred posts' eventfd");
        } else {
            pthread_attr_init(&at);
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            pthread_sigmask(SIG_SETMASK, &all, &old);
            r = pthread_create(&t, &at, poster_main, (void *)(intptr_t)fd);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            pthread_attr_destroy(&at);
            if (r) {
                close(fd);
                rm_detail("cannot start the deferred posts' thread");
                r = EAGAIN;
            } else {
                atomic_store(&poster.fd, fd);
                atomic_store(&poster.pid, me);
                if (!poster.atexit_done && !atexit(flush_at_exit)) poster.atexit_done = 1;
            }
        }
    }
    pthread_mutex_unlock(&poster.mu);
    return r;
}

int rm_sem_post_deferred(rsem_t *s)
{
    if (!s) return EINVAL;
    struct rm_sem *h = __atomic_load_n(&s->rm_state_, __ATOMIC_ACQUIRE);
    if (!h || h == (void *)DESTROYED) return EINVAL;
    atomic_fetch_add(&h->pending, 1);
    int fd = atomic_load(&poster.fd);
    if (fd >= 0 && atomic_load(&poster.pid) == getpid()) {
        int saved = errno;
        uint64_t one = 1;
        ssize_t ignored = write(fd, &one, sizeof one);
        (void)ignored;
        errno = saved;
    }
    return 0;
}

/* ---- handles ---- */

static int create(const char *name, unsigned value, int fair, unsigned long lease_ms, int reclaim,
                  struct rm_sem **out)
{
    if (!name) {
        rm_detail("the semaphore name is NULL");
        return EINVAL;
    }
    if (value > RSEM_VALUE_MAX) {
        rm_detail("the initial value %u is above RSEM_VALUE_MAX", value);
        return EINVAL;
    }
    struct rm_sem *h = calloc(1, sizeof *h);
    if (!h) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    int r = 0;
    if (!(h->ns = name_get(name, &r))) {
        free(h);
        return r;
    }
    h->initial = value;
    h->fair = fair;
    h->lease_ms = lease_ms;
    h->reclaim = reclaim;
    pthread_mutex_lock(&reg.mu);
    h->next = reg.handles;
    if (reg.handles) reg.handles->prev = h;
    reg.handles = h;
    pthread_mutex_unlock(&reg.mu);
    *out = h;
    return 0;
}

static void handle_free(struct rm_sem *h)
{
    pthread_mutex_lock(&reg.mu);
    while (h->posting) pthread_cond_wait(&reg.posted, &reg.mu);
    if (h->prev) h->prev->next = h->next;
    else reg.handles = h->next;
    if (h->next) h->next->prev = h->prev;
    name_put_locked(h->ns);
    pthread_mutex_unlock(&reg.mu);
    free(h);
}

static struct rm_sem *get(rsem_t *s, int *err)
{
    if (!s) {
        rm_detail("the semaphore is NULL");
        *err = EINVAL;
        return NULL;
    }
    void *st = __atomic_load_n(&s->rm_state_, __ATOMIC_ACQUIRE);
    if (st && st != DESTROYED) {
        poster_ensure(); /* (again in a forked child) */
        return st;
    }
    const char *name = __atomic_load_n(&s->rm_name_, __ATOMIC_ACQUIRE);
    if (st == DESTROYED || !name) {
        rm_detail(st ? "the semaphore was destroyed" : "the semaphore was not initialized");
        *err = EINVAL;
        return NULL;
    }
    struct rm_sem *h;
    if ((*err = create(name, s->rm_value_, 0, 0, 1, &h))) return NULL;
    void *expected = NULL;
    if (!__atomic_compare_exchange_n(&s->rm_state_, &expected, h, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        handle_free(h);
        if (expected == DESTROYED) {
            rm_detail("the semaphore was destroyed");
            *err = EINVAL;
            return NULL;
        }
        return expected;
    }
    poster_ensure();
    return h;
}

static int init_handle(rsem_t *s, const char *name, unsigned value, const rsemattr_t *attr,
                       struct rm_sem **out)
{
    int fair, reclaim, r;
    unsigned long lease;
    if (!s) {
        rm_detail("the semaphore is NULL");
        return EINVAL;
    }
    if ((r = rm_semattr_read(attr, &fair, &lease, &reclaim))) return r;
    struct rm_sem *h;
    if ((r = create(name, value, fair, lease, reclaim, &h))) return r;
    if ((r = poster_ensure())) {
        handle_free(h);
        return r;
    }
    s->rm_name_ = NULL;
    s->rm_value_ = value;
    s->rm_flags_ = 0;
    memset(s->rm_reserved_, 0, sizeof s->rm_reserved_);
    __atomic_store_n(&s->rm_state_, h, __ATOMIC_RELEASE);
    if (out) *out = h;
    return 0;
}

RMUTEX_API int rsem_init(rsem_t *s, const char *name, unsigned value, const rsemattr_t *attr)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    return rm_entry_leave(&e, init_handle(s, name, value, attr, NULL));
}

RMUTEX_API int rsem_destroy(rsem_t *s)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_sem *h = get(s, &r);
    if (!h) return rm_entry_leave(&e, r);
    pthread_mutex_lock(&h->ns->mu);
    int busy = h->users != 0;
    pthread_mutex_unlock(&h->ns->mu);
    if (busy) {
        rm_detail("a thread of this process waits on the semaphore through this handle");
        return rm_entry_leave(&e, EBUSY);
    }
    __atomic_store_n(&s->rm_state_, DESTROYED, __ATOMIC_RELEASE);
    unsigned long n = atomic_exchange(&h->pending, 0); /* (deferred posts: not lost) */
    if (n) post_common(h, n > RSEM_VALUE_MAX ? RSEM_VALUE_MAX : (unsigned)n);
    handle_free(h);
    return rm_entry_leave(&e, 0);
}

/* ---- sem.lua ---- */

#define NKEYS 8
#define NARGS 20
_Static_assert(NARGS <= RM_WATCHDOG_MAXARGS, "a call may be deferred to the watchdog");

struct sem_req {
    const char *argv[NARGS];
    size_t lens[NARGS];
    char initial[RM_CONN_UINT], n[RM_CONN_UINT], lease[RM_CONN_UINT], wlease[RM_CONN_UINT],
         ticket[RM_CONN_UINT], id[RM_CONN_UINT], flags[8], done[RM_CONN_UINT];
};

/* The calling thread's last wait or post whose outcome it has learnt (its
 * reply came, and no undo needs its grant): the next call on the same name
 * deletes that grant key (ARGV 12), so a busy semaphore keeps about one
 * per thread instead of a minute's worth (the rest expire). */
static __thread struct {
    const struct rm_semname *ns;
    uint64_t id;
} learnt;

static void learnt_set(const struct rm_semname *ns, uint64_t id)
{
    learnt.ns = ns;
    learnt.id = id;
}

/* The call op by the process uuid (ulen bytes) on h's name: n permits,
 * this call's id and ticket. */
static void req_make(struct sem_req *q, const struct rm_semname *ns, struct rm_endpoint *ep,
                     const char *op, const char *uuid, size_t ulen, unsigned initial, unsigned n,
                     unsigned long lease_ms, const char *flags, uint64_t ticket, uint64_t id)
{
    const struct rm_sem_keys *k = &ns->keys;
    snprintf(q->flags, sizeof q->flags, "%s", flags);
    const char *v[NARGS] = {
        k->sem, k->leases, k->held, k->queue, k->alive, k->seq, k->lost, k->grant,
        op, uuid, q->initial, q->n, q->lease, q->wlease, q->flags, q->ticket, q->id,
        rm_endpoint_publish(ep), k->sem, q->done,
    };
    uint64_t done = learnt.ns == ns ? learnt.id : 0;
    if (done) learnt.ns = NULL;
    rm_conn_uint(q->done, done);
    memcpy(q->argv, v, sizeof v);
    for (int i = 0; i < NARGS; i++) q->lens[i] = strlen(v[i]);
    q->lens[9] = ulen;
    q->lens[10] = rm_conn_uint(q->initial, initial);
    q->lens[11] = rm_conn_uint(q->n, n);
    q->lens[12] = rm_conn_uint(q->lease, lease_ms);
    q->lens[13] = rm_conn_uint(q->wlease, RM_SETTING(waiter_lease_ms));
    q->lens[15] = rm_conn_uint(q->ticket, ticket);
    q->lens[16] = rm_conn_uint(q->id, id);
    q->lens[19] = strlen(q->done);
}

static unsigned long lease_of(const struct rm_sem *h)
{
    return h->lease_ms ? h->lease_ms : RM_SETTING(lease_ms);
}

static size_t uuid_len(const struct rm_thread *self)
{
    return (size_t)(strrchr(self->owner, ':') - self->owner);
}

/* A call's id: unique in this process (thread, request), scattered across
 * processes by the pid; below 2^53, as the script reads numbers. */
static uint64_t call_id(struct rm_thread *self)
{
    uint64_t id = ((uint64_t)getpid() << 34 ^ self->tid << 22 ^ ++self->seq) & 0x1fffffffffffffULL;
    return id ? id : 1;
}

/* ---- the process's count and its lease ---- */

/* A post answered: own permits of the process went back, and its lease
 * was found lost (absorbed).  Ends the watchdog entry when the count is
 * down to 0; reports a loss once. */
static void count_down(struct rm_semname *ns, long own, int lost)
{
    pthread_mutex_lock(&ns->mu);
    ns->held -= own;
    struct rm_watchdog_entry *wd = NULL;
    int tell = 0;
    if (lost) {
        ns->held = 0;
        tell = !ns->loss_told;
        ns->loss_told = 1;
    }
    if (ns->held <= 0 && ns->wd) {
        wd = ns->wd;
        ns->wd = NULL;
        RM_COUNT_SUB(held, 1);
    }
    pthread_mutex_unlock(&ns->mu);
    if (wd && rm_watchdog_cancel(wd)) tell = 0; /* the watchdog told already */
    if (tell) rm_watchdog_report_lost(NULL, ns->keys.name);
}

/* A wait took n permits (reclaim on): count them, and start the process's
 * lease entry if there is none (or the one there was found lost).
 * ENOMEM: no entry could be made (the caller gives the permits back). */
static int count_up(struct rm_sem *h, struct rm_endpoint *ep, struct rm_thread *self, unsigned n,
                    const struct rm_outcome *o)
{
    struct rm_semname *ns = h->ns;
    pthread_mutex_lock(&ns->mu);
    struct rm_watchdog_entry *old = NULL;
    if (ns->wd && rm_watchdog_lost(ns->wd)) {
        old = ns->wd;
        ns->wd = NULL;
        ns->held = 0;
        RM_COUNT_SUB(held, 1);
    }
    ns->held += n;
    ns->loss_told = 0;
    int start = !h->lease_ms && !ns->wd && ns->held > 0;
    pthread_mutex_unlock(&ns->mu);
    if (old) rm_watchdog_cancel(old);
    if (!start) return 0;
    struct rm_watchdog_entry *wd =
        rm_watchdog_permits(ep, ns->keys.name, ns->keys.leases, ns->keys.lost, ns->keys.sem,
                            self->owner, uuid_len(self), lease_of(h), o->valid_until, o->due);
    if (!wd) {
        pthread_mutex_lock(&ns->mu);
        ns->held -= n;
        pthread_mutex_unlock(&ns->mu);
        return ENOMEM;
    }
    pthread_mutex_lock(&ns->mu);
    if (!ns->wd && ns->held > 0) ns->wd = wd, wd = NULL, RM_COUNT(held);
    pthread_mutex_unlock(&ns->mu);
    if (wd) rm_watchdog_cancel(wd); /* posted meanwhile, or another thread started one */
    return 0;
}

/* ---- waiting ---- */

struct waiting {
    struct rm_sem *h;
    struct rm_semname *ns;
    struct rm_endpoint *ep;
    struct rm_thread *self;
    unsigned n;
    int try_only, cancel_state;
    uint64_t id, ticket;
    int queued;                  /* a busy answer put it in the queue (fair) */
    int again;                   /* the last attempt's reply was lost */
    int joined;                  /* 1 on the channel, -1 could not: poll */
    int done;                    /* finished (the cancellation handler's guard) */
    struct rm_watchdog_entry *alive;
    char match[RM_CONN_UINT + 1]; /* "-<id>" */
    char member[96];             /* "<n>|<id>|<uuid>" */
    size_t member_len;
    struct rm_waiter waiter;
};

static const char *wait_flags(const struct waiting *x, char *buf)
{
    int k = 0;
    if (x->try_only) buf[k++] = 't';
    if (x->h->fair) buf[k++] = 'f';
    if (!x->h->reclaim) buf[k++] = 'c';
    if (x->again) buf[k++] = 'a';
    buf[k] = 0;
    return buf;
}

/* Give back what wait x took (its grant), now or through the watchdog. */
static int undo(struct waiting *x, int deferred)
{
    struct sem_req q;
    long long answer;
    req_make(&q, x->ns, x->ep, "undo", x->self->owner, uuid_len(x->self), x->h->initial, x->n,
             lease_of(x->h), x->h->reclaim ? "" : "c", 0, x->id);
    if (deferred) {
        rm_watchdog_defer(x->ep, RM_SCRIPT_SEM, NKEYS, NARGS, q.argv, q.lens,
                          rm_clock_after(RM_MSEC(60000)));
        return 0;
    }
    return rm_call_release(x->ep, RM_SCRIPT_SEM, NKEYS, NARGS, q.argv, q.lens, rm_call_deadline(),
                           rm_clock_after(RM_MSEC(60000)), &answer);
}

static int step_attempt(void *ctx, rm_nsec deadline, struct rm_outcome *o)
{
    struct waiting *x = ctx;
    char flags[8];
    struct sem_req q;
    req_make(&q, x->ns, x->ep, "wait", x->self->owner, uuid_len(x->self), x->h->initial, x->n,
             lease_of(x->h), wait_flags(x, flags), x->ticket, x->id);
    redisReply *reply;
    struct rm_ack ack;
    o->sent = rm_clock_now();
    int r = rm_call(x->ep, RM_SCRIPT_SEM, NKEYS, NARGS, q.argv, q.lens, deadline,
                    x->try_only ? RM_POOL_FAILFAST : 0, &reply, &ack);
    if (r == RM_E_LOST) x->again = 1;
    if (r) return r;
    redisReply **e = reply->element;
    size_t ne = reply->elements;
    if (reply->type != REDIS_REPLY_ARRAY || ne < 2 || e[0]->type != REDIS_REPLY_INTEGER ||
        e[1]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(reply);
        rm_detail("unexpected reply from sem.lua");
        return EIO;
    }
    if (e[0]->integer == 0) {
        o->state = RM_CALL_ACQUIRED;
        o->valid_until = o->sent + RM_MSEC(lease_of(x->h));
        o->due = o->sent + RM_MSEC(lease_of(x->h)) / 3;
    } else {
        o->state = RM_CALL_BUSY;
        o->pttl = e[1]->integer;
        if (ne >= 3 && e[2]->type == REDIS_REPLY_INTEGER && e[2]->integer > 0) {
            x->ticket = (uint64_t)e[2]->integer;
            x->queued = 1;
        }
    }
    freeReplyObject(reply);
    if (o->state == RM_CALL_ACQUIRED && rm_ack_short(&ack)) {
        rm_ack_shortfall_detail(&ack, x->ns->keys.name, undo(x, 0));
        o->state = RM_CALL_SHORTFALL;
    }
    return 0;
}

static void look_again(void *waiter) { rm_sub_poke(waiter); }

static void sleep_cancellable(rm_nsec until, int cancel_state)
{
    int ignored;
    pthread_setcancelstate(cancel_state, &ignored);
    rm_clock_sleep_until(until); /* clock_nanosleep: a cancellation point */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
}

static int step_wait(void *ctx, const struct rm_outcome *o, rm_nsec deadline)
{
    struct waiting *x = ctx;
    unsigned long wlease = RM_SETTING(waiter_lease_ms);
    if (!x->alive && x->queued) {
        const struct rm_sem_keys *k = &x->ns->keys;
        x->alive = rm_watchdog_waiter(x->ep, k->alive, k->queue, k->seq, NULL, x->member,
                                      x->member_len, wlease);
        if (!x->alive) {
            rm_detail("out of memory");
            return ENOMEM;
        }
        if (x->joined > 0) rm_watchdog_set_wake(x->alive, look_again, &x->waiter);
    }
    unsigned long rank = x->joined > 0 ? rm_sub_rank(&x->waiter) : 0;
    rm_nsec bound = rm_wait_queue_bound(rank, o->pttl, wlease);
    rm_nsec until = rm_clock_min(deadline, rm_clock_after(bound));
    int why = RM_WAKE_TIMEOUT;
    if (x->joined > 0) why = rm_sub_wait_cancellable(&x->waiter, until, x->cancel_state);
    else sleep_cancellable(until, x->cancel_state);
    if (why == RM_WAKE_REFUSED) return rm_sub_refused(&x->waiter);
    if (why == RM_WAKE_MOVED) {
        if (x->alive) rm_watchdog_set_wake(x->alive, NULL, NULL); /* the waiter is remade */
        x->joined = rm_endpoint_rejoin(x->ep, x->ns->keys.slot, &x->waiter) ? -1 : 1;
        if (x->alive && x->joined > 0) rm_watchdog_set_wake(x->alive, look_again, &x->waiter);
    }
    return 0;
}

static const struct rm_acquire_steps steps = { step_attempt, step_wait };

/* Leave the queue (the waiters behind may go). */
static void leave_queue(struct waiting *x)
{
    struct sem_req q;
    long long answer;
    req_make(&q, x->ns, x->ep, "cancel", x->self->owner, uuid_len(x->self), x->h->initial, x->n,
             0, "", x->ticket, x->id);
    rm_call_release(x->ep, RM_SCRIPT_SEM, NKEYS, NARGS, q.argv, q.lens, rm_call_deadline(),
                    rm_clock_after(RM_MSEC(RM_SETTING(waiter_lease_ms))), &answer);
}

/* The wait ends with r (or is cancelled: r ECANCELED): out of the channel
 * and the queue; a wait given up after a lost reply is undone. */
static void finish(struct waiting *x, int r, int unknown)
{
    if (x->done) return;
    x->done = 1;
    if (x->alive) rm_watchdog_cancel(x->alive);
    if (x->joined > 0) rm_sub_leave(&x->waiter);
    if (r) {
        if (x->queued || unknown) leave_queue(x);
        if (unknown) undo(x, 1);
    }
    rm_session_leave();
    pthread_mutex_lock(&x->ns->mu);
    x->h->users--;
    pthread_mutex_unlock(&x->ns->mu);
}

static void cancelled(void *arg)
{
    int ignored;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
    struct waiting *x = arg;
    finish(x, ECANCELED, x->again);
}

static int wait_common(rsem_t *s, unsigned n, struct rm_wait *w, int cancel_state)
{
    int r;
    struct rm_sem *h = get(s, &r);
    if (!h) return r;
    if (n == 0 || n > RSEM_VALUE_MAX) {
        rm_detail("a wait takes 1 to RSEM_VALUE_MAX permits, not %u", n);
        return EINVAL;
    }
    struct rm_semname *ns = h->ns;
    struct rm_thread *self = rm_thread_self();
    struct rm_endpoint *ep;
    if ((r = rm_session_enter(&ep))) return r;
    pthread_mutex_lock(&ns->mu);
    h->users++;
    pthread_mutex_unlock(&ns->mu);
    struct waiting x = { .h = h, .ns = ns, .ep = ep, .self = self, .n = n,
                         .try_only = w->mode == RM_WAIT_TRY, .cancel_state = cancel_state,
                         .id = call_id(self) };
    x.match[0] = '-';
    rm_conn_uint(x.match + 1, x.id);
    int len = snprintf(x.member, sizeof x.member, "%u|%llu|%.*s", n, (unsigned long long)x.id,
                       (int)uuid_len(self), self->owner);
    x.member_len = len > 0 && (size_t)len < sizeof x.member ? (size_t)len : 0;
    /* On the channel before the first attempt: the message that lets it go
     * can follow at once. */
    if (!x.try_only)
        x.joined = (h->fair ? rm_endpoint_join(ep, ns->keys.slot, ns->keys.sem, &x.waiter, x.match,
                                               strlen(x.match))
                            : rm_endpoint_join_releases(ep, ns->keys.slot, ns->keys.sem,
                                                        &x.waiter, NULL, 0))
                       ? -1 : 1;
    struct rm_outcome o = { 0 };
    int unknown = 0;
    pthread_cleanup_push(cancelled, &x);
    const struct rm_wait_subject subject = { ep, RM_REGISTRY_WAIT_SEM, 0 };
    r = rm_wait_acquire(w, &steps, &x, ns->keys.name,
                        h->fair ? "short of permits, or others wait ahead" : "short of permits",
                        &self->rng, &o, &unknown, &subject);
    pthread_cleanup_pop(0);
    if (!r && h->reclaim && count_up(h, ep, self, n, &o)) {
        undo(&x, 0);
        rm_detail("out of memory");
        r = ENOMEM;
    }
    if (!r) RM_COUNT(acquisitions);
    if (!r && !unknown) learnt_set(ns, x.id);
    finish(&x, r, unknown);
    return r; /* EBUSY for a try: as rmutex_trylock's (the POSIX wrappers say EAGAIN) */
}

RMUTEX_API int rsem_wait(rsem_t *s)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    struct rm_wait w = { RM_WAIT_FOREVER, 0, RM_FOREVER };
    return rm_entry_leave(&e, wait_common(s, 1, &w, e.cancel_state));
}

RMUTEX_API int rsem_trywait(rsem_t *s)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    struct rm_wait w = { RM_WAIT_TRY, 0, 0 };
    return rm_entry_leave(&e, wait_common(s, 1, &w, e.cancel_state));
}

/* The timed forms: abstime on clock (NULL: no limit). */
static int timed(rsem_t *s, unsigned n, clockid_t clock, const struct timespec *abstime)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) {
        rm_detail("the clock forms accept CLOCK_REALTIME and CLOCK_MONOTONIC only");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_wait w = { RM_WAIT_FOREVER, 0, RM_FOREVER };
    if (abstime) rm_wait_timed(&w, clock, abstime);
    return rm_entry_leave(&e, wait_common(s, n, &w, e.cancel_state));
}

RMUTEX_API int rsem_timedwait(rsem_t *s, const struct timespec *abstime)
{
    if (!abstime) {
        rm_detail("the deadline is NULL");
        return EINVAL;
    }
    return timed(s, 1, CLOCK_REALTIME, abstime);
}

RMUTEX_API int rsem_clockwait(rsem_t *s, clockid_t clock, const struct timespec *abstime)
{
    if (!abstime) {
        rm_detail("the deadline is NULL");
        return EINVAL;
    }
    return timed(s, 1, clock, abstime);
}

RMUTEX_API int rsem_wait_n(rsem_t *s, unsigned n, clockid_t clock, const struct timespec *abstime)
{
    return timed(s, n, clock, abstime);
}

/* ---- posting ---- */

/* Post n through h: 0, EPERM (absorbed by a lost lease), EOVERFLOW, or an
 * error.  A post Redis does not answer in time goes to the watchdog. */
static int post_common(struct rm_sem *h, unsigned n)
{
    struct rm_semname *ns = h->ns;
    struct rm_thread *self = rm_thread_self();
    struct rm_endpoint *ep;
    int r = rm_session_enter(&ep);
    if (r) return r;
    uint64_t id = call_id(self);
    rm_nsec deadline = rm_call_deadline();
    int again = 0;
    redisReply *reply = NULL;
    for (unsigned tries = 0;; tries++) {
        struct sem_req q;
        req_make(&q, ns, ep, "post", self->owner, uuid_len(self), h->initial, n, 0,
                 again ? "a" : "", 0, id);
        r = rm_call(ep, RM_SCRIPT_SEM, NKEYS, NARGS, q.argv, q.lens, deadline, 0, &reply, NULL);
        if (r == RM_E_LOST) again = 1;
        if (r >= 0 || r == RM_E_REDIRECT) break;
        if (rm_clock_now() >= deadline) {
            /* Redis did not answer in time: the watchdog posts it (named by
             * its id: never twice). */
            req_make(&q, ns, ep, "post", self->owner, uuid_len(self), h->initial, n, 0, "a", 0,
                     id);
            rm_watchdog_defer(ep, RM_SCRIPT_SEM, NKEYS, NARGS, q.argv, q.lens,
                              rm_clock_after(RM_MSEC(600000)));
            rm_log("post of %s deferred: %s", ns->keys.name, rmutex_detail());
            rm_session_leave();
            return 0;
        }
        rm_clock_sleep_until(rm_clock_min(deadline, rm_clock_after(RM_MSEC(tries < 3 ? 5 : 50))));
    }
    rm_session_leave();
    if (r) return r > 0 ? r : EIO;
    redisReply **e = reply->element;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 ||
        e[0]->type != REDIS_REPLY_INTEGER || e[1]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(reply);
        rm_detail("unexpected reply from sem.lua");
        return EIO;
    }
    long long status = e[0]->integer, own = e[1]->integer;
    freeReplyObject(reply);
    learnt_set(ns, id);
    if (status == 2) {
        rm_detail("a post of %u would take %s past RSEM_VALUE_MAX", n, ns->keys.name);
        return EOVERFLOW;
    }
    if (own > 0 || status == 1) count_down(ns, (long)own, status == 1);
    if (status == 1) {
        rm_detail("the lease of this process's permits of %s was lost: the server gave them "
                  "back already", ns->keys.name);
        return EPERM;
    }
    return 0;
}

static int post_entry(rsem_t *s, unsigned n)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_sem *h = get(s, &r);
    if (!h) return rm_entry_leave(&e, r);
    if (n == 0 || n > RSEM_VALUE_MAX) {
        rm_detail("a post gives 1 to RSEM_VALUE_MAX permits, not %u", n);
        return rm_entry_leave(&e, EINVAL);
    }
    return rm_entry_leave(&e, post_common(h, n));
}

RMUTEX_API int rsem_post(rsem_t *s) { return post_entry(s, 1); }
RMUTEX_API int rsem_post_n(rsem_t *s, unsigned n) { return post_entry(s, n); }

/* ---- sem_open's round trip, the value, unlink ---- */

static int ask_open(struct rm_sem *h, unsigned value, int flags)
{
    struct rm_thread *self = rm_thread_self();
    struct rm_endpoint *ep;
    int r;
    if ((r = rm_session_enter(&ep))) return r;
    struct sem_req q;
    req_make(&q, h->ns, ep, "open", self->owner, uuid_len(self), value, (unsigned)flags, 0, "", 0, 0);
    redisReply *reply;
    r = rm_call_retried(ep, RM_SCRIPT_SEM, NKEYS, NARGS, q.argv, q.lens, &reply);
    rm_session_leave();
    if (r) return r;
    if (reply->type != REDIS_REPLY_INTEGER) {
        rm_detail("unexpected reply from sem.lua");
        r = EIO;
    } else if (reply->integer == 1) {
        rm_detail("the semaphore %s exists already", h->ns->keys.name);
        r = EEXIST;
    } else if (reply->integer == 2) {
        rm_detail("there is no semaphore called %s", h->ns->keys.name);
        r = ENOENT;
    }
    freeReplyObject(reply);
    return r;
}

RMUTEX_API int rsem_open(rsem_t *s, const char *name, unsigned value, const rsemattr_t *attr,
                         int flags)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    if ((flags & ~(RSEM_CREATE | RSEM_EXCL)) || flags == RSEM_EXCL) {
        rm_detail("rsem_open's flags are RSEM_CREATE, optionally with RSEM_EXCL");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_sem *h;
    int r = init_handle(s, name, value, attr, &h);
    if (!r && (r = ask_open(h, value, flags))) {
        __atomic_store_n(&s->rm_state_, NULL, __ATOMIC_RELEASE);
        handle_free(h);
    }
    return rm_entry_leave(&e, r);
}

RMUTEX_API int rsem_post_signal(rsem_t *s)
{
    int saved = errno, r = rm_sem_post_deferred(s);
    errno = saved;
    return r;
}

RMUTEX_API int rsem_hold_deadline(rsem_t *s, struct timespec *deadline)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_sem *h = get(s, &r);
    if (!h) return rm_entry_leave(&e, r);
    if (!deadline) {
        rm_detail("the output pointer is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_semname *ns = h->ns;
    pthread_mutex_lock(&ns->mu);
    /* One lease for all the process's permits of the name (ns->wd lives
     * while the process holds some: read under ns->mu). */
    int held = ns->held > 0, watched = held && ns->wd, lost = watched && rm_watchdog_lost(ns->wd);
    rm_nsec until = watched && !lost ? rm_watchdog_valid_until(ns->wd) : 0;
    pthread_mutex_unlock(&ns->mu);
    if (!watched || lost) {
        rm_detail(!held ? "this process holds no permit of %s"
                        : lost ? "this process's permit lease of %s was lost"
                               : "the permits of %s have a fixed lease, which nobody renews",
                  ns->keys.name);
        return rm_entry_leave(&e, EPERM);
    }
    deadline->tv_sec = (time_t)(until / 1000000000);
    deadline->tv_nsec = (long)(until % 1000000000);
    return rm_entry_leave(&e, 0);
}

RMUTEX_API int rsem_getvalue(rsem_t *s, int *value)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_sem *h = get(s, &r);
    if (!h) return rm_entry_leave(&e, r);
    if (!value) {
        rm_detail("the output pointer is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_thread *self = rm_thread_self();
    struct rm_endpoint *ep;
    if ((r = rm_session_enter(&ep))) return rm_entry_leave(&e, r);
    struct sem_req q;
    req_make(&q, h->ns, ep, "getvalue", self->owner, uuid_len(self), h->initial, 1, 0, "", 0, 0);
    redisReply *reply;
    r = rm_call_retried(ep, RM_SCRIPT_SEM, NKEYS, NARGS, q.argv, q.lens, &reply);
    rm_session_leave();
    if (r) return rm_entry_leave(&e, r);
    if (reply->type != REDIS_REPLY_INTEGER) {
        rm_detail("unexpected reply from sem.lua");
        r = EIO;
    } else {
        *value = (int)reply->integer;
    }
    freeReplyObject(reply);
    return rm_entry_leave(&e, r);
}

/* sem.lua's inspect answer into *info: 0 or EIO. */
static int read_inspect(const redisReply *r, rsem_info_t *info)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 5 || (r->elements - 5) % 3) return EIO;
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type != (i >= 5 && (i - 5) % 3 == 0 ? REDIS_REPLY_STRING : REDIS_REPLY_INTEGER))
            return EIO;
    long long v = r->element[0]->integer;
    info->exists = v >= 0;
    info->value = v >= 0 ? (int)v : 0;
    info->server_time_ms = r->element[1]->integer;
    info->queued = (unsigned)r->element[2]->integer;
    info->processes = (unsigned)r->element[3]->integer;
    info->lapsed = (unsigned)r->element[4]->integer;
    for (size_t i = 5; i + 2 < r->elements && info->shown < RSEM_INSPECT_HOLDERS; i += 3) {
        rmutex_readerinfo_t *h = &info->holder[info->shown++];
        snprintf(h->owner, sizeof h->owner, "%.*s:0", (int)r->element[i]->len, r->element[i]->str);
        h->holds = (unsigned)r->element[i + 1]->integer;
        h->ttl_ms = r->element[i + 2]->integer;
        h->held_ms = -1;
    }
    return 0;
}

RMUTEX_API int rsem_inspect(const char *name, rsem_info_t *out, size_t size)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    if (!out || size == 0) {
        rm_detail("the output pointer is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    rsem_info_t info;
    memset(&info, 0, sizeof info);
    struct rm_semname ns = { 0 };
    int r = rm_keys_sem(name, &ns.keys);
    if (r) return rm_entry_leave(&e, r);
    struct rm_endpoint *ep;
    if (!(r = rm_session_enter(&ep))) {
        struct rm_thread *self = rm_thread_self();
        struct sem_req q;
        req_make(&q, &ns, ep, "inspect", self->owner, uuid_len(self), 0, RSEM_INSPECT_HOLDERS, 0,
                 "", 0, 0);
        redisReply *reply;
        if (!(r = rm_call_retried(ep, RM_SCRIPT_SEM, NKEYS, NARGS, q.argv, q.lens, &reply))) {
            if ((r = read_inspect(reply, &info))) rm_detail("unexpected reply from sem.lua");
            freeReplyObject(reply);
        }
        rm_nsec deadline = rm_call_deadline();
        for (unsigned i = 0; !r && i < info.shown; i++) {
            rmutex_readerinfo_t *h = &info.holder[i];
            const struct rm_registry_fields f = RM_REGISTRY_FIELDS(h);
            rm_inspect_process(ep, ns.keys.name, h->owner, info.server_time_ms, &f, deadline);
        }
        rm_session_leave();
    }
    free(ns.keys.buf);
    if (!r) memcpy(out, &info, size < sizeof info ? size : sizeof info);
    return rm_entry_leave(&e, r);
}

RMUTEX_API int rsem_unlink(const char *name)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    struct rm_semname ns = { 0 };
    int r = rm_keys_sem(name, &ns.keys);
    if (r) return rm_entry_leave(&e, r);
    struct rm_endpoint *ep;
    if (!(r = rm_session_enter(&ep))) {
        struct sem_req q;
        req_make(&q, &ns, ep, "unlink", "-", 1, 0, 1, 0, "", 0, 0);
        redisReply *reply;
        r = rm_call_retried(ep, RM_SCRIPT_SEM, NKEYS, NARGS, q.argv, q.lens, &reply);
        rm_session_leave();
        if (!r) {
            if (reply->type != REDIS_REPLY_INTEGER) {
                rm_detail("unexpected reply from sem.lua");
                r = EIO;
            } else if (reply->integer == 0) {
                rm_detail("there is no semaphore called %s", name);
                r = ENOENT;
            }
            freeReplyObject(reply);
        }
    }
    free(ns.keys.buf);
    return rm_entry_leave(&e, r);
}

/* ---- process exit, fork ---- */

void rm_sem_release_all_at_exit(struct rm_endpoint *ep, rm_nsec deadline)
{
    flush_pending();
    struct rm_thread *self = rm_thread_self();
    /* The registry's lock is held across these round trips: the process is
     * exiting, and a name must not be freed under us meanwhile. */
    pthread_mutex_lock(&reg.mu);
    for (struct rm_semname *ns = reg.names; ns && rm_clock_now() < deadline; ns = ns->next) {
        pthread_mutex_lock(&ns->mu);
        struct rm_watchdog_entry *wd = ns->wd;
        long held = ns->held;
        ns->wd = NULL;
        ns->held = 0;
        if (wd) RM_COUNT_SUB(held, 1);
        pthread_mutex_unlock(&ns->mu);
        if (wd) rm_watchdog_cancel(wd);
        if (held <= 0) continue;
        struct sem_req q;
        long long answer;
        req_make(&q, ns, ep, "release", self->owner, uuid_len(self), 0, 1, 0, "", 0, 0);
        rm_call_release(ep, RM_SCRIPT_SEM, NKEYS, NARGS, q.argv, q.lens, deadline, deadline,
                        &answer);
    }
    pthread_mutex_unlock(&reg.mu);
}

void rm_sem_atfork(int who)
{
    if (who < 0) {
        pthread_mutex_lock(&reg.mu);
        return;
    }
    if (who == 1) {
        /* The child: the parent's permits are not its own (the watchdog
         * forgot their entries), nor are its deferred posts (the parent
         * makes them); the poster and its eventfd are the parent's: the
         * child makes its own at its next call.  Nothing is freed -- a
         * parent thread may have been inside any of it. */
        for (struct rm_semname *ns = reg.names; ns; ns = ns->next) {
            pthread_mutex_init(&ns->mu, NULL);
            ns->held = 0;
            ns->wd = NULL;
            ns->loss_told = 0;
        }
        for (struct rm_sem *h = reg.handles; h; h = h->next) {
            h->users = 0;
            h->posting = 0;
            atomic_store(&h->pending, 0);
        }
        pthread_cond_init(&reg.posted, NULL);
        pthread_mutex_init(&poster.mu, NULL);
        int fd = atomic_exchange(&poster.fd, -1);
        if (fd >= 0) close(fd);
        atomic_store(&poster.pid, 0);
    }
    pthread_mutex_unlock(&reg.mu);
}
