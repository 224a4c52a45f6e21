/* node.h -- one Redis server this process talks to, and everything per
 * server: the command pool, the subscription multiplexer, whether it is
 * reachable. */
#ifndef RM_NODE_H
#define RM_NODE_H

#include "config.h"
#include "pool.h"
#include "sub.h"

struct rm_node {
    struct rm_server_addr addr; /* the node's own copy */
    _Atomic int down;           /* the last dial failed (outage reported) */
    _Atomic unsigned replicas;  /* how many replicas the topology knows it has */
    _Atomic int gone;           /* no longer in the topology: drained */
    struct rm_pool pool;        /* command connections */
    struct rm_sub *sub;         /* the multiplexer, started lazily */
    struct rm_node *next;       /* the endpoint's list of every node */
};

/* Create / destroy a node for addr (copied, password included).  flags:
 * RM_NODE_SHARDED, its multiplexer subscribes sharded (SSUBSCRIBE) and
 * tells hook what it learns of the topology; RM_NODE_PRELOAD, its pool
 * loads the scripts on every new connection (a node that may have just
 * been promoted).  Destroy closes every connection; nothing may be lent
 * out. */
enum { RM_NODE_SHARDED = 1, RM_NODE_PRELOAD = 2 };
int rm_node_create(const struct rm_server_addr *addr, int flags, struct rm_topo_hook hook,
                   struct rm_node **out);
void rm_node_destroy(struct rm_node *n);

/* How a module that dials n tells it whether the server was reached. */
struct rm_reach rm_node_reach(struct rm_node *n);

/* fork(): -1 lock (prepare), 0 unlock (parent), 1 child: the child's
 * node forgets the parent's connections and threads. */
void rm_node_atfork(struct rm_node *n, int who);

#endif
