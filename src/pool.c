/* pool.c -- the per-endpoint pool of command connections.
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
 * Any error on a connection closes it: a stream in an unknown state is never
 * reused.  After fork() the child's handler closes every connection of
 * the pool without writing a byte (rm_pool_atfork).
 *
 * The first connection also reads maxmemory-policy: anything but noeviction
 * lets Redis evict lock keys under memory pressure, which breaks mutual
 * exclusion silently; the calling thread's detail says so. */
#include "pool.h"
#include "conn.h"
#include "internal.h"
#include "sub.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    pthread_mutex_t mu;
    rmutex_outage_fn fn;
    void *arg;
} outage = { .mu = PTHREAD_MUTEX_INITIALIZER };

RMUTEX_API int rmutex_set_outage_callback(rmutex_outage_fn fn, void *arg)
{
    pthread_mutex_lock(&outage.mu);
    outage.fn = fn;
    outage.arg = arg;
    pthread_mutex_unlock(&outage.mu);
    return 0;
}

void rm_endpoint_reachable(struct rm_endpoint *ep, int ok)
{
    if (atomic_exchange(&ep->down, !ok) == !ok) return; /* no change */
    rm_log("Redis at %s is %s", ep->addr.display, ok ? "reachable again" : "unreachable");
    pthread_mutex_lock(&outage.mu);
    rmutex_outage_fn fn = outage.fn;
    void *arg = outage.arg;
    pthread_mutex_unlock(&outage.mu);
    if (fn) fn(!ok, ok ? "" : rmutex_detail(), arg);
}

int rm_endpoint_create(const struct rm_server_addr *addr, struct rm_endpoint **out)
{
    struct rm_endpoint *ep = calloc(1, sizeof *ep);
    if (!ep) return ENOMEM;
    ep->addr = *addr;
    ep->addr.user = addr->user ? strdup(addr->user) : NULL;
    ep->addr.password = addr->password ? strdup(addr->password) : NULL;
    if ((addr->user && !ep->addr.user) || (addr->password && !ep->addr.password)) goto fail;
    pthread_mutex_init(&ep->mu, NULL);
    rm_cond_init(&ep->cv);
    ep->rng = (uint32_t)getpid() ^ (uint32_t)(uintptr_t)ep;
    if (rm_sub_create(ep, &ep->sub)) {
        pthread_mutex_destroy(&ep->mu);
        pthread_cond_destroy(&ep->cv);
        goto fail;
    }
    *out = ep;
    return 0;
fail:
    rm_server_addr_free(&ep->addr);
    free(ep);
    return ENOMEM;
}

static void forget(struct rm_endpoint *ep, struct rm_conn *c)
{
    if (c->prev) c->prev->next = c->next;
    else ep->all = c->next;
    if (c->next) c->next->prev = c->prev;
    ep->open--;
    RM_COUNT_SUB(connections, 1);
}

void rm_endpoint_destroy(struct rm_endpoint *ep)
{
    if (!ep) return;
    rm_sub_destroy(ep->sub);
    while (ep->all) {
        struct rm_conn *c = ep->all;
        forget(ep, c);
        rm_conn_close(c);
    }
    pthread_mutex_destroy(&ep->mu);
    pthread_cond_destroy(&ep->cv);
    rm_server_addr_free(&ep->addr);
    free(ep);
}

/* Read maxmemory-policy once.  Servers that refuse CONFIG (managed Redis,
 * ACLs) are not an error. */
static void check_policy(struct rm_endpoint *ep, struct rm_conn *c)
{
    static const char *argv[] = { "CONFIG", "GET", "maxmemory-policy" };
    static const size_t lens[] = { 6, 3, 16 };
    redisReply *r;
    if (rm_conn_call(c, 3, argv, lens, rm_after(RM_MSEC(1000)), &r)) return;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING && strcmp(r->element[1]->str, "noeviction")) {
        rm_detail("warning: %s has maxmemory-policy %s; lock keys can be evicted under memory "
                  "pressure and mutual exclusion lost (set it to noeviction)",
                  ep->addr.display, r->element[1]->str);
    }
    freeReplyObject(r);
}

