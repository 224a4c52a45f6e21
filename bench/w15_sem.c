/* w15_sem.c -- W15: counting semaphores (rsem_*), against the mutex and
 * the raw round trip of the same run.
 *
 *   1. Uncontended pairs, one thread: rsem_wait+rsem_post pairs/s on a
 *      semaphore of one permit, non-fair and fair, beside the non-fair
 *      mutex's lock+unlock (W1's measurement), after a raw hiredis EVALSHA
 *      loop; round trips per pair (rmutex_stats) and the Redis time per
 *      pair (INFO commandstats: the stretch's EVALSHA time / its pairs, its
 *      calls checked against 2 per pair).  The three subjects take turns
 *      in 5 interleaved rounds of short stretches, the median of each
 *      subject's rounds (W13's method: a burst of other load on this
 *      shared machine falls on one stretch of each, not on one subject).
 *   2. Hand-off latency: a semaphore of one permit that this process
 *      holds (its value is 0), a forked process waiting in rsem_wait; this
 *      process posts.  The time is from the post returning to the waiter's
 *      wait returning, CLOCK_MONOTONIC in both processes.  The waiter is
 *      seen in the fair queue in Redis first (the non-fair semaphore and
 *      the mutex keep none: it has called), then 10 ms more, as W13's
 *      hand-off.  Non-fair, fair, and the non-fair mutex's unlock ->
 *      waiting locker in for comparison, taking turns run by run; the
 *      waiter posts (unlocks) at once and this process takes the permit
 *      back for the next run.  60 runs each per repetition (20 with
 *      --quick): their p50 and p90, in ms and in RTT of this run.
 *   3. Reclaim after kill -9 (lease=2000): a forked process takes the
 *      only permit (its lease renewed by its watchdog every lease/3); a
 *      thread of this process waits in rsem_wait; after a random delay
 *      the child is killed with SIGKILL.  The time from the kill to the
 *      wait returning, against the lease (the promise: within one lease)
 *      and against what was left of the child's lease at the kill (the
 *      leases zset's score against the server's TIME, read just after
 *      the kill): the waiter is told when the earliest lease runs out and
 *      looks again then, so expected ~ the remaining lease (2/3 to 1
 *      lease) plus a round trip.  Non-fair and fair taking turns, 5 runs
 *      each (2 with --quick). */
#include "bench.h"
#include "clock.h"
#include "cmdstats.h"
#include "report.h"
#include "server.h"

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

#define RECLAIM_LEASE_MS 2000

enum { MUTEX, SEM, SEM_FAIR, NKIND };
static const char *const kind_name[NKIND] = { "mutex (non-fair)", "semaphore (non-fair)",
                                              "semaphore (fair)" };

/* s, made fair or not. */
static int sem_open_kind(rsem_t *s, const char *name, unsigned value, int fair)
{
    rsemattr_t a;
    int r = rsemattr_init(&a);
    if (!r) r = rsemattr_setfair(&a, fair);
    if (!r) r = rsem_init(s, name, value, &a);
    rsemattr_destroy(&a);
    if (r) fprintf(stderr, "bench W15: rsem_init(%s): %s (%s)\n", name, strerror(r), rmutex_detail());
    return r;
}

/* Wait+post pairs of s for seconds and at least n pairs: pairs/s to *rate
 * (may be NULL).  0, or -1 with an error line. */
static int sem_pairs(rsem_t *s, long n, double seconds, double *rate)
{
    int64_t t0 = now_ns(), until = t0 + (int64_t)(seconds * 1e9), t;
    long k = 0;
    do {
        int r = rsem_wait(s);
        if (r || (r = rsem_post(s))) {
            fprintf(stderr, "bench W15: wait+post pair: %s (%s)\n", strerror(r), rmutex_detail());
            return -1;
        }
        k++;
    } while ((t = now_ns()) < until || k < n);
    if (rate) *rate = k / ((double)(t - t0) / 1e9);
    return 0;
}

/* ---- 1: uncontended pairs ---- */

struct stretch {
    double rate, trips, redis_us, stray; /* stray: EVALSHA calls beyond 2 per pair */
};

