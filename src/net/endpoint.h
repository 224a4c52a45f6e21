/* endpoint.h -- the Redis deployment the library talks to, as the URL
 * names it: one server, a cluster, or a primary that Sentinel names; and
 * which node serves a given key. */
#ifndef RM_ENDPOINT_H
#define RM_ENDPOINT_H

#include <stddef.h>

#include "clock.h"
#include "config.h"

struct rm_node;
struct rm_waiter;
struct redisReply;

struct rm_endpoint;

/* Create the endpoint for svc (taken over: svc is left empty).  No I/O
 * here: a cluster's map is read at the first call.  0 or ENOMEM. */
int rm_endpoint_create(struct rm_service *svc, struct rm_endpoint **out);
/* Stop its threads and close everything; nothing may be lent out. */
void rm_endpoint_destroy(struct rm_endpoint *ep);

/* 1 for a cluster: keys route by slot, pub/sub is sharded. */
int rm_endpoint_clustered(const struct rm_endpoint *ep);

/* 1 for a cluster or Sentinel: the primary of a key can change. */
int rm_endpoint_follows(const struct rm_endpoint *ep);

/* The command that publishes a lock's messages, for the scripts:
 * "spublish" in a cluster, else "publish". */
const char *rm_endpoint_publish(const struct rm_endpoint *ep);

/* The primary that serves slot (ignored but in a cluster).  Waits, until
 * deadline at most, for a map when there is none yet.  NULL, with the
 * detail set, when no node is known to serve it. */
struct rm_node *rm_endpoint_route(struct rm_endpoint *ep, int slot, rm_nsec deadline);

/* EACCES when the topology's last refresh (the cluster map, the sentinels'
 * answer) failed because a login was refused -- route's NULL then means
 * that, with the detail, not an outage; else 0. */
int rm_endpoint_refused(const struct rm_endpoint *ep);

/* Every primary that serves a slot now (a plain server's or Sentinel's
 * one primary), at most max, into out; waits until deadline for a map
 * when there is none yet.  Returns how many, 0 with the detail set when
 * none is known.  (rmutex_list: a SCAN must visit each.) */
int rm_endpoint_primaries(struct rm_endpoint *ep, struct rm_node **out, int max, rm_nsec deadline);

/* failed, which served slot, cannot be reached: ask for a refresh and
 * wait for it (until deadline) to name another node for slot.  That node,
 * or NULL (not a cluster, or the map still names failed). */
struct rm_node *rm_endpoint_reroute(struct rm_endpoint *ep, int slot, struct rm_node *failed,
                                    rm_nsec deadline);

/* The node a redirection error reply (MOVED/ASK) sent by from points to
 * (created if new; NULL out of memory or for an unknown host, after asking
 * for a refresh).  MOVED updates the slot at once and asks for a full
 * refresh.  *ask: it was ASK (send ASKING first; the map is unchanged).
 * Returns NULL too when r is no redirection. */
struct rm_node *rm_endpoint_redirect(struct rm_endpoint *ep, const struct redisReply *r,
                                     struct rm_node *from, int *ask);

/* The map may be stale (a node failed, CLUSTERDOWN, a subscription was
 * taken away): ask for a full refresh, of another node than failed. */
void rm_endpoint_suspect(struct rm_endpoint *ep, struct rm_node *failed);

/* Register w on channel at the node that serves slot (rm_sub_join). */
int rm_endpoint_join(struct rm_endpoint *ep, int slot, const char *channel, struct rm_waiter *w,
                     const char *match, size_t match_len);

/* The same for a notified waiter (rm_sub_join_notify). */
int rm_endpoint_join_notify(struct rm_endpoint *ep, int slot, const char *channel,
                            struct rm_waiter *w, const char *match, size_t match_len,
                            void (*notify)(void *arg, int why), void *arg);

/* The same for a read-write lock's waiter (rm_sub_join_releases). */
int rm_endpoint_join_releases(struct rm_endpoint *ep, int slot, const char *channel,
                              struct rm_waiter *w, const char *match, size_t match_len);

/* w was woken with RM_WAKE_MOVED: join its channel again where slot is
 * served now (leaving it where it was).  Returns 0, or the join's error
 * (w is then not joined). */
int rm_endpoint_rejoin(struct rm_endpoint *ep, int slot, struct rm_waiter *w);

/* rm_sub_deliver on the multiplexer of the node that serves slot now, if
 * one is known (never waits for one; else 0). */
int rm_endpoint_deliver(struct rm_endpoint *ep, int slot, const char *channel, const char *msg,
                        size_t len);

/* fork(): -1 lock (prepare), 0 unlock (parent), 1 child: no threads, no
 * connections; the child keeps what it knows of the topology. */
void rm_endpoint_atfork(struct rm_endpoint *ep, int who);

/* What the URL named, for logs and details. */
const char *rm_endpoint_display(const struct rm_endpoint *ep);

#endif
