/* endpoint.c -- one Redis server and what hangs off it.
 *
 * An endpoint owns the server's address, its command pool (pool.c) and its
 * subscription multiplexer (sub.c), and knows whether the server is
 * reachable.  The watchdog keeps its own connection per endpoint
 * (watchdog.c).  Everything that dials -- pool, multiplexer, watchdog --
 * reports each dial's fate through the endpoint's reach callback, and the
 * endpoint turns changes into calls of the outage callback
 * (rmutex_set_outage_callback): reachable -> unreachable once, and back.
 * Pool and multiplexer know only an address and that callback, so the
 * dependencies point one way: endpoint -> pool, multiplexer -> connection.
 * A standalone server is one endpoint. */
#include "endpoint.h"
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
    struct rm_endpoint *ep = arg;
    if (atomic_exchange(&ep->down, !ok) == !ok) return; /* no change */
    rm_log("Redis at %s is %s", ep->addr.display, ok ? "reachable again" : "unreachable");
    pthread_mutex_lock(&outage.mu);
    rmutex_outage_fn fn = outage.fn;
    void *fn_arg = outage.arg;
    pthread_mutex_unlock(&outage.mu);
    if (fn) fn(!ok, ok ? "" : rmutex_detail(), fn_arg);
}

struct rm_reach rm_endpoint_reach(struct rm_endpoint *ep)
{
    struct rm_reach r = { reachable, ep };
    return r;
}

int rm_endpoint_create(const struct rm_server_addr *addr, struct rm_endpoint **out)
{
    struct rm_endpoint *ep = calloc(1, sizeof *ep);
    if (!ep) return ENOMEM;
    ep->addr = *addr;
    ep->addr.user = addr->user ? strdup(addr->user) : NULL;
    ep->addr.password = addr->password ? strdup(addr->password) : NULL;
    if ((addr->user && !ep->addr.user) || (addr->password && !ep->addr.password) ||
        rm_sub_create(&ep->addr, rm_endpoint_reach(ep), &ep->sub)) {
        rm_config_addr_free(&ep->addr);
        free(ep);
        return ENOMEM;
    }
    rm_pool_init(&ep->pool, &ep->addr, rm_endpoint_reach(ep));
    *out = ep;
    return 0;
}

void rm_endpoint_destroy(struct rm_endpoint *ep)
{
    if (!ep) return;
    rm_sub_destroy(ep->sub);
    rm_pool_fini(&ep->pool);
    rm_config_addr_free(&ep->addr);
    free(ep);
}

void rm_endpoint_atfork(struct rm_endpoint *ep, int who)
{
    if (who < 0) {
        rm_sub_atfork(ep->sub, -1);
        rm_pool_atfork(&ep->pool, -1);
        return;
    }
    rm_pool_atfork(&ep->pool, who);
    rm_sub_atfork(ep->sub, who);
    if (who == 1) atomic_store(&ep->down, 0);
}
