/* pool.c -- one server's pool of command connections.
 *
 * DESIGN
 * ------
 * A connection is lent to one thread for one request (a script call, or a
 * call and its WAIT) and given back at once; no thread keeps one across a
 * wait for a lock.  So a small pool (rmutex_set_pool_size, default 8)
 * serves any number of threads.
 *
 * The pool grows on demand up to its size.  A failed dial starts a jittered
 * exponential backoff (10 ms doubling to 1 s) shared by every thread, so an
 * unreachable server is knocked on at most once per backoff step, not once
 * per waiting thread.  Callers with a deadline wait for a connection no
 * longer than that deadline; trylock asks FAILFAST and gets RM_E_UNSENT at
 * once while the server is known to be down.
 *
 * A server that answered but refused the login (a wrong password, a user
 * that is off, a SELECT refused) is not down: the refusal is remembered,
 * code and detail, and every caller during the backoff gets that same
 * answer at once -- trylock, lock and timedlock alike, never "unreachable"
 * for one call and EACCES for the next.  The next dial after the backoff
 * asks again, so a login fixed on the server (ACL SETUSER) heals without
 * a restart.  The refusal counts as reaching the server (node.c): it is
 * no outage.  A dial after it that gets no answer at all (it timed out: a
 * loaded machine, a slow server) is not taken for an outage at once: the
 * refusal stands, and is the answer, for up to KEEP_REFUSAL such dials in
 * a row -- a ported program would otherwise be told "unreachable", then
 * "answers again", about a server that only ever refused it.  One that is
 * really gone is an outage from the next dial on.
 *
 * Any error on a connection closes it: a stream in an unknown state is never
 * reused.  An idle connection is peeked at before it is lent (one
 * non-blocking recv): one the server closed meanwhile -- it restarted, or
 * killed the client -- is replaced, so a request is never written where it
 * provably cannot run, and a release retried after it is not mistaken for
 * one whose reply was lost (call.c).  After fork() the child's handler closes every connection of
 * the pool without writing a byte (rm_pool_atfork).
 *
 * A thread may hold two connections at once, no more: a spare
 * (RM_POOL_SPARE), lent only when idle and never the last the pool can
 * lend, for a call it sent ahead and reads after another (call.c,
 * rm_call_send), so that other call never waits for a connection that
 * only the same thread would give back.
 *
 * The first connection also reads maxmemory-policy: anything but noeviction
 * lets Redis evict lock keys under memory pressure, which breaks mutual
 * exclusion silently; the calling thread's detail says so.  A connection on
 * which that read fails is closed like any other after an I/O error. */
#include "pool.h"
#include "script.h"
#include "conn.h"
#include "internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Dials in a row that may go unanswered after a refusal before the pool
 * reports an outage rather than the refusal (DESIGN). */
#define KEEP_REFUSAL 3

void rm_pool_init(struct rm_pool *p, const struct rm_server_addr *addr, struct rm_reach reach)
{
    memset(p, 0, sizeof *p);
    p->addr = addr;
    p->reach = reach;
    pthread_mutex_init(&p->mu, NULL);
    rm_clock_cond_init(&p->cv);
    p->rng = (uint32_t)getpid() ^ (uint32_t)(uintptr_t)p;
}

static void reached(struct rm_pool *p, int ok)
{
    if (p->reach.fn) p->reach.fn(p->reach.arg, ok);
}

static void forget(struct rm_pool *p, struct rm_conn *c)
{
    if (c->prev) c->prev->next = c->next;
    else p->all = c->next;
    if (c->next) c->next->prev = c->prev;
    p->open--;
    RM_COUNT_SUB(connections, 1);
}

