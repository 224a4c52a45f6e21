/* once.c -- ronce: pthread_once across processes.
 *
 * DESIGN
 * ------
 * Redis keeps whether the routine of a name has run (once.lua: a "done"
 * key with no TTL) and who runs it now (a zset of one runner and its
 * lease).  A ronce_t keeps only its name and whether this process has
 * seen it done (rm_done_): then ronce returns at once, with no round trip
 * -- the common case, every call after the first.
 *
 * Otherwise, in order:
 *   1. join the once's channel (every message is a broadcast: "* done",
 *      "* free"), so the end of a run is not missed from now on;
 *   2. try (one round trip, repeated after a lost reply: the script knows
 *      the caller's runner id): done -> return; another runner with a live
 *      lease -> sleep until a message or the bound (the poll cap, or that
 *      lease's end when sooner: a dead runner's lease passes, and the next
 *      try takes over) and try again; nobody, or a runner whose lease
 *      passed -> the caller is the runner;
 *   3. the runner's lease is renewed by the watchdog (renew.lua's 'w'
 *      entry) while routine() runs, with the caller's cancellation state
 *      restored (the routine may be cancelled where it could be under
 *      pthread_once);
 *   4. done (one round trip, until Redis answers): the mark, the runner
 *      gone, "* done" published; rm_done_ set.
 * A runner cancelled (or calling pthread_exit) inside the routine gives
 * its turn up from its cleanup handler ("* free": a waiter takes over at
 * once); one whose process dies is replaced when its lease passes.  A
 * runner that stalled past its lease (another took over) still marks the
 * routine done when it finishes: exactly once holds unless a runner
 * stalls past its lease, as a mutex's exclusion does.
 *
 * ronce on a name from inside that name's routine, in the same thread, is
 * EDEADLK (each thread keeps the names it runs); glibc's pthread_once
 * deadlocks there.  ronce_reset deletes the done mark. */
#include "await.h"
#include "call.h"
#include "endpoint.h"
#include "internal.h"
#include "keys.h"
#include "registry.h"
#include "script.h"
#include "session.h"
#include "sub.h"
#include "thread.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(ronce_t) == 64, "ronce_t is 64 bytes: part of the ABI");

/* ---- once.lua ---- */

#define NKEYS 3
#define NARGS 7
_Static_assert(NARGS <= RM_WATCHDOG_MAXARGS, "an abandon may be deferred to the watchdog");

struct once_req {
    const char *argv[NARGS];
    size_t lens[NARGS];
    char lease[24];
};

static void req_make(struct once_req *q, const struct rm_once_keys *k, struct rm_endpoint *ep,
                     const char *op, const char *id, size_t id_len)
{
    const char *v[NARGS] = {
        k->done, k->run, k->channel, op, id ? id : "", q->lease, rm_endpoint_publish(ep),
    };
    memcpy(q->argv, v, sizeof v);
    for (int i = 0; i < NARGS; i++) q->lens[i] = strlen(v[i]);
    q->lens[4] = id ? id_len : 0;
    q->lens[5] = (size_t)snprintf(q->lease, sizeof q->lease, "%lu", RM_SETTING(lease_ms));
}

/* ---- running ---- */

/* One call that got past the fast path, off the caller's stack. */
struct calling {
    struct rm_once_keys keys;
    struct rm_endpoint *ep;
    struct rm_thread *self;
    char id[96];                  /* "<owner>:<seq>": the runner, if it runs */
    size_t id_len;
    int joined;                   /* 1 on the channel, -1 polling */
    struct rm_waiter waiter;
    struct rm_watchdog_entry *lease;
    struct calling *outer;        /* the routines this thread runs (running) */
    struct rm_registry_wait announced; /* in the holder registry while another runs it */
};

/* The routines the calling thread is running, innermost first. */
static __thread struct calling *running;

/* Call op (done, abandon: safe to repeat) until Redis answers or deadline:
 * 0 and the integer, or the error. */
static int call_int(struct calling *c, const char *op, rm_nsec deadline, long long *answer)
{
    struct once_req q;
    redisReply *reply;
    req_make(&q, &c->keys, c->ep, op, c->id, c->id_len);
    int r = rm_await_call(c->ep, RM_SCRIPT_ONCE, NKEYS, NARGS, q.argv, q.lens, deadline, c->self,
                          &reply);
    if (r) return r;
    int ok = reply->type == REDIS_REPLY_INTEGER;
    if (ok) *answer = reply->integer;
    freeReplyObject(reply);
    if (ok) return 0;
    rm_detail("unexpected reply from once.lua");
    return EIO;
}

/* Step 2: 0 done, 1 the caller runs it, 2 another does (*ms: its lease
 * passes then), or -errno. */
static int try_once(struct calling *c, long long *ms)
{
    struct once_req q;
    redisReply *reply;
    req_make(&q, &c->keys, c->ep, "try", c->id, c->id_len);
    int r = rm_await_call(c->ep, RM_SCRIPT_ONCE, NKEYS, NARGS, q.argv, q.lens, RM_FOREVER, c->self,
                          &reply);
    if (r) return -r;
    redisReply **e = reply->element;
    int ok = reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
             e[0]->type == REDIS_REPLY_INTEGER && e[0]->integer >= 0 && e[0]->integer <= 2 &&
             (e[0]->integer != 2 || (reply->elements == 2 && e[1]->type == REDIS_REPLY_INTEGER));
    int st = ok ? (int)e[0]->integer : -EIO;
    if (st == 2) *ms = e[1]->integer;
    freeReplyObject(reply);
    if (!ok) rm_detail("unexpected reply from once.lua");
    return st;
}

