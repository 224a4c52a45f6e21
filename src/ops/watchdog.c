/* watchdog.c -- renews the leases of every hold of the process.
 *
 * DESIGN
 * ------
 * One thread per process (and one more per primary of a cluster: struct
 * link).  Holds taken with lease 0 register an entry: lock key, owner-mark
 * key (robust holds only), owner field, lease; so do queued fair waiters
 * and condition waiters (their liveness in the queue is a lease too).  Each entry is due for
 * renewal lease/3 after the send time of its last successful acquire or
 * renewal.  When the thread wakes it takes every entry due within a small
 * window (lease/12) -- so entries acquired close together are renewed
 * together -- and renews them with renew.lua, up to BATCH entries per
 * script call, every call for one endpoint pipelined on the watchdog's own
 * connection.  A last call left part-filled is topped up with entries due
 * within twice the window, so groups of holds taken further apart merge
 * over a few periods into full calls.  The watchdog does not borrow from
 * the command pool (but to follow a migrating slot, below): a pool drained
 * by callers cannot delay a renewal.  A cluster's batches are per slot,
 * and each primary has a connection and a thread of its own (struct
 * link).
 *
 * The answer for each entry is 1 (renewed: the lease now runs from the
 * send time of that call) or 0 (the owner's field is gone: expired,
 * deleted, force-unlocked, flushed, server restarted).  A 0 marks the hold
 * lost at once.  A failed call (connection error, timeout, error reply) is
 * retried soon (lease/10, at most 250 ms) until the lease would have run
 * out -- last successful send + lease -- and then the hold is marked lost
 * too.  Lost holds get the lost-lock callback, on this thread, with no lock
 * held; their owner's unlock returns EPERM.  (An unlock that finds its
 * hold gone before the watchdog did runs the callback itself:
 * rm_watchdog_report_lost.)
 *
 * Restarts.  A server that restarts without its data wipes every hold on
 * it, and nothing would tell before the next renewal, lease/3 later.  But
 * it closes every connection first, the watchdog's among them: while it
 * sleeps, the thread polls its idle connections (an eventfd wakes it for
 * new work), and one that becomes readable -- it reads every reply it
 * asks for, so only a close can do that -- makes it renew every hold and
 * waiter that server serves at once (so does a close in the middle of a
 * round trip: a server shutting down with replicas pauses writes first),
 * and again every retry delay while the server is away: a wiped hold is
 * reported within a retry delay (250 ms at most) of the server answering
 * again, whatever the lease.  Until that renewal the holds are
 * "unverified": a cached lock serves no local hold from one, and its
 * unlock asks Redis (cache.c).  A dial that fails makes them unverified as
 * well: the restart may come while a renewal is on the wire.  A hold on a
 * server the watchdog has no connection to yet is renewed at once, which
 * makes one.
 *
 * Migrating slots (Cluster).  A renewal batch answered ASK (its keys moved
 * to the importing node), MOVED or TRYAGAIN (some keys moved, some not)
 * follows its keys in the same round -- the whole batch through rm_call,
 * which sends ASKING, then each entry alone -- so that a slot left open
 * longer than what is left of a lease loses no hold.
 *
 * A queued waiter's renewal that finds it no longer queued (granted, or
 * purged as dead because its renewals came late) wakes its thread to look
 * (rm_watchdog_set_wake): a fair waiter then confirms its grant or takes
 * its place again, so it need not ask Redis often on its own.
 *
 * Ordering with unlock: rm_watchdog_cancel() takes an entry out before the
 * release is sent.  A renewal already on the wire can still reach Redis
 * after the release; it finds no owner field and does nothing (renew.lua
 * renews only a hold that still has the owner's field), and its answer is
 * dropped because the entry is cancelled.  So no renewal outlives an unlock.
 *
 * The same thread also runs deferred calls: releases that a caller could
 * not complete in its own time (Redis unreachable at unlock, or an acquire
 * whose reply was lost when its caller had to give up).  They are retried
 * until they answer or until the hold's lease would have run out anyway.
 * And it makes periodic calls for the modules above it: a periodic entry
 * has its owner's build and done functions, the call built when it is due
 * (with the lock held: the holder registry lists the holds of now,
 * rm_watchdog_each_hold_locked) and sent with the renewals of its node.
 * The holder registry's announcements are one (registry.c): its hook,
 * told of every new hold (rm_watchdog_on_hold), makes or pokes it, and so
 * does a waiting thread (rm_watchdog_periodic_poke) for the moment its wait
 * is to be announced; a build with nothing new to send says when to look
 * again (call->again) or goes dormant.
 *
 * Entries are a tagged union: what every kind has (the list, the call's
 * arguments, the schedule), then each kind's own (KIND_HOLD, KIND_WAITER,
 * KIND_DEFERRED, KIND_PERIODIC).
 *
 * The thread blocks every signal and is started on first use. */
#include "watchdog.h"
#include "ack.h"
#include "call.h"
#include "conn.h"
#include "keys.h"
#include "names.h"
#include "endpoint.h"
#include "node.h"
#include "script.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define BATCH 400
#define MAXARGS RM_WATCHDOG_MAXARGS

enum { KIND_HOLD = 'h', KIND_WAITER = 'w', KIND_DEFERRED = 'd', KIND_PERIODIC = 'p' };

/* One thing the thread does: what every kind has, then a tagged union (by
 * kind) of what is each kind's own. */
struct rm_watchdog_entry {
    struct rm_watchdog_entry *next, *prev;
    struct rm_endpoint *ep;
    int slot;                 /* of argv[0]: one script call serves one slot */
    char kind;
    char wire;                /* a renewed entry's kind in renew.lua ('h', 'l', 'w') */
    int nkeys, argc;          /* argv: KEYS then ARGV (a periodic call: its key) */
    const char *argv[MAXARGS];
    size_t lens[MAXARGS];
    unsigned long lease_ms;   /* renewed entries (KIND_HOLD, KIND_WAITER) */
    rm_nsec next_due;
    rm_nsec window;           /* renewed up to this much early, to batch */
    int inflight, cancelled, cb_running, use_eval;
    rm_nsec repoke;          /* periodic: a poke that came while a call was in flight (0: none) */
    _Atomic int lost;         /* a hold found gone; any entry: done with */
    union {
        struct {              /* KIND_HOLD */
            _Atomic rm_nsec valid_until; /* last good send + lease (read lock-free) */
            _Atomic int unverified; /* its server's connection dropped since the last
                                       renewal: a restart may have wiped it */
            rm_nsec acquired; /* when the acquiring call was sent */
            int parked;       /* a parked cache's hold: taking it over is allowed */
            int by_name;      /* a read-write lock's: the callback gets m NULL */
            int name_arg;     /* the argv the callback names (a semaphore's: its name) */
            rmutex_t *m;      /* for the lost-lock callback (NULL: nobody to tell) */
            struct rm_names_stats *stats; /* its name's counters (NULL: none) */
            int named;        /* stats was looked up */
        } hold;
        struct {              /* KIND_WAITER */
            void (*wake)(void *); /* told when its renewal finds it gone */
            void *wake_arg;
        } waiter;
        struct {              /* KIND_DEFERRED */
            int script;
            rm_nsec give_up_at;
        } deferred;
        struct {              /* KIND_PERIODIC */
            const struct rm_watchdog_periodic *fns;
            void *arg;
            struct rm_watchdog_call call; /* the call on the wire, built when collected */
        } periodic;
    } u;
    char buf[];
};

