/* endpoint.c -- the deployment behind the URL, and which node serves a key.
 *
 * DESIGN
 * ------
 * A plain server (redis://, unix://) is one node (node.c: its pool, its
 * multiplexer) and every key goes there.
 *
 * A cluster (redis-cluster://seed,seed...) is one node per primary, and a
 * slot map: RM_SLOTS atomic pointers to nodes, read without a lock on
 * every call.  Every key and channel of a lock shares one slot (keys.c),
 * so a whole script call goes to one node.  The map comes from CLUSTER
 * SLOTS (cluster.c), read by one refresher thread per endpoint, so at most
 * one refresh is in flight and requests for one coalesce:
 *
 *   - at the first call (which waits for it, within its deadline);
 *   - every `refresh` ms (URL option, 5 s) while the process uses it;
 *   - soon after a MOVED (the slot itself is updated at once by the caller
 *     that got it), a node that cannot be reached, CLUSTERDOWN, or a
 *     subscription the server took away -- asked of another node than the
 *     one that failed, and no sooner than MIN_GAP after the previous one.
 *
 * A map that covers no slot or fewer slots than the current one is
 * believed only if a second node gives the same map: a node failing over
 * has been seen answering with only itself, and believing it would drop
 * every other slot.  Only primaries become nodes; replicas are counted
 * (for replicas=auto), never sent to.  Nodes are never freed before
 * shutdown: a pointer read from the map stays valid however the map
 * changes; a node that left the map is marked gone and its pool drains.
 *
 * Sentinel (redis-sentinel://sentinel,sentinel.../name) is one node at a
 * time: the primary the sentinels name (sentinel.c), asked at the first
 * call, re-asked when the primary fails a call or answers READONLY, and
 * followed at once on +switch-master, to which the refresher thread stays
 * subscribed on one sentinel.  The old primary's node is drained.
 *
 * Redirections (rm_endpoint_redirect) are followed by the caller (call.c);
 * this file turns the address in them into a node.
 *
 * fork(): the child keeps the map and the nodes, without their
 * connections and threads; they come back on first use. */
#include "endpoint.h"
#include "cluster.h"
#include "conn.h"
#include "internal.h"
#include "node.h"
#include "sentinel.h"
#include "sub.h"

#include <arpa/inet.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIN_GAP RM_MSEC(100)

struct rm_endpoint {
    struct rm_service svc;
    pthread_mutex_t mu;          /* the fields below but the atomics */
    pthread_cond_t changed;      /* a refresh ended */
    pthread_cond_t wake;         /* the refresher has work, or must stop */
    struct rm_node *nodes;       /* every node, in the map or not */
    _Atomic(struct rm_node *) single;  /* not a cluster: the node */
    _Atomic(struct rm_node *) *slots;  /* a cluster: RM_SLOTS owners */
    unsigned long version;       /* refreshes ended */
    unsigned covered;            /* slots the map has an owner for */
    pthread_t thread;
    int started, stop, want;
    struct rm_server_addr avoid; /* not to be asked (salen 0: none) */
    rm_nsec last;                /* when the last refresh ended */
    char why[200];               /* why the last refresh failed */
    _Atomic int refused;         /* ... EACCES when a login was refused: a caller is
                                    answered that, not "unreachable" */
    struct rm_conn *watch;       /* Sentinel: subscribed to +switch-master */
    uint32_t rng;
};

static void topo_hook(void *arg, const char *moved, size_t len);

int rm_endpoint_clustered(const struct rm_endpoint *ep) { return ep->slots != NULL; }

int rm_endpoint_follows(const struct rm_endpoint *ep) { return ep->svc.mode != RM_MODE_SERVER; }

const char *rm_endpoint_publish(const struct rm_endpoint *ep)
{
    return ep->slots ? "spublish" : "publish";
}

const char *rm_endpoint_display(const struct rm_endpoint *ep) { return ep->svc.display; }

/* The node for addr, created if new (addr is copied).  Under ep->mu. */
static struct rm_node *node_locked(struct rm_endpoint *ep, const struct rm_server_addr *addr)
{
    for (struct rm_node *n = ep->nodes; n; n = n->next)
        if (rm_config_same_addr(&n->addr, addr)) return n;
    struct rm_topo_hook hook = { topo_hook, ep };
    struct rm_node *n;
    int flags = (ep->slots ? RM_NODE_SHARDED : 0) | (ep->svc.mode != RM_MODE_SERVER ? RM_NODE_PRELOAD : 0);
    if (rm_node_create(addr, flags, hook, &n)) return NULL;
    n->next = ep->nodes;
    ep->nodes = n;
    return n;
}

