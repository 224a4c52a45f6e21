/* w4_crowd.c -- W4, live: a crowd of threads queued on one fair mutex.
 *
 * N threads (N = 10, 1 001, 10 000) in four forked processes loop lock /
 * unlock on one fair mutex, without pause and without caching, at the
 * library's defaults (waiter lease 3 s, poll 2 s), all starting together;
 * each process first takes the lock once from its main thread
 * (connections, scripts, subscription).  A repetition lasts 5 s (15 s at
 * N = 10 000: a few passes of the queue), then the threads stop asking and
 * the queue drains.  Every acquisition is recorded in a shared mapping in
 * acquisition order (w3.h: lock called, lock returned, unlock called,
 * unlock returned, thread).  Read from the records:
 *
 *   - the last thread's first acquisition, from the start: with strict FIFO
 *     it comes within (N - 1) hand-offs (target at N = 1 001: 2 s);
 *   - every acquisition's wait (lock called -> returned) against strict
 *     FIFO's bound for it: the threads ahead of it x the repetition's p99
 *     hand-off + one poll interval.  Ahead of a call made in the start's
 *     burst (until every thread has called once: half a second for 10 000
 *     threads) may be all the others -- which of them reach Redis first
 *     is the pool's and the scheduler's doing; ahead of a later call, the
 *     calls still pending when it was made.
 *     The longest wait, with that acquisition's bound as its limit, and
 *     the worst wait ÷ its bound over every acquisition (target ≤ 1: no
 *     waiter passed over);
 *   - hand-off p50 and p99 (w3_analyze: unlock returns -> the next owner's
 *     lock returns, over the timed window) against the RTT limit measured
 *     in the same run, and acquisitions per second;
 *   - the watchdogs' renewal script calls per waiter lease, all processes
 *     (rmutex_stats over the window); the limit is ideal batching with
 *     every thread queued: each waiter renewed every lease / 3, 400 per
 *     call;
 *   - looks per second: waits that ended with no message (wakeups_poll).
 */
#include "bench.h"
#include "clock.h"
#include "report.h"
#include "w3.h"
#include "workers.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROCS 4
#define WAITER_LEASE_MS 3000
#define POLL_MS 2000
#define RENEW_BATCH 400 /* the watchdog's */

static const int crowd[] = { 10, 1001, 10000 };
#define NCROWD 3

struct shared {
    struct workers run;
    _Atomic uint64_t renewal_calls, polls; /* over the window, summed by the processes */
    volatile uint64_t counter;             /* acquisitions: the record index */
    uint64_t cap;
    struct w3_rec rec[];
};

struct proc {
    struct shared *sh;
    rmutex_t m;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go;
};

struct worker {
    struct proc *p;
    int who;
};

static void *worker(void *arg)
{
    struct worker *w = arg;
    struct proc *p = w->p;
    struct shared *sh = p->sh;
    pthread_mutex_lock(&p->mu);
    while (!p->go) pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    int r = 0;
    while (!atomic_load(&sh->run.stop) && !atomic_load(&sh->run.failed)) {
        int64_t c = now_ns();
        if ((r = rmutex_lock(&p->m))) break;
        int64_t a = now_ns();
        uint64_t seq = sh->counter;
        sh->counter = seq + 1;
        int64_t u = now_ns();
        r = rmutex_unlock(&p->m);
        int64_t t = now_ns();
        if (seq < sh->cap) sh->rec[seq] = (struct w3_rec){ c, a, u, t, w->who + 1, 0 };
        if (r) break;
    }
    if (r) {
        fprintf(stderr, "bench W4 crowd: %s (%s)\n", strerror(r), rmutex_detail());
        atomic_store(&sh->run.failed, 1);
    }
    return NULL;
}