/* The watchdog's connection to one node.  A cluster's primaries are each
 * served by a thread of their own (the link's), so that a slow or failing
 * primary delays nobody else's renewals; a plain server's and Sentinel's
 * one primary are served by the watchdog thread itself. */
struct link {
    struct link *next;
    struct rm_node *node;
    struct rm_conn *conn;
    unsigned failures;
    int started, busy;           /* its thread runs; it has work (wd.mu) */
    int connected;               /* conn is open, as of its last round trip (wd.mu:
                                    conn itself is its round trip's thread's) */
    int dropped;                 /* conn broke in the middle of a round trip (its
                                    round trip's thread's, like conn) */
    pthread_t thread;
    pthread_cond_t cv;           /* work was handed to it, or stop */
    struct rm_watchdog_entry **work;
    int *res;
    size_t nwork, holds, cap;
    rm_nsec budget;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* new entries, cancels, stop */
    pthread_cond_t cb_done;   /* a callback finished */
    int started, stop;
    pthread_t thread;
    struct rm_watchdog_entry *head; /* every live entry */
    struct link *links;
    rmutex_lost_fn cb;
    void *cb_arg;
    rm_nsec planned;          /* when the thread means to wake */
    int sleeping;             /* in poll(): wake it through wake_fd */
    int wake_fd;              /* an eventfd; -1: none, sleep on cv */
    struct pollfd *pfd;       /* the thread's poll set: wake_fd, idle links */
    size_t pfd_cap;
    struct rm_watchdog_entry *periodic; /* the last periodic entry found */
    void (*on_hold)(struct rm_endpoint *ep, const char *owner, size_t owner_len);
    uint32_t rng;
} wd = { .mu = PTHREAD_MUTEX_INITIALIZER, .planned = RM_FOREVER, .wake_fd = -1 };

static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
static void init_cvs(void)
{
    rm_clock_cond_init(&wd.cv);
    rm_clock_cond_init(&wd.cb_done);
}

RMUTEX_API int rmutex_set_lost_callback(rmutex_lost_fn fn, void *arg)
{
    pthread_mutex_lock(&wd.mu);
    wd.cb = fn;
    wd.cb_arg = arg;
    pthread_mutex_unlock(&wd.mu);
    return 0;
}

/* Renewed entries share renew.lua calls; the others are calls of their own. */
static int renewed(const struct rm_watchdog_entry *e)
{
    return e->kind == KIND_HOLD || e->kind == KIND_WAITER;
}

static rm_nsec window(const struct rm_watchdog_entry *e) { return e->window; }

/* Renewed entries are due every lease/3; one woken for an earlier entry
 * takes them along up to a quarter of that early. */
static void schedule(struct rm_watchdog_entry *e, rm_nsec due, rm_nsec period)
{
    e->next_due = due;
    e->window = period / 4;
}

static rm_nsec retry_delay(const struct rm_watchdog_entry *e)
{
    rm_nsec d = renewed(e) ? RM_MSEC(e->lease_ms) / 10 : RM_MSEC(250);
    return d > RM_MSEC(250) ? RM_MSEC(250) : d;
}

static void *wd_main(void *arg);
static struct link *link_find(const struct rm_node *node);
static void after_round_trip_locked(struct link *l);

/* Make the thread look again now (wd.mu held). */
static void wake_locked(void)
{
    if (wd.wake_fd >= 0) {
        if (!wd.sleeping) return; /* it scans every entry before it sleeps */
        uint64_t one = 1;
        while (write(wd.wake_fd, &one, sizeof one) < 0 && errno == EINTR) {}
        wd.sleeping = 0;
        return;
    }
    pthread_cond_signal(&wd.cv);
}

/* Link e in and make sure the thread will look at it in time. */
static void add_locked(struct rm_watchdog_entry *e)
{
    e->prev = NULL;
    e->next = wd.head;
    if (wd.head) wd.head->prev = e;
    wd.head = e;
    if (!wd.started) {
        sigset_t all, old;
        if (wd.wake_fd < 0) wd.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (!pthread_create(&wd.thread, NULL, wd_main, NULL)) wd.started = 1;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        /* No thread (out of resources): the hold is still correct, only not
         * renewed; the next add tries again. */
    }
    if (e->next_due < wd.planned) wake_locked();
}

static void unlink_locked(struct rm_watchdog_entry *e)
{
    if (e->prev) e->prev->next = e->next;
    else wd.head = e->next;
    if (e->next) e->next->prev = e->prev;
    e->next = e->prev = NULL;
}

/* Allocate an entry holding copies of argv. */
static struct rm_watchdog_entry *entry_new(int argc, const char *const *argv, const size_t *lens)
{
    size_t total = 0;
    for (int i = 0; i < argc; i++) total += lens[i] + 1;
    /* malloc, not calloc: glibc's calloc bypasses the thread cache, and an
     * entry is made and freed on every lock and unlock. */
    struct rm_watchdog_entry *e = malloc(sizeof *e + total);
    if (!e) return NULL;
    memset(e, 0, sizeof *e);
    char *p = e->buf;
    for (int i = 0; i < argc; i++) {
        memcpy(p, argv[i], lens[i]);
        p[lens[i]] = 0;
        e->argv[i] = p;
        e->lens[i] = lens[i];
        p += lens[i] + 1;
    }
    e->argc = argc;
    return e;
}

static struct rm_watchdog_entry *add(struct rm_watchdog_entry *e)
{
    pthread_once(&cv_once, init_cvs);
    pthread_mutex_lock(&wd.mu);
    add_locked(e);
    pthread_mutex_unlock(&wd.mu);
    return e;
}

/* ---- periodic calls (the holder registry's announcements: registry.c) ---- */

void rm_watchdog_on_hold(void (*fn)(struct rm_endpoint *ep, const char *owner, size_t owner_len))
{
    pthread_mutex_lock(&wd.mu);
    wd.on_hold = fn;
    pthread_mutex_unlock(&wd.mu);
}

struct rm_watchdog_entry *rm_watchdog_periodic_find_locked(const struct rm_endpoint *ep,
                                                           const struct rm_watchdog_periodic *fns)
{
    /* Every hold asks (through the hook), so the last one found is
     * remembered: the walk is over every entry, queued waiters' too (a
     * deep queue has thousands), under wd.mu.  Periodic entries live
     * until the watchdog stops. */
    struct rm_watchdog_entry *p = wd.periodic;
    if (p && p->ep == ep && p->u.periodic.fns == fns) return p;
    for (struct rm_watchdog_entry *e = wd.head; e; e = e->next)
        if (e->kind == KIND_PERIODIC && e->ep == ep && e->u.periodic.fns == fns)
            return wd.periodic = e;
    return NULL;
}

