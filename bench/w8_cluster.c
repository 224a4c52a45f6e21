/* w8_cluster.c -- W8, W6 on a cluster, and W9: rmutex on Redis Cluster
 * and Sentinel (3 primaries + 3 replicas; 1 primary, 1 replica and 3
 * sentinels; node timeout and down-after 1 s; topo.c starts them).
 *
 *   W8  uncontended lock+unlock pairs on the cluster (64 names over all
 *       slots, one thread) against the same on the run's standalone
 *       server, alternating repetitions: the ratio is the routing's cost
 *       (target >= 0.9).
 *   W6  (cluster) 10 000 holds over all slots, lease 3000, three lease
 *       periods: renewal script calls and watchdog round trips per
 *       primary per period, expiries.  A script call may touch one slot
 *       only, so holds batch per slot.
 *   W9  failover: kill -9 of a primary (with a replica) while a thread
 *       keeps trying a lock served there; from the kill, and from the
 *       promotion (cluster: the replica's ROLE says master; Sentinel: the
 *       +switch-master message), to its first acquisition (target <= 1 s
 *       after the promotion).  The killed node is restarted as a replica
 *       between repetitions. */
#include "bench.h"
#include "clock.h"
#include "report.h"
#include "server.h"
#include "topo.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct topo cl;
static int cl_up = -1;

static int cluster_up(void)
{
    if (cl_up < 0) {
        printf("  starting a cluster of 3 primaries + 3 replicas ...\n");
        cl_up = !topo_cluster(&cl, opt.redis_server);
        if (!cl_up) {
            fprintf(stderr, "bench: the cluster did not start (logs: %s)\n", cl.dir);
            topo_stop(&cl);
        }
    }
    return cl_up;
}

void bench_cluster_stop(void)
{
    if (cl_up > 0) topo_stop(&cl);
    cl_up = -1;
}


static int configure(const char *url, const char *opts)
{
    char u[1200];
    snprintf(u, sizeof u, "%s%s%s", url, opts[0] ? "?" : "", opts);
    rmutex_shutdown();
    int r = rmutex_configure(u);
    if (r) fprintf(stderr, "bench: configure %s: %s (%s)\n", u, strerror(r), rmutex_detail());
    return r;
}

/* ---- W8 ---- */

#define W8_NAMES 64

static double pairs(rmutex_t *m, double seconds)
{
    int64_t t0 = now_ns(), until = t0 + (int64_t)(seconds * 1e9), t;
    long n = 0;
    do {
        rmutex_t *x = &m[n % W8_NAMES];
        if (rmutex_lock(x) || rmutex_unlock(x)) {
            fprintf(stderr, "bench W8: %s\n", rmutex_detail());
            return -1;
        }
        n++;
    } while ((t = now_ns()) < until);
    return n / ((double)(t - t0) / 1e9);
}

static int w8_side(const char *url, double seconds, double *rate)
{
    rmutex_t m[W8_NAMES];
    char what[32], name[128];
    if (url ? configure(url, "") : bench_configure("")) return -1;
    for (int i = 0; i < W8_NAMES; i++) {
        snprintf(what, sizeof what, "w8:%d", i);
        lock_name(name, sizeof name, what);
        if (rmutex_init(&m[i], name, NULL)) return -1;
    }
    int ok = pairs(m, 0.3) >= 0; /* warm: maps, connections, scripts */
    *rate = ok ? pairs(m, seconds) : -1;
    for (int i = 0; i < W8_NAMES; i++) rmutex_destroy(&m[i]);
    return ok && *rate > 0 ? 0 : -1;
}

static void w8(void)
{
    struct sample cr = { .n = 0 }, sr = { .n = 0 }, ratio = { .n = 0 };
    double seconds = opt.quick ? 0.5 : 2;
    int ok = cluster_up();
    for (int i = 0; ok && i < opt.reps; i++) {
        double s, c;
        ok = !w8_side(NULL, seconds, &s) && !w8_side(cl.url, seconds, &c);
        if (!ok) break;
        sample_add(&sr, s);
        sample_add(&cr, c);
        sample_add(&ratio, c / s);
        printf("  W8: cluster %.0f pairs/s, standalone %.0f pairs/s, ratio %.2f\n", c, s, c / s);
    }
    struct row *r = report_row("W8", "uncontended pairs on the cluster ÷ on a standalone server", "ratio",
                               ok ? &ratio : NULL);
    row_target(r, "≥ 0.9", ON_VALUE, J_GE, 0.9, 0);
    if (!ok) row_na(r, "error, see stderr");
    report_row("W8", "cluster: lock+unlock pairs, 1 thread, 64 names", "pairs/s", ok ? &cr : NULL);
    report_row("W8", "standalone: the same", "pairs/s", ok ? &sr : NULL);
    bench_configure("");
}