int rm_pool_get(struct rm_endpoint *ep, rm_nsec deadline, int flags, struct rm_conn **out)
{
    pthread_mutex_lock(&ep->mu);
    for (;;) {
        if (ep->idle) {
            struct rm_conn *c = ep->idle;
            ep->idle = c->idle_next;
            pthread_mutex_unlock(&ep->mu);
            *out = c;
            return 0;
        }
        rm_nsec now = rm_now();
        unsigned max = RM_SETTING(pool_size);
        if (ep->open < max && now >= ep->dial_not_before) {
            ep->open++;
            int first = !ep->policy_checked;
            ep->policy_checked = 1;
            pthread_mutex_unlock(&ep->mu);

            struct rm_conn *c = NULL;
            int r = rm_conn_dial(&ep->addr, "cmd", deadline, &c);
            if (!r && first) check_policy(ep, c);

            pthread_mutex_lock(&ep->mu);
            if (!r) {
                c->count_round_trips = 1;
                c->next = ep->all;
                c->prev = NULL;
                if (ep->all) ep->all->prev = c;
                ep->all = c;
                RM_COUNT(connections);
                if (ep->dial_failures || ep->broken) RM_COUNT(reconnects);
                if (ep->broken) ep->broken--;
                ep->dial_failures = 0;
                pthread_mutex_unlock(&ep->mu);
                rm_endpoint_reachable(ep, 1);
                *out = c;
                return 0;
            }
            ep->open--;
            if (first) ep->policy_checked = 0;
            ep->dial_not_before = rm_now() + rm_backoff(ep->dial_failures++, RM_MSEC(10),
                                                        RM_MSEC(1000), &ep->rng);
            pthread_cond_broadcast(&ep->cv);
            pthread_mutex_unlock(&ep->mu);
            if (r == RM_E_UNSENT) rm_endpoint_reachable(ep, 0);
            /* One dial per call: the caller decides whether and when to try
             * again (its own backoff and deadline). */
            return r;
        }
        if (ep->open < max && (flags & RM_POOL_FAILFAST)) {
            rm_detail("Redis at %s is unreachable (retrying in %lld ms)", ep->addr.display,
                      (long long)RM_TO_MSEC(ep->dial_not_before - now));
            pthread_mutex_unlock(&ep->mu);
            return RM_E_UNSENT;
        }
        rm_nsec until = deadline;
        if (ep->open < max && ep->dial_not_before < until) until = ep->dial_not_before;
        if (rm_cond_wait_until(&ep->cv, &ep->mu, until) == ETIMEDOUT && rm_now() >= deadline)
            break;
    }
    if (ep->dial_failures)
        rm_detail("Redis at %s is unreachable", ep->addr.display);
    else
        rm_detail("all %u connections to %s stayed busy until the deadline", ep->open,
                  ep->addr.display);
    pthread_mutex_unlock(&ep->mu);
    return RM_E_UNSENT;
}

void rm_pool_put(struct rm_endpoint *ep, struct rm_conn *c, int ok)
{
    pthread_mutex_lock(&ep->mu);
    if (ok && c->wlen == 0) {
        c->idle_next = ep->idle;
        ep->idle = c;
        pthread_cond_signal(&ep->cv);
        pthread_mutex_unlock(&ep->mu);
        return;
    }
    forget(ep, c);
    ep->broken++; /* its replacement is a reconnect */
    pthread_cond_broadcast(&ep->cv);
    pthread_mutex_unlock(&ep->mu);
    rm_conn_close(c);
}

void rm_pool_atfork(struct rm_endpoint *ep, int who)
{
    if (who < 0) {
        pthread_mutex_lock(&ep->mu);
        return;
    }
    if (who == 0) {
        pthread_mutex_unlock(&ep->mu);
        return;
    }
    /* Child: the parent's connections are not ours to speak on. */
    while (ep->all) {
        struct rm_conn *c = ep->all;
        ep->all = c->next;
        rm_conn_close(c);
    }
    ep->idle = NULL;
    ep->open = 0;
    ep->dial_failures = 0;
    ep->broken = 0;
    atomic_store(&ep->down, 0);
    ep->dial_not_before = 0;
    ep->rng ^= (uint32_t)getpid();
    rm_cond_init(&ep->cv);
    pthread_mutex_unlock(&ep->mu); /* taken by the prepare handler, in this thread */
}