struct rm_watchdog_entry *rm_watchdog_periodic_locked(struct rm_endpoint *ep, const char *key,
                                                      size_t key_len,
                                                      const struct rm_watchdog_periodic *fns,
                                                      void *arg, rm_nsec due)
{
    struct rm_watchdog_entry *e = entry_new(1, &key, &key_len);
    if (!e) return NULL;
    e->ep = ep;
    e->slot = rm_endpoint_clustered(ep) ? rm_keys_slot(key, key_len) : 0;
    e->kind = KIND_PERIODIC;
    e->nkeys = 1;
    e->u.periodic.fns = fns;
    e->u.periodic.arg = arg;
    e->next_due = due;
    add_locked(e);
    if (fns->start) fns->start(arg);
    return wd.periodic = e;
}

void rm_watchdog_poke_locked(struct rm_watchdog_entry *e, rm_nsec due)
{
    if (e->inflight) { /* the call out now may not carry what asked: kept for its end */
        if (!e->repoke || due < e->repoke) e->repoke = due;
        return;
    }
    if (e->next_due <= due) return;
    e->next_due = due;
    e->window = 0;
    if (due < wd.planned) wake_locked();
}

void rm_watchdog_periodic_poke(struct rm_endpoint *ep, const char *key, size_t key_len,
                               const struct rm_watchdog_periodic *fns, rm_nsec due)
{
    pthread_once(&cv_once, init_cvs);
    pthread_mutex_lock(&wd.mu);
    struct rm_watchdog_entry *e = rm_watchdog_periodic_find_locked(ep, fns);
    if (e) rm_watchdog_poke_locked(e, due);
    else rm_watchdog_periodic_locked(ep, key, key_len, fns, NULL, due);
    pthread_mutex_unlock(&wd.mu);
}

size_t rm_watchdog_each_hold_locked(const struct rm_endpoint *ep, size_t max,
                                    void (*fn)(void *arg, const char *lock, size_t len,
                                               rm_nsec acquired),
                                    void *arg)
{
    size_t n = 0;
    for (struct rm_watchdog_entry *e = wd.head; e && n < max; e = e->next) {
        if (e->kind != KIND_HOLD || e->ep != ep || e->lost || e->cancelled) continue;
        if (fn) fn(arg, e->argv[e->u.hold.name_arg], e->lens[e->u.hold.name_arg], e->u.hold.acquired);
        n++;
    }
    return n;
}

/* Build e's call, for now: 0 when there is nothing to send (dormant until
 * poked).  A call the server answered NOSCRIPT is still built (apply): it
 * goes again as it was, with the script's body -- its owner has already
 * counted it as sent, and would otherwise leave what it said unsaid until
 * its next period (a server restarted, flushed or new after a shutdown). */
static int periodic_build_locked(struct rm_watchdog_entry *e, rm_nsec now)
{
    if (e->u.periodic.call.argv) return 1;
    memset(&e->u.periodic.call, 0, sizeof e->u.periodic.call);
    if (e->u.periodic.fns->build(e->u.periodic.arg, e->ep, e->argv[0], e->lens[0], now,
                                 &e->u.periodic.call))
        return 1;
    e->next_due = e->u.periodic.call.again ? e->u.periodic.call.again : RM_FOREVER;
    e->window = 0;
    return 0;
}

static void periodic_free_call(struct rm_watchdog_entry *e)
{
    free(e->u.periodic.call.mem);
    memset(&e->u.periodic.call, 0, sizeof e->u.periodic.call);
}

/* e, a new hold's entry: add it, renewing at once when the watchdog has
 * no connection to its server yet (the first hold there, or the last one
 * dropped: the renewal makes one -- the connection whose closing tells of
 * a restart, sleep_locked), and tell the hook. */
static struct rm_watchdog_entry *add_hold(struct rm_watchdog_entry *e, const char *owner,
                                          size_t owner_len)
{
    pthread_once(&cv_once, init_cvs);
    pthread_mutex_lock(&wd.mu);
    struct rm_node *at = rm_endpoint_route(e->ep, e->slot, 0);
    struct link *l = at ? link_find(at) : NULL;
    if (!l || !l->connected) e->next_due = rm_clock_now(), e->window = 0;
    add_locked(e);
    if (wd.on_hold) wd.on_hold(e->ep, owner, owner_len);
    pthread_mutex_unlock(&wd.mu);
    return e;
}

static void hold_init(struct rm_watchdog_entry *e, struct rm_endpoint *ep, char wire, int nkeys,
                      unsigned long lease_ms, rm_nsec valid_until, rm_nsec due, rmutex_t *m,
                      int by_name)
{
    e->u.hold.by_name = by_name;
    e->ep = ep;
    e->slot = rm_endpoint_clustered(ep) ? rm_keys_slot(e->argv[0], e->lens[0]) : 0;
    e->kind = KIND_HOLD;
    e->wire = wire;
    e->nkeys = nkeys;
    e->lease_ms = lease_ms;
    e->u.hold.m = m;
    e->u.hold.valid_until = valid_until;
    e->u.hold.acquired = valid_until - RM_MSEC(lease_ms);
    schedule(e, due, due - rm_clock_now());
}

struct rm_watchdog_entry *rm_watchdog_hold(struct rm_endpoint *ep, const char *lock,
                                           const char *mark, int robust, const char *owner,
                                           size_t owner_len, unsigned long lease_ms,
                                           rm_nsec valid_until, rm_nsec due, rmutex_t *m,
                                           int by_name)
{
    char lease[RM_CONN_UINT];
    /* A robust hold's owner mark is renewed with it.  Other holds name no
     * mark: a script call that names a key missing on a migrating slot's
     * source gets TRYAGAIN, and the renewal must go on through a migration. */
    const char *argv[] = { lock, mark, owner, lease };
    size_t lens[] = { strlen(lock), robust ? strlen(mark) : 0, owner_len,
                      rm_conn_uint(lease, lease_ms) };
    int skip = !robust;
    if (skip) argv[1] = lock, lens[1] = lens[0]; /* argv + 1: lock, owner, lease */
    struct rm_watchdog_entry *e = entry_new(4 - skip, argv + skip, lens + skip);
    if (!e) return NULL;
    hold_init(e, ep, robust ? 'h' : 'l', 2 - skip, lease_ms, valid_until, due, m, by_name);
    return add_hold(e, owner, owner_len);
}

struct rm_watchdog_entry *rm_watchdog_reads(struct rm_endpoint *ep, const char *lock,
                                            const char *readers, const char *holds,
                                            const char *timeout, const char *uuid,
                                            size_t uuid_len, unsigned long lease_ms,
                                            rm_nsec valid_until, rm_nsec due)
{
    char lease[RM_CONN_UINT];
    const char *argv[] = { lock, readers, holds, timeout, uuid, lease };
    size_t lens[] = { strlen(lock), strlen(readers), strlen(holds), strlen(timeout), uuid_len,
                      rm_conn_uint(lease, lease_ms) };
    struct rm_watchdog_entry *e = entry_new(6, argv, lens);
    if (!e) return NULL;
    hold_init(e, ep, 'r', 4, lease_ms, valid_until, due, NULL, 1);
    /* (The registry names the process by uuid: an owner "<uuid>:<thread>".) */
    char owner[128];
    int n = snprintf(owner, sizeof owner, "%.*s:0", (int)uuid_len, uuid);
    return add_hold(e, owner, n > 0 && (size_t)n < sizeof owner ? (size_t)n : 0);
}