int rm_endpoint_create(struct rm_service *svc, struct rm_endpoint **out)
{
    struct rm_endpoint *ep = calloc(1, sizeof *ep);
    if (!ep) return ENOMEM;
    ep->svc = *svc;
    memset(svc, 0, sizeof *svc);
    pthread_mutex_init(&ep->mu, NULL);
    rm_clock_cond_init(&ep->changed);
    rm_clock_cond_init(&ep->wake);
    ep->rng = (uint32_t)getpid() ^ (uint32_t)(uintptr_t)ep;
    if (ep->svc.mode == RM_MODE_CLUSTER) {
        if (!(ep->slots = calloc(RM_SLOTS, sizeof *ep->slots))) goto fail;
    } else if (ep->svc.mode == RM_MODE_SERVER) {
        struct rm_node *n = node_locked(ep, &ep->svc.seeds[0]);
        if (!n) goto fail;
        atomic_store(&ep->single, n);
    }
    *out = ep;
    return 0;
fail:
    rm_endpoint_destroy(ep);
    return ENOMEM;
}

void rm_endpoint_destroy(struct rm_endpoint *ep)
{
    if (!ep) return;
    pthread_mutex_lock(&ep->mu);
    int started = ep->started;
    ep->stop = 1;
    pthread_cond_signal(&ep->wake);
    pthread_mutex_unlock(&ep->mu);
    if (started) pthread_join(ep->thread, NULL);
    while (ep->nodes) {
        struct rm_node *n = ep->nodes;
        ep->nodes = n->next;
        rm_node_destroy(n);
    }
    if (ep->watch) rm_conn_close(ep->watch);
    free(ep->slots);
    rm_config_service_free(&ep->svc);
    rm_config_addr_free(&ep->avoid);
    pthread_cond_destroy(&ep->changed);
    pthread_cond_destroy(&ep->wake);
    pthread_mutex_destroy(&ep->mu);
    free(ep);
}

/* ---- the refresher ---- */

/* The numeric host of a, for a map entry that names no host ("": the node
 * that answered). */
static void numeric_host(const struct rm_server_addr *a, char *buf, size_t n)
{
    buf[0] = 0;
    if (a->sa.ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->sa)->sin_addr, buf, (socklen_t)n);
    else if (a->sa.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->sa)->sin6_addr, buf, (socklen_t)n);
}

/* Make m (read from asked) the map: nodes for its primaries, every slot. */
static int apply(struct rm_endpoint *ep, const struct rm_cluster_map *m,
                 const struct rm_server_addr *asked)
{
    struct rm_server_addr *addrs = calloc(m->nprimaries ? m->nprimaries : 1, sizeof *addrs);
    struct rm_node **nodes = calloc(m->nprimaries ? m->nprimaries : 1, sizeof *nodes);
    int r = addrs && nodes ? 0 : ENOMEM;
    for (unsigned i = 0; !r && i < m->nprimaries; i++) {
        char host[64];
        snprintf(host, sizeof host, "%s", m->primaries[i].host);
        if (!host[0]) numeric_host(asked, host, sizeof host);
        r = rm_config_node_addr(host, m->primaries[i].port, &ep->svc.node_login, &addrs[i]);
    }
    if (!r) {
        pthread_mutex_lock(&ep->mu);
        for (struct rm_node *n = ep->nodes; n; n = n->next) atomic_store(&n->gone, 1);
        for (unsigned i = 0; i < m->nprimaries; i++) {
            if (!(nodes[i] = node_locked(ep, &addrs[i]))) {
                r = ENOMEM;
                break;
            }
            atomic_store(&nodes[i]->gone, 0);
            atomic_store(&nodes[i]->replicas, m->primaries[i].replicas);
            rm_log("cluster map: primary %s, %u replica(s)", nodes[i]->addr.display,
                   m->primaries[i].replicas);
        }
        if (!r) {
            for (unsigned s = 0; s < RM_SLOTS; s++)
                atomic_store_explicit(&ep->slots[s], m->owner[s] ? nodes[m->owner[s] - 1] : NULL,
                                      memory_order_release);
            ep->covered = m->covered;
        }
        pthread_mutex_unlock(&ep->mu);
    }
    for (unsigned i = 0; addrs && i < m->nprimaries; i++) rm_config_addr_free(&addrs[i]);
    free(addrs);
    free(nodes);
    if (r) rm_detail("out of memory");
    return r;
}