void rm_pool_fini(struct rm_pool *p)
{
    while (p->all) {
        struct rm_conn *c = p->all;
        forget(p, c);
        rm_conn_close(c);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
}

/* A topology that fails over (Cluster, Sentinel): load every script on a
 * new connection, pipelined, so that the first call on a node just
 * promoted -- whose script cache is empty: Redis does not replicate
 * SCRIPT LOAD -- needs no NOSCRIPT round trip.  A refusal (an ACL without
 * SCRIPT LOAD) only costs that round trip later. */
static int preload_scripts(struct rm_pool *p, struct rm_conn *c)
{
    rm_nsec deadline = rm_clock_after(RM_MSEC(RM_SETTING(command_timeout_ms)));
    for (int i = 0; i < RM_SCRIPT_COUNT; i++) {
        const char *argv[] = { "SCRIPT", "LOAD", rm_scripts[i].body };
        size_t lens[] = { 6, 4, rm_scripts[i].len };
        rm_conn_append(c, 3, argv, lens);
    }
    int r = rm_conn_flush(c, deadline);
    for (int i = 0; !r && i < RM_SCRIPT_COUNT; i++) {
        redisReply *reply;
        if ((r = rm_conn_read(c, deadline, &reply))) break;
        if (reply->type == REDIS_REPLY_ERROR)
            rm_log("SCRIPT LOAD %s on %s: %.*s", rm_scripts[i].name, p->addr->display,
                   (int)reply->len, reply->str);
        freeReplyObject(reply);
    }
    if (r) rm_detail("Redis at %s did not answer SCRIPT LOAD", p->addr->display);
    return r ? RM_E_UNSENT : 0;
}

/* Read maxmemory-policy once.  Servers that refuse CONFIG (managed Redis,
 * ACLs) are not an error; a connection that fails the call is: its state
 * is unknown (RM_E_UNSENT: the caller's request was not sent). */
static int check_policy(struct rm_pool *p, struct rm_conn *c)
{
    static const char *argv[] = { "CONFIG", "GET", "maxmemory-policy" };
    static const size_t lens[] = { 6, 3, 16 };
    redisReply *r;
    if (rm_conn_call(c, 3, argv, lens, rm_clock_after(RM_MSEC(1000)), &r)) {
        rm_detail("Redis at %s did not answer CONFIG GET", p->addr->display);
        return RM_E_UNSENT;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING && strcmp(r->element[1]->str, "noeviction")) {
        rm_detail("warning: %s has maxmemory-policy %s; lock keys can be evicted under memory "
                  "pressure and mutual exclusion lost (set it to noeviction)",
                  p->addr->display, r->element[1]->str);
    }
    freeReplyObject(r);
    return 0;
}

/* RM_POOL_SPARE: spares are at most the pool's size - 1, so a thread that
 * holds one and makes another call always has a connection left to come
 * back to it (every other lent connection comes back after one request). */
static int get_spare(struct rm_pool *p, struct rm_conn **out)
{
    pthread_mutex_lock(&p->mu);
    struct rm_conn *c = p->idle;
    if (!c || p->spares + 1 >= RM_SETTING(pool_size)) {
        pthread_mutex_unlock(&p->mu);
        return RM_E_UNSENT;
    }
    p->idle = c->idle_next;
    p->spares++;
    c->spare = 1;
    pthread_mutex_unlock(&p->mu);
    if (rm_conn_usable(c)) {
        *out = c;
        return 0;
    }
    rm_pool_put(p, c, 0);
    return RM_E_UNSENT;
}

int rm_pool_get(struct rm_pool *p, rm_nsec deadline, int flags, struct rm_conn **out)
{
    if (flags & RM_POOL_SPARE) return get_spare(p, out);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->idle) {
            struct rm_conn *c = p->idle;
            p->idle = c->idle_next;
            pthread_mutex_unlock(&p->mu);
            if (rm_conn_usable(c)) {
                *out = c;
                return 0;
            }
            /* Closed by the server while idle (a restart, a CLIENT KILL):
             * replace it; nothing was sent on it. */
            rm_pool_put(p, c, 0);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        rm_nsec now = rm_clock_now();
        unsigned max = RM_SETTING(pool_size);
        if (p->open < max && now >= p->dial_not_before) {
            p->open++;
            int first = !p->policy_checked;
            p->policy_checked = 1;
            pthread_mutex_unlock(&p->mu);

            struct rm_conn *c = NULL;
            int r = rm_conn_dial(p->addr, "cmd", deadline, &c);
            if (!r && ((first && (r = check_policy(p, c))) || (p->preload && (r = preload_scripts(p, c))))) {
                rm_conn_close(c);
                c = NULL;
            }

            pthread_mutex_lock(&p->mu);
            if (!r) {
                c->count_round_trips = 1;
                c->next = p->all;
                c->prev = NULL;
                if (p->all) p->all->prev = c;
                p->all = c;
                RM_COUNT(connections);
                if (p->dial_failures || p->broken) RM_COUNT(reconnects);
                if (p->broken) p->broken--;
                p->dial_failures = 0;
                p->refused = 0;
                pthread_mutex_unlock(&p->mu);
                reached(p, 1);
                *out = c;
                return 0;
            }
            p->open--;
            if (first) p->policy_checked = 0;
            p->dial_not_before = rm_clock_now() + rm_clock_backoff(p->dial_failures++, RM_MSEC(10),
                                                        RM_MSEC(1000), &p->rng);
            int kept = 0;
            if (r == EACCES || r == EINVAL) {
                p->refused = r;
                p->refusal_kept = 0;
                snprintf(p->refusal, sizeof p->refusal, "%s", rmutex_detail());
            } else if (p->refused && r == RM_E_UNSENT && ++p->refusal_kept < KEEP_REFUSAL) {
                kept = 1; /* no answer, after a refusal: still the refusal (DESIGN) */
                r = p->refused;
                rm_detail("%s", p->refusal);
            } else {
                p->refused = 0;
            }
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
            if (kept) return r;
            if (r == RM_E_UNSENT) reached(p, 0);
            else if (r == EACCES || r == EINVAL) reached(p, 1); /* it answered */
            /* One dial per call: the caller decides whether and when to try
             * again (its own backoff and deadline). */
            return r;
        }
        if (p->open < max && p->refused) {
            /* Refused a moment ago: the same answer, until the backoff
             * lets the next dial ask again. */
            int r = p->refused;
            rm_detail("%s", p->refusal);
            pthread_mutex_unlock(&p->mu);
            return r;
        }
        if (p->open < max && (flags & RM_POOL_FAILFAST)) {
            rm_detail("Redis at %s is unreachable (retrying in %lld ms)", p->addr->display,
                      (long long)RM_TO_MSEC(p->dial_not_before - now));
            pthread_mutex_unlock(&p->mu);
            return RM_E_UNSENT;
        }
        rm_nsec until = deadline;
        if (p->open < max && p->dial_not_before < until) until = p->dial_not_before;
        if (rm_clock_cond_wait_until(&p->cv, &p->mu, until) == ETIMEDOUT && rm_clock_now() >= deadline)
            break;
    }
    if (p->dial_failures)
        rm_detail("Redis at %s is unreachable", p->addr->display);
    else
        rm_detail("all %u connections to %s stayed busy until the deadline", p->open,
                  p->addr->display);
    pthread_mutex_unlock(&p->mu);
    return RM_E_UNSENT;
}