struct rm_watchdog_entry *rm_watchdog_permits(struct rm_endpoint *ep, const char *name,
                                              const char *leases, const char *lost,
                                              const char *sem, const char *uuid,
                                              size_t uuid_len, unsigned long lease_ms,
                                              rm_nsec valid_until, rm_nsec due)
{
    char lease[RM_CONN_UINT];
    /* (renew.lua reads KEYS leases, lost, sem and ARGV uuid, lease, name:
     * the name is there for the lost-lock callback only.) */
    const char *argv[] = { leases, lost, sem, uuid, lease, name };
    size_t lens[] = { strlen(leases), strlen(lost), strlen(sem), uuid_len,
                      rm_conn_uint(lease, lease_ms), strlen(name) };
    struct rm_watchdog_entry *e = entry_new(6, argv, lens);
    if (!e) return NULL;
    hold_init(e, ep, 's', 3, lease_ms, valid_until, due, NULL, 1);
    e->u.hold.name_arg = 5;
    char owner[128];
    int n = snprintf(owner, sizeof owner, "%.*s:0", (int)uuid_len, uuid);
    return add_hold(e, owner, n > 0 && (size_t)n < sizeof owner ? (size_t)n : 0);
}

struct rm_watchdog_entry *rm_watchdog_waiter(struct rm_endpoint *ep, const char *alive,
                                 const char *queue, const char *state, const char *extra,
                                 const char *waiter, size_t waiter_len, unsigned long lease_ms)
{
    char lease[24];
    const char *argv[] = { alive, queue, state, extra, waiter, lease };
    size_t lens[] = { strlen(alive), strlen(queue), strlen(state), extra ? strlen(extra) : 0,
                      waiter_len, (size_t)snprintf(lease, sizeof lease, "%lu", lease_ms) };
    int nkeys = extra ? 4 : 3;
    if (!extra) { /* alive, queue, state, waiter, lease */
        argv[3] = waiter, lens[3] = waiter_len;
        argv[4] = lease, lens[4] = lens[5];
    }
    struct rm_watchdog_entry *e = entry_new(nkeys + 2, argv, lens);
    if (!e) return NULL;
    e->ep = ep;
    e->slot = rm_endpoint_clustered(ep) ? rm_keys_slot(e->argv[0], e->lens[0]) : 0;
    e->kind = KIND_WAITER;
    e->wire = extra ? 'v' : 'w';
    e->nkeys = nkeys;
    e->lease_ms = lease_ms;
    schedule(e, rm_clock_now() + RM_MSEC(lease_ms) / 3, RM_MSEC(lease_ms) / 3);
    return add(e);
}

int rm_watchdog_cancel(struct rm_watchdog_entry *e)
{
    pthread_mutex_lock(&wd.mu);
    while (e->cb_running) pthread_cond_wait(&wd.cb_done, &wd.mu);
    int lost = e->lost;
    if (e->inflight) {
        e->cancelled = 1; /* the thread frees it when the answer is in */
    } else {
        unlink_locked(e);
        free(e);
    }
    pthread_mutex_unlock(&wd.mu);
    return lost;
}

void rm_watchdog_set_user(struct rm_watchdog_entry *e, rmutex_t *m)
{
    pthread_mutex_lock(&wd.mu);
    e->u.hold.m = m;
    pthread_mutex_unlock(&wd.mu);
}

void rm_watchdog_set_wake(struct rm_watchdog_entry *e, void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&wd.mu);
    e->u.waiter.wake = fn;
    e->u.waiter.wake_arg = arg;
    pthread_mutex_unlock(&wd.mu);
}

void rm_watchdog_set_parked(struct rm_watchdog_entry *e, int parked)
{
    pthread_mutex_lock(&wd.mu);
    e->u.hold.parked = parked;
    pthread_mutex_unlock(&wd.mu);
}

int rm_watchdog_lost(const struct rm_watchdog_entry *e) { return atomic_load(&e->lost); }

int rm_watchdog_unverified(const struct rm_watchdog_entry *e)
{
    return atomic_load(&e->u.hold.unverified);
}

rm_nsec rm_watchdog_valid_until(const struct rm_watchdog_entry *e)
{
    return atomic_load(&e->u.hold.valid_until);
}

void rm_watchdog_report_lost(rmutex_t *m, const char *name)
{
    RM_COUNT(locks_lost);
    struct rm_names_stats *ns = rm_names_find(name);
    if (ns) RM_NAMES_COUNT(ns, locks_lost);
    rm_log("hold of %s lost (found at its unlock)", name);
    pthread_mutex_lock(&wd.mu);
    rmutex_lost_fn cb = wd.cb;
    void *cb_arg = wd.cb_arg;
    pthread_mutex_unlock(&wd.mu);
    if (cb) cb(m, name, cb_arg);
}

void rm_watchdog_defer(struct rm_endpoint *ep, int script, int nkeys, int argc,
                 const char *const *argv, const size_t *lens, rm_nsec give_up_at)
{
    RM_ASSERT(argc <= MAXARGS);
    struct rm_watchdog_entry *e = entry_new(argc, argv, lens);
    if (!e) return; /* the lease will run out by itself */
    e->ep = ep;
    e->slot = rm_endpoint_clustered(ep) ? rm_keys_slot(e->argv[0], e->lens[0]) : 0;
    e->kind = KIND_DEFERRED;
    e->u.deferred.script = script;
    e->nkeys = nkeys;
    e->u.deferred.give_up_at = give_up_at;
    e->next_due = rm_clock_now();
    RM_COUNT(deferred_releases);
    add(e);
}

/* ---- the thread ---- */

static struct link *link_find(const struct rm_node *node)
{
    for (struct link *l = wd.links; l; l = l->next)
        if (l->node == node) return l;
    return NULL;
}

static struct link *link_for(struct rm_node *node)
{
    struct link *l = link_find(node);
    if (l) return l;
    if (!(l = calloc(1, sizeof *l))) return NULL;
    l->node = node;
    rm_clock_cond_init(&l->cv);
    l->next = wd.links;
    wd.links = l;
    return l;
}

static int by_slot(const void *a, const void *b)
{
    const struct rm_watchdog_entry *x = *(struct rm_watchdog_entry *const *)a;
    const struct rm_watchdog_entry *y = *(struct rm_watchdog_entry *const *)b;
    return (x->slot > y->slot) - (x->slot < y->slot);
}

/* How many of e[0..n) from the first on share its slot, BATCH at most. */
static int batch_len(struct rm_watchdog_entry **e, int n)
{
    int k = 1;
    while (k < n && k < BATCH && e[k]->slot == e[0]->slot) k++;
    return k;
}