static void call_end(struct calling *c)
{
    rm_registry_wait_end(&c->announced);
    if (c->joined > 0) rm_sub_leave(&c->waiter);
    rm_session_leave();
    free(c->keys.buf);
    free(c);
}

/* The runner's thread was cancelled (or exits) inside the routine: its
 * turn goes to another caller at once. */
static void abandoned(void *arg)
{
    struct calling *c = arg;
    int ignored;
    long long answer;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
    running = c->outer;
    rm_watchdog_cancel(c->lease);
    if (call_int(c, "abandon", rm_call_deadline(), &answer)) {
        struct once_req q;
        req_make(&q, &c->keys, c->ep, "abandon", c->id, c->id_len);
        rm_watchdog_defer(c->ep, RM_SCRIPT_ONCE, NKEYS, NARGS, q.argv, q.lens,
                          rm_clock_after(RM_MSEC(RM_SETTING(lease_ms))));
    }
    rm_log("%s: the runner was cancelled inside the routine; its turn is given up",
           c->keys.name);
    call_end(c);
}

/* Steps 3 and 4. */
static int run(struct calling *c, ronce_t *once, void (*routine)(void), int cancel_state)
{
    if (c->joined > 0) rm_sub_leave(&c->waiter);
    c->joined = 0;
    c->lease = rm_watchdog_waiter(c->ep, c->keys.run, c->keys.run, c->keys.run, NULL, c->id,
                                  c->id_len, RM_SETTING(lease_ms));
    if (!c->lease) {
        long long ignored;
        call_int(c, "abandon", rm_call_deadline(), &ignored);
        rm_detail("out of memory");
        return ENOMEM;
    }
    c->outer = running;
    running = c;
    int ignored;
    pthread_cleanup_push(abandoned, c);
    pthread_setcancelstate(cancel_state, &ignored);
    routine();
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
    pthread_cleanup_pop(0);
    running = c->outer;
    rm_watchdog_cancel(c->lease);
    long long answer;
    int r = call_int(c, "done", RM_FOREVER, &answer);
    if (!r) __atomic_store_n(&once->rm_done_, 1, __ATOMIC_RELEASE);
    return r;
}

static int once_common(ronce_t *once, void (*routine)(void), int cancel_state)
{
    if (!once || !routine) {
        rm_detail(once ? "the routine is NULL" : "the once is NULL");
        return EINVAL;
    }
    if (__atomic_load_n(&once->rm_done_, __ATOMIC_ACQUIRE)) return 0;
    const char *name = once->rm_name_;
    for (struct calling *o = running; name && o; o = o->outer)
        if (!strcmp(o->keys.name, name)) {
            rm_detail("ronce on %s from inside its own routine", name);
            return EDEADLK;
        }
    struct calling *c = calloc(1, sizeof *c);
    if (!c) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    int r = rm_keys_once(name, &c->keys);
    if (r) {
        free(c);
        return r;
    }
    if ((r = rm_session_enter(&c->ep))) {
        free(c->keys.buf);
        free(c);
        return r;
    }
    c->self = rm_thread_self();
    c->id_len = (size_t)snprintf(c->id, sizeof c->id, "%s:%llu", c->self->owner,
                                 (unsigned long long)++c->self->seq);
    c->joined = rm_endpoint_join(c->ep, c->keys.slot, c->keys.channel, &c->waiter, "#", 1) ? -1 : 1;
    for (;;) {
        long long ms = -1;
        int st = try_once(c, &ms);
        if (st < 0) {
            r = -st;
            break;
        }
        if (st == 0) {
            __atomic_store_n(&once->rm_done_, 1, __ATOMIC_RELEASE);
            break;
        }
        if (st == 1) {
            rm_registry_wait_end(&c->announced); /* its turn: no longer a wait */
            r = run(c, once, routine, cancel_state);
            break;
        }
        if (!c->announced.ep) {
            c->announced = (struct rm_registry_wait){ .ep = c->ep, .owner = c->self->owner,
                                                      .lock = c->keys.name,
                                                      .kind = RM_REGISTRY_WAIT_ONCE };
            rm_registry_wait_begin(&c->announced);
        }
        rm_await_sleep(c->ep, c->keys.slot, &c->waiter, &c->joined,
                       rm_await_bound(ms, &c->waiter, c->joined, RM_FOREVER),
                       PTHREAD_CANCEL_DISABLE);
    }
    call_end(c);
    return r;
}

RMUTEX_API int ronce(ronce_t *once, void (*routine)(void))
{
    struct rm_entry e;
    rm_entry_enter(&e);
    return rm_entry_leave(&e, once_common(once, routine, e.cancel_state));
}

RMUTEX_API int ronce_reset(const char *name)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    struct rm_once_keys keys;
    int r = rm_keys_once(name, &keys);
    if (r) return rm_entry_leave(&e, r);
    struct rm_endpoint *ep;
    if (!(r = rm_session_enter(&ep))) {
        struct once_req q;
        redisReply *reply;
        req_make(&q, &keys, ep, "reset", NULL, 0);
        if (!(r = rm_call_retried(ep, RM_SCRIPT_ONCE, NKEYS, NARGS, q.argv, q.lens, &reply))) {
            if (reply->type != REDIS_REPLY_INTEGER) {
                rm_detail("unexpected reply from once.lua");
                r = EIO;
            } else if (!reply->integer) {
                rm_detail("the routine of %s has not run (or was reset already)", name);
                r = ENOENT;
            }
            freeReplyObject(reply);
        }
        rm_session_leave();
    }
    free(keys.buf);
    return rm_entry_leave(&e, r);
}