/* One refresh: ask the primaries (not avoid), then the seeds, until one
 * gives a map we believe.  Returns 0 or the last error (detail set). */
static int refresh(struct rm_endpoint *ep, const struct rm_server_addr *avoid)
{
    /* Candidates: the nodes of the map (pointers stay valid), then seeds. */
    const struct rm_server_addr *cand[64];
    unsigned nc = 0;
    pthread_mutex_lock(&ep->mu);
    unsigned covered = ep->covered;
    for (struct rm_node *n = ep->nodes; n && nc < 48; n = n->next)
        if (!atomic_load(&n->gone) && !(avoid->salen && rm_config_same_addr(&n->addr, avoid)))
            cand[nc++] = &n->addr;
    uint32_t start = nc ? (uint32_t)rm_clock_backoff(0, 1000, 1000, &ep->rng) % nc : 0;
    pthread_mutex_unlock(&ep->mu);
    /* Start at a random one, so that processes spread their questions. */
    for (unsigned i = 0; i < start; i++) {
        const struct rm_server_addr *t = cand[0];
        memmove(cand, cand + 1, (nc - 1) * sizeof *cand);
        cand[nc - 1] = t;
    }
    for (unsigned i = 0; i < ep->svc.nseeds && nc < 64; i++) cand[nc++] = &ep->svc.seeds[i];

    struct rm_cluster_map m = { 0 }, doubt = { 0 };
    int have_doubt = 0, r = RM_E_UNSENT, refused = 0;
    char refusal[200] = "";
    for (unsigned i = 0; i < nc; i++) {
        struct rm_conn *c;
        rm_nsec deadline = rm_clock_after(RM_MSEC(RM_SETTING(connect_timeout_ms)) +
                                          RM_MSEC(RM_SETTING(command_timeout_ms)));
        if ((r = rm_conn_dial(cand[i], "topo", deadline, &c))) {
            if (r == EACCES && !refused) { /* the same login goes to every node */
                refused = EACCES;
                snprintf(refusal, sizeof refusal, "%s", rmutex_detail());
            }
            continue;
        }
        r = rm_cluster_slots(c, deadline, &m);
        rm_conn_close(c);
        if (r) continue;
        if (m.covered >= covered && m.covered > 0) {
            r = apply(ep, &m, cand[i]);
            break;
        }
        /* Fewer slots than we know of: believe it when a second node
         * says the same. */
        if (have_doubt && rm_cluster_map_same(&doubt, &m)) {
            r = apply(ep, &m, cand[i]);
            break;
        }
        rm_cluster_map_free(&doubt);
        doubt = m;
        memset(&m, 0, sizeof m);
        have_doubt = 1;
        rm_detail("%s answered a map of %u slots (we know %u); waiting for a second opinion",
                  cand[i]->display, doubt.covered, covered);
        r = EIO;
    }
    rm_cluster_map_free(&m);
    rm_cluster_map_free(&doubt);
    if (r && refused) { /* no node gave a map, and one refused the login: say that */
        rm_detail("%s", refusal);
        r = EACCES;
    }
    return r;
}

/* Sentinel: ask who the primary is, and switch to it if it changed: the
 * old one's pool drains, its waiters join again at the new one, and calls
 * and renewals route to the new one from now on. */
static int resolve(struct rm_endpoint *ep)
{
    struct rm_sentinel_answer a;
    struct rm_server_addr addr;
    int r = rm_sentinel_resolve(&ep->svc, &a);
    if (r) return r;
    if ((r = rm_config_node_addr(a.host, a.port, &ep->svc.node_login, &addr))) return r;
    pthread_mutex_lock(&ep->mu);
    struct rm_node *n = node_locked(ep, &addr), *old = atomic_load(&ep->single);
    if (n) {
        atomic_store(&n->replicas, a.replicas);
        if (n != old) {
            atomic_store(&n->gone, 0);
            rm_pool_drain(&n->pool, 0);
            atomic_store_explicit(&ep->single, n, memory_order_release);
        }
    }
    pthread_mutex_unlock(&ep->mu);
    rm_config_addr_free(&addr);
    if (!n) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    if (old && old != n) {
        rm_log("the primary of %s is now %s (was %s)", ep->svc.master, n->addr.display, old->addr.display);
        atomic_store(&old->gone, 1);
        rm_pool_drain(&old->pool, 1);
        rm_sub_move_all(old->sub);
    }
    return 0;
}