/* One renew.lua call's arguments for entries e[0..cnt) (one slot). */
struct batch {
    const char **argv;
    size_t *lens;
    int nkeys, argc;
    char count[16], kinds[BATCH];
};

static int batch_make(struct rm_watchdog_entry *const *e, int cnt, struct batch *b)
{
    int argc = 1;
    b->nkeys = 0;
    for (int i = 0; i < cnt; i++) {
        b->nkeys += e[i]->nkeys;
        argc += e[i]->argc + 1;
    }
    b->argv = malloc(sizeof *b->argv * (size_t)argc);
    b->lens = malloc(sizeof *b->lens * (size_t)argc);
    if (!b->argv || !b->lens) {
        free(b->argv);
        free(b->lens);
        return ENOMEM;
    }
    int k = 0;
    for (int i = 0; i < cnt; i++)
        for (int j = 0; j < e[i]->nkeys; j++) b->argv[k] = e[i]->argv[j], b->lens[k++] = e[i]->lens[j];
    b->argv[k] = b->count, b->lens[k++] = (size_t)snprintf(b->count, sizeof b->count, "%d", cnt);
    for (int i = 0; i < cnt; i++) {
        const struct rm_watchdog_entry *x = e[i];
        b->kinds[i] = x->wire;
        b->argv[k] = &b->kinds[i], b->lens[k++] = 1;
        for (int j = x->nkeys; j < x->argc; j++) b->argv[k] = x->argv[j], b->lens[k++] = x->lens[j];
    }
    b->argc = k;
    return 0;
}

static void batch_free(struct batch *b)
{
    free(b->argv);
    free(b->lens);
}

/* Renew e[0..cnt) through the command pool with rm_call, which follows
 * MOVED and ASK (sending ASKING), into res.  Returns 0, or rm_call's
 * status (RM_E_TRANSIENT for TRYAGAIN: some of the keys moved, others
 * not yet). */
static int renew_routed(struct rm_watchdog_entry *const *e, int cnt, int *res, rm_nsec deadline)
{
    struct batch b;
    if (batch_make(e, cnt, &b)) return ENOMEM;
    redisReply *r;
    int st = rm_call(e[0]->ep, RM_SCRIPT_RENEW, b.nkeys, b.argc, b.argv, b.lens, deadline, 0, &r, NULL);
    batch_free(&b);
    if (st) return st;
    if (r->type == REDIS_REPLY_ARRAY && (int)r->elements == cnt)
        for (int i = 0; i < cnt; i++)
            res[i] = r->element[i]->type == REDIS_REPLY_INTEGER ? (int)r->element[i]->integer : -1;
    freeReplyObject(r);
    return 0;
}

/* A batch of one slot was answered with a redirection or TRYAGAIN: its
 * slot is migrating, or moved.  Renew it now where the keys are -- the
 * whole batch first (ASK: on the importing node, after ASKING), then, if
 * some of its keys have moved and others not (TRYAGAIN), each entry on
 * its own -- instead of retrying at the old node until the migration
 * ends: a migration may stay open longer than what is left of a lease.
 * What still fails is retried as any failed renewal.  (Through the
 * command pool: this path is taken during migrations only.) */
static void follow_migration(struct rm_watchdog_entry *const *e, int cnt, int *res,
                             rm_nsec deadline)
{
    RM_COUNT(cluster_retries);
    int st = renew_routed(e, cnt, res, deadline);
    rm_log("renewal batch of slot %d followed its keys: %s", e[0]->slot,
           st ? rmutex_detail() : "renewed");
    if (st != RM_E_TRANSIENT || cnt == 1) return;
    for (int i = 0; i < cnt && rm_clock_now() < deadline; i++) renew_routed(e + i, 1, res + i, deadline);
}

/* One renewal round trip for one node: the due entries in e[0..n)
 * (renewed entries first, in batches of one slot each -- a script call may
 * touch one slot only; then each KIND_DEFERRED as its own call).  Fills
 * res[i]: 1/0 from Redis, -1 failed, -2 NOSCRIPT.  A batch answered with a
 * redirection or TRYAGAIN follows its keys at once (follow_migration). */
enum { RES_FOLLOW = -3 }; /* (res: a batch to follow, once the pipeline is read) */

static void exchange(struct link *l, struct rm_watchdog_entry **e, int n, int *res, rm_nsec deadline)
{
    for (int i = 0; i < n; i++) res[i] = -1;
    if (!l->conn) {
        int r = rm_conn_dial(&l->node->addr, "wd", deadline, &l->conn);
        struct rm_reach reach = rm_node_reach(l->node);
        if (r) {
            l->conn = NULL;
            l->failures++;
            rm_log("watchdog cannot connect: %s", rmutex_detail());
            if (r == RM_E_UNSENT) reach.fn(reach.arg, 0);
            rm_endpoint_suspect(e[0]->ep, l->node);
            return;
        }
        reach.fn(reach.arg, 1);
        if (l->failures) RM_COUNT(reconnects);
        l->failures = 0;
    }
    struct rm_conn *c = l->conn;
    int calls = 0;
    int nholds = 0;
    while (nholds < n && renewed(e[nholds])) nholds++;
    qsort(e, (size_t)nholds, sizeof *e, by_slot);
    for (int b = 0, cnt; b < nholds; b += cnt) {
        struct batch bt;
        cnt = batch_len(e + b, nholds - b);
        if (batch_make(e + b, cnt, &bt)) goto drop;
        rm_script_append(c, RM_SCRIPT_RENEW, bt.nkeys, bt.argc, bt.argv, bt.lens, e[b]->use_eval);
        batch_free(&bt);
        calls++;
    }
    for (int i = nholds; i < n; i++) {
        const struct rm_watchdog_entry *x = e[i];
        if (x->kind == KIND_PERIODIC) {
            const struct rm_watchdog_call *pc = &x->u.periodic.call;
            rm_script_append(c, pc->script, pc->nkeys, pc->argc, pc->argv, pc->lens, x->use_eval);
        } else {
            rm_script_append(c, x->u.deferred.script, x->nkeys, x->argc, x->argv, x->lens,
                             x->use_eval);
        }
    }
    struct rm_ack ack = rm_ack_want(atomic_load(&l->node->replicas));
    if (ack.wait_for && nholds) rm_ack_append(c, &ack);
    if (rm_conn_flush(c, deadline)) goto drop;
    RM_COUNT_ADD(renewal_calls, (uint64_t)calls);
    RM_COUNT(renewal_rounds);

    for (int b = 0, cnt; b < nholds; b += cnt) {
        cnt = batch_len(e + b, nholds - b);
        redisReply *r;
        int ask;
        if (rm_conn_read(c, deadline, &r)) goto drop;
        if (r->type == REDIS_REPLY_ARRAY && (int)r->elements == cnt) {
            for (int i = 0; i < cnt; i++)
                res[b + i] = r->element[i]->type == REDIS_REPLY_INTEGER ? (int)r->element[i]->integer : -1;
        } else if (rm_conn_reply_is_noscript(r)) {
            for (int i = 0; i < cnt; i++) res[b + i] = -2;
        } else if (rm_endpoint_redirect(e[b]->ep, r, l->node, &ask) ||
                   rm_conn_reply_status(r) == RM_E_TRANSIENT) {
            rm_log("renewal batch of slot %d answered %.*s", e[b]->slot, (int)r->len, r->str);
            res[b] = RES_FOLLOW;
        } else {
            rm_log("renewal failed: %s", rmutex_detail());
        }
        freeReplyObject(r);
    }
    for (int i = nholds; i < n; i++) {
        redisReply *r;
        int ask;
        if (rm_conn_read(c, deadline, &r)) goto drop;
        if (r->type == REDIS_REPLY_INTEGER) res[i] = (int)r->integer;
        /* A release that answers the grant it made to a thread of ours
         * (call.h): done; the multiplexer brings that thread its message. */
        else if (r->type == REDIS_REPLY_STRING && e[i]->kind == KIND_DEFERRED) res[i] = 1;
        else if (rm_conn_reply_is_noscript(r)) res[i] = -2;
        else if (rm_endpoint_redirect(e[i]->ep, r, l->node, &ask)) {
        } else if (r->type == REDIS_REPLY_ERROR) {
            rm_log("deferred call on %s answered %.*s", e[i]->argv[0], (int)r->len, r->str);
        } else {
            rm_log("deferred call on %s answered a reply of type %d", e[i]->argv[0], r->type);
        }
        freeReplyObject(r);
    }
    if (ack.wait_for && nholds && rm_ack_read(c, &ack) < 0) goto drop;
    for (int b = 0, cnt; b < nholds; b += cnt) {
        cnt = batch_len(e + b, nholds - b);
        if (res[b] != RES_FOLLOW) continue;
        res[b] = -1;
        follow_migration(e + b, cnt, res + b, deadline);
    }
    return;
drop:
    for (int i = 0; i < n; i++)
        if (res[i] == RES_FOLLOW) res[i] = -1;
    rm_log("watchdog connection dropped: %s", rmutex_detail());
    rm_endpoint_suspect(e[0]->ep, l->node);
    rm_conn_close(l->conn);
    l->conn = NULL;
    l->failures++;
    l->dropped = 1;
}

