/* endpoint.h -- one Redis server this process talks to, and everything per
 * server: the command pool, the subscription multiplexer, whether it is
 * reachable. */
#ifndef RM_ENDPOINT_H
#define RM_ENDPOINT_H

#include "config.h"
#include "pool.h"

struct rm_sub;

struct rm_endpoint {
    struct rm_server_addr addr; /* the endpoint's own copy */
    _Atomic int down;           /* the last dial failed (outage reported) */
    _Atomic unsigned replicas;  /* how many replicas the topology knows it has */
    struct rm_pool pool;        /* command connections */
    struct rm_sub *sub;         /* the multiplexer, started lazily */
};

/* Create / destroy an endpoint for addr (copied, password included).
 * Destroy closes every connection; nothing may be lent out. */
int rm_endpoint_create(const struct rm_server_addr *addr, struct rm_endpoint **out);
void rm_endpoint_destroy(struct rm_endpoint *ep);

/* How a module that dials ep tells it whether the server was reached. */
struct rm_reach rm_endpoint_reach(struct rm_endpoint *ep);

/* fork(): -1 lock (prepare), 0 unlock (parent), 1 child: the child's
 * endpoint forgets the parent's connections and threads. */
void rm_endpoint_atfork(struct rm_endpoint *ep, int who);

#endif