/* Sentinel: wait for a +switch-master until next (a short slice at a
 * time, so a request for a refresh is seen soon).  Under ep->mu. */
static void watch_locked(struct rm_endpoint *ep, rm_nsec next)
{
    struct rm_conn *w = ep->watch;
    pthread_mutex_unlock(&ep->mu);
    if (!w && rm_sentinel_watch(&ep->svc, &w)) w = NULL;
    int switched = 0;
    if (w) {
        rm_nsec left = next - rm_clock_now();
        if (left > RM_MSEC(50)) left = RM_MSEC(50);
        struct pollfd p = { w->fd, POLLIN, 0 };
        if (left > 0 && poll(&p, 1, (int)(left / 1000000) + 1) > 0) {
            switched = rm_sentinel_switched(&ep->svc, w);
            if (switched < 0) {
                rm_conn_close(w);
                w = NULL;
            }
        }
    } else {
        rm_clock_sleep_until(rm_clock_min(next, rm_clock_after(RM_MSEC(50))));
    }
    pthread_mutex_lock(&ep->mu);
    ep->watch = w;
    if (switched > 0) {
        rm_log("+switch-master for %s", ep->svc.master);
        ep->want = 1;
        ep->last = 0; /* resolve now */
    }
}

static void *refresher(void *arg)
{
    struct rm_endpoint *ep = arg;
    pthread_setname_np(pthread_self(), "rmutex-topo");
    pthread_mutex_lock(&ep->mu);
    while (!ep->stop) {
        rm_nsec now = rm_clock_now();
        rm_nsec next = ep->last + RM_MSEC(ep->svc.refresh_ms);
        if (ep->want) next = rm_clock_min(next, ep->last + MIN_GAP);
        if (now < next) {
            if (ep->slots) rm_clock_cond_wait_until(&ep->wake, &ep->mu, next);
            else watch_locked(ep, next);
            continue;
        }
        struct rm_server_addr avoid = ep->avoid;
        memset(&ep->avoid, 0, sizeof ep->avoid);
        ep->want = 0;
        pthread_mutex_unlock(&ep->mu);
        int r = ep->slots ? refresh(ep, &avoid) : resolve(ep);
        rm_log("%s refresh: %s", ep->slots ? "cluster map" : "sentinel", r ? rmutex_detail() : "ok");
        RM_COUNT(map_refreshes);
        pthread_mutex_lock(&ep->mu);
        if (r) snprintf(ep->why, sizeof ep->why, "%s", rmutex_detail());
        atomic_store(&ep->refused, r == EACCES ? EACCES : 0);
        ep->last = rm_clock_now();
        ep->version++;
        pthread_cond_broadcast(&ep->changed);
    }
    pthread_mutex_unlock(&ep->mu);
    return NULL;
}

/* Ask for a refresh (of another node than avoid).  Under ep->mu. */
static void ask_locked(struct rm_endpoint *ep, const struct rm_node *avoid)
{
    if (ep->svc.mode == RM_MODE_SERVER || ep->stop) return;
    if (avoid && !ep->avoid.salen) {
        ep->avoid.sa = avoid->addr.sa;
        ep->avoid.salen = avoid->addr.salen;
    }
    ep->want = 1;
    if (!ep->started) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (!pthread_create(&ep->thread, NULL, refresher, ep)) ep->started = 1;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    pthread_cond_signal(&ep->wake);
}

void rm_endpoint_suspect(struct rm_endpoint *ep, struct rm_node *failed)
{
    if (ep->svc.mode == RM_MODE_SERVER) return;
    pthread_mutex_lock(&ep->mu);
    ask_locked(ep, failed);
    pthread_mutex_unlock(&ep->mu);
}

/* The node that serves slot now, as far as we know (NULL: nobody). */
static struct rm_node *current(struct rm_endpoint *ep, int slot)
{
    return atomic_load_explicit(ep->slots ? &ep->slots[slot] : &ep->single, memory_order_acquire);
}

