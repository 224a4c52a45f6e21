/* w15_sem.c -- W15: counting semaphores (rsem_*), against the mutex and
 * the raw round trip of the same run.
 *
 *   1. Uncontended pairs, one thread: rsem_wait+rsem_post pairs/s on a
 *      semaphore of one permit, non-fair and fair, beside the non-fair
 *      mutex's lock+unlock (W1's measurement), after a raw hiredis EVALSHA
 *      loop; round trips per pair (rmutex_stats) and the Redis time per
 *      pair (INFO commandstats: the stretch's EVALSHA time / its pairs, its
 *      calls checked against 2 per pair); the keys Redis holds just after
 *      (every wait and post leaves its grant key a minute).  The three
 *      subjects take turns in 5 interleaved rounds of short stretches, the
 *      median of each subject's rounds (rounds.c, as W13: a burst of other
 *      load on this shared machine falls on one stretch of each, not on
 *      one subject).
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
 *      --quick): their p50 and p90, in ms and in RTT of this run
 *      (handoff.c, as W13's).
 *   3. Reclaim after kill -9 (lease=2000): a forked process takes the
 *      only permit (its lease renewed by its watchdog every lease/3); a
 *      thread of this process waits in rsem_wait; after a random delay
 *      the child is killed with SIGKILL.  The time from the kill to the
 *      wait returning, against the lease (the promise: within one lease)
 *      and against what was left of the child's lease at the kill (the
 *      leases zset's score against the server's TIME, read just after
 *      the kill): the waiter is told when the earliest lease runs out and
 *      looks again then, so expected ~ the remaining lease (2/3 to 1
 *      lease) plus a round trip; targets: within 1 lease + 50 ms of the
 *      kill, within 50 ms of the lease's end, every run.  Non-fair and
 *      fair taking turns, 5 runs each (2 with --quick). */
#include "bench.h"
#include "clock.h"
#include "handoff.h"
#include "report.h"
#include "rounds.h"
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
#define SLACK_MS 50 /* part 3: the waiter's look after the lease ran out */

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

static int mutex_subject(void *m, double seconds, double *rate)
{
    return lock_pairs("W15", m, 0, seconds, rate);
}

static int sem_subject(void *s, double seconds, double *rate)
{
    return sem_pairs(s, 0, seconds, rate);
}

static void pairs_part(void)
{
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
    ok = ok && made == SEM_FAIR && !lock_pairs("W15", &m, 200, 0.2, NULL) &&
         !sem_pairs(&sem[SEM], 200, 0.2, NULL) && !sem_pairs(&sem[SEM_FAIR], 200, 0.2, NULL);
    static const char *const pair[NKIND] = { "lock+unlock", "wait+post", "wait+post" };
    const struct subject subj[NKIND] = { { mutex_subject, &m }, { sem_subject, &sem[SEM] },
                                         { sem_subject, &sem[SEM_FAIR] } };
    ok = !rounds_report("W15", ok, c, NKIND, subj, kind_name, pair, seconds, NULL);
    /* Every wait and post leaves a grant key a minute (a lost reply's
     * answer): what the stretches left behind. */
    struct sample keys = { .n = 0 };
    if (ok) {
        sample_add(&keys, (double)rcmd_int(c, "DBSIZE"));
        printf("  W15 pairs: %.0f keys in Redis after them\n", keys.v[0]);
    }
    struct row *r = report_row("W15", "keys in Redis just after the pairs (DBSIZE)", "keys", ok ? &keys : NULL);
    if (ok) snprintf(r->note, sizeof r->note, "grant keys: one per wait and per post, kept a minute");
    for (int k = SEM; k <= made; k++) rsem_destroy(&sem[k]);
    if (have_m) rmutex_destroy(&m);
    if (c) redisFree(c);
}

/* ---- 2: hand-off latency ---- */

/* The mutex and both semaphores, each process its own handles. */
struct subjects {
    rmutex_t m;
    rsem_t sem[NKIND];
};

struct names {
    char name[NKIND][128], fair_queue[160];
};

