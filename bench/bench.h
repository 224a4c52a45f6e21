/* bench.h -- what the parts of rmutex-bench share: the options, the RTT
 * limit measured in this run, and the workloads. */
#ifndef BENCH_H
#define BENCH_H

#include "stat.h"

#include <rmutex.h>

struct opts {
    int quick, long_run, reps;
    const char *url, *csv, *md, *data_dir, *only;
    const char *redis_server, *shim_prog, *preload, *lua_dir;
    const char *self;       /* this program (W12 runs it as --stamp) */
    double w3_seconds;      /* per repetition; --long: 120 for the fair runs */
    double fifo_slack_ms;   /* W3: how much later a call must be to count as overtaking */
};
extern struct opts opt;

/* The RTT limit of this run: sequential round trips on one connection. */
struct limits {
    struct sample ping_rb, ping_hr, eval_rb, eval_hr; /* requests/s by each method */
    struct sample ping_p50_us;                         /* hiredis loop, per-request median */
    double ping_rate, eval_rate;                       /* the faster method's median */
    double ping_rtt_us, eval_rtt_us;                   /* 1e6 / rate */
    char ping_by[24], eval_by[24];
    char sha[41];                                      /* of "return 1" */
};
extern struct limits lim;

/* Add reps measurements of each kind. */
int limits_measure(int reps);
/* The limit from the measurements so far (the workloads' progress lines and
 * chart data use it; the table's figures are divided by the final one). */
void limits_compute(void);
/* n sequential PINGs (eval 0) or EVALSHAs of "return 1" (eval 1) on c, by
 * hiredis: requests per second, and the median request time if p50_us. */
struct redisContext;
double limit_loop(struct redisContext *c, int n, int eval, double *p50_us);
/* Compute the final limit and add its rows to the report. */
void limits_finish(void);
/* The floor under any pub/sub wake-up: PUBLISH on c -> a forked subscriber
 * process (plain hiredis, a connection of its own) has read the message,
 * rounds times on channel.  The median in µs, or NAN on an error. */
double pubsub_delivery_p50(struct redisContext *c, const char *channel, int rounds);
/* The same with gap_ms of quiet before each PUBLISH: the floor of a wake-up
 * that finds the server and the subscriber idle, as a hand-off between two
 * otherwise idle processes does. */
double pubsub_delivery_idle_p50(struct redisContext *c, const char *channel, int rounds,
                                int gap_ms);

/* rmutex_shutdown(), then rmutex_configure() with the server and opts. */
int bench_configure(const char *opts);
rmutex_stats_t stats_now(void);
/* Is workload id ("W3") selected by --only? */
int selected(const char *id);
/* A lock name unique to this run: "bench:<pid>:<what>". */
void lock_name(char *buf, size_t n, const char *what);
/* Lock+unlock pairs of m until seconds have passed and n pairs are done
 * (either may be 0); pairs/s to *rate (may be NULL).  0, or -1 with an
 * error line naming workload id. */
int lock_pairs(const char *id, rmutex_t *m, long n, double seconds, double *rate);

void w1_run(void);
void w2_run(void);
void w3_run(void);
void w4_run(void);
/* W4's live part (w4_crowd.c), run by w4_run. */
void w4_crowd_run(void);
void w5_run(void);
void w6_run(void);
void w7_run(void);
void w8_run(void);
void w9_run(void);
void w10_run(void);
void w11_run(void);
void w12_run(void);
void w13_run(void); /* read-write locks (w13_rwlock.c, w13_readers.c, w13_handoff.c) */
void w14_run(void); /* W1 over TLS beside plain TCP; the handshake */
void w14_barrier_run(void); /* barrier rounds of 2, 10, 100 members across processes (W14b) */
void w15_run(void); /* semaphores (w15_sem.c): pairs, hand-off, reclaim after kill -9 */
/* Stop the cluster W8 and W9 started, if any. */
void bench_cluster_stop(void);

#endif