/* One stretch of pairs of kind (on m, or on sem[kind]): 0 or -1. */
static int stretch(redisContext *c, int kind, rmutex_t *m, rsem_t *sem, double seconds,
                   struct stretch *o)
{
    double calls0, usec0, calls1, usec1;
    rmutex_stats_t s0 = stats_now();
    if (evalsha_totals(c, &calls0, &usec0)) return -1;
    int r = kind == MUTEX ? lock_pairs("W15", m, 0, seconds, &o->rate)
                          : sem_pairs(&sem[kind], 0, seconds, &o->rate);
    rmutex_stats_t s1 = stats_now();
    if (r || evalsha_totals(c, &calls1, &usec1)) return -1;
    double n = (double)(s1.acquisitions - s0.acquisitions);
    if (n <= 0) return -1;
    o->trips = (double)(s1.round_trips - s0.round_trips) / n;
    o->redis_us = (usec1 - usec0) / n;
    o->stray = calls1 - calls0 - 2 * n;
    return 0;
}

#define ROUNDS 5

static double median_of(double *v, int n)
{
    sort_doubles(v, (size_t)n);
    return quantile_sorted(v, (size_t)n, 0.5);
}

/* One repetition: ROUNDS rounds of a stretch of seconds / ROUNDS for each
 * kind, the order turned by one every round; per kind the median of its
 * rounds, figure by figure.  0 or -1. */