static void *open_subjects(void *ctx)
{
    const struct names *n = ctx;
    struct subjects *o = malloc(sizeof *o);
    if (!o) return NULL;
    if (rmutex_init(&o->m, n->name[MUTEX], NULL)) {
        fprintf(stderr, "bench W15: rmutex_init(%s): %s\n", n->name[MUTEX], rmutex_detail());
        free(o);
        return NULL;
    }
    if (sem_open_kind(&o->sem[SEM], n->name[SEM], 1, 0)) {
        rmutex_destroy(&o->m);
        free(o);
        return NULL;
    }
    if (sem_open_kind(&o->sem[SEM_FAIR], n->name[SEM_FAIR], 1, 1)) {
        rsem_destroy(&o->sem[SEM]);
        rmutex_destroy(&o->m);
        free(o);
        return NULL;
    }
    return o;
}

static void close_subjects(void *subj)
{
    struct subjects *o = subj;
    rsem_destroy(&o->sem[SEM_FAIR]);
    rsem_destroy(&o->sem[SEM]);
    rmutex_destroy(&o->m);
    free(o);
}

/* The holder takes the only permit (the value is 0 then), the waiter
 * waits for it; each posts it back (its own permit: the post gives it back). */
static int take(void *subj, int kind, int waiter)
{
    struct subjects *o = subj;
    (void)waiter;
    return kind == MUTEX ? rmutex_lock(&o->m) : rsem_wait(&o->sem[kind]);
}

static int let_go(void *subj, int kind, int waiter)
{
    struct subjects *o = subj;
    (void)waiter;
    return kind == MUTEX ? rmutex_unlock(&o->m) : rsem_post(&o->sem[kind]);
}

/* The fair semaphore's waiters queue; the others keep no queue. */
static int waiting(redisContext *c, void *ctx, int kind)
{
    const struct names *n = ctx;
    return kind == SEM_FAIR ? handoff_queued(c, n->fair_queue) : 0;
}

static void handoff_part(void)
{
    static const struct handoff_ops ops = { open_subjects, close_subjects, take, let_go, waiting };
    static const char *const figure[NKIND] = {
        "mutex unlock → waiting locker in (non-fair, for comparison)",
        "semaphore post → waiting rsem_wait in (non-fair)",
        "semaphore post → waiting rsem_wait in (fair)",
    };
    struct names n;
    lock_name(n.name[MUTEX], sizeof n.name[MUTEX], "w15:handoff:mutex");
    lock_name(n.name[SEM], sizeof n.name[SEM], "w15:handoff:sem");
    lock_name(n.name[SEM_FAIR], sizeof n.name[SEM_FAIR], "w15:handoff:sem:fair");
    snprintf(n.fair_queue, sizeof n.fair_queue, "rmutex_sem_queue:{%s}", n.name[SEM_FAIR]);
    if (bench_configure("")) fprintf(stderr, "bench W15 hand-off: not configured\n");
    handoff_measure("W15", &ops, &n, NKIND, kind_name, figure);
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
    char queue[160];
    snprintf(queue, sizeof queue, "rmutex_sem_queue:{%s}", name);
    if (ok && fair) ok = !handoff_queued(c, queue);
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
    /* The permit the wait took goes back, whatever else failed (a permit
     * held would refuse the next rmutex_shutdown). */
    int r = atomic_load(&w.in) && !atomic_load(&w.r) ? rsem_post(s) : 0;
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
        /* From the kill the permit is back when the lease as last renewed
         * runs out: up to a whole lease (a kill just after a renewal), and
         * the waiter's look follows; SLACK_MS for that look. */
        row_target(r, "≤ 1 lease + 50 ms", ON_RATIO, J_LE, 1 + (double)SLACK_MS / RECLAIM_LEASE_MS, 1);
        if (!ok) row_na(r, "error, see stderr");
        snprintf(fig, sizeof fig, "%s: the holder's lease left at the kill", kind_name[k]);
        r = report_row("W15", fig, "ms", ok ? &left[k] : NULL);
        row_limit(r, RECLAIM_LEASE_MS, "lease");
        snprintf(fig, sizeof fig, "%s: reclaim time − lease left at the kill", kind_name[k]);
        r = report_row("W15", fig, "ms", ok ? &late[k] : NULL);
        row_target(r, "≤ 50 ms", ON_VALUE, J_LE, SLACK_MS, 1);
    }
}

void w15_run(void)
{
    pairs_part();
    handoff_part();
    reclaim_part();
}