struct rm_node *rm_endpoint_route(struct rm_endpoint *ep, int slot, rm_nsec deadline)
{
    struct rm_node *n = current(ep, slot);
    if (n || ep->svc.mode == RM_MODE_SERVER) return n;
    /* No owner known: wait for the end of a refresh that starts now. */
    pthread_mutex_lock(&ep->mu);
    unsigned long v = ep->version;
    ask_locked(ep, NULL);
    while (!(n = current(ep, slot)) && ep->version == v && ep->started && !ep->stop)
        if (rm_clock_cond_wait_until(&ep->changed, &ep->mu, deadline) == ETIMEDOUT) break;
    if (!n && !ep->slots) {
        if (ep->why[0]) rm_detail("%s", ep->why);
        else rm_detail("no primary from the sentinels of %s in time", ep->svc.display);
    } else if (!n) {
        if (ep->version == 0 && !ep->why[0])
            rm_detail("no cluster map from %s in time", ep->svc.display);
        else if (ep->covered)
            rm_detail("no primary serves slot %d (the map covers %u slots)", slot, ep->covered);
        else
            rm_detail("no cluster map from %s: %s", ep->svc.display, ep->why);
    }
    pthread_mutex_unlock(&ep->mu);
    return n;
}

int rm_endpoint_refused(const struct rm_endpoint *ep) { return atomic_load(&ep->refused); }

int rm_endpoint_primaries(struct rm_endpoint *ep, struct rm_node **out, int max, rm_nsec deadline)
{
    struct rm_node *n = rm_endpoint_route(ep, 0, deadline);
    if (!ep->slots) {
        if (n && max > 0) out[0] = n;
        return n && max > 0;
    }
    int count = 0;
    for (int s = 0; s < RM_SLOTS && count < max; s++) {
        if (!(n = current(ep, s))) continue;
        int seen = 0;
        for (int i = 0; i < count && !seen; i++) seen = out[i] == n;
        if (!seen) out[count++] = n;
    }
    if (!count) rm_detail("no cluster map from %s in time", ep->svc.display);
    return count;
}