/* A worker process: threads first .. first + n - 1. */
static void child(struct shared *sh, const char *name, int first, int n)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    static struct proc p;
    p.sh = sh;
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_setfair(&a, 1);
    struct worker *w = calloc((size_t)n, sizeof *w);
    pthread_t *tid = calloc((size_t)n, sizeof *tid);
    int started = 0;
    if (!w || !tid || rmutex_init(&p.m, name, &a) || rmutex_lock(&p.m) || rmutex_unlock(&p.m)) {
        fprintf(stderr, "bench W4 crowd: warm-up: %s\n", rmutex_detail());
        atomic_store(&sh->run.failed, 1);
    } else {
        pthread_attr_t ta;
        pthread_attr_init(&ta);
        pthread_attr_setstacksize(&ta, 256 * 1024);
        for (; started < n; started++) {
            w[started] = (struct worker){ &p, first + started };
            if (pthread_create(&tid[started], &ta, worker, &w[started])) {
                fprintf(stderr, "bench W4 crowd: cannot start thread %d\n", started);
                atomic_store(&sh->run.failed, 1);
                break;
            }
        }
    }
    atomic_fetch_add(&sh->run.ready, 1);
    while (!atomic_load(&sh->run.go) && !atomic_load(&sh->run.failed)) sleep_ns(1000000);
    rmutex_stats_t s0 = stats_now();
    pthread_mutex_lock(&p.mu);
    p.go = 1;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    while (!atomic_load(&sh->run.stop) && !atomic_load(&sh->run.failed)) sleep_ns(1000000);
    rmutex_stats_t s1 = stats_now();
    atomic_fetch_add(&sh->renewal_calls, s1.renewal_calls - s0.renewal_calls);
    atomic_fetch_add(&sh->polls, s1.wakeups_poll - s0.wakeups_poll);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    exit(atomic_load(&sh->run.failed) ? 1 : 0);
}

