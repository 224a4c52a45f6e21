/* rwlock.c -- read-write locks: rrwlock_* across processes.
 *
 * DESIGN
 * ------
 * Redis keeps the lock (rwlock.lua: Redisson's RReadWriteLock hash, the
 * readers, the queue); this file keeps what one process knows of it, per
 * name (struct rm_rwname, shared by every handle of the name, like a
 * mutex's struct rm_lock): which of its threads read and how deep, which
 * writes.  So the pthread rules cost no round trip:
 *   - a thread's re-read is counted here (never queued behind a writer);
 *   - wrlock by a reader, rdlock or wrlock by the writer is EDEADLK (try
 *     forms: EBUSY), through any handle of the name;
 *   - an unlock by a thread that holds nothing is EPERM.
 *
 * A process's read holds are one thing in Redis: a member of the readers
 * zset (its lease, renewed by one watchdog entry whatever the number of
 * its reading threads) and a hash thread -> acquisition (each thread's
 * hold, so that a retried release ends only what it names).  The entry
 * starts with the process's first reader and is cancelled with its last;
 * when the watchdog finds the process gone from the readers (its lease
 * ran out, the server lost it), every read hold of the name in this
 * process is lost: each thread's unlock is EPERM.  A writer's hold is its
 * field in the hash, renewed as a mutex's hold is (with its owner mark
 * when robust).
 *
 * Acquiring is the lock algorithms' loop (wait.c, rm_wait_acquire): the
 * attempt is rwlock.lua's rdlock or wrlock, which takes the lock or queues
 * the caller at a ticket it keeps for the whole call; the wait is on
 * Redisson's channel redisson_rwlock:{NAME}, for the one message that
 * names this waiter's id ("-<id>": the script says who may go) or a
 * release of Redisson's ("0", "1": a Redisson client's hold ended) --
 * rm_sub_join_releases -- until the poll bound: the process's first waiter
 * of the name looks every half waiter lease (and when the hold it saw
 * runs out), the others less often, as the fair lock's.  While queued, the
 * watchdog keeps the waiter alive; a waiter that gives up leaves the queue
 * (the readers behind a writer then go), and one whose last reply was
 * lost releases what it may have taken, through the watchdog.  A read or
 * a write is granted only once the replicas the settings ask for have
 * acknowledged it (WAIT, as for a mutex: call.c): one they did not is
 * given back at once and the call answers RMUTEX_ENOREPLICAS -- else a
 * primary restarted stale, or one that dies before its replicas have the
 * grant, would hand out holds that exist nowhere else.
 *
 * rrwlock_hold_deadline tells a holder until when its hold is known good
 * (the writer's watchdog entry, or the process's read lease entry, shared
 * by its readers), as rmutex_hold_deadline does for a mutex.
 *
 * A thread that exits holding reads gives them back (they are its own; a
 * read hold that outlived its thread would stay as long as the process
 * renews its reads).  One that exits writing lets the lease run out, as a
 * mutex's holder does: the next taker of a robust lock gets EOWNERDEAD.
 * fork(): the child holds nothing and its handles are idle; at exit the
 * holds left are given back.
 *
 * Lock order: the registry, then a name's mu; never across a round trip. */
#include "rwlock.h"
#include "ack.h"
#include "call.h"
#include "clock.h"
#include "conn.h"
#include "endpoint.h"
#include "internal.h"
#include "keys.h"
#include "pool.h"
#include "rwlockattr.h"
#include "script.h"
#include "session.h"
#include "sub.h"
#include "thread.h"
#include "token.h"
#include "registry.h"
#include "wait.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- state ---- */

struct rm_rdhold;

/* One name in this process. */
struct rm_rwname {
    struct rm_rwname *next;      /* the registry (reg.mu) */
    unsigned refs;               /* handles and holds (reg.mu) */
    struct rm_rw_keys keys;
    pthread_mutex_t mu;          /* what follows; never held across a round trip */
    uint64_t writer;             /* the writing thread, 0: none */
    uint64_t writer_acq;
    struct rm_rw *writer_via;    /* the handle it wrote through */
    struct rm_watchdog_entry *writer_wd; /* NULL: a fixed lease, until writer_until */
    rm_nsec writer_until;
    uint64_t writer_token;       /* its fencing token, 0: not asked yet */
    struct rm_rdhold *readers;   /* this process's reading threads */
    unsigned nreaders;
    struct rm_rw *handles;       /* every handle of the name */
    struct rm_watchdog_entry *reads_wd; /* the process's read lease; NULL: fixed */
    rm_nsec reads_until;
    pid_t keys_pid;              /* the process the per-process keys are for */
    char *holds, *timeout;       /* rmutex_rw_holds:{NAME}:<uuid>, Redisson's timeout key */
};

/* One thread's reads of one name. */
struct rm_rdhold {
    struct rm_rdhold *next;      /* the name's readers (ns->mu) */
    struct rm_rdhold *tnext;     /* the thread's reads (that thread only) */
    struct rm_rwname *ns;
    struct rm_rw *via;
    uint64_t tid, acq;
    unsigned depth;
};