/* ---- W6 on the cluster ---- */

#define W6C_HOLDS 10000
#define W6C_LEASE 3000

static double evalsha_calls(int port)
{
    redisContext *c = topo_connect(port);
    redisReply *r = c && !c->err ? redisCommand(c, "INFO commandstats") : NULL;
    double calls = NAN;
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "cmdstat_evalsha:calls=") : NULL;
    if (p) calls = atof(p + 22);
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return calls;
}

static void w6c(void)
{
    struct sample calls = { .n = 0 }, rounds = { .n = 0 }, per = { .n = 0 }, lost = { .n = 0 };
    char opts[32];
    snprintf(opts, sizeof opts, "lease=%d", W6C_LEASE);
    int ok = cluster_up() && !configure(cl.url, opts);
    static rmutex_t m[W6C_HOLDS];
    for (int rep = 0; ok && rep < opt.reps; rep++) {
        char what[48], name[128];
        for (int i = 0; ok && i < W6C_HOLDS; i++) {
            snprintf(what, sizeof what, "w6c:%d:%d", rep, i);
            lock_name(name, sizeof name, what);
            ok = !rmutex_init(&m[i], name, NULL) && !rmutex_lock(&m[i]);
        }
        if (!ok) {
            fprintf(stderr, "bench W6 (cluster): %s\n", rmutex_detail());
            break;
        }
        int prim[3], np = 0;
        for (int i = 0; i < cl.n && np < 3; i++)
            if (cl.pid[i] && !strcmp(topo_role(cl.port[i]), "master")) prim[np++] = i;
        double e0[3] = { 0 }, e1[3] = { 0 };
        sleep_ns(W6C_LEASE * 1000000LL / 2); /* past the acquisitions' own calls */
        rmutex_stats_t s0 = stats_now();
        for (int k = 0; k < np; k++) e0[k] = evalsha_calls(cl.port[prim[k]]);
        int64_t t0 = now_ns();
        sleep_ns(3LL * W6C_LEASE * 1000000);
        rmutex_stats_t s1 = stats_now();
        for (int k = 0; k < np; k++) e1[k] = evalsha_calls(cl.port[prim[k]]);
        double periods = (double)(now_ns() - t0) / 1e9 / (W6C_LEASE / 1000.0);
        double c = (double)(s1.renewal_calls - s0.renewal_calls) / periods;
        double rt = (double)(s1.renewal_rounds - s0.renewal_rounds) / periods / (np ? np : 1);
        double most = 0;
        for (int k = 0; k < np; k++) most = fmax(most, (e1[k] - e0[k]) / periods);
        sample_add(&calls, c);
        sample_add(&rounds, rt);
        sample_add(&per, most);
        sample_add(&lost, (double)(s1.locks_lost - s0.locks_lost));
        printf("  W6 (cluster): %.0f renewal calls/period (busiest primary %.0f), %.1f round trips per "
               "primary/period, lost %llu\n", c, most, rt,
               (unsigned long long)(s1.locks_lost - s0.locks_lost));
        for (int i = 0; i < W6C_HOLDS; i++) {
            rmutex_unlock(&m[i]);
            rmutex_destroy(&m[i]);
        }
    }
    struct row *r = report_row("W6", "cluster: renewal script calls per lease period (10 000 holds, all slots)",
                               "calls", ok ? &calls : NULL);
    if (!ok) row_na(r, "error, see stderr");
    report_row("W6", "cluster: the busiest primary's EVALSHA calls per lease period", "calls", ok ? &per : NULL);
    report_row("W6", "cluster: watchdog round trips (pipelines) per primary per lease period", "RT",
               ok ? &rounds : NULL);
    r = report_row("W6", "cluster: expiries in 3 lease periods", "holds", ok ? &lost : NULL);
    row_target(r, "0", ON_VALUE, J_LE, 0, 1);
    bench_configure("");
}

/* ---- W9 ---- */

struct trier {
    rmutex_t *m;
    _Atomic int stop;
    _Atomic int64_t first_after; /* first acquisition after `after` */
    _Atomic int64_t after;
};

static void *try_loop(void *arg)
{
    struct trier *t = arg;
    while (!atomic_load(&t->stop)) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 1;
        int64_t began = now_ns();
        if (!rmutex_timedlock(t->m, &dl)) {
            /* Only a call that began after the kill counts. */
            int64_t now = now_ns(), after = atomic_load(&t->after);
            if (after && !atomic_load(&t->first_after) && began > after) atomic_store(&t->first_after, now);
            rmutex_unlock(t->m);
        }
        sleep_ns(1000000);
    }
    return NULL;
}

/* One failover of primary p (whose replica is q) of topo t: kill -> first
 * acquisition and promotion -> first acquisition, in ms. */
