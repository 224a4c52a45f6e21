/* pool.h -- one server's pool of command connections. */
#ifndef RM_POOL_H
#define RM_POOL_H

#include <pthread.h>
#include <stdint.h>

#include "clock.h"
#include "config.h"
#include "conn.h"

struct rm_pool {
    const struct rm_server_addr *addr; /* the endpoint's */
    struct rm_reach reach;     /* told when a dial reaches the server or not */

    pthread_mutex_t mu;        /* protects the fields below */
    pthread_cond_t cv;         /* a connection came back or a dial ended */
    struct rm_conn *idle;      /* idle connections, most recent first */
    struct rm_conn *all;       /* every pooled connection, idle or lent */
    unsigned open;             /* connections open or being dialled */
    rm_nsec dial_not_before;   /* backoff after failed dials */
    unsigned dial_failures;
    int refused;               /* the last dial's login was refused: EACCES/EINVAL, else 0 */
    char refusal[512];         /* ... and the detail that said so */
    unsigned refusal_kept;     /* dials since that failed without an answer (pool.c) */
    unsigned broken;           /* connections dropped after errors, not yet replaced */
    uint32_t rng;
    int policy_checked;        /* maxmemory-policy was read */
    int draining;              /* the server is no longer the primary: close on put */
    int preload;               /* load the scripts on every new connection */
    unsigned spares;           /* connections lent as spares (RM_POOL_SPARE) */
};

/* Set up an empty pool for addr (kept by reference: it must outlive the
 * pool); close every connection of one (none may be lent out). */
void rm_pool_init(struct rm_pool *p, const struct rm_server_addr *addr, struct rm_reach reach);
void rm_pool_fini(struct rm_pool *p);

enum {
    RM_POOL_FAILFAST = 1, /* do not wait out a dial backoff */
    RM_POOL_SPARE = 2,    /* an idle connection at once, and only while another one
                             stays for the calls of threads that hold a spare */
};

/* Lend the caller a connection for its exclusive use: an idle one, else a
 * new one if the pool is not full (one dial per call; a failed dial
 * returns at once), else wait for one to come back, all before deadline.
 * With SPARE: an idle one or RM_E_UNSENT at once, never the last the pool
 * can lend -- its holder makes another call before giving it back (a call
 * sent ahead, call.c), and that call must never wait for a spare.
 * While dials are backing off after failures, waits for the backoff (or,
 * with FAILFAST, returns at once).  Returns 0; RM_E_UNSENT (no connection
 * by the deadline, server unreachable); EACCES/EINVAL when the server
 * refuses our login (at once, with the same detail, until the backoff
 * lets a dial ask again); ENOMEM.  The detail says why. */
int rm_pool_get(struct rm_pool *p, rm_nsec deadline, int flags, struct rm_conn **out);

/* Give c back.  ok = 0 after any error: c is closed, never reused. */
void rm_pool_put(struct rm_pool *p, struct rm_conn *c, int ok);

/* on: the server is no longer the one to use (a Sentinel failover):
 * close the idle connections now and each lent one when it comes back.
 * off: use it again. */
void rm_pool_drain(struct rm_pool *p, int on);

/* fork(): lock the pool in the prepare handler, unlock in the parent; the
 * child closes the parent's sockets (without sending) and starts empty. */
void rm_pool_atfork(struct rm_pool *p, int who);

#endif
