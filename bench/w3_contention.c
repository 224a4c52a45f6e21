/* w3_contention.c -- W3: many threads and processes contending for one
 * lock.
 *
 * Layouts 1x8 and 4x2 (processes x threads), each with the non-fair and
 * the fair lock.  The processes are forked from here and share one
 * anonymous mapping: a go/stop flag, the counter the critical section
 * increments (a plain read-modify-write, so two owners at once would lose
 * an update: that is checked), and one record per acquisition (w3.h).  The
 * critical section makes no Redis call.  Every thread first takes the lock
 * once (connections, scripts, subscription), then all start together and
 * loop lock / increment / unlock for the run's time.  w3_analyze.c turns
 * the records into the figures; the hand-off latencies of all repetitions
 * go to --data DIR/w3_handoff_<lock>_<P>x<T>.dat for the chart.
 *
 * Limits: throughput against the EVALSHA-trivial rate (a direct hand-off
 * needs about one round trip per acquisition), hand-off latency against
 * the RTT limit.  To see what limits them, the CPU time per acquisition is
 * reported too: of the worker processes (getrusage of the waited-for
 * children: their whole life, warm-up included, over every acquisition
 * they made) with their voluntary context switches, and of redis-server
 * (INFO cpu) over the same stretch. */
#include "bench.h"
#include "clock.h"
#include "report.h"
#include "server.h"
#include "w3.h"
#include "workers.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static double floor_us = NAN; /* measure_floor's */
static double idle_floor_us = NAN; /* the same after 10 ms of quiet each */

struct shared {
    struct workers run;
    volatile uint64_t counter;
    uint64_t cap;
    _Atomic uint64_t done; /* acquisitions counted by the threads themselves */
    struct w3_rec rec[];
};

struct worker {
    struct shared *sh;
    rmutex_t *m;
    int who;
};

static void *worker(void *arg)
{
    struct worker *w = arg;
    struct shared *sh = w->sh;
    int r = rmutex_lock(w->m);
    if (!r) r = rmutex_unlock(w->m);
    if (r) {
        fprintf(stderr, "bench W3: warm-up: %s (%s)\n", strerror(r), rmutex_detail());
        atomic_store(&sh->run.failed, 1);
    }
    atomic_fetch_add(&sh->run.ready, 1);
    while (!atomic_load(&sh->run.go) && !atomic_load(&sh->run.failed)) sleep_ns(1000000);
    uint64_t n = 0;
    while (!atomic_load(&sh->run.stop) && !atomic_load(&sh->run.failed)) {
        int64_t c = now_ns();
        if ((r = rmutex_lock(w->m))) break;
        int64_t a = now_ns();
        uint64_t seq = sh->counter;
        sh->counter = seq + 1;
        int64_t u = now_ns();
        r = rmutex_unlock(w->m);
        int64_t t = now_ns();
        if (seq < sh->cap) {
            struct w3_rec *rec = &sh->rec[seq];
            rec->call = c;
            rec->acq = a;
            rec->unl = u;
            rec->rel = t;
            rec->who = w->who + 1;
        }
        n++;
        if (r) break;
    }
    if (r) {
        fprintf(stderr, "bench W3: %s (%s)\n", strerror(r), rmutex_detail());
        atomic_store(&sh->run.failed, 1);
    }
    atomic_fetch_add(&sh->done, n);
    return NULL;
}

static void child(struct shared *sh, const char *name, int fair, int proc, int threads)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rmutexattr_t a;
    rmutex_t m;
    rmutexattr_init(&a);
    rmutexattr_setfair(&a, fair);
    if (rmutex_init(&m, name, &a)) {
        atomic_store(&sh->run.failed, 1);
        atomic_fetch_add(&sh->run.ready, threads);
        exit(1);
    }
    pthread_t tid[64];
    struct worker w[64];
    for (int t = 0; t < threads; t++) {
        w[t] = (struct worker){ sh, &m, proc * threads + t };
        pthread_create(&tid[t], NULL, worker, &w[t]);
    }
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    rmutex_destroy(&m);
    exit(0);
}

/* One repetition.  0 and *out filled, or -1. */
struct cost {
    double client_us, redis_us, switches; /* per acquisition */
};