static int failover(struct topo *t, int p, int q, int sentinel, const char *name, double *from_kill,
                    double *from_promotion)
{
    rmutex_t m;
    if (rmutex_init(&m, name, NULL) || rmutex_lock(&m) || rmutex_unlock(&m)) return -1;
    struct trier tr = { .m = &m };
    pthread_t th;
    pthread_create(&th, NULL, try_loop, &tr);
    sleep_ns(200000000);
    redisContext *watch = NULL;
    if (sentinel) {
        watch = topo_connect(t->port[2]);
        redisReply *r = watch ? redisCommand(watch, "SUBSCRIBE +switch-master") : NULL;
        if (r) freeReplyObject(r);
    }
    int64_t killed = now_ns();
    topo_kill(t, p);
    atomic_store(&tr.after, now_ns());
    int64_t promoted = 0, until = killed + 20000000000LL;
    if (sentinel) {
        struct timeval tv = { 20, 0 };
        redisSetTimeout(watch, tv);
        void *msg = NULL;
        if (redisGetReply(watch, &msg) == REDIS_OK) promoted = now_ns();
        if (msg) freeReplyObject(msg);
    } else {
        while (!promoted && now_ns() < until) {
            if (!strcmp(topo_role(t->port[q]), "master")) promoted = now_ns();
            else sleep_ns(5000000);
        }
    }
    while (promoted && !atomic_load(&tr.first_after) && now_ns() < until) sleep_ns(5000000);
    atomic_store(&tr.stop, 1);
    pthread_join(th, NULL);
    if (watch) redisFree(watch);
    rmutex_destroy(&m);
    int64_t first = atomic_load(&tr.first_after);
    if (!promoted || !first) {
        fprintf(stderr, "bench W9: %s\n", promoted ? "no acquisition after the promotion" : "no promotion");
        return -1;
    }
    *from_kill = (double)(first - killed) / 1e6;
    *from_promotion = (double)(first - promoted) / 1e6;
    /* The old primary comes back, and is a replica again (Sentinel turns a
     * restarted old primary into one ~10 s later) before the next rep:
     * a node promoted within a second of becoming a replica was seen to
     * time out connects and leave commands unanswered for ~3.5 s, the
     * benchmark's own plain connection included. */
    if (topo_restart(t, p) || topo_wait_healthy(t, 30)) return -1;
    int64_t until2 = now_ns() + 30000000000LL;
    while (strcmp(topo_role(t->port[p]), "slave") && now_ns() < until2) sleep_ns(100000000);
    sleep_ns(3000000000LL);
    return 0;
}

static void w9_kind(int sentinel)
{
    struct sample fk = { .n = 0 }, fp = { .n = 0 };
    struct topo st, *t = &cl;
    const char *kind = sentinel ? "Sentinel" : "cluster";
    int ok = sentinel ? !topo_sentinel(&st, opt.redis_server) : cluster_up();
    if (sentinel) t = &st;
    if (!ok) fprintf(stderr, "bench W9: the %s did not start (logs: %s)\n", kind, t->dir);
    ok = ok && !configure(t->url, "lease=6000&replicas=auto&wait_timeout=500&command_timeout=500");
    for (int rep = 0; ok && rep < opt.reps; rep++) {
        char what[48], name[128];
        int p = -1, q = -1;
        for (int k = 0; p < 0 && k < 100000; k++) {
            snprintf(what, sizeof what, "w9:%d:%d", rep, k);
            lock_name(name, sizeof name, what);
            int owner = sentinel ? topo_primary(t) : topo_owner(t, topo_slot(t, name));
            if (owner >= 0 && (q = topo_replica_of(t, owner)) >= 0) p = owner;
        }
        double a, b;
        if (p < 0 || failover(t, p, q, sentinel, name, &a, &b)) {
            ok = 0;
            break;
        }
        sample_add(&fk, a);
        sample_add(&fp, b);
        printf("  W9 %s: kill -9 -> first acquisition %.0f ms, %s -> first acquisition %.0f ms\n", kind, a,
               sentinel ? "+switch-master" : "promotion", b);
    }
    rmutex_shutdown();
    if (sentinel) topo_stop(&st);
    char fig[96];
    snprintf(fig, sizeof fig, "%s: kill -9 of a primary -> first acquisition", kind);
    struct row *r = report_row("W9", fig, "ms", ok ? &fk : NULL);
    if (!ok) row_na(r, "error, see stderr");
    snprintf(fig, sizeof fig, "%s: %s -> first acquisition", kind, sentinel ? "+switch-master" : "promotion");
    r = report_row("W9", fig, "ms", ok ? &fp : NULL);
    row_target(r, "≤ 1000", ON_VALUE, J_LE, 1000, 0);
    bench_configure("");
}

void w8_run(void)
{
    w8();
    w6c();
}

void w9_run(void)
{
    w9_kind(0);
    w9_kind(1);
    bench_cluster_stop();
}