static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* How many of sorted v[0..n) are < x. */
static size_t count_below(const int64_t *v, size_t n, int64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

struct crowd_out {
    double last_first_ms, first_bound_ms; /* the last thread's first acquisition */
    double longest_ms, longest_bound_ms;  /* the longest wait and its FIFO bound */
    double worst_ratio;                   /* max over acquisitions of wait / bound */
    double worst_at_s, worst_ahead;       /* that acquisition's call (from the start) and
                                             the threads ahead of it */
    double p50_us, p99_us, rate, renewals, renewals_ideal, looks;
};

/* Waits against strict FIFO over every record rec[0..n) (the drain too:
 * each call made is one record, so the calls pending at any moment are
 * known exactly). */
static int waits(const struct w3_rec *rec, size_t n, int nthreads, int64_t t0, double p99_us,
                 struct crowd_out *o)
{
    int64_t *calls = malloc(sizeof *calls * (n + 1)), *acqs = malloc(sizeof *acqs * (n + 1));
    int64_t *first = malloc(sizeof *first * (size_t)nthreads);
    if (!calls || !acqs || !first) {
        free(calls);
        free(acqs);
        free(first);
        return -1;
    }
    for (int t = 0; t < nthreads; t++) first[t] = -1;
    int64_t burst = t0; /* the last thread's first call */
    for (size_t i = 0; i < n; i++) {
        calls[i] = rec[i].call;
        acqs[i] = rec[i].acq;
        int t = rec[i].who - 1;
        if (t >= 0 && t < nthreads && first[t] < 0) {
            first[t] = rec[i].acq;
            if (rec[i].call > burst) burst = rec[i].call;
        }
    }
    qsort(calls, n, sizeof *calls, by_value);
    qsort(acqs, n, sizeof *acqs, by_value);
    double poll_us = POLL_MS * 1e3;
    o->worst_ratio = 0;
    o->longest_ms = 0;
    for (size_t i = 0; i < n; i++) {
        /* A call of the start's burst (before every thread had called
         * once) may find any of the others ahead of it: which of them
         * reached Redis first is the pool's and the scheduler's doing. */
        double ahead = rec[i].call <= burst ? nthreads - 1
                       : (double)count_below(calls, n, rec[i].call) -
                         (double)count_below(acqs, n, rec[i].call);
        double wait_us = (double)(rec[i].acq - rec[i].call) / 1e3, bound_us = ahead * p99_us + poll_us;
        if (wait_us / bound_us > o->worst_ratio) {
            o->worst_ratio = wait_us / bound_us;
            o->worst_at_s = (double)(rec[i].call - t0) / 1e9;
            o->worst_ahead = ahead;
        }
        if (wait_us / 1e3 > o->longest_ms) {
            o->longest_ms = wait_us / 1e3;
            o->longest_bound_ms = bound_us / 1e3;
        }
    }
    int missing = 0;
    o->last_first_ms = 0;
    for (int t = 0; t < nthreads; t++) {
        if (first[t] < 0) missing++;
        else if ((double)(first[t] - t0) / 1e6 > o->last_first_ms) o->last_first_ms = (double)(first[t] - t0) / 1e6;
    }
    o->first_bound_ms = ((nthreads - 1) * p99_us + poll_us) / 1e3;
    free(calls);
    free(acqs);
    free(first);
    if (missing) fprintf(stderr, "bench W4 crowd: %d thread(s) never acquired\n", missing);
    return missing ? -1 : 0;
}

static int rep(int r, int nthreads, double seconds, struct crowd_out *o)
{
    char what[64], name[128];
    snprintf(what, sizeof what, "w4:crowd:%d:%d", nthreads, r);
    lock_name(name, sizeof name, what);
    uint64_t cap = (uint64_t)((seconds + 30) * 20000) + (uint64_t)nthreads;
    size_t size = sizeof(struct shared) + cap * sizeof(struct w3_rec);
    struct shared *sh = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE,
                             -1, 0);
    if (sh == MAP_FAILED) {
        perror("bench W4 crowd: mmap");
        return -1;
    }
    sh->cap = cap;
    pid_t pid[PROCS];
    fflush(NULL);
    for (int p = 0, first = 0; p < PROCS; p++) {
        int n = nthreads / PROCS + (p < nthreads % PROCS);
        if ((pid[p] = fork()) == 0) child(sh, name, first, n);
        first += n;
    }
    int64_t t0, t1;
    int ok = !workers_run("W4 crowd", &sh->run, PROCS, pid, PROCS, seconds, 60, &t0, &t1);
    if (sh->counter > cap) ok = 0;
    if (ok) {
        struct w3_result res;
        w3_analyze(sh->rec, sh->counter, nthreads, 0, t0, t1, 1e18, &res);
        free(res.handoff_us);
        double secs = (double)(t1 - t0) / 1e9;
        o->p50_us = res.p50_us;
        o->p99_us = res.p99_us;
        o->rate = res.rate;
        o->renewals = (double)atomic_load(&sh->renewal_calls) / (secs * 1000 / WAITER_LEASE_MS);
        o->renewals_ideal = 0;
        for (int p = 0; p < PROCS; p++) {
            int n = nthreads / PROCS + (p < nthreads % PROCS);
            o->renewals_ideal += 3 * ((n + RENEW_BATCH - 1) / RENEW_BATCH);
        }
        o->looks = (double)atomic_load(&sh->polls) / secs;
        if (waits(sh->rec, sh->counter, nthreads, t0, res.p99_us, o)) ok = 0;
    }
    munmap(sh, size);
    return ok ? 0 : -1;
}

