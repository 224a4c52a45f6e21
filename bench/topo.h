/* topo.h -- throw-away Redis Cluster and Sentinel sets for W6 (cluster),
 * W8 and W9: redis-server processes on free loopback ports in a temp dir,
 * node timeout / down-after 1 s, stopped at the end. */
#ifndef BENCH_TOPO_H
#define BENCH_TOPO_H

#include <hiredis/hiredis.h>
#include <sys/types.h>

#define TOPO_MAX 8

struct topo {
    int n;                  /* processes */
    int port[TOPO_MAX];
    pid_t pid[TOPO_MAX];
    int sentinel[TOPO_MAX]; /* 1: a sentinel */
    char dir[256];
    char url[1024];         /* redis-cluster://... or redis-sentinel://.../bench */
    const char *binary;
};

/* 3 primaries with one replica each.  0 or -1. */
int topo_cluster(struct topo *t, const char *binary);
/* 1 primary, 1 replica, 3 sentinels (quorum 2), master name "bench". */
int topo_sentinel(struct topo *t, const char *binary);
void topo_stop(struct topo *t);

redisContext *topo_connect(int port);
/* kill -9 process i / start it again on its port (its own config). */
void topo_kill(struct topo *t, int i);
int topo_restart(struct topo *t, int i);
/* Cluster: the process index of slot's primary, of a primary's replica,
 * and the slot of key (asked of a live node).  -1 if unknown. */
int topo_owner(struct topo *t, int slot);
int topo_replica_of(struct topo *t, int primary);
int topo_slot(struct topo *t, const char *key);
/* "master" / "slave" as ROLE says, or "" when unreachable. */
const char *topo_role(int port);
/* Sentinel: the primary's process index, as a sentinel says. */
int topo_primary(struct topo *t);
/* Every live node is ok / settled again (after a restart).  0 or -1. */
int topo_wait_healthy(struct topo *t, double seconds);

#endif
