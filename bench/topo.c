/* topo.c -- the cluster and the Sentinel set of W6 (cluster), W8 and W9.
 *
 * Every process is a redis-server started by fork+exec with its own
 * config file in the run's temp dir, so that it can be restarted on the
 * same port with the same identity (nodes.conf) after a kill -9.  A
 * cluster's slots are split evenly with CLUSTER ADDSLOTSRANGE and its
 * nodes joined with CLUSTER MEET; a first write on each primary makes
 * CLUSTER SLOTS list its replica (it omits replicas at offset 0). */
#include "topo.h"
#include "clock.h"
#include "server.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static int free_port(void)
{
    static int next = 0;
    /* 40000-52000: a cluster bus (port + 10000) stays below 62001. */
    if (!next) next = 40000 + (int)(getpid() % 10000);
    for (int tries = 0; tries < 1000; tries++) {
        int p = next++;
        if (next > 52000) next = 40000;
        redisContext *c = topo_connect(p);
        int used = c && !c->err;
        if (c) redisFree(c);
        if (!used) return p;
    }
    return -1;
}

redisContext *topo_connect(int port)
{
    struct timeval tv = { 1, 0 };
    return redisConnectWithTimeout("127.0.0.1", port, tv);
}

static int spawn(struct topo *t, int i)
{
    char conf[300];
    snprintf(conf, sizeof conf, "%s/%d.conf", t->dir, t->port[i]);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        if (t->sentinel[i]) execlp(t->binary, t->binary, conf, "--sentinel", (char *)NULL);
        else execlp(t->binary, t->binary, conf, (char *)NULL);
        _exit(127);
    }
    t->pid[i] = pid;
    for (int k = 0; k < 500 && waitpid(pid, NULL, WNOHANG) == 0; k++) {
        redisContext *c = topo_connect(t->port[i]);
        redisReply *r = c && !c->err ? redisCommand(c, "PING") : NULL;
        int up = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (up) return 0;
        sleep_ns(10000000);
    }
    return -1;
}

/* A process with its own config file: the common lines, then extra.  A
 * port found free can be taken before the server binds it (another
 * program's cluster bus is its port + 10000): then another port. */
static int add(struct topo *t, int sentinel, const char *extra)
{
    int i = t->n++;
    t->sentinel[i] = sentinel;
    for (int attempt = 0; attempt < 5; attempt++) {
        int port = free_port();
        if (port < 0) return -1;
        t->port[i] = port;
        char conf[300];
        snprintf(conf, sizeof conf, "%s/%d.conf", t->dir, port);
        FILE *f = fopen(conf, "w");
        if (!f) return -1;
        fprintf(f, "port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\nlogfile %s/%d.log\n%s", port,
                t->dir, t->dir, port, extra);
        if (strstr(extra, "cluster-enabled")) fprintf(f, "cluster-config-file nodes-%d.conf\n", port);
        if (!sentinel) fprintf(f, "save \"\"\nappendonly no\nrepl-diskless-sync-delay 0\n");
        fclose(f);
        if (!spawn(t, i)) return 0;
        topo_kill(t, i);
    }
    return -1;
}