struct rm_node *rm_endpoint_reroute(struct rm_endpoint *ep, int slot, struct rm_node *failed,
                                    rm_nsec deadline)
{
    if (ep->svc.mode == RM_MODE_SERVER) return NULL;
    pthread_mutex_lock(&ep->mu);
    unsigned long v = ep->version;
    ask_locked(ep, failed);
    struct rm_node *n;
    while ((n = current(ep, slot)) == failed && ep->started) {
        if (ep->version != v) { /* a refresh that still names failed: ask again */
            v = ep->version;
            ask_locked(ep, failed);
        }
        if (rm_clock_cond_wait_until(&ep->changed, &ep->mu, deadline) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&ep->mu);
    return n && n != failed ? n : NULL;
}

/* The node at host:port ("" : from's host), created if new. */
static struct rm_node *node_at(struct rm_endpoint *ep, const char *host, unsigned port,
                               const struct rm_node *from)
{
    char ip[64];
    if (!host[0] && from) {
        numeric_host(&from->addr, ip, sizeof ip);
        host = ip;
    }
    struct rm_server_addr a;
    if (rm_config_node_addr(host, port, &ep->svc.node_login, &a)) return NULL;
    pthread_mutex_lock(&ep->mu);
    struct rm_node *n = node_locked(ep, &a);
    pthread_mutex_unlock(&ep->mu);
    rm_config_addr_free(&a);
    return n;
}

struct rm_node *rm_endpoint_redirect(struct rm_endpoint *ep, const redisReply *r,
                                     struct rm_node *from, int *ask)
{
    int slot;
    unsigned port;
    char host[64];
    if (!ep->slots || r->type != REDIS_REPLY_ERROR) return NULL;
    int kind = rm_cluster_redirect(r->str, r->len, &slot, host, sizeof host, &port);
    if (!kind) return NULL;
    *ask = kind == RM_CLUSTER_ASK;
    RM_COUNT_ADD(redirects_moved, (uint64_t)!*ask);
    RM_COUNT_ADD(redirects_ask, (uint64_t)*ask);
    struct rm_node *n = strcmp(host, "?") ? node_at(ep, host, port, from) : NULL;
    if (!*ask) {
        if (n) atomic_store_explicit(&ep->slots[slot], n, memory_order_release);
        rm_endpoint_suspect(ep, NULL);
    }
    if (!n) rm_detail("cannot follow the redirection '%.*s'", (int)(r->len > 80 ? 80 : r->len), r->str);
    return n;
}

/* A sharded multiplexer's news: a MOVED answer to SSUBSCRIBE, or (moved
 * NULL) a subscription taken away or a dropped connection. */
static void topo_hook(void *arg, const char *moved, size_t len)
{
    struct rm_endpoint *ep = arg;
    int slot, ask;
    unsigned port;
    char host[64];
    if (moved && rm_cluster_redirect(moved, len, &slot, host, sizeof host, &port) == RM_CLUSTER_MOVED &&
        strcmp(host, "?") && host[0]) {
        struct rm_node *n = node_at(ep, host, port, NULL);
        if (n) atomic_store_explicit(&ep->slots[slot], n, memory_order_release);
    }
    (void)ask;
    rm_endpoint_suspect(ep, NULL);
}

/* ---- waiters ---- */

int rm_endpoint_join_notify(struct rm_endpoint *ep, int slot, const char *channel,
                            struct rm_waiter *w, const char *match, size_t match_len,
                            void (*notify)(void *arg, int why), void *arg)
{
    struct rm_node *n = rm_endpoint_route(ep, slot, rm_clock_after(RM_MSEC(RM_SETTING(command_timeout_ms))));
    if (!n) return EAGAIN;
    return rm_sub_join_notify(n->sub, channel, w, match, match_len, notify, arg);
}

int rm_endpoint_join(struct rm_endpoint *ep, int slot, const char *channel, struct rm_waiter *w,
                     const char *match, size_t match_len)
{
    return rm_endpoint_join_notify(ep, slot, channel, w, match, match_len, NULL, NULL);
}

int rm_endpoint_join_releases(struct rm_endpoint *ep, int slot, const char *channel,
                              struct rm_waiter *w, const char *match, size_t match_len)
{
    struct rm_node *n = rm_endpoint_route(ep, slot, rm_clock_after(RM_MSEC(RM_SETTING(command_timeout_ms))));
    if (!n) return EAGAIN;
    return rm_sub_join_releases(n->sub, channel, w, match, match_len);
}

int rm_endpoint_rejoin(struct rm_endpoint *ep, int slot, struct rm_waiter *w)
{
    RM_COUNT(resubscribes_moved);
    char *channel = strdup(rm_sub_channel(w));
    const char *match = w->match;
    size_t match_len = w->match_len;
    int releases = w->releases;
    rm_sub_leave(w);
    if (!channel) return ENOMEM;
    int r = releases ? rm_endpoint_join_releases(ep, slot, channel, w, match, match_len)
                     : rm_endpoint_join(ep, slot, channel, w, match, match_len);
    free(channel);
    return r;
}

int rm_endpoint_deliver(struct rm_endpoint *ep, int slot, const char *channel, const char *msg,
                        size_t len)
{
    struct rm_node *n = current(ep, slot); /* no waiting: the server's copy is on its way */
    return n && n->sub ? rm_sub_deliver(n->sub, channel, msg, len) : 0;
}

/* ---- fork ---- */

void rm_endpoint_atfork(struct rm_endpoint *ep, int who)
{
    if (who < 0) {
        pthread_mutex_lock(&ep->mu);
        for (struct rm_node *n = ep->nodes; n; n = n->next) rm_node_atfork(n, -1);
        return;
    }
    for (struct rm_node *n = ep->nodes; n; n = n->next) rm_node_atfork(n, who);
    if (who == 1) {
        if (ep->watch) rm_conn_close(ep->watch); /* the parent's socket: closed, nothing sent */
        ep->watch = NULL;
        ep->started = ep->stop = ep->want = 0;
        ep->rng ^= (uint32_t)getpid();
        /* Not destroyed: the parent's threads were waiting on them, and in
         * the child nobody is. */
        memset(&ep->changed, 0, sizeof ep->changed);
        memset(&ep->wake, 0, sizeof ep->wake);
        rm_clock_cond_init(&ep->changed);
        rm_clock_cond_init(&ep->wake);
    }
    pthread_mutex_unlock(&ep->mu); /* the child: taken by the prepare handler, in this thread */
}
