/* cluster.h -- what a Redis Cluster node says about the cluster: its slot
 * map (CLUSTER SLOTS) and its redirections (MOVED, ASK). */
#ifndef RM_CLUSTER_H
#define RM_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "keys.h"

struct rm_conn;

/* One primary of a slot map. */
struct rm_cluster_primary {
    char host[64];     /* as the node announced it ("" : the node asked) */
    unsigned port;
    unsigned replicas; /* replicas listed with it (CLUSTER SLOTS omits failed ones) */
};

/* A slot map: owner[s] is 1 + the index of slot s's primary, 0 if no one
 * serves it. */
struct rm_cluster_map {
    unsigned nprimaries, cap;
    struct rm_cluster_primary *primaries;
    uint16_t owner[RM_SLOTS];
    unsigned covered;  /* slots that have an owner */
};

/* Ask the node on c for CLUSTER SLOTS before deadline and fill *m (set up
 * empty with {0}; free with rm_cluster_map_free).  Returns 0, RM_E_LOST or
 * RM_E_UNSENT (no answer), EIO (a reply that is not a slot map: the detail
 * says), ENOMEM. */
int rm_cluster_slots(struct rm_conn *c, rm_nsec deadline, struct rm_cluster_map *m);
void rm_cluster_map_free(struct rm_cluster_map *m);

/* 1 if a and b give every slot to the same host:port. */
int rm_cluster_map_same(const struct rm_cluster_map *a, const struct rm_cluster_map *b);

/* A redirection error reply "MOVED <slot> <host>:<port>" or "ASK <slot>
 * <host>:<port>" in s[0..len).  Returns RM_CLUSTER_MOVED or RM_CLUSTER_ASK
 * with the slot, host (possibly "" -- the same host -- or "?", unknown)
 * and port filled, or 0 if s is no redirection. */
enum { RM_CLUSTER_MOVED = 1, RM_CLUSTER_ASK = 2 };
int rm_cluster_redirect(const char *s, size_t len, int *slot, char *host, size_t hostcap,
                        unsigned *port);

#endif