static int rounds(redisContext *c, rmutex_t *m, rsem_t *sem, double seconds, struct stretch *out)
{
    double v[4][NKIND][ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        for (int j = 0; j < NKIND; j++) {
            int k = (j + r) % NKIND;
            struct stretch st;
            if (stretch(c, k, m, sem, seconds / ROUNDS, &st)) return -1;
            v[0][k][r] = st.rate, v[1][k][r] = st.trips, v[2][k][r] = st.redis_us, v[3][k][r] = st.stray;
        }
    for (int k = 0; k < NKIND; k++)
        out[k] = (struct stretch){ median_of(v[0][k], ROUNDS), median_of(v[1][k], ROUNDS),
                                   median_of(v[2][k], ROUNDS), median_of(v[3][k], ROUNDS) };
    return 0;
}

static void pairs_part(void)
{
    struct sample rate[NKIND], us[NKIND], trips[NKIND], vs_raw[NKIND], vs_mutex[NKIND],
                  us_vs_mutex[NKIND];
    memset(rate, 0, sizeof rate);
    memset(us, 0, sizeof us);
    memset(trips, 0, sizeof trips);
    memset(vs_raw, 0, sizeof vs_raw);
    memset(vs_mutex, 0, sizeof vs_mutex);
    memset(us_vs_mutex, 0, sizeof us_vs_mutex);
    double seconds = opt.quick ? 0.5 : 2;
    char mname[128], sname[NKIND][128];
    lock_name(mname, sizeof mname, "w15:mutex");
    lock_name(sname[SEM], sizeof sname[SEM], "w15:sem");
    lock_name(sname[SEM_FAIR], sizeof sname[SEM_FAIR], "w15:sem:fair");
    rmutex_t m;
    rsem_t sem[NKIND];
    redisContext *c = server_connect();
    int have_m = c && !bench_configure("") && !rmutex_init(&m, mname, NULL), ok = have_m;
    int made = MUTEX; /* the last kind made */
    while (ok && made + 1 < NKIND && !sem_open_kind(&sem[made + 1], sname[made + 1], 1, made + 1 == SEM_FAIR))
        made++;
    if (made < SEM_FAIR) ok = 0;
    ok = ok && !lock_pairs("W15", &m, 200, 0.2, NULL) && !sem_pairs(&sem[SEM], 200, 0.2, NULL) &&
         !sem_pairs(&sem[SEM_FAIR], 200, 0.2, NULL);
    for (int i = 0; ok && i < opt.reps; i++) {
        double ev = limit_loop(c, (int)(seconds * lim.eval_rate), 1, NULL);
        struct stretch s[NKIND];
        if (!(ok = !rounds(c, &m, sem, seconds, s))) break;
        printf("  W15 pairs: EVALSHA loop %.0f/s;", ev);
        for (int k = 0; k < NKIND; k++) {
            sample_add(&rate[k], s[k].rate);
            sample_add(&us[k], s[k].redis_us);
            sample_add(&trips[k], s[k].trips);
            sample_add(&vs_raw[k], s[k].rate / (ev / 2));
            sample_add(&vs_mutex[k], s[k].rate / s[MUTEX].rate);
            sample_add(&us_vs_mutex[k], s[k].redis_us / s[MUTEX].redis_us);
            printf(" %s %.0f pairs/s (%.2f RT, %.1f us in Redis%s)", kind_name[k], s[k].rate,
                   s[k].trips, s[k].redis_us, s[k].stray ? ", stray calls" : "");
        }
        printf("\n");
    }
    for (int k = SEM; k <= made; k++) rsem_destroy(&sem[k]);
    if (have_m) rmutex_destroy(&m);
    if (c) redisFree(c);
    char fig[96];
    for (int k = 0; k < NKIND; k++) {
        const char *pair = k == MUTEX ? "lock+unlock" : "wait+post";
        snprintf(fig, sizeof fig, "%s %s pairs, 1 thread", kind_name[k], pair);
        struct row *r = report_row("W15", fig, "pairs/s", ok ? &rate[k] : NULL);
        row_limit_ref(r, &lim.eval_rate, 0.5, "EVALSHA/2");
        if (!ok) row_na(r, "error, see stderr");
        snprintf(fig, sizeof fig, "%s pairs/s ÷ an EVALSHA/2 loop just before", kind_name[k]);
        report_row("W15", fig, "ratio", ok ? &vs_raw[k] : NULL);
        if (k != MUTEX) {
            snprintf(fig, sizeof fig, "%s pairs/s ÷ the mutex pair's, same rep", kind_name[k]);
            report_row("W15", fig, "ratio", ok ? &vs_mutex[k] : NULL);
        }
        snprintf(fig, sizeof fig, "%s round trips per pair (calling thread)", kind_name[k]);
        report_row("W15", fig, "RT", ok ? &trips[k] : NULL);
        snprintf(fig, sizeof fig, "%s Redis time per pair (INFO commandstats)", kind_name[k]);
        report_row("W15", fig, "µs", ok ? &us[k] : NULL);
        if (k != MUTEX) {
            snprintf(fig, sizeof fig, "%s Redis time per pair ÷ the mutex pair's, same rep", kind_name[k]);
            report_row("W15", fig, "ratio", ok ? &us_vs_mutex[k] : NULL);
        }
    }
}

/* ---- 2: hand-off latency ---- */

struct shared {
    _Atomic int go, calling, done, failed; /* run numbers; go < 0: exit */
    _Atomic int kind;
    _Atomic int64_t in;                    /* the waiter's wait returned */
};

/* The waiter's handles, or this process's: the mutex and both semaphores. */
struct subjects {
    rmutex_t m;
    rsem_t sem[NKIND];
    int made; /* the last kind made */
};

static int subjects_open(struct subjects *o, char (*name)[128])
{
    o->made = -1;
    if (rmutex_init(&o->m, name[MUTEX], NULL)) {
        fprintf(stderr, "bench W15: rmutex_init(%s): %s\n", name[MUTEX], rmutex_detail());
        return -1;
    }
    for (o->made = MUTEX; o->made + 1 < NKIND; o->made++)
        if (sem_open_kind(&o->sem[o->made + 1], name[o->made + 1], 1, o->made + 1 == SEM_FAIR)) return -1;
    return 0;
}

static void subjects_close(struct subjects *o)
{
    for (int k = SEM; k <= o->made; k++) rsem_destroy(&o->sem[k]);
    if (o->made >= MUTEX) rmutex_destroy(&o->m);
}

/* Take kind (the mutex's lock, a permit), or let it go. */
static int take(struct subjects *o, int kind)
{
    return kind == MUTEX ? rmutex_lock(&o->m) : rsem_wait(&o->sem[kind]);
}

static int let_go(struct subjects *o, int kind)
{
    return kind == MUTEX ? rmutex_unlock(&o->m) : rsem_post(&o->sem[kind]);
}

static void waiter(struct shared *sh, char (*name)[128])
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct subjects o;
    if (subjects_open(&o, name)) {
        atomic_store(&sh->failed, 1);
        _exit(1);
    }
    for (int seen = 0;;) {
        int go;
        while ((go = atomic_load(&sh->go)) == seen) sleep_ns(100000);
        if (go < 0) break;
        seen = go;
        int kind = atomic_load(&sh->kind);
        atomic_store(&sh->calling, go);
        int r = take(&o, kind);
        atomic_store(&sh->in, now_ns());
        if (!r) r = let_go(&o, kind);
        if (r) {
            fprintf(stderr, "bench W15 hand-off: waiter: %s (%s)\n", strerror(r), rmutex_detail());
            atomic_store(&sh->failed, 1);
            _exit(1);
        }
        atomic_store(&sh->done, go);
    }
    subjects_close(&o);
    _exit(0);
}

