/* node.c -- one Redis server and what hangs off it.
 *
 * A node owns the server's address, its command pool (pool.c) and its
 * subscription multiplexer (sub.c), and knows whether the server is
 * reachable.  The watchdog keeps its own connection per node
 * (watchdog.c).  Everything that dials -- pool, multiplexer, watchdog --
 * reports each dial's fate through the node's reach callback, and the node
 * turns changes into calls of the outage callback
 * (rmutex_set_outage_callback): reachable -> unreachable once, and back.
 * Pool and multiplexer know only an address and that callback, so the
 * dependencies point one way: node -> pool, multiplexer -> connection.
 * Which nodes there are, and which serves a key, is the endpoint's
 * business (endpoint.c): a plain server is one node, a cluster one per
 * primary, Sentinel one per primary it has named. */
#include "node.h"
#include "internal.h"
#include "sub.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* A dial to ep by any module succeeded (ok) or could not reach the server:
 * on a change, tell the outage callback. */
static void reachable(void *arg, int ok)
{
    struct rm_node *n = arg;
    if (atomic_exchange(&n->down, !ok) == !ok) return; /* no change */
    rm_log("Redis at %s is %s", n->addr.display, ok ? "reachable again" : "unreachable");
    pthread_mutex_lock(&outage.mu);
    rmutex_outage_fn fn = outage.fn;
    void *fn_arg = outage.arg;
    pthread_mutex_unlock(&outage.mu);
    if (fn) fn(!ok, ok ? "" : rmutex_detail(), fn_arg);
}

struct rm_reach rm_node_reach(struct rm_node *n)
{
    struct rm_reach r = { reachable, n };
    return r;
}

int rm_node_create(const struct rm_server_addr *addr, int flags, struct rm_topo_hook hook,
                   struct rm_node **out)
{
    struct rm_node *n = calloc(1, sizeof *n);
    if (!n) return ENOMEM;
    n->addr = *addr;
    n->addr.user = addr->user ? strdup(addr->user) : NULL;
    n->addr.password = addr->password ? strdup(addr->password) : NULL;
    if ((addr->user && !n->addr.user) || (addr->password && !n->addr.password) ||
        rm_sub_create(&n->addr, rm_node_reach(n), !!(flags & RM_NODE_SHARDED), hook, &n->sub)) {
        rm_config_addr_free(&n->addr);
        free(n);
        return ENOMEM;
    }
    rm_pool_init(&n->pool, &n->addr, rm_node_reach(n));
    n->pool.preload = !!(flags & RM_NODE_PRELOAD);
    *out = n;
    return 0;
}

void rm_node_destroy(struct rm_node *n)
{
    if (!n) return;
    rm_sub_destroy(n->sub);
    rm_pool_fini(&n->pool);
    rm_config_addr_free(&n->addr);
    free(n);
}

void rm_node_atfork(struct rm_node *n, int who)
{
    if (who < 0) {
        rm_sub_atfork(n->sub, -1);
        rm_pool_atfork(&n->pool, -1);
        return;
    }
    rm_pool_atfork(&n->pool, who);
    rm_sub_atfork(n->sub, who);
    if (who == 1) atomic_store(&n->down, 0);
}