/* A hold's name's counters (names.c; a mutex's: its key is its name),
 * looked up at its first renewal or loss; NULL when the name has none. */
static struct rm_names_stats *name_stats(struct rm_watchdog_entry *e)
{
    if (!e->u.hold.named) {
        e->u.hold.stats = rm_names_find(e->argv[0]);
        e->u.hold.named = 1;
    }
    return e->u.hold.stats;
}

/* Apply the answer res for e, sent at sent.  Returns 1 if e is newly lost. */
static int apply(struct rm_watchdog_entry *e, int res, rm_nsec sent, rm_nsec now)
{
    e->inflight = 0;
    /* An answered EVAL has put the script in the server's cache again:
     * the next call goes as EVALSHA (not the whole body for the entry's
     * lifetime). */
    if (res >= 0) e->use_eval = 0;
    if (e->kind == KIND_PERIODIC) {
        if (res == -2) { /* the same call again at once, as EVAL (periodic_build_locked) */
            e->use_eval = 1;
            RM_COUNT(script_loads);
            e->next_due = now;
            e->window = 0;
            return 0;
        }
        periodic_free_call(e);
        /* Failed (unreachable, or an ACL that refuses it): its owner says
         * when to try again; nothing depends on it. */
        e->next_due = e->u.periodic.fns->done(e->u.periodic.arg, res >= 0, sent, now);
        if (e->repoke && e->repoke < e->next_due) e->next_due = e->repoke;
        e->repoke = 0;
        e->window = 0;
        return 0;
    }
    if (res == -2) {
        e->use_eval = 1;
        e->next_due = now;
        RM_COUNT(script_loads);
        return 0;
    }
    if (e->kind == KIND_DEFERRED) {
        if (res >= 0 || now >= e->u.deferred.give_up_at) {
            rm_log("deferred release %s: %s", e->argv[0], res >= 0 ? "done" : "given up");
            e->cancelled = 1;
        } else {
            e->next_due = now + retry_delay(e);
            e->window = 0;
        }
        return 0;
    }
    if (e->kind == KIND_WAITER) {
        /* 0: granted, or taken out as dead though alive (its renewals came
         * late: a stall).  The waiting thread is told to look: it confirms
         * its grant, or is queued again at its ticket (fair.c) -- it need
         * not look often itself to find out. */
        if (res == 0 && e->u.waiter.wake) e->u.waiter.wake(e->u.waiter.wake_arg);
        if (res >= 0) schedule(e, sent + RM_MSEC(e->lease_ms) / 3, RM_MSEC(e->lease_ms) / 3);
        else e->next_due = now + retry_delay(e), e->window = 0;
        return 0;
    }
    if (res == 1) {
        RM_COUNT(renewals);
        if (name_stats(e)) RM_NAMES_COUNT(e->u.hold.stats, renewals);
        e->u.hold.valid_until = sent + RM_MSEC(e->lease_ms);
        e->u.hold.unverified = 0;
        schedule(e, sent + RM_MSEC(e->lease_ms) / 3, RM_MSEC(e->lease_ms) / 3);
        return 0;
    }
    if (res == -1 && now < e->u.hold.valid_until) {
        /* A retry is not taken early to batch it: it would be due again at
         * once (the window can be longer than the retry delay). */
        e->next_due = rm_clock_min(now + retry_delay(e), e->u.hold.valid_until);
        e->window = 0;
        return 0;
    }
    e->lost = 1;
    if (!e->u.hold.parked) { /* (a parked cache taken over was let go) */
        RM_COUNT(locks_lost);
        if (name_stats(e)) RM_NAMES_COUNT(e->u.hold.stats, locks_lost);
    }
    rm_log("hold of %s lost (%s)", e->argv[0], res == 0 ? "gone from Redis" : "lease ran out");
    return 1;
}

/* The round trip for e[0..n) on l (NULL: no node serves them: failed). */
static void round_trip(struct link *l, struct rm_watchdog_entry **e, size_t n, size_t holds,
                       int *res, rm_nsec deadline)
{
    rm_log("watchdog: %zu renewal(s), %zu deferred call(s)", holds, n - holds);
    if (l) exchange(l, e, (int)n, res, deadline);
    else for (size_t i = 0; i < n; i++) res[i] = -1;
    if (n && res[0] == -1 && holds) RM_COUNT(renewal_failures);
}

/* Apply the answers res to e[0..n) (sent at sent) and run the lost-lock
 * callbacks, with no lock held while they run; cancel waits for them.
 * Under wd.mu. */