/* Wait (seconds at most) until *v == want, or the waiter failed.  0 or -1. */
static int await(_Atomic int *v, int want, const struct shared *sh, double seconds)
{
    for (int64_t until = now_ns() + (int64_t)(seconds * 1e9); atomic_load(v) != want;) {
        if (atomic_load(&sh->failed) || now_ns() > until) return -1;
        sleep_ns(50000);
    }
    return 0;
}

/* Until the fair semaphore's queue has someone (two seconds at most). */
static int queued(redisContext *c, const char *name)
{
    for (int64_t until = now_ns() + 2000000000LL; now_ns() < until; sleep_ns(200000))
        if (rcmd_int(c, "ZCARD rmutex_sem_queue:{%s}", name) > 0) return 0;
    fprintf(stderr, "bench W15 hand-off: the fair waiter did not queue\n");
    return -1;
}

/* One run, number run, of kind: the latency in ms to *ms. */
static int one_run(struct shared *sh, redisContext *c, int kind, int run, struct subjects *o,
                   const char *fair_name, double *ms)
{
    int r = take(o, kind);
    if (r) {
        fprintf(stderr, "bench W15 hand-off: hold: %s (%s)\n", strerror(r), rmutex_detail());
        return -1;
    }
    atomic_store(&sh->kind, kind);
    atomic_store(&sh->go, run);
    int ok = !await(&sh->calling, run, sh, 5) && (kind != SEM_FAIR || !queued(c, fair_name));
    sleep_ns(10000000);
    r = let_go(o, kind);
    int64_t out = now_ns();
    if (r) fprintf(stderr, "bench W15 hand-off: post/unlock: %s (%s)\n", strerror(r), rmutex_detail());
    if (r || await(&sh->done, run, sh, 10)) return -1;
    *ms = (double)(atomic_load(&sh->in) - out) / 1e6;
    return ok ? 0 : -1;
}

/* Tell the forked process to exit and reap it (SIGKILL after 10 s). */
static void reap(pid_t pid)
{
    int status;
    int64_t until = now_ns() + 10000000000LL;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (now_ns() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        sleep_ns(1000000);
    }
}

static const char *const handoff_name[NKIND] = {
    "mutex unlock → waiting locker in (non-fair, for comparison)",
    "semaphore post → waiting rsem_wait in (non-fair)",
    "semaphore post → waiting rsem_wait in (fair)",
};

static void handoff_part(void)
{
    int runs = opt.quick ? 20 : 60;
    struct sample p50[NKIND], p90[NKIND];
    memset(p50, 0, sizeof p50);
    memset(p90, 0, sizeof p90);
    char name[NKIND][128];
    lock_name(name[MUTEX], sizeof name[MUTEX], "w15:handoff:mutex");
    lock_name(name[SEM], sizeof name[SEM], "w15:handoff:sem");
    lock_name(name[SEM_FAIR], sizeof name[SEM_FAIR], "w15:handoff:sem:fair");
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double *lat = malloc(sizeof *lat * (size_t)(NKIND * runs));
    redisContext *c = server_connect();
    struct subjects o = { .made = -1 };
    int ok = sh != MAP_FAILED && lat && c && !bench_configure("") && !subjects_open(&o, name);
    pid_t pid = -1;
    if (ok) {
        memset(sh, 0, sizeof *sh);
        fflush(NULL);
        if ((pid = fork()) == 0) waiter(sh, name);
        ok = pid > 0;
    }
    for (int rep = 0, run = 0; ok && rep < opt.reps; rep++) {
        for (int i = 0; ok && i < runs; i++)
            for (int k = 0; ok && k < NKIND; k++)
                ok = !one_run(sh, c, k, ++run, &o, name[SEM_FAIR], &lat[k * runs + i]);
        if (!ok) break;
        printf("  W15 hand-off:");
        for (int k = 0; k < NKIND; k++) {
            double *v = &lat[k * runs];
            sort_doubles(v, (size_t)runs);
            sample_add(&p50[k], quantile_sorted(v, (size_t)runs, 0.5));
            sample_add(&p90[k], quantile_sorted(v, (size_t)runs, 0.9));
            printf(" %s p50 %.3f p90 %.3f ms;", kind_name[k], p50[k].v[p50[k].n - 1], p90[k].v[p90[k].n - 1]);
        }
        printf("\n");
    }
    if (pid > 0) {
        atomic_store(&sh->go, -1);
        reap(pid);
    }
    subjects_close(&o);
    if (c) redisFree(c);
    free(lat);
    if (sh != MAP_FAILED) munmap(sh, sizeof *sh);
    char fig[96];
    for (int k = 0; k < NKIND; k++)
        for (int q = 0; q < 2; q++) {
            snprintf(fig, sizeof fig, "hand-off %s, p%d", handoff_name[k], q ? 90 : 50);
            struct row *r = report_row("W15", fig, "ms", ok ? (q ? &p90[k] : &p50[k]) : NULL);
            row_limit_ref(r, &lim.ping_rtt_us, 0.001, "RTT");
            if (!ok) row_na(r, "error, see stderr");
        }
}

