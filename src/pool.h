/* pool.h -- a Redis endpoint and its pool of command connections. */
#ifndef RM_POOL_H
#define RM_POOL_H

#include <pthread.h>

#include "clock.h"
#include "config.h"

struct rm_conn;
struct rm_sub;

/* One Redis server this process talks to.  Everything that is per server
 * hangs off it: the command pool (here), the subscription multiplexer
 * (sub.c) and the watchdog's connection (watchdog.c).  A standalone
 * server is one endpoint; a cluster will be one per node. */
struct rm_endpoint {
    struct rm_server_addr addr;

    pthread_mutex_t mu;        /* protects the pool fields below */
    pthread_cond_t cv;         /* a connection came back or a dial ended */
    struct rm_conn *idle;      /* idle connections, most recent first */
    struct rm_conn *all;       /* every pooled connection, idle or lent */
    unsigned open;             /* connections open or being dialled */
    rm_nsec dial_not_before;   /* backoff after failed dials */
    unsigned dial_failures;
    unsigned broken;           /* connections dropped after errors, not yet replaced */
    uint32_t rng;
    int policy_checked;        /* maxmemory-policy was read */
    _Atomic int down;          /* the last dial failed (outage reported) */

    struct rm_sub *sub;        /* created with the endpoint, started lazily */
};

/* Create / destroy an endpoint for addr (copied; the password is kept).
 * Destroy closes every connection; nothing may be lent out. */
int rm_endpoint_create(const struct rm_server_addr *addr, struct rm_endpoint **out);
void rm_endpoint_destroy(struct rm_endpoint *ep);

enum { RM_POOL_FAILFAST = 1 }; /* do not wait out a dial backoff */

/* Lend the caller a connection for its exclusive use: an idle one, else a
 * new one if the pool is not full (one dial per call; a failed dial
 * returns at once), else wait for one to come back, all before deadline.
 * While dials are backing off after failures, waits for the backoff (or,
 * with FAILFAST, returns at once).  Returns 0; RM_E_UNSENT (no connection
 * by the deadline, server unreachable); EACCES/EINVAL when the server
 * refuses our login; ENOMEM.  The detail says why. */
int rm_pool_get(struct rm_endpoint *ep, rm_nsec deadline, int flags, struct rm_conn **out);

/* Give c back.  ok = 0 after any error: c is closed, never reused. */
void rm_pool_put(struct rm_endpoint *ep, struct rm_conn *c, int ok);

/* A dial to ep by any module (pool, multiplexer, watchdog) succeeded (ok)
 * or could not reach the server: on a change, tell the outage callback. */
void rm_endpoint_reachable(struct rm_endpoint *ep, int ok);

/* fork(): lock the pool in the prepare handler, unlock in the parent; the
 * child closes the parent's sockets (without sending) and starts empty. */
void rm_pool_atfork(struct rm_endpoint *ep, int who);

#endif