static void settle_locked(struct rm_watchdog_entry **e, const int *res, size_t n, rm_nsec sent)
{
    rm_nsec now = rm_clock_now();
    for (size_t i = 0; i < n; i++) {
        struct rm_watchdog_entry *x = e[i];
        int newly_lost = x->cancelled ? 0 : apply(x, res[i], sent, now);
        x->inflight = 0;
        if (x->cancelled) {
            unlink_locked(x);
            free(x);
            e[i] = NULL;
        } else if (!newly_lost) {
            e[i] = NULL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct rm_watchdog_entry *x = e[i];
        if (!x || !wd.cb || x->kind != KIND_HOLD || (!x->u.hold.m && !x->u.hold.by_name))
            continue;
        rmutex_lost_fn cb = wd.cb;
        void *cb_arg = wd.cb_arg;
        rmutex_t *m = x->u.hold.m; /* (a cached hold's changes with its user: rm_watchdog_set_user) */
        x->cb_running = 1;
        pthread_mutex_unlock(&wd.mu);
        cb(m, x->argv[x->u.hold.name_arg], cb_arg);
        pthread_mutex_lock(&wd.mu);
        x->cb_running = 0;
        pthread_cond_broadcast(&wd.cb_done);
    }
}

/* A cluster primary's thread: one round trip per batch handed over. */
static void *link_main(void *arg)
{
    struct link *l = arg;
    pthread_setname_np(pthread_self(), "rmutex-wd-node");
    pthread_mutex_lock(&wd.mu);
    while (!wd.stop) {
        if (!l->busy) {
            pthread_cond_wait(&l->cv, &wd.mu);
            continue;
        }
        pthread_mutex_unlock(&wd.mu);
        rm_nsec sent = rm_clock_now();
        round_trip(l, l->work, l->nwork, l->holds, l->res, sent + l->budget);
        pthread_mutex_lock(&wd.mu);
        l->connected = l->conn != NULL;
        settle_locked(l->work, l->res, l->nwork, sent);
        after_round_trip_locked(l);
        l->busy = 0;
        wake_locked(); /* its node's entries can be collected again */
    }
    pthread_mutex_unlock(&wd.mu);
    return NULL;
}

/* Give e[0..n) to l's thread (started if needed).  0 if that cannot be
 * done (out of memory or threads): the caller does the round trip. */
static int hand_over_locked(struct link *l, struct rm_watchdog_entry **e, size_t n, size_t holds,
                            rm_nsec budget)
{
    if (n > l->cap) {
        void *a = realloc(l->work, n * sizeof *l->work), *b = realloc(l->res, n * sizeof *l->res);
        if (a) l->work = a;
        if (b) l->res = b;
        if (!a || !b) return 0;
        l->cap = n;
    }
    if (!l->started) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        l->started = !pthread_create(&l->thread, NULL, link_main, l);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!l->started) return 0;
    }
    memcpy(l->work, e, n * sizeof *e);
    l->nwork = n;
    l->holds = holds;
    l->budget = budget;
    l->busy = 1;
    pthread_cond_signal(&l->cv);
    return 1;
}

/* Every hold l's node serves is unverified until its next renewal -- a
 * cached lock's unlock asks Redis (cache.c) -- because the watchdog's
 * connection to that server closed, or could not be made: it may have
 * restarted without its data.  now_due: renew them (and the waiters) at
 * once as well -- and again every retry delay while the server cannot be
 * reached -- so that a wiped hold is reported lost within a retry delay of
 * the server answering again, not at its next renewal (lease/3 later).
 * (wd.mu held, no round trip on l.) */
static void unverify_locked(struct link *l, int now_due)
{
    rm_nsec now = rm_clock_now();
    for (struct rm_watchdog_entry *e = wd.head; e; e = e->next) {
        if (!renewed(e) || e->inflight || e->lost || e->cancelled) continue;
        if (rm_endpoint_route(e->ep, e->slot, 0) != l->node) continue;
        if (e->kind == KIND_HOLD) {
            if (now_due) RM_COUNT(holds_checked);
            e->u.hold.unverified = 1;
        }
        if (now_due) {
            e->next_due = now;
            e->window = 0;
        }
    }
}

/* After a round trip on l: a connection that broke in its middle is a
 * close like one seen while idle (a server shutting down with replicas
 * pauses writes first, so a call can be on the wire when it closes): every
 * hold it serves is checked at once, not only those the call carried.  A
 * dial that failed leaves them unverified (a restart may come while a
 * renewal is on the wire; a TLS dial and handshake widen that window);
 * their retries are planned already.  (wd.mu held.) */
static void after_round_trip_locked(struct link *l)
{
    if (l->dropped) {
        l->dropped = 0;
        unverify_locked(l, 1);
    } else if (!l->conn) {
        unverify_locked(l, 0);
    }
}

/* l's connection was found closed while idle: the server restarted (its
 * holds may be wiped), or the connection was killed. */
static void dropped_locked(struct link *l)
{
    rm_log("watchdog connection to %s closed while idle; checking its holds now",
           l->node->addr.display);
    rm_conn_close(l->conn);
    l->conn = NULL;
    l->connected = 0;
    l->failures++;
    unverify_locked(l, 1);
}

/* Sleep until next, a wake, or a link's connection becoming readable
 * while idle -- which only its closing can do: the watchdog reads every
 * reply it asks for.  (wd.mu held, let go while asleep.) */
static void sleep_locked(rm_nsec next)
{
    wd.planned = next;
    if (wd.wake_fd < 0) {
        rm_clock_cond_wait_until(&wd.cv, &wd.mu, next);
        wd.planned = RM_FOREVER;
        return;
    }
    size_t n = 1;
    for (struct link *l = wd.links; l; l = l->next) n++;
    if (n > wd.pfd_cap) {
        struct pollfd *p = realloc(wd.pfd, n * sizeof *p);
        if (p) wd.pfd = p, wd.pfd_cap = n;
    }
    if (!wd.pfd) {
        rm_clock_cond_wait_until(&wd.cv, &wd.mu, rm_clock_min(next, rm_clock_after(RM_MSEC(100))));
        wd.planned = RM_FOREVER;
        return;
    }
    n = 0;
    wd.pfd[n++] = (struct pollfd){ wd.wake_fd, POLLIN, 0 };
    for (struct link *l = wd.links; l && n < wd.pfd_cap; l = l->next)
        if (!l->busy && l->conn) wd.pfd[n++] = (struct pollfd){ l->conn->fd, POLLIN, 0 };
    wd.sleeping = 1;
    pthread_mutex_unlock(&wd.mu);
    int ms = -1;
    if (next != RM_FOREVER) {
        rm_nsec left = next - rm_clock_now();
        ms = left <= 0 ? 0 : left > RM_MSEC(3600000) ? 3600000 : (int)((left + RM_MSEC(1) - 1) / RM_MSEC(1));
    }
    int ready = poll(wd.pfd, (nfds_t)n, ms);
    uint64_t count;
    if (ready > 0 && wd.pfd[0].revents) /* drained: it is non-blocking */
        while (read(wd.wake_fd, &count, sizeof count) < 0 && errno == EINTR) {}
    pthread_mutex_lock(&wd.mu);
    wd.sleeping = 0;
    wd.planned = RM_FOREVER;
    for (size_t i = 1; ready > 0 && i < n; i++) {
        if (!wd.pfd[i].revents) continue;
        /* Still idle and still that connection (only this thread hands
         * work to a link, and it was asleep)? */
        for (struct link *l = wd.links; l; l = l->next)
            if (!l->busy && l->conn && l->conn->fd == wd.pfd[i].fd && !rm_conn_usable(l->conn))
                dropped_locked(l);
    }
}