static void rows(int nthreads, int ok, struct sample *s, const struct sample *bound_first,
                 const struct sample *bound_longest, const struct sample *ideal)
{
    char fig[96];
    struct row *r;
    snprintf(fig, sizeof fig, "crowd of %d: last thread's first acquisition", nthreads);
    r = report_row("W4", fig, "ms", ok ? &s[0] : NULL);
    row_limit(r, sample_median(bound_first), "FIFO (N-1)·p99+poll");
    if (nthreads == 1001) row_target(r, "≤ 2000 ms", ON_VALUE, J_LE, 2000, 1);
    if (!ok) row_na(r, "error, see stderr");
    snprintf(fig, sizeof fig, "crowd of %d: longest wait of an acquisition", nthreads);
    r = report_row("W4", fig, "ms", ok ? &s[1] : NULL);
    row_limit(r, sample_median(bound_longest), "its FIFO bound");
    snprintf(fig, sizeof fig, "crowd of %d: worst wait ÷ its FIFO bound (ahead·p99+poll)", nthreads);
    r = report_row("W4", fig, "ratio", ok ? &s[2] : NULL);
    row_target(r, "≤ 1", ON_VALUE, J_LE, 1, 1);
    snprintf(fig, sizeof fig, "crowd of %d: hand-off p50", nthreads);
    r = report_row("W4", fig, "µs", ok ? &s[3] : NULL);
    row_limit_ref(r, &lim.ping_rtt_us, 1, "RTT");
    snprintf(fig, sizeof fig, "crowd of %d: hand-off p99", nthreads);
    r = report_row("W4", fig, "µs", ok ? &s[4] : NULL);
    row_limit_ref(r, &lim.ping_rtt_us, 1, "RTT");
    snprintf(fig, sizeof fig, "crowd of %d: acquisitions/s", nthreads);
    r = report_row("W4", fig, "acq/s", ok ? &s[5] : NULL);
    row_limit_ref(r, &lim.eval_rate, 1, "EVALSHA");
    snprintf(fig, sizeof fig, "crowd of %d: renewal calls per waiter lease (4 processes)", nthreads);
    r = report_row("W4", fig, "calls", ok ? &s[6] : NULL);
    row_limit(r, sample_median(ideal), "all queued, 400/call");
    snprintf(fig, sizeof fig, "crowd of %d: looks without a message", nthreads);
    report_row("W4", fig, "/s", ok ? &s[7] : NULL);
}

void w4_crowd_run(void)
{
    char o[64];
    snprintf(o, sizeof o, "waiter_lease=%d&poll=%d", WAITER_LEASE_MS, POLL_MS);
    int ok = !bench_configure(o);
    for (int i = 0; i < NCROWD; i++) {
        int n = crowd[i], good = ok;
        double seconds = n >= 10000 ? (opt.quick ? 8 : 15) : (opt.quick ? 3 : 5);
        struct sample s[8], bf = { .n = 0 }, bl = { .n = 0 }, ideal = { .n = 0 };
        memset(s, 0, sizeof s);
        for (int r = 0; good && r < opt.reps; r++) {
            struct crowd_out c;
            memset(&c, 0, sizeof c);
            if (rep(r, n, seconds, &c)) {
                good = 0;
                break;
            }
            printf("  W4 crowd of %d: last first acquisition %.0f ms (FIFO %.0f), longest wait %.0f ms "
                   "(FIFO %.0f), worst wait/bound %.3f (called at %.2f s, %.0f ahead), hand-off p50 "
                   "%.0f p99 %.0f us, %.0f acq/s, %.1f renewal calls per lease (ideal %.0f), "
                   "%.1f looks/s\n",
                   n, c.last_first_ms, c.first_bound_ms, c.longest_ms, c.longest_bound_ms,
                   c.worst_ratio, c.worst_at_s, c.worst_ahead, c.p50_us, c.p99_us, c.rate,
                   c.renewals, c.renewals_ideal, c.looks);
            double v[8] = { c.last_first_ms, c.longest_ms, c.worst_ratio, c.p50_us,
                            c.p99_us, c.rate, c.renewals, c.looks };
            for (int k = 0; k < 8; k++) sample_add(&s[k], v[k]);
            sample_add(&bf, c.first_bound_ms);
            sample_add(&bl, c.longest_bound_ms);
            sample_add(&ideal, c.renewals_ideal);
        }
        rows(n, good, s, &bf, &bl, &ideal);
    }
}