static double rusage_us(const struct rusage *r)
{
    return (double)(r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1e6 +
           (double)(r->ru_utime.tv_usec + r->ru_stime.tv_usec);
}

static double redis_cpu_us(void)
{
    redisContext *c = server_connect();
    if (!c) return 0;
    double v = (info_field(c, "cpu", "used_cpu_user") + info_field(c, "cpu", "used_cpu_sys")) * 1e6;
    redisFree(c);
    return v;
}

static int rep(const char *name, int fair, int procs, int threads, double seconds,
               struct w3_result *out, long *lost, struct cost *cost)
{
    struct rusage ru0, ru1;
    getrusage(RUSAGE_CHILDREN, &ru0);
    double redis0 = redis_cpu_us();
    uint64_t cap = (uint64_t)((seconds + 10) * 60000);
    size_t size = sizeof(struct shared) + cap * sizeof(struct w3_rec);
    struct shared *sh = mmap(NULL, size, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (sh == MAP_FAILED) {
        perror("bench W3: mmap");
        return -1;
    }
    sh->cap = cap;
    pid_t pid[16];
    fflush(NULL);
    for (int p = 0; p < procs; p++) {
        pid[p] = fork();
        if (pid[p] == 0) child(sh, name, fair, p, threads);
    }
    int nthreads = procs * threads;
    int64_t t0, t1;
    int ok = !workers_run("W3", &sh->run, nthreads, pid, procs, seconds, 30, &t0, &t1);
    getrusage(RUSAGE_CHILDREN, &ru1);
    double redis1 = redis_cpu_us(), acqs = (double)sh->counter + nthreads;
    cost->client_us = (rusage_us(&ru1) - rusage_us(&ru0)) / acqs;
    cost->redis_us = (redis1 - redis0) / acqs;
    cost->switches = (double)(ru1.ru_nvcsw - ru0.ru_nvcsw) / acqs;
    if (ok) {
        uint64_t written = sh->counter < cap ? sh->counter : cap;
        w3_analyze(sh->rec, written, nthreads, threads, t0, t1, opt.fifo_slack_ms * 1e6, out);
        *lost = (long)(atomic_load(&sh->done) - sh->counter);
    }
    munmap(sh, size);
    return ok ? 0 : -1;
}

static void write_handoffs(const char *lockname, int procs, int threads, double *h, size_t n)
{
    if (!opt.data_dir || !n) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/w3_handoff_%s_%dx%d.dat", opt.data_dir, lockname, procs, threads);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return;
    }
    sort_doubles(h, n);
    fprintf(f, "# W3 hand-off latency (unlock returns -> next owner's lock returns), %s lock, "
               "%d process(es) x %d threads, %zu hand-offs of all repetitions\n"
               "# RTT limit (1/PING rate) of this run: %.2f us\n# quantile latency_us\n",
            lockname, procs, threads, n, lim.ping_rtt_us);
    for (int i = 0; i <= 1000; i++) {
        double q = i / 1000.0;
        fprintf(f, "%.3f %.3f\n", q, quantile_sorted(h, n, q));
    }
    fclose(f);
}

static void config(int fair, int procs, int threads)
{
    const char *kind = fair ? "fair" : "non-fair";
    double seconds = opt.long_run && fair ? 120 : opt.w3_seconds;
    char name[128], what[64], fig[96], tag[16];
    snprintf(what, sizeof what, "w3:%s:%dx%d", fair ? "fair" : "nonfair", procs, threads);
    lock_name(name, sizeof name, what);
    snprintf(tag, sizeof tag, "%dx%d", procs, threads);
    struct sample rate = { .n = 0 }, p50 = { .n = 0 }, p99 = { .n = 0 }, p50c = { .n = 0 },
                  p50x = { .n = 0 },
                  gap = { .n = 0 }, fifo = { .n = 0 }, mins = { .n = 0 }, lostv = { .n = 0 },
                  ccpu = { .n = 0 }, rcpu = { .n = 0 }, csw = { .n = 0 };
    double *all = NULL;
    size_t nall = 0;
    int ok = !bench_configure("");
    for (int i = 0; ok && i < opt.reps; i++) {
        struct w3_result res;
        struct cost cost;
        long lost = 0;
        if (rep(name, fair, procs, threads, seconds, &res, &lost, &cost)) {
            ok = 0;
            break;
        }
        printf("  W3 %s %s: %.0f acq/s, hand-off p50 %.1f us p99 %.1f us, gap %.1f ms, "
               "fifo %.0f, shares %.2f..%.2f, lost %ld; per acquisition: client CPU %.1f us, "
               "%.2f switches, redis CPU %.1f us\n",
               kind, tag, res.rate, res.p50_us, res.p99_us, res.gap_ms, res.fifo, res.min_share,
               res.max_share, lost, cost.client_us, cost.switches, cost.redis_us);
        sample_add(&ccpu, cost.client_us);
        sample_add(&rcpu, cost.redis_us);
        sample_add(&csw, cost.switches);
        sample_add(&rate, res.rate);
        sample_add(&p50, res.p50_us);
        sample_add(&p99, res.p99_us);
        sample_add(&p50c, res.p50_call_us);
        if (!isnan(res.p50_xproc_us)) sample_add(&p50x, res.p50_xproc_us);
        sample_add(&gap, res.gap_ms);
        sample_add(&fifo, res.fifo);
        sample_add(&mins, res.min_share);
        sample_add(&lostv, (double)lost);
        double *grown = realloc(all, sizeof *all * (nall + res.nh + 1));
        if (grown) {
            all = grown;
            memcpy(all + nall, res.handoff_us, sizeof *all * res.nh);
            nall += res.nh;
        }
        free(res.handoff_us);
    }
    write_handoffs(fair ? "fair" : "nonfair", procs, threads, all, nall);
    free(all);

    struct row *r;
    snprintf(fig, sizeof fig, "%s %s acquisitions/s", kind, tag);
    r = report_row("W3", fig, "acq/s", &rate);
    row_limit_ref(r, &lim.eval_rate, 1, "EVALSHA");
    if (fair) row_target(r, "ratio ≥ 0.5", ON_RATIO, J_GE, 0.5, 0);
    if (!ok) row_na(r, "error, see stderr");
    snprintf(fig, sizeof fig, "%s %s hand-off p50 (unlock ret → lock ret)", kind, tag);
    r = report_row("W3", fig, "µs", ok ? &p50 : NULL);
    row_limit_ref(r, &lim.ping_rtt_us, 1, "RTT");
    if (fair) row_target(r, "ratio ≤ 0.6", ON_RATIO, J_LE, 0.6, 0);
    snprintf(fig, sizeof fig, "%s %s hand-off p99", kind, tag);
    r = report_row("W3", fig, "µs", ok ? &p99 : NULL);
    row_limit_ref(r, &lim.ping_rtt_us, 1, "RTT");
    snprintf(fig, sizeof fig, "%s %s hand-off p50 from unlock call", kind, tag);
    r = report_row("W3", fig, "µs", ok ? &p50c : NULL);
    row_limit_ref(r, &lim.ping_rtt_us, 1, "RTT");
    if (procs > 1) {
        /* Release -> the next process holding, against pub/sub's floor. */
        snprintf(fig, sizeof fig, "%s %s hand-off to another process p50 from unlock call", kind, tag);
        r = report_row("W3", fig, "µs", ok && p50x.n ? &p50x : NULL);
        row_limit_ref(r, &floor_us, 1, "pub/sub floor");
        if (!fair) row_target(r, "ratio ≤ 1.2", ON_RATIO, J_LE, 1.2, 0);
    }
    snprintf(fig, sizeof fig, "%s %s longest gap (%.0f s runs)", kind, tag, seconds);
    r = report_row("W3", fig, "ms", ok ? &gap : NULL);
    if (fair) row_target(r, seconds >= 120 ? "≤ 100 ms" : "≤ 100 ms (2 min: --long)", ON_VALUE, J_LE, 100, 1);
    if (fair) {
        snprintf(fig, sizeof fig, "%s %s FIFO violations (slack %.0f ms)", kind, tag, opt.fifo_slack_ms);
        r = report_row("W3", fig, "acq", ok ? &fifo : NULL);
        row_target(r, "0", ON_VALUE, J_LE, 0, 1);
    }
    snprintf(fig, sizeof fig, "%s %s fewest acquisitions of a thread ÷ mean", kind, tag);
    r = report_row("W3", fig, "share", ok ? &mins : NULL);
    if (!fair) row_target(r, "≥ 0.25", ON_VALUE, J_GE, 0.25, 1);
    snprintf(fig, sizeof fig, "%s %s client CPU per acquisition (all processes)", kind, tag);
    report_row("W3", fig, "µs", ok ? &ccpu : NULL);
    snprintf(fig, sizeof fig, "%s %s client context switches per acquisition", kind, tag);
    report_row("W3", fig, "switches", ok ? &csw : NULL);
    snprintf(fig, sizeof fig, "%s %s redis-server CPU per acquisition", kind, tag);
    report_row("W3", fig, "µs", ok ? &rcpu : NULL);
    snprintf(fig, sizeof fig, "%s %s lost updates (exclusion check)", kind, tag);
    r = report_row("W3", fig, "updates", ok ? &lostv : NULL);
    row_target(r, "0", ON_VALUE, J_LE, 0, 1);
}

/* The floor under a hand-off to another process, measured in this run:
 * a raw PUBLISH -> a subscriber process (plain hiredis) read it, p50 (as
 * W10's floor row). */
static void measure_floor(void)
{
    char ch[128];
    lock_name(ch, sizeof ch, "w3:floor");
    redisContext *c = server_connect();
    struct sample s = { .n = 0 };
    floor_us = c ? pubsub_delivery_p50(c, ch, opt.quick ? 200 : 1000) : NAN;
    if (c) redisFree(c);
    if (!isnan(floor_us)) sample_add(&s, floor_us);
    struct row *r = report_row("W3", "floor: raw PUBLISH → a subscriber process read it, p50", "µs",
                               isnan(floor_us) ? NULL : &s);
    row_limit_ref(r, &lim.ping_rtt_us, 1, "RTT");
    /* The floor of a hand-off between idle processes (w3_handoff.c): each
     * PUBLISH after 10 ms of quiet, as each of its runs. */
    c = server_connect();
    idle_floor_us = c ? pubsub_delivery_idle_p50(c, ch, opt.quick ? 40 : 120, 10) : NAN;
    if (c) redisFree(c);
    struct sample si = { .n = 0 };
    if (!isnan(idle_floor_us)) sample_add(&si, idle_floor_us);
    r = report_row("W3", "floor after 10 ms of quiet: raw PUBLISH → a subscriber process read it, p50",
                   "µs", isnan(idle_floor_us) ? NULL : &si);
    row_limit_ref(r, &lim.ping_rtt_us, 1, "RTT");
}

void w3_run(void)
{
    measure_floor();
    w3_handoff_run(&idle_floor_us);
    config(0, 1, 8);
    config(0, 4, 2);
    config(1, 1, 8);
    config(1, 4, 2);
}