static void *wd_main(void *arg)
{
    RM_UNUSED(arg);
    pthread_setname_np(pthread_self(), "rmutex-wd");
    struct rm_watchdog_entry **due = NULL;
    int *res = NULL;
    size_t cap = 0;

    pthread_mutex_lock(&wd.mu);
    while (!wd.stop) {
        rm_nsec now = rm_clock_now(), next = RM_FOREVER;
        struct rm_node *node = NULL;
        int routed = 0;
        size_t n = 0, holds = 0;
        /* Collect what is due on one endpoint: renewals (pass 0), renewals
         * taken early to fill the last script call (pass 1), then deferred
         * calls (pass 2). */
        for (int pass = 0; pass < 3; pass++) {
            if (pass == 1 && holds % BATCH == 0) continue;
            for (struct rm_watchdog_entry *e = wd.head; e; e = e->next) {
                if (e->inflight || e->lost || e->cancelled) continue;
                if ((pass == 2) == renewed(e)) continue;
                /* Woken at the earliest due entry: take every entry due
                 * within its window after now, so entries acquired close
                 * together are renewed -- and stay -- together.  A call
                 * that is not full takes entries due within twice that
                 * window as well: groups acquired further apart than the
                 * window thus merge over a few periods instead of costing
                 * a part-filled call each forever. */
                rm_nsec early = pass == 1 ? 2 * window(e) : window(e);
                if (e->next_due - early > now) {
                    if (pass != 1 && e->next_due < next) next = e->next_due;
                    continue;
                }
                /* One node per round trip: the node that serves e now.
                 * A node whose thread is busy takes it when done. */
                struct rm_node *at = rm_endpoint_route(e->ep, e->slot, 0);
                struct link *lb = at ? link_find(at) : NULL;
                if (lb && lb->busy) continue;
                if (routed && at != node) {
                    if (pass != 1 && e->next_due < next) next = e->next_due;
                    continue;
                }
                if (pass == 1 && holds % BATCH == 0) break;
                if (n == cap) {
                    size_t nc = cap ? cap * 2 : 64;
                    void *a = realloc(due, nc * sizeof *due), *b = realloc(res, nc * sizeof *res);
                    if (a) due = a;
                    if (b) res = b;
                    if (!a || !b) break;
                    cap = nc;
                }
                if (e->kind == KIND_PERIODIC && !periodic_build_locked(e, now)) {
                    if (e->next_due < next) next = e->next_due; /* not yet: again later */
                    continue;
                }
                node = at;
                routed = 1;
                e->inflight = 1;
                due[n++] = e;
                if (pass < 2) holds++;
            }
        }
        if (!n) {
            sleep_locked(next);
            continue;
        }
        /* The answer must come back while the leases can still be saved. */
        rm_nsec budget = RM_MSEC(RM_SETTING(command_timeout_ms));
        for (size_t i = 0; i < holds; i++)
            if (RM_MSEC(due[i]->lease_ms) / 3 < budget) budget = RM_MSEC(due[i]->lease_ms) / 3;
        if (budget < RM_MSEC(50)) budget = RM_MSEC(50);
        struct link *l = node ? link_for(node) : NULL;
        if (l && rm_endpoint_clustered(due[0]->ep) && hand_over_locked(l, due, n, holds, budget))
            continue;
        pthread_mutex_unlock(&wd.mu);
        rm_nsec sent = rm_clock_now();
        round_trip(l, due, n, holds, res, sent + budget);
        pthread_mutex_lock(&wd.mu);
        if (l) l->connected = l->conn != NULL;
        settle_locked(due, res, n, sent);
        if (l) after_round_trip_locked(l);
    }
    pthread_mutex_unlock(&wd.mu);
    free(due);
    free(res);
    return NULL;
}

/* Forget every entry and close every connection (wd.mu held, no thread). */
static void reset_locked(void)
{
    while (wd.head) {
        struct rm_watchdog_entry *e = wd.head;
        wd.head = e->next;
        if (e->kind == KIND_PERIODIC) periodic_free_call(e);
        free(e);
    }
    while (wd.links) {
        struct link *l = wd.links;
        wd.links = l->next;
        rm_conn_close(l->conn);
        free(l->work);
        free(l->res);
        free(l);
    }
    wd.started = wd.stop = wd.sleeping = 0;
    wd.planned = RM_FOREVER;
    wd.periodic = NULL;
}

void rm_watchdog_stop(void)
{
    pthread_once(&cv_once, init_cvs);
    pthread_mutex_lock(&wd.mu);
    int started = wd.started;
    wd.stop = 1;
    wd.sleeping = 1; /* (whatever it is doing: the write is harmless) */
    wake_locked();
    for (struct link *l = wd.links; l; l = l->next) pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&wd.mu);
    if (started) pthread_join(wd.thread, NULL);
    /* The links' threads: the list only grows while the main thread runs. */
    for (struct link *l = wd.links; l; l = l->next)
        if (l->started) pthread_join(l->thread, NULL);
    pthread_mutex_lock(&wd.mu);
    reset_locked();
    pthread_mutex_unlock(&wd.mu);
}

void rm_watchdog_atfork(int who)
{
    if (who < 0) {
        pthread_mutex_lock(&wd.mu);
        return;
    }
    if (who == 0) {
        pthread_mutex_unlock(&wd.mu);
        return;
    }
    /* Child: the parent's holds are not ours; no thread, no socket.  Only
     * the sockets are closed: nothing is freed, since another thread of
     * the parent -- this one, most often, announcing or renewing -- may
     * have been inside the allocator when it forked, and only
     * async-signal-safe calls are sure to work here (glibc's malloc
     * survives a fork, ASan's and others' do not).  The parent's entries
     * stay reachable from abandoned, so no leak is reported either. */
    static struct { struct rm_watchdog_entry *head; struct link *links; } abandoned[4];
    static unsigned forks;
    for (struct link *l = wd.links; l; l = l->next)
        if (l->conn && l->conn->fd >= 0) close(l->conn->fd), l->conn->fd = -1;
    if (forks < sizeof abandoned / sizeof *abandoned) {
        abandoned[forks].head = wd.head;
        abandoned[forks++].links = wd.links;
    }
    wd.head = NULL;
    wd.links = NULL;
    wd.periodic = NULL;
    wd.started = wd.stop = wd.sleeping = 0;
    wd.planned = RM_FOREVER;
    /* The eventfd is shared with the parent: a wake here would wake its
     * watchdog.  The child's thread makes its own. */
    if (wd.wake_fd >= 0) close(wd.wake_fd);
    wd.wake_fd = -1;
    rm_clock_cond_init(&wd.cv);
    rm_clock_cond_init(&wd.cb_done);
    pthread_mutex_unlock(&wd.mu); /* taken by the prepare handler, in this thread */
}