/* ---- 3: reclaim after kill -9 ---- */

struct holder_state {
    _Atomic int held, failed;
};

/* The forked holder: takes the only permit of name and sleeps holding it
 * (its watchdog renewing the lease) until it is killed. */
static void holder(struct holder_state *hs, const char *name, int fair)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rsem_t s;
    int r = sem_open_kind(&s, name, 1, fair);
    if (!r && (r = rsem_wait(&s))) fprintf(stderr, "bench W15 reclaim: holder: %s (%s)\n", strerror(r), rmutex_detail());
    atomic_store(r ? &hs->failed : &hs->held, 1);
    for (;;) pause();
}

struct waiting {
    rsem_t *s;
    _Atomic int64_t in; /* 0 until the wait returned */
    _Atomic int r;
};

static void *wait_thread(void *arg)
{
    struct waiting *w = arg;
    int r = rsem_wait(w->s);
    atomic_store(&w->r, r);
    atomic_store(&w->in, now_ns());
    return NULL;
}

/* What is left of the one process lease on name at the server's now, in ms
 * (NAN if there is not exactly one). */
static double lease_left_ms(redisContext *c, const char *name)
{
    redisAppendCommand(c, "ZRANGE rmutex_sem_leases:{%s} 0 -1 WITHSCORES", name);
    redisAppendCommand(c, "TIME");
    redisReply *z = NULL, *t = NULL;
    double left = NAN;
    if (redisGetReply(c, (void **)&z) == REDIS_OK && redisGetReply(c, (void **)&t) == REDIS_OK &&
        z->type == REDIS_REPLY_ARRAY && z->elements == 2 && t->type == REDIS_REPLY_ARRAY && t->elements == 2)
        left = atof(z->element[1]->str) - (atof(t->element[0]->str) * 1e3 + atof(t->element[1]->str) / 1e3);
    if (z) freeReplyObject(z);
    if (t) freeReplyObject(t);
    return left;
}

/* One run on s (called name): the kill -> wait returned time and the lease
 * left at the kill, in ms.  0 or -1. */