static int start_dir(struct topo *t, const char *binary)
{
    memset(t, 0, sizeof *t);
    t->binary = binary;
    const char *tmp = getenv("TMPDIR");
    snprintf(t->dir, sizeof t->dir, "%s/rmutex-bench-topo.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(t->dir) ? 0 : -1;
}

static long long cmd_int(int port, const char *fmt, const char *arg)
{
    redisContext *c = topo_connect(port);
    redisReply *r = c && !c->err ? redisCommand(c, fmt, arg) : NULL;
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return v;
}

static int cmd_ok(int port, const char *fmt, ...)
{
    redisContext *c = topo_connect(port);
    if (!c || c->err) {
        if (c) redisFree(c);
        return 0;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    int ok = r && r->type != REDIS_REPLY_ERROR;
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

static int cluster_ok(struct topo *t)
{
    for (int i = 0; i < t->n; i++) {
        if (!t->pid[i]) continue;
        redisContext *c = topo_connect(t->port[i]);
        redisReply *r = c && !c->err ? redisCommand(c, "CLUSTER INFO") : NULL;
        int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok");
        if (r) freeReplyObject(r);
        if (ok && !strcmp(topo_role(t->port[i]), "slave")) {
            r = redisCommand(c, "INFO replication");
            ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");
            if (r) freeReplyObject(r);
        }
        if (c) redisFree(c);
        if (!ok) return 0;
    }
    return 1;
}

int topo_wait_healthy(struct topo *t, double seconds)
{
    int64_t until = now_ns() + (int64_t)(seconds * 1e9);
    while (now_ns() < until) {
        if (!strncmp(t->url, "redis-cluster", 13) ? cluster_ok(t) : topo_primary(t) >= 0) return 0;
        sleep_ns(50000000);
    }
    return -1;
}

int topo_cluster(struct topo *t, const char *binary)
{
    if (start_dir(t, binary)) return -1;
    for (int i = 0; i < 6; i++)
        if (add(t, 0, "cluster-enabled yes\ncluster-node-timeout 1000\n"))
            return -1;
    char id[3][64];
    for (int i = 0; i < 3; i++) {
        redisContext *c = topo_connect(t->port[i]);
        redisReply *r = c ? redisCommand(c, "CLUSTER MYID") : NULL;
        if (!r || r->type != REDIS_REPLY_STRING) return -1;
        snprintf(id[i], sizeof id[i], "%s", r->str);
        freeReplyObject(r);
        int lo = i * 5461, hi = i == 2 ? 16383 : lo + 5460;
        r = redisCommand(c, "CLUSTER ADDSLOTSRANGE %d %d", lo, hi);
        if (r) freeReplyObject(r);
        redisFree(c);
    }
    for (int i = 1; i < 6; i++) cmd_ok(t->port[i], "CLUSTER MEET 127.0.0.1 %d", t->port[0]);
    for (int i = 3; i < 6; i++) {
        int64_t until = now_ns() + 10000000000LL;
        while (!cmd_ok(t->port[i], "CLUSTER REPLICATE %s", id[i - 3]))
            if (now_ns() > until) return -1;
            else sleep_ns(50000000);
    }
    int p = 0;
    p += snprintf(t->url, sizeof t->url, "redis-cluster://");
    for (int i = 0; i < 3; i++) p += snprintf(t->url + p, sizeof t->url - p, "%s127.0.0.1:%d", i ? "," : "", t->port[i]);
    if (topo_wait_healthy(t, 30)) return -1;
    for (int i = 0; i < 3; i++) { /* a first write, so that CLUSTER SLOTS lists the replicas */
        char key[32];
        for (int k = 0;; k++) {
            snprintf(key, sizeof key, "bench:warm:%d", k);
            if (topo_owner(t, topo_slot(t, key)) == i) break;
        }
        cmd_ok(t->port[i], "SET %s 1", key);
    }
    sleep_ns(1500000000); /* a replica's offset reaches the others by gossip */
    return 0;
}

int topo_sentinel(struct topo *t, const char *binary)
{
    if (start_dir(t, binary)) return -1;
    if (add(t, 0, "")) return -1;
    char extra[256];
    snprintf(extra, sizeof extra, "replicaof 127.0.0.1 %d\n", t->port[0]);
    if (add(t, 0, extra)) return -1;
    snprintf(extra, sizeof extra,
             "sentinel monitor bench 127.0.0.1 %d 2\nsentinel down-after-milliseconds bench 1000\n"
             "sentinel failover-timeout bench 3000\n", t->port[0]);
    for (int i = 0; i < 3; i++)
        if (add(t, 1, extra)) return -1;
    int p = snprintf(t->url, sizeof t->url, "redis-sentinel://");
    for (int i = 2; i < 5; i++) p += snprintf(t->url + p, sizeof t->url - p, "%s127.0.0.1:%d", i > 2 ? "," : "", t->port[i]);
    snprintf(t->url + p, sizeof t->url - p, "/bench");
    /* Settled: every sentinel knows the replica and the other sentinels. */
    int64_t until = now_ns() + 30000000000LL;
    while (now_ns() < until) {
        int settled = 1;
        for (int i = 2; i < 5 && settled; i++) {
            redisContext *c = topo_connect(t->port[i]);
            redisReply *r = c ? redisCommand(c, "SENTINEL MASTER bench") : NULL;
            int slaves = 0, others = 0;
            for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k + 1 < r->elements; k += 2) {
                if (!strcmp(r->element[k]->str, "num-slaves")) slaves = atoi(r->element[k + 1]->str);
                if (!strcmp(r->element[k]->str, "num-other-sentinels")) others = atoi(r->element[k + 1]->str);
            }
            settled = slaves == 1 && others == 2;
            if (r) freeReplyObject(r);
            if (c) redisFree(c);
        }
        if (settled) return 0;
        sleep_ns(100000000);
    }
    return -1;
}

void topo_kill(struct topo *t, int i)
{
    if (!t->pid[i]) return;
    kill(t->pid[i], SIGKILL);
    waitpid(t->pid[i], NULL, 0);
    t->pid[i] = 0;
}

int topo_restart(struct topo *t, int i) { return t->pid[i] ? 0 : spawn(t, i); }

void topo_stop(struct topo *t)
{
    for (int i = 0; i < t->n; i++) topo_kill(t, i);
    if (t->dir[0] && !getenv("BENCH_KEEP_TOPO")) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
        if (system(cmd)) fprintf(stderr, "bench: could not remove %s\n", t->dir);
    }
}

const char *topo_role(int port)
{
    static __thread char role[16];
    role[0] = 0;
    redisContext *c = topo_connect(port);
    redisReply *r = c && !c->err ? redisCommand(c, "ROLE") : NULL;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING)
        snprintf(role, sizeof role, "%s", r->element[0]->str);
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return role;
}