/* A handle: one rrwlock_t. */
struct rm_rw {
    struct rm_rw *next, *prev;   /* the name's handles (ns->mu) */
    struct rm_rwname *ns;
    rrwlock_t *user;
    int prefer_reader, robust;
    unsigned long lease_ms;      /* 0: renewed by the watchdog */
    unsigned users;              /* threads in a call through it (ns->mu) */
    unsigned holds;              /* holds taken through it (ns->mu) */
};

static struct {
    pthread_mutex_t mu;
    struct rm_rwname *head;
} reg = { .mu = PTHREAD_MUTEX_INITIALIZER };

static char destroyed_sentinel;
#define DESTROYED ((void *)&destroyed_sentinel)

_Static_assert(sizeof(rrwlock_t) == 64, "rrwlock_t is 64 bytes: part of the ABI");

static struct rm_rwname *name_get(const char *name, int *err)
{
    pthread_mutex_lock(&reg.mu);
    for (struct rm_rwname *n = reg.head; n; n = n->next)
        if (!strcmp(n->keys.lock, name)) {
            n->refs++;
            pthread_mutex_unlock(&reg.mu);
            return n;
        }
    struct rm_rwname *n = calloc(1, sizeof *n);
    if (!n || (*err = rm_keys_rwlock(name, &n->keys))) {
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
    n->next = reg.head;
    reg.head = n;
    pthread_mutex_unlock(&reg.mu);
    return n;
}

static void name_put(struct rm_rwname *n)
{
    pthread_mutex_lock(&reg.mu);
    if (--n->refs) {
        pthread_mutex_unlock(&reg.mu);
        return;
    }
    struct rm_rwname **p = &reg.head;
    while (*p != n) p = &(*p)->next;
    *p = n->next;
    pthread_mutex_unlock(&reg.mu);
    rm_keys_rw_free(&n->keys);
    pthread_mutex_destroy(&n->mu);
    free(n->holds);
    free(n);
}

static void name_ref(struct rm_rwname *n)
{
    pthread_mutex_lock(&reg.mu);
    n->refs++;
    pthread_mutex_unlock(&reg.mu);
}

/* This process's keys of ns (its holds' hash, Redisson's timeout key of
 * its anchor): made for the process's uuid, again after a fork.  NULL out
 * of memory.  ns->mu held. */
static int process_keys_locked(struct rm_rwname *ns, struct rm_thread *self)
{
    if (ns->holds && ns->keys_pid == getpid()) return 0;
    const char *colon = strrchr(self->owner, ':');
    size_t ulen = (size_t)(colon - self->owner), size = strlen(ns->keys.holds) +
                  ns->keys.tag_len + 2 * ulen + 64;
    char *mem = malloc(2 * size);
    if (!mem) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    rm_keys_rw_process(&ns->keys, self->owner, ulen, mem, mem + size, size);
    free(ns->holds);
    ns->holds = mem;
    ns->timeout = mem + size;
    ns->keys_pid = getpid();
    return 0;
}

static struct rm_rdhold *reads_of(struct rm_rwname *ns, uint64_t tid)
{
    for (struct rm_rdhold *h = ns->readers; h; h = h->next)
        if (h->tid == tid) return h;
    return NULL;
}

/* ---- handles ---- */

static int create(rrwlock_t *l, const char *name, int kind, unsigned long lease_ms, int robust,
                  struct rm_rw **out)
{
    if (kind != RRWLOCK_PREFER_READER && kind != RRWLOCK_PREFER_WRITER &&
        kind != RRWLOCK_PREFER_WRITER_NONRECURSIVE) {
        rm_detail("unknown read-write lock kind %d", kind);
        return EINVAL;
    }
    struct rm_rw *h = calloc(1, sizeof *h);
    if (!h) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    int r = 0;
    if (!(h->ns = name_get(name, &r))) {
        free(h);
        return r;
    }
    h->user = l;
    h->prefer_reader = kind == RRWLOCK_PREFER_READER;
    h->robust = robust;
    h->lease_ms = lease_ms;
    struct rm_rwname *ns = h->ns;
    pthread_mutex_lock(&ns->mu);
    h->next = ns->handles;
    if (ns->handles) ns->handles->prev = h;
    ns->handles = h;
    pthread_mutex_unlock(&ns->mu);
    *out = h;
    return 0;
}

static void handle_free(struct rm_rw *h)
{
    struct rm_rwname *ns = h->ns;
    pthread_mutex_lock(&ns->mu);
    if (h->prev) h->prev->next = h->next;
    else ns->handles = h->next;
    if (h->next) h->next->prev = h->prev;
    pthread_mutex_unlock(&ns->mu);
    name_put(ns);
    free(h);
}

static struct rm_rw *get(rrwlock_t *l, int *err)
{
    if (!l) {
        rm_detail("the read-write lock is NULL");
        *err = EINVAL;
        return NULL;
    }
    void *st = __atomic_load_n(&l->rm_state_, __ATOMIC_ACQUIRE);
    if (st && st != DESTROYED) return st;
    const char *name = __atomic_load_n(&l->rm_name_, __ATOMIC_ACQUIRE);
    if (st == DESTROYED || !name) {
        rm_detail(st ? "the read-write lock was destroyed" : "the read-write lock was not initialized");
        *err = EINVAL;
        return NULL;
    }
    int kind = __atomic_load_n(&l->rm_kind_, __ATOMIC_RELAXED);
    struct rm_rw *h;
    if ((*err = create(l, name, kind & 0xff, 0, !!(kind & RRWLOCK_FLAG_ROBUST), &h))) return NULL;
    void *expected = NULL;
    if (!__atomic_compare_exchange_n(&l->rm_state_, &expected, h, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        handle_free(h);
        if (expected == DESTROYED) {
            *err = EINVAL;
            return NULL;
        }
        return expected;
    }
    return h;
}

RMUTEX_API int rrwlock_init(rrwlock_t *l, const char *name, const rrwlockattr_t *attr)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int kind, robust, r;
    unsigned long lease;
    if (!l) {
        rm_detail("the read-write lock is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    if ((r = rm_rwlockattr_read(attr, &kind, &lease, &robust))) return rm_entry_leave(&e, r);
    struct rm_rw *h;
    if ((r = create(l, name, kind, lease, robust, &h))) return rm_entry_leave(&e, r);
    l->rm_name_ = NULL;
    l->rm_kind_ = kind | (robust ? RRWLOCK_FLAG_ROBUST : 0);
    l->rm_spare_ = 0;
    memset(l->rm_reserved_, 0, sizeof l->rm_reserved_);
    __atomic_store_n(&l->rm_state_, h, __ATOMIC_RELEASE);
    return rm_entry_leave(&e, 0);
}

RMUTEX_API int rrwlock_destroy(rrwlock_t *l)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_rw *h = get(l, &r);
    if (!h) return rm_entry_leave(&e, r);
    pthread_mutex_lock(&h->ns->mu);
    int busy = h->users || h->holds;
    pthread_mutex_unlock(&h->ns->mu);
    if (busy) {
        rm_detail("the read-write lock is held through this handle, or waited for, by a thread "
                  "of this process");
        return rm_entry_leave(&e, EBUSY);
    }
    __atomic_store_n(&l->rm_state_, DESTROYED, __ATOMIC_RELEASE);
    handle_free(h);
    return rm_entry_leave(&e, 0);
}

/* ---- rwlock.lua ---- */

#define NKEYS 10
#define NARGS 19
_Static_assert(NARGS <= RM_WATCHDOG_MAXARGS, "a release may be deferred to the watchdog");

struct rw_req {
    const char *argv[NARGS];
    size_t lens[NARGS];
    char acq[RM_CONN_UINT], lease[RM_CONN_UINT], wlease[RM_CONN_UINT], ticket[RM_CONN_UINT],
         id[RM_CONN_UINT], flags[8];
};

/* The call op of owner (its acquisition acq, this wait's id and ticket)
 * on ns, with the per-process keys already made (ns->mu was held for
 * that; they live as long as ns). */
static void req_make(struct rw_req *q, const struct rm_rwname *ns, struct rm_endpoint *ep,
                     const char *op, const char *owner, size_t owner_len, uint64_t acq,
                     unsigned long lease_ms, const char *flags, uint64_t ticket, uint64_t id)
{
    const struct rm_rw_keys *k = &ns->keys;
    snprintf(q->flags, sizeof q->flags, "%s", flags);
    const char *v[NARGS] = {
        k->lock, k->readers, k->queue, k->writers, k->alive, k->seq, k->owner, ns->holds,
        ns->timeout, k->channel,
        op, owner, q->acq, q->lease, q->wlease, q->flags, q->ticket, rm_endpoint_publish(ep), q->id,
    };
    memcpy(q->argv, v, sizeof v);
    for (int i = 0; i < NARGS; i++) q->lens[i] = strlen(v[i]);
    q->lens[11] = owner_len;
    q->lens[12] = rm_conn_uint(q->acq, acq);
    q->lens[13] = rm_conn_uint(q->lease, lease_ms);
    q->lens[14] = rm_conn_uint(q->wlease, RM_SETTING(waiter_lease_ms));
    q->lens[16] = rm_conn_uint(q->ticket, ticket);
    q->lens[18] = rm_conn_uint(q->id, id);
}

static unsigned long lease_of(const struct rm_rw *h)
{
    return h->lease_ms ? h->lease_ms : RM_SETTING(lease_ms);
}

/* The lost-lock callback for a hold of ns found gone by its unlock. */
static int report_lost(const struct rm_rwname *ns)
{
    rm_watchdog_report_lost(NULL, ns->keys.lock);
    return EPERM;
}

/* ---- acquiring ---- */

struct acquiring {
    struct rm_rw *h;
    struct rm_rwname *ns;
    struct rm_endpoint *ep;
    struct rm_thread *self;
    int writer, try_only;
    uint64_t acq, id, ticket;
    int queued;                  /* a busy answer put it in the queue */
    int joined;                  /* 1 on the channel, -1 could not: poll */
    struct rm_watchdog_entry *alive;
    char match[RM_CONN_UINT + 1]; /* "-<id>" */
    char member[96];             /* "<r|w>|<id>|<owner>|<acq>" */
    size_t member_len;
    struct rm_waiter waiter;
};

/* Give acquisition x->acq back (it was taken but must not be kept): what
 * rm_call_release answers (the watchdog retries it until valid_until when
 * Redis does not answer in time). */
static int give_back(struct acquiring *x, rm_nsec valid_until)
{
    struct rw_req q;
    long long answer;
    req_make(&q, x->ns, x->ep, x->writer ? "wrunlock" : "rdunlock", x->self->owner,
             x->self->owner_len, x->acq, lease_of(x->h), "", 0, x->id);
    return rm_call_release(x->ep, RM_SCRIPT_RWLOCK, NKEYS, NARGS, q.argv, q.lens,
                           rm_call_deadline(), valid_until, &answer);
}

static int step_attempt(void *ctx, rm_nsec deadline, struct rm_outcome *o)
{
    struct acquiring *x = ctx;
    char flags[8];
    int n = 0;
    if (x->try_only) flags[n++] = 't';
    if (x->h->robust) flags[n++] = 'r';
    if (x->h->prefer_reader && !x->writer) flags[n++] = 'p';
    flags[n] = 0;
    struct rw_req q;
    req_make(&q, x->ns, x->ep, x->writer ? "wrlock" : "rdlock", x->self->owner,
             x->self->owner_len, x->acq, lease_of(x->h), flags, x->ticket, x->id);
    redisReply *reply;
    struct rm_ack ack;
    o->sent = rm_clock_now();
    int r = rm_call(x->ep, RM_SCRIPT_RWLOCK, NKEYS, NARGS, q.argv, q.lens, deadline,
                    x->try_only ? RM_POOL_FAILFAST : 0, &reply, &ack);
    if (r) return r;
    redisReply **e = reply->element;
    size_t ne = reply->elements;
    if (reply->type != REDIS_REPLY_ARRAY || ne < 2 || e[0]->type != REDIS_REPLY_INTEGER ||
        e[1]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(reply);
        rm_detail("unexpected reply from rwlock.lua");
        return EIO;
    }
    o->state = (int)e[0]->integer;
    if (o->state == RM_CALL_ACQUIRED) {
        o->dead = e[1]->integer == 1;
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
        rm_ack_shortfall_detail(&ack, x->ns->keys.lock, give_back(x, o->valid_until));
        o->state = RM_CALL_SHORTFALL;
    }
    return 0;
}

static void look_again(void *waiter) { rm_sub_poke(waiter); }

static int step_wait(void *ctx, const struct rm_outcome *o, rm_nsec deadline)
{
    struct acquiring *x = ctx;
    unsigned long wlease = RM_SETTING(waiter_lease_ms);
    if (!x->alive && x->queued) {
        const struct rm_rw_keys *k = &x->ns->keys;
        x->alive = rm_watchdog_waiter(x->ep, k->alive, k->queue, k->seq, k->writers, x->member,
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
    int why = x->joined > 0 ? rm_sub_wait(&x->waiter, until) : RM_WAKE_TIMEOUT;
    if (why == RM_WAKE_REFUSED) return rm_sub_refused(&x->waiter);
    if (why == RM_WAKE_MOVED) {
        if (x->alive) rm_watchdog_set_wake(x->alive, NULL, NULL); /* the waiter is remade */
        x->joined = rm_endpoint_rejoin(x->ep, x->ns->keys.slot, &x->waiter) ? -1 : 1;
        if (x->alive && x->joined > 0) rm_watchdog_set_wake(x->alive, look_again, &x->waiter);
    } else if (x->joined <= 0) {
        rm_clock_sleep_until(until);
    }
    return 0;
}

static const struct rm_acquire_steps steps = { step_attempt, step_wait };

/* Give up acquisition x->acq after a lost reply: it may have been taken;
 * release it through the watchdog (the release names it: it ends no
 * later hold). */
static void release_unknown(struct acquiring *x)
{
    struct rw_req q;
    req_make(&q, x->ns, x->ep, x->writer ? "wrunlock" : "rdunlock", x->self->owner,
             x->self->owner_len, x->acq, lease_of(x->h), "", 0, x->id);
    rm_watchdog_defer(x->ep, RM_SCRIPT_RWLOCK, NKEYS, NARGS, q.argv, q.lens,
                      rm_clock_after(RM_MSEC(lease_of(x->h))));
}

/* Leave the queue (a writer that gives up lets the readers behind it go). */
static void cancel(struct acquiring *x)
{
    struct rw_req q;
    long long answer;
    req_make(&q, x->ns, x->ep, "cancel", x->self->owner, x->self->owner_len, x->acq,
             lease_of(x->h), x->writer ? "w" : "", x->ticket, x->id);
    rm_call_release(x->ep, RM_SCRIPT_RWLOCK, NKEYS, NARGS, q.argv, q.lens, rm_call_deadline(),
                    rm_clock_after(RM_MSEC(RM_SETTING(waiter_lease_ms))), &answer);
}

static __thread struct rm_rdhold *my_reads; /* the calling thread's reads */
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static void thread_exit(void *arg);
static void make_key(void) { pthread_key_create(&exit_key, thread_exit); }

static void arm_exit(void)
{
    pthread_once(&key_once, make_key);
    if (!pthread_getspecific(exit_key)) pthread_setspecific(exit_key, (void *)1);
}

/* x acquired (o): record the hold.  ENOMEM: nothing recorded (the caller
 * gives it back). */
static int record(struct acquiring *x, const struct rm_outcome *o)
{
    struct rm_rwname *ns = x->ns;
    unsigned long lease = lease_of(x->h);
    if (x->writer) {
        struct rm_watchdog_entry *wd = NULL;
        char field[96];
        int n = snprintf(field, sizeof field, "%s:write", x->self->owner);
        if (!x->h->lease_ms &&
            !(wd = rm_watchdog_hold(x->ep, ns->keys.lock, ns->keys.owner, x->h->robust, field,
                                    (size_t)n, lease, o->valid_until, o->due, NULL, 1)))
            return ENOMEM;
        pthread_mutex_lock(&ns->mu);
        ns->writer = x->self->tid;
        ns->writer_acq = x->acq;
        ns->writer_via = x->h;
        ns->writer_wd = wd;
        ns->writer_until = o->valid_until;
        ns->writer_token = 0;
        x->h->holds++;
        pthread_mutex_unlock(&ns->mu);
        name_ref(ns);
    } else {
        struct rm_rdhold *rd = malloc(sizeof *rd);
        if (!rd) return ENOMEM;
        memset(rd, 0, sizeof *rd);
        rd->ns = ns;
        rd->via = x->h;
        rd->tid = x->self->tid;
        rd->acq = x->acq;
        rd->depth = 1;
        pthread_mutex_lock(&ns->mu);
        rd->next = ns->readers;
        ns->readers = rd;
        x->h->holds++;
        int first = ns->nreaders++ == 0;
        if (first) ns->reads_until = o->valid_until;
        pthread_mutex_unlock(&ns->mu);
        if (first && !x->h->lease_ms) {
            /* (The last reader's unlock cancels it; a reader coming
             * meanwhile finds nreaders > 0 and starts none.) */
            const char *colon = strrchr(x->self->owner, ':');
            struct rm_watchdog_entry *wd =
                rm_watchdog_reads(x->ep, ns->keys.lock, ns->keys.readers, ns->holds, ns->timeout,
                                  x->self->owner, (size_t)(colon - x->self->owner), lease,
                                  o->valid_until, o->due);
            pthread_mutex_lock(&ns->mu);
            if (ns->nreaders && !ns->reads_wd) ns->reads_wd = wd, wd = NULL;
            pthread_mutex_unlock(&ns->mu);
            if (wd) rm_watchdog_cancel(wd); /* the readers left meanwhile */
        }
        rd->tnext = my_reads;
        my_reads = rd;
        name_ref(ns);
    }
    RM_COUNT(acquisitions);
    RM_COUNT(held);
    arm_exit();
    return 0;
}

static int lock_common(rrwlock_t *l, struct rm_wait *w, int writer)
{
    int r;
    struct rm_rw *h = get(l, &r);
    if (!h) return r;
    struct rm_rwname *ns = h->ns;
    struct rm_thread *self = rm_thread_self();
    int try_only = w->mode == RM_WAIT_TRY;
    pthread_mutex_lock(&ns->mu);
    struct rm_rdhold *mine = reads_of(ns, self->tid);
    if (ns->writer == self->tid || (writer && mine)) {
        pthread_mutex_unlock(&ns->mu);
        rm_detail("the calling thread %s %s%s", ns->writer == self->tid ? "writes" : "reads",
                  ns->keys.lock, writer && mine ? " (no upgrade: unlock the read first)" : "");
        return try_only ? EBUSY : EDEADLK;
    }
    if (mine) { /* a re-read: counted here, never queued */
        r = mine->depth == RMUTEX_RECURSION_MAX ? EAGAIN : 0;
        if (!r) mine->depth++;
        else rm_detail("%s is already read %u times by this thread", ns->keys.lock, mine->depth);
        pthread_mutex_unlock(&ns->mu);
        return r;
    }
    h->users++;
    r = process_keys_locked(ns, self);
    pthread_mutex_unlock(&ns->mu);

    struct rm_endpoint *ep;
    if (!r && !(r = rm_session_enter(&ep))) {
        struct acquiring x = { .h = h, .ns = ns, .ep = ep, .self = self, .writer = writer,
                               .try_only = try_only, .acq = ++self->seq };
        /* The waiter's id: unique in this process (thread, acquisition),
         * scattered across processes by the pid (a clash costs a spurious
         * look, nothing more); below 2^53, as the script reads numbers. */
        x.id = ((uint64_t)getpid() << 34 ^ self->tid << 22 ^ x.acq) & 0x1fffffffffffffULL;
        if (!x.id) x.id = 1;
        x.match[0] = '-';
        rm_conn_uint(x.match + 1, x.id);
        int n = snprintf(x.member, sizeof x.member, "%c|%llu|%s|%llu", writer ? 'w' : 'r',
                         (unsigned long long)x.id, self->owner, (unsigned long long)x.acq);
        x.member_len = n > 0 && (size_t)n < sizeof x.member ? (size_t)n : 0;
        /* On the channel before the first attempt: the message that lets
         * it go can follow the enqueue at once. */
        if (!try_only)
            x.joined = rm_endpoint_join_releases(ep, ns->keys.slot, ns->keys.channel, &x.waiter,
                                                 x.match, strlen(x.match)) ? -1 : 1;
        struct rm_outcome o = { 0 };
        int unknown;
        const struct rm_wait_subject subject = {
            ep, writer ? RM_REGISTRY_WAIT_WRITE : RM_REGISTRY_WAIT_READ, 0 };
        r = rm_wait_acquire(w, &steps, &x, ns->keys.lock,
                            writer ? "held (read or written), or others wait ahead"
                                   : "held by a writer, or a writer waits ahead",
                            &self->rng, &o, &unknown, &subject);
        if (x.alive) rm_watchdog_cancel(x.alive);
        if (x.joined > 0) rm_sub_leave(&x.waiter);
        if (r) {
            if (x.queued || unknown) cancel(&x);
            if (unknown) release_unknown(&x);
        } else {
            if (record(&x, &o)) {
                give_back(&x, o.valid_until);
                rm_detail("out of memory");
                r = ENOMEM;
            } else if (o.dead) {
                rm_detail("the last writer of %s died holding it", ns->keys.lock);
                r = EOWNERDEAD;
            }
        }
        rm_session_leave();
    }
    pthread_mutex_lock(&ns->mu);
    h->users--;
    pthread_mutex_unlock(&ns->mu);
    return r;
}

/* The untimed forms: mode RM_WAIT_FOREVER or RM_WAIT_TRY. */
static int untimed(rrwlock_t *l, int mode, int writer)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    struct rm_wait w = { mode, 0, mode == RM_WAIT_TRY ? 0 : RM_FOREVER };
    return rm_entry_leave(&e, lock_common(l, &w, writer));
}

RMUTEX_API int rrwlock_rdlock(rrwlock_t *l) { return untimed(l, RM_WAIT_FOREVER, 0); }
RMUTEX_API int rrwlock_tryrdlock(rrwlock_t *l) { return untimed(l, RM_WAIT_TRY, 0); }

/* The timed and clock forms: clock as the clock forms accept it. */
static int timed(rrwlock_t *l, clockid_t clock, const struct timespec *abstime, int writer)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) {
        rm_detail("the clock forms accept CLOCK_REALTIME and CLOCK_MONOTONIC only");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_wait w;
    rm_wait_timed(&w, clock, abstime);
    return rm_entry_leave(&e, lock_common(l, &w, writer));
}

RMUTEX_API int rrwlock_timedrdlock(rrwlock_t *l, const struct timespec *abstime)
{
    return timed(l, CLOCK_REALTIME, abstime, 0);
}

RMUTEX_API int rrwlock_clockrdlock(rrwlock_t *l, clockid_t clock, const struct timespec *abstime)
{
    return timed(l, clock, abstime, 0);
}

RMUTEX_API int rrwlock_wrlock(rrwlock_t *l) { return untimed(l, RM_WAIT_FOREVER, 1); }
RMUTEX_API int rrwlock_trywrlock(rrwlock_t *l) { return untimed(l, RM_WAIT_TRY, 1); }

RMUTEX_API int rrwlock_timedwrlock(rrwlock_t *l, const struct timespec *abstime)
{
    return timed(l, CLOCK_REALTIME, abstime, 1);
}

RMUTEX_API int rrwlock_clockwrlock(rrwlock_t *l, clockid_t clock, const struct timespec *abstime)
{
    return timed(l, clock, abstime, 1);
}

/* ---- releasing ---- */

static void thread_list_remove(struct rm_rdhold *rd)
{
    for (struct rm_rdhold **p = &my_reads; *p; p = &(*p)->tnext)
        if (*p == rd) {
            *p = rd->tnext;
            return;
        }
}

/* Take rd (the calling thread's, its last level) off ns; says whether the
 * process's reads were found lost, and hands back the read lease's entry
 * when rd was the process's last reader (the caller cancels it). */
static int read_drop_locked(struct rm_rwname *ns, struct rm_rdhold *rd,
                            struct rm_watchdog_entry **last_wd, rm_nsec *known_good)
{
    struct rm_rdhold **p = &ns->readers;
    while (*p != rd) p = &(*p)->next;
    *p = rd->next;
    rd->via->holds--;
    *last_wd = NULL;
    int lost = ns->reads_wd ? rm_watchdog_lost(ns->reads_wd) : rm_clock_now() >= ns->reads_until;
    *known_good = ns->reads_wd ? rm_watchdog_valid_until(ns->reads_wd) : ns->reads_until;
    if (--ns->nreaders == 0) {
        *last_wd = ns->reads_wd;
        ns->reads_wd = NULL;
    }
    RM_COUNT_SUB(held, 1);
    return lost;
}

/* Until when the process's reads of ns are known good now: the watchdog
 * renews them while other readers of the process hold (a read unlock's
 * release that waited on a busy server asks this again). */
static rm_nsec reads_known_good_now(void *arg)
{
    struct rm_rwname *ns = arg;
    pthread_mutex_lock(&ns->mu);
    rm_nsec v = ns->reads_wd ? rm_watchdog_valid_until(ns->reads_wd) : 0;
    pthread_mutex_unlock(&ns->mu);
    return v;
}

/* Send rdunlock / wrunlock for acquisition acq of the calling thread:
 * 0, EPERM (lost: reported) or an error. */
static int release(struct rm_rwname *ns, struct rm_thread *self, int writer, uint64_t acq,
                   rm_nsec known_good)
{
    struct rm_endpoint *ep;
    int r = rm_session_enter(&ep);
    if (r) return r;
    struct rw_req q;
    req_make(&q, ns, ep, writer ? "wrunlock" : "rdunlock", self->owner, self->owner_len, acq,
             0, "", 0, 0);
    r = rm_call_unlock_live(ep, RM_SCRIPT_RWLOCK, NKEYS, NARGS, q.argv, q.lens, rm_call_deadline(),
                            known_good, writer ? NULL : reads_known_good_now, ns);
    rm_session_leave();
    return r == RM_E_GONE ? report_lost(ns) : r;
}

RMUTEX_API int rrwlock_unlock(rrwlock_t *l)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_rw *h = get(l, &r);
    if (!h) return rm_entry_leave(&e, r);
    struct rm_rwname *ns = h->ns;
    struct rm_thread *self = rm_thread_self();
    pthread_mutex_lock(&ns->mu);
    if (ns->writer == self->tid) {
        struct rm_watchdog_entry *wd = ns->writer_wd;
        uint64_t acq = ns->writer_acq;
        rm_nsec known_good = wd ? rm_watchdog_valid_until(wd) : ns->writer_until;
        ns->writer = 0;
        ns->writer_wd = NULL;
        ns->writer_via->holds--;
        pthread_mutex_unlock(&ns->mu);
        RM_COUNT_SUB(held, 1);
        int lost = wd ? rm_watchdog_cancel(wd) : 0;
        if (lost) {
            rm_detail("the write lease of %s was lost before this unlock", ns->keys.lock);
            r = EPERM;
        } else {
            r = release(ns, self, 1, acq, known_good);
        }
        name_put(ns);
        return rm_entry_leave(&e, r);
    }
    struct rm_rdhold *rd = reads_of(ns, self->tid);
    if (!rd) {
        pthread_mutex_unlock(&ns->mu);
        rm_detail("the calling thread holds %s neither for reading nor for writing",
                  ns->keys.lock);
        return rm_entry_leave(&e, EPERM);
    }
    if (rd->depth > 1) {
        rd->depth--;
        pthread_mutex_unlock(&ns->mu);
        return rm_entry_leave(&e, 0);
    }
    struct rm_watchdog_entry *last;
    rm_nsec known_good;
    int lost = read_drop_locked(ns, rd, &last, &known_good);
    pthread_mutex_unlock(&ns->mu);
    if (last && rm_watchdog_cancel(last)) lost = 1;
    thread_list_remove(rd);
    if (lost) {
        rm_detail("the read lease of %s was lost before this unlock", ns->keys.lock);
        r = EPERM;
    } else {
        r = release(ns, self, 0, rd->acq, known_good);
    }
    free(rd);
    name_put(ns);
    return rm_entry_leave(&e, r);
}

RMUTEX_API int rrwlock_fence(rrwlock_t *l, uint64_t *token)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_rw *h = get(l, &r);
    if (!h) return rm_entry_leave(&e, r);
    if (!token) {
        rm_detail("the output pointer is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_rwname *ns = h->ns;
    struct rm_thread *self = rm_thread_self();
    pthread_mutex_lock(&ns->mu);
    int writing = ns->writer == self->tid && !(ns->writer_wd && rm_watchdog_lost(ns->writer_wd));
    uint64_t acq = ns->writer_acq, got = ns->writer_token;
    pthread_mutex_unlock(&ns->mu);
    if (!writing) {
        rm_detail("the calling thread does not hold %s for writing", ns->keys.lock);
        return rm_entry_leave(&e, EPERM);
    }
    if (!got) { /* the first ask of this hold: only this thread can end it meanwhile */
        char field[96];
        int n = snprintf(field, sizeof field, "%s:write", self->owner);
        struct rm_endpoint *ep;
        if (!(r = rm_session_enter(&ep))) {
            r = rm_token_take(ep, ns->keys.lock, ns->keys.token, field, (size_t)n, acq, 1, &got);
            rm_session_leave();
        }
        if (r) return rm_entry_leave(&e, r);
        pthread_mutex_lock(&ns->mu);
        if (ns->writer == self->tid && ns->writer_acq == acq) ns->writer_token = got;
        pthread_mutex_unlock(&ns->mu);
    }
    *token = got;
    return rm_entry_leave(&e, 0);
}

RMUTEX_API int rrwlock_hold_deadline(rrwlock_t *l, struct timespec *deadline)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_rw *h = get(l, &r);
    if (!h) return rm_entry_leave(&e, r);
    if (!deadline) {
        rm_detail("the output pointer is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_rwname *ns = h->ns;
    struct rm_thread *self = rm_thread_self();
    pthread_mutex_lock(&ns->mu);
    /* The writer's own lease, or the process's read lease (one for all its
     * readers: the watchdog renews it once a period). */
    int writing = ns->writer == self->tid, reading = !writing && reads_of(ns, self->tid);
    struct rm_watchdog_entry *wd = writing ? ns->writer_wd : reading ? ns->reads_wd : NULL;
    rm_nsec until = writing ? ns->writer_until : ns->reads_until;
    /* (An entry lives while the name has this hold: read under ns->mu.) */
    int lost = wd && rm_watchdog_lost(wd);
    if (wd && !lost) until = rm_watchdog_valid_until(wd);
    pthread_mutex_unlock(&ns->mu);
    if (!writing && !reading) {
        rm_detail("the calling thread holds %s neither for reading nor for writing", ns->keys.lock);
        return rm_entry_leave(&e, EPERM);
    }
    if (lost) {
        rm_detail("the calling thread's %s lease of %s was lost", writing ? "write" : "read",
                  ns->keys.lock);
        return rm_entry_leave(&e, EPERM);
    }
    deadline->tv_sec = (time_t)(until / 1000000000);
    deadline->tv_nsec = (long)(until % 1000000000);
    return rm_entry_leave(&e, 0);
}

/* ---- thread exit, process exit, fork ---- */

/* A thread exits: its reads are given back (they are its own); a write it
 * holds runs out its lease (robust: the next taker gets EOWNERDEAD). */
static void thread_exit(void *arg)
{
    RM_UNUSED(arg);
    struct rm_thread *self = rm_thread_self();
    while (my_reads) {
        struct rm_rdhold *rd = my_reads;
        my_reads = rd->tnext;
        struct rm_rwname *ns = rd->ns;
        struct rm_watchdog_entry *last;
        rm_nsec known_good;
        pthread_mutex_lock(&ns->mu);
        int lost = read_drop_locked(ns, rd, &last, &known_good);
        pthread_mutex_unlock(&ns->mu);
        if (last && rm_watchdog_cancel(last)) lost = 1;
        if (!lost) release(ns, self, 0, rd->acq, known_good);
        free(rd);
        name_put(ns);
    }
    pthread_mutex_lock(&reg.mu);
    for (struct rm_rwname *ns = reg.head; ns; ns = ns->next) {
        pthread_mutex_lock(&ns->mu);
        struct rm_watchdog_entry *wd = NULL;
        if (ns->writer == self->tid) {
            wd = ns->writer_wd;
            ns->writer = 0;
            ns->writer_wd = NULL;
            ns->writer_via->holds--;
            RM_COUNT_SUB(held, 1);
            rm_log("thread %llu exited writing %s; its lease will run out",
                   (unsigned long long)self->tid, ns->keys.lock);
        }
        pthread_mutex_unlock(&ns->mu);
        if (wd) rm_watchdog_cancel(wd); /* (the name's hold reference stays: leaked, tiny) */
    }
    pthread_mutex_unlock(&reg.mu);
}

void rm_rwlock_release_all_at_exit(struct rm_endpoint *ep, rm_nsec deadline)
{
    RM_UNUSED(ep);
    /* The registry's lock is held across these round trips: the process is
     * exiting, and a name must not be freed under us meanwhile. */
    pthread_mutex_lock(&reg.mu);
    for (struct rm_rwname *ns = reg.head; ns && rm_clock_now() < deadline; ns = ns->next) {
        char owner[64];
        pthread_mutex_lock(&ns->mu);
        uint64_t writer = ns->writer, wacq = ns->writer_acq;
        struct rm_watchdog_entry *wwd = ns->writer_wd, *rwd = ns->reads_wd;
        ns->writer_wd = ns->reads_wd = NULL;
        size_t nr = 0;
        uint64_t tids[64], acqs[64];
        for (struct rm_rdhold *rd = ns->readers; rd && nr < 64; rd = rd->next)
            tids[nr] = rd->tid, acqs[nr++] = rd->acq;
        pthread_mutex_unlock(&ns->mu);
        if (wwd) rm_watchdog_cancel(wwd);
        if (rwd) rm_watchdog_cancel(rwd);
        for (size_t i = 0; i <= nr; i++) {
            uint64_t tid = i < nr ? tids[i] : writer, acq = i < nr ? acqs[i] : wacq;
            if (!tid) continue;
            size_t n = rm_thread_owner_of(tid, owner, sizeof owner);
            struct rw_req q;
            long long answer;
            req_make(&q, ns, ep, i < nr ? "rdunlock" : "wrunlock", owner, n, acq, 0, "", 0, 0);
            rm_call_release(ep, RM_SCRIPT_RWLOCK, NKEYS, NARGS, q.argv, q.lens, deadline, deadline,
                            &answer);
        }
    }
    pthread_mutex_unlock(&reg.mu);
}

void rm_rwlock_atfork(int who)
{
    if (who < 0) {
        pthread_mutex_lock(&reg.mu);
        return;
    }
    if (who == 1) {
        /* The child: the parent's holds are not its own (the watchdog
         * forgot their entries); nothing is freed -- a parent thread may
         * have been inside any of it. */
        for (struct rm_rwname *ns = reg.head; ns; ns = ns->next) {
            pthread_mutex_init(&ns->mu, NULL);
            ns->writer = 0;
            ns->writer_wd = ns->reads_wd = NULL;
            ns->readers = NULL;
            ns->nreaders = 0;
            for (struct rm_rw *h = ns->handles; h; h = h->next) h->users = h->holds = 0;
        }
        my_reads = NULL;
    }
    pthread_mutex_unlock(&reg.mu);
}