static int reclaim_run(redisContext *c, rsem_t *s, const char *name, int fair, struct holder_state *hs,
                       double *reclaim_ms, double *left_ms)
{
    memset(hs, 0, sizeof *hs);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) holder(hs, name, fair);
    if (pid < 0) return -1;
    int ok = 1;
    for (int64_t until = now_ns() + 10000000000LL; ok && !atomic_load(&hs->held); sleep_ns(1000000))
        if (atomic_load(&hs->failed) || now_ns() > until) ok = 0;
    struct waiting w = { .s = s };
    pthread_t th;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int started = ok && !pthread_create(&th, NULL, wait_thread, &w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    ok = started;
    if (ok && fair) ok = !queued(c, name);
    /* The waiter has had its first look (non-fair: given the time); then
     * a random point of the holder's renewal period. */
    sleep_ns(50000000 + (int64_t)(rand() % (RECLAIM_LEASE_MS / 3)) * 1000000);
    int64_t killed = now_ns();
    kill(pid, SIGKILL);
    double left = lease_left_ms(c, name);
    *left_ms = left + (double)(now_ns() - killed) / 1e6;
    int64_t until = killed + (int64_t)3 * RECLAIM_LEASE_MS * 1000000;
    while (started && !atomic_load(&w.in) && now_ns() < until) sleep_ns(200000);
    if (started && !atomic_load(&w.in)) {
        fprintf(stderr, "bench W15 reclaim: the wait did not return within 3 leases of the kill\n");
        pthread_cancel(th);
        ok = 0;
    }
    if (started) pthread_join(th, NULL);
    if (ok && atomic_load(&w.r)) {
        fprintf(stderr, "bench W15 reclaim: wait: %s\n", strerror(atomic_load(&w.r)));
        ok = 0;
    }
    if (ok) *reclaim_ms = (double)(atomic_load(&w.in) - killed) / 1e6;
    int r = ok ? rsem_post(s) : 0;
    if (r) fprintf(stderr, "bench W15 reclaim: post: %s (%s)\n", strerror(r), rmutex_detail());
    waitpid(pid, NULL, 0);
    if (isnan(left)) fprintf(stderr, "bench W15 reclaim: not one lease in Redis at the kill\n");
    return ok && !r && !isnan(left) ? 0 : -1;
}

static void reclaim_part(void)
{
    int runs = opt.quick ? 2 : 5;
    struct sample took[NKIND], left[NKIND], late[NKIND];
    memset(took, 0, sizeof took);
    memset(left, 0, sizeof left);
    memset(late, 0, sizeof late);
    char name[NKIND][128], o[32];
    lock_name(name[SEM], sizeof name[SEM], "w15:reclaim:sem");
    lock_name(name[SEM_FAIR], sizeof name[SEM_FAIR], "w15:reclaim:sem:fair");
    snprintf(o, sizeof o, "lease=%d", RECLAIM_LEASE_MS);
    struct holder_state *hs = mmap(NULL, sizeof *hs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    redisContext *c = server_connect();
    rsem_t s[NKIND];
    int made = MUTEX;
    int ok = hs != MAP_FAILED && c && !bench_configure(o);
    while (ok && made + 1 < NKIND && !sem_open_kind(&s[made + 1], name[made + 1], 1, made + 1 == SEM_FAIR))
        made++;
    ok = ok && made == SEM_FAIR;
    srand((unsigned)getpid());
    for (int i = 0; ok && i < runs; i++)
        for (int k = SEM; ok && k < NKIND; k++) {
            double ms, l;
            if (!(ok = !reclaim_run(c, &s[k], name[k], k == SEM_FAIR, hs, &ms, &l))) break;
            sample_add(&took[k], ms);
            sample_add(&left[k], l);
            sample_add(&late[k], ms - l);
            printf("  W15 reclaim, %s: kill -9 -> wait returned %.0f ms, the lease had %.0f ms left\n",
                   kind_name[k], ms, l);
        }
    for (int k = SEM; k <= made; k++) rsem_destroy(&s[k]);
    if (c) redisFree(c);
    if (hs != MAP_FAILED) munmap(hs, sizeof *hs);
    bench_configure("");
    char fig[96];
    for (int k = SEM; k < NKIND; k++) {
        snprintf(fig, sizeof fig, "%s: holder kill -9 → waiter's rsem_wait returned", kind_name[k]);
        struct row *r = report_row("W15", fig, "ms", ok ? &took[k] : NULL);
        row_limit(r, RECLAIM_LEASE_MS, "lease");
        row_target(r, "≤ 1 lease", ON_RATIO, J_LE, 1, 1);
        if (!ok) row_na(r, "error, see stderr");
        snprintf(fig, sizeof fig, "%s: the holder's lease left at the kill", kind_name[k]);
        r = report_row("W15", fig, "ms", ok ? &left[k] : NULL);
        row_limit(r, RECLAIM_LEASE_MS, "lease");
        snprintf(fig, sizeof fig, "%s: reclaim time − lease left at the kill", kind_name[k]);
        report_row("W15", fig, "ms", ok ? &late[k] : NULL);
    }
}

void w15_run(void)
{
    pairs_part();
    handoff_part();
    reclaim_part();
}