static int index_of(struct topo *t, long long port)
{
    for (int i = 0; i < t->n; i++)
        if (t->port[i] == port) return i;
    return -1;
}

int topo_slot(struct topo *t, const char *key)
{
    for (int i = 0; i < t->n; i++)
        if (t->pid[i] && !t->sentinel[i]) return (int)cmd_int(t->port[i], "CLUSTER KEYSLOT %s", key);
    return -1;
}

int topo_owner(struct topo *t, int slot)
{
    for (int i = 0; i < t->n; i++) {
        if (!t->pid[i]) continue;
        redisContext *c = topo_connect(t->port[i]);
        redisReply *r = c && !c->err ? redisCommand(c, "CLUSTER SLOTS") : NULL;
        int owner = -1;
        for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
            redisReply *e = r->element[k];
            if (slot >= e->element[0]->integer && slot <= e->element[1]->integer)
                owner = index_of(t, e->element[2]->element[1]->integer);
        }
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        return owner;
    }
    return -1;
}

int topo_replica_of(struct topo *t, int primary)
{
    for (int i = 0; i < t->n; i++) {
        if (!t->pid[i] || t->sentinel[i] || i == primary) continue;
        redisContext *c = topo_connect(t->port[i]);
        redisReply *r = c && !c->err ? redisCommand(c, "ROLE") : NULL;
        int yes = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 && !strcmp(r->element[0]->str, "slave") &&
                  r->element[2]->integer == t->port[primary];
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (yes) return i;
    }
    return -1;
}

int topo_primary(struct topo *t)
{
    for (int i = 0; i < t->n; i++) {
        if (!t->pid[i] || !t->sentinel[i]) continue;
        redisContext *c = topo_connect(t->port[i]);
        redisReply *r = c && !c->err ? redisCommand(c, "SENTINEL get-master-addr-by-name bench") : NULL;
        int p = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? index_of(t, atoi(r->element[1]->str)) : -1;
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        return p;
    }
    return -1;
}