void rm_pool_drain(struct rm_pool *p, int on)
{
    struct rm_conn *closing = NULL;
    pthread_mutex_lock(&p->mu);
    p->draining = on;
    while (on && p->idle) {
        struct rm_conn *c = p->idle;
        p->idle = c->idle_next;
        forget(p, c);
        c->idle_next = closing;
        closing = c;
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    while (closing) {
        struct rm_conn *c = closing;
        closing = c->idle_next;
        rm_conn_close(c);
    }
}

void rm_pool_put(struct rm_pool *p, struct rm_conn *c, int ok)
{
    pthread_mutex_lock(&p->mu);
    if (c->spare) {
        c->spare = 0;
        p->spares--;
    }
    if (ok && c->wlen == 0 && !p->draining) {
        c->idle_next = p->idle;
        p->idle = c;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        return;
    }
    forget(p, c);
    p->broken++; /* its replacement is a reconnect */
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    rm_conn_close(c);
}

void rm_pool_atfork(struct rm_pool *p, int who)
{
    if (who < 0) {
        pthread_mutex_lock(&p->mu);
        return;
    }
    if (who == 0) {
        pthread_mutex_unlock(&p->mu);
        return;
    }
    /* Child: the parent's connections are not ours to speak on (and one in
     * use by a parent thread may be half-way through a reply). */
    while (p->all) {
        struct rm_conn *c = p->all;
        p->all = c->next;
        rm_conn_abandon(c);
    }
    p->idle = NULL;
    p->open = 0;
    p->spares = 0;
    p->dial_failures = 0;
    p->refused = 0;
    p->refusal_kept = 0;
    p->broken = 0;
    p->dial_not_before = 0;
    p->rng ^= (uint32_t)getpid();
    rm_clock_cond_init(&p->cv);
    pthread_mutex_unlock(&p->mu); /* taken by the prepare handler, in this thread */
}
