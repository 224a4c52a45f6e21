/* w10_cond.c -- W10: condition variables (rcond_*).
 *
 *   - signal -> the waiter holds the mutex again: a waiter in another
 *     process waits once per round; this process waits until Redis shows
 *     it registered, signals (without holding the mutex), and the waiter
 *     reports when rcond_wait returned (CLOCK_MONOTONIC is one clock for
 *     both processes).  Median and p99 over the rounds, and the median in
 *     units of the EVALSHA RTT of this run.  The signal finds the mutex
 *     free, so it hands it to the waiter (wait morphing, cond.c): the
 *     waiter owns it on receipt and makes no round trip after its wake-up
 *     -- then "signal -> wake" is that same figure, observed.  A round in
 *     which the wait did make one (its wait took more than its register
 *     and release: the plain path, the leave sent ahead with the mutex's
 *     acquire) counts as that figure minus an uncontended lock (one script
 *     round trip) the waiter times right after each round: derived.  The
 *     share of rounds handed the mutex is reported;
 *   - the same with the waiter a thread of this process (the signalling
 *     thread wakes it itself when its reply beats the multiplexer's copy
 *     of the message: cond.c's hand_over), and the share of rounds in
 *     which it did;
 *   - round trips of the calling thread per wait (the waiter's, including
 *     the mutex's release and retake), per signal and per broadcast;
 *   - a broadcast's Redis-side time (SLOWLOG, exact per command) with 1
 *     waiter, with 10 in 10 processes and with 1 000 in 10 processes, and
 *     the ratios 1 000 / 1 (the target, <= 2) and 1 000 / 10: the script
 *     does not look at the waiters, but its PUBLISH writes to every
 *     subscribed process, so the second ratio is the one that isolates
 *     the number of waiters; and how long the 1 000 take to have all
 *     returned (each retakes the mutex in turn);
 *   - the broadcast script alone (called directly, timed by INFO
 *     commandstats) with 1, 1 000 and 10 000 synthetic waiters and no
 *     subscriber: what the script costs against the number of waiters,
 *     free of the crowd's load on the machine;
 *   - the signal script alone, the same way, on one synthetic waiter whose
 *     channel has a subscriber, with its mutex free (the script grants it
 *     in place: wait morphing) and without a mutex to grant: all of it runs
 *     before Redis writes the message, so it is part of every signal ->
 *     wake-up, against the EVALSHA RTT;
 *   - the floor under every pub/sub wake-up on this machine: a raw PUBLISH
 *     read by a plain hiredis subscriber in another process. */
#include "bench.h"
#include "clock.h"
#include "cmdstats.h"
#include "report.h"
#include "server.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct report_line {
    int64_t returned_ns; /* rcond_wait returned */
    int rc;
    double round_trips;  /* of the wait */
    int64_t lock_ns;     /* an uncontended lock right after: one script round trip */
};

/* Waiters registered and not yet signalled (a waiter handed the mutex by
 * its signal may still be in the zset, signalled, until its leave lands:
 * the watchdog sends it after the wait returned). */
static long long unsignalled(redisContext *c, const char *key)
{
    return rcmd_int(c, "ZCOUNT %s 1 +inf", key);
}

/* Poll until the condition has want registered waiters (or 30 s). */
static int await_waiters(redisContext *c, const char *key, long long want)
{
    int64_t until = now_ns() + 30000000000LL;
    while (unsignalled(c, key) != want) {
        if (now_ns() > until) return -1;
        sleep_ns(100000);
    }
    return 0;
}

/* The waiter's rounds: lock, wait once, report on fd.  0, or where it
 * failed. */
static int wait_rounds(const char *mname, const char *cname, int rounds, int fd)
{
    rmutex_t m;
    rcond_t cv;
    if (rmutex_init(&m, mname, NULL) || rcond_init(&cv, cname, NULL)) return 1;
    for (int i = 0; i < rounds; i++) {
        struct report_line l = { 0, 0, 0 };
        if (rmutex_lock(&m)) return 2;
        rmutex_stats_t s0 = stats_now();
        l.rc = rcond_wait(&cv, &m);
        l.returned_ns = now_ns();
        rmutex_stats_t s1 = stats_now();
        l.round_trips = (double)(s1.round_trips - s0.round_trips);
        rmutex_unlock(&m);
        int64_t p0 = now_ns();
        if (rmutex_lock(&m)) return 4;
        l.lock_ns = now_ns() - p0;
        if (rmutex_unlock(&m)) return 4;
        if (write(fd, &l, sizeof l) != (ssize_t)sizeof l) return 3;
    }
    rcond_destroy(&cv);
    rmutex_destroy(&m);
    return 0;
}

static void child_waiter(const char *mname, const char *cname, int rounds, int fd)
{
    _exit(wait_rounds(mname, cname, rounds, fd));
}

/* The same waiter as a thread of this process (the signal wakes it from
 * here: cond.c's hand_over). */
struct thread_waiter {
    const char *mname, *cname;
    int rounds, fd;
};

static void *thread_waiter(void *p)
{
    struct thread_waiter *t = p;
    wait_rounds(t->mname, t->cname, t->rounds, t->fd);
    return NULL;
}

/* local: the waiter is a thread of this process, not another process. */
static void latency(redisContext *c, int local)
{
    char mname[128], cname[128], key[200];
    lock_name(mname, sizeof mname, local ? "w10:lm" : "w10:m");
    lock_name(cname, sizeof cname, local ? "w10:lc" : "w10:c");
    snprintf(key, sizeof key, "rmutex_cond_wait:{%s}", cname);
    int rounds = opt.quick ? 100 : 400, fds[2];
    struct sample holds_p50 = { .n = 0 }, holds_p99 = { .n = 0 }, wake = { .n = 0 },
                  rt_wait = { .n = 0 }, rt_signal = { .n = 0 }, rt_broadcast = { .n = 0 },
                  handed = { .n = 0 }, from_here = { .n = 0 };
    double *lat = calloc((size_t)rounds, sizeof *lat), *woke = calloc((size_t)rounds, sizeof *woke);
    int ok = lat && woke && !pipe(fds);
    rcond_t cv;
    ok = ok && !rcond_init(&cv, cname, NULL);
    for (int rep = 0; ok && rep < opt.reps; rep++) {
        pid_t pid = -1;
        pthread_t tid;
        struct thread_waiter tw = { mname, cname, rounds, fds[1] };
        if (local) {
            if (pthread_create(&tid, NULL, thread_waiter, &tw)) break;
        } else if ((pid = fork()) == 0) {
            close(fds[0]);
            child_waiter(mname, cname, rounds, fds[1]);
        }
        double trips = 0, sig_trips = 0, handed_rounds = 0;
        uint64_t here0 = stats_now().cond_signals_local;
        for (int i = 0; ok && i < rounds; i++) {
            struct report_line l;
            if (await_waiters(c, key, 1)) {
                fprintf(stderr, "bench W10: the waiter did not register\n");
                ok = 0;
                break;
            }
            rmutex_stats_t s0 = stats_now();
            int64_t t0 = now_ns();
            int r = rcond_signal(&cv);
            rmutex_stats_t s1 = stats_now();
            sig_trips += (double)(s1.round_trips - s0.round_trips);
            if (r || read(fds[0], &l, sizeof l) != (ssize_t)sizeof l || l.rc) {
                fprintf(stderr, "bench W10: signal %d, wait %d\n", r, l.rc);
                ok = 0;
                break;
            }
            lat[i] = (double)(l.returned_ns - t0) / 1e3;
            /* Register and release only: nothing after the wake-up. */
            int owned_on_receipt = l.round_trips <= 2;
            handed_rounds += owned_on_receipt;
            woke[i] = (double)(l.returned_ns - t0 - (owned_on_receipt ? 0 : l.lock_ns)) / 1e3;
            trips += l.round_trips;
        }
        int status;
        if (local) {
            if (!ok) pthread_cancel(tid); /* (rcond_wait is a cancellation point) */
            pthread_join(tid, NULL);
        } else {
            if (!ok) kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
        if (!ok) break;
        sort_doubles(lat, (size_t)rounds);
        double p50 = quantile_sorted(lat, (size_t)rounds, 0.5);
        sample_add(&holds_p50, p50);
        sample_add(&holds_p99, quantile_sorted(lat, (size_t)rounds, 0.99));
        sort_doubles(woke, (size_t)rounds);
        sample_add(&wake, quantile_sorted(woke, (size_t)rounds, 0.5));
        sample_add(&rt_wait, trips / rounds);
        sample_add(&rt_signal, sig_trips / rounds);
        sample_add(&handed, 100.0 * handed_rounds / rounds);
        sample_add(&from_here, 100.0 * (double)(stats_now().cond_signals_local - here0) / rounds);
        /* A broadcast with nobody waiting is one round trip too. */
        rmutex_stats_t b0 = stats_now();
        rcond_broadcast(&cv);
        rmutex_stats_t b1 = stats_now();
        sample_add(&rt_broadcast, (double)(b1.round_trips - b0.round_trips));
        printf("  W10 signal -> %s holds the mutex: p50 %.0f us, p99 %.0f us (%d rounds)\n",
               local ? "a waiting thread of this process" : "waiter", p50,
               quantile_sorted(lat, (size_t)rounds, 0.99), rounds);
    }
    if (ok) rcond_destroy(&cv);
    free(lat);
    free(woke);
    close(fds[0]);
    close(fds[1]);

    if (local) {
        struct row *r = report_row("W10", "signal → a waiting thread of this process holds the mutex, p50",
                                   "µs", ok ? &holds_p50 : NULL);
        row_limit_ref(r, &lim.eval_rtt_us, 1, "EVALSHA RTT");
        report_row("W10", "signals that woke a thread of this process from the signalling thread",
                   "%", ok ? &from_here : NULL);
        return;
    }
    struct row *r = report_row("W10", "signal → waiter holds the mutex, p50", "µs", ok ? &holds_p50 : NULL);
    row_limit_ref(r, &lim.eval_rtt_us, 1, "EVALSHA RTT");
    row_target(r, "ratio ≤ 3", ON_RATIO, J_LE, 3, 0);
    report_row("W10", "signal → waiter holds the mutex, p99", "µs", ok ? &holds_p99 : NULL);
    r = report_row("W10",
                   "signal → wake, p50 (the hold when the waiter owned the mutex on receipt, else "
                   "the hold − its uncontended lock)",
                   "µs", ok ? &wake : NULL);
    row_limit_ref(r, &lim.eval_rtt_us, 1, "EVALSHA RTT");
    row_target(r, "ratio ≤ 1.5", ON_RATIO, J_LE, 1.5, 0);
    report_row("W10", "rounds in which the signal handed the waiter the mutex", "%",
               ok ? &handed : NULL);
    report_row("W10", "round trips per wait (with the mutex's release, and retake if any)", "RT",
               ok ? &rt_wait : NULL);
    report_row("W10", "round trips per signal", "RT", ok ? &rt_signal : NULL);
    report_row("W10", "round trips per broadcast", "RT", ok ? &rt_broadcast : NULL);
}

/* ---- the floor: raw pub/sub delivery between two processes ---- */

/* PUBLISH by this process -> a subscriber process (plain hiredis) has read
 * the message: what any pub/sub wake-up costs on this machine before a
 * thread is woken. */
static void raw_delivery(redisContext *c)
{
    char ch[128];
    lock_name(ch, sizeof ch, "w10:raw");
    struct sample p50s = { .n = 0 };
    double p50 = pubsub_delivery_p50(c, ch, opt.quick ? 200 : 1000);
    int ok = !isnan(p50);
    if (ok) sample_add(&p50s, p50);
    struct row *r = report_row("W10", "floor: raw PUBLISH → a subscriber process read it, p50", "µs",
                               ok ? &p50s : NULL);
    row_limit_ref(r, &lim.eval_rtt_us, 1, "EVALSHA RTT");
}

/* ---- broadcast to many ---- */

struct crowd {
    const char *mname, *cname;
    rmutex_t m;
    rcond_t cv;
    int bad;
};

static void *crowd_thread(void *p)
{
    struct crowd *cr = p;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += 120;
    if (rmutex_lock(&cr->m)) {
        __atomic_add_fetch(&cr->bad, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    if (rcond_timedwait(&cr->cv, &cr->m, &t)) __atomic_add_fetch(&cr->bad, 1, __ATOMIC_RELAXED);
    rmutex_unlock(&cr->m);
    return NULL;
}

static void crowd_process(const char *mname, const char *cname, int threads)
{
    struct crowd cr = { mname, cname, { 0 }, { 0 }, 0 };
    if (rmutex_init(&cr.m, mname, NULL) || rcond_init(&cr.cv, cname, NULL)) _exit(1);
    pthread_t *ts = calloc((size_t)threads, sizeof *ts);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 256 * 1024);
    for (int i = 0; i < threads; i++) pthread_create(&ts[i], &a, crowd_thread, &cr);
    for (int i = 0; i < threads; i++) pthread_join(ts[i], NULL);
    _exit(cr.bad ? 2 : 0);
}

/* The Redis-side µs of the last EVALSHA ... broadcast in SLOWLOG. */
static double broadcast_usec(redisContext *c)
{
    redisReply *r = rcmd(c, "SLOWLOG GET 200000");
    double us = -1;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 4) continue;
        redisReply *args = e->element[3];
        for (size_t k = 0; args->type == REDIS_REPLY_ARRAY && k < args->elements; k++)
            if (args->element[k]->str && !strcmp(args->element[k]->str, "broadcast")) {
                us = (double)e->element[2]->integer;
                break;
            }
        if (us >= 0) break;
    }
    if (r) freeReplyObject(r);
    return us;
}

/* procs x threads waiters; returns 0 and the broadcast's Redis µs and the
 * time until every waiter process exited. */
static int crowd(redisContext *c, int procs, int threads, int rep, double *redis_us, double *all_ms)
{
    char mname[128], cname[128], key[200], what[64];
    snprintf(what, sizeof what, "w10:crowd%d:%d", procs * threads, rep);
    lock_name(mname, sizeof mname, what);
    snprintf(what, sizeof what, "w10:crowdc%d:%d", procs * threads, rep);
    lock_name(cname, sizeof cname, what);
    snprintf(key, sizeof key, "rmutex_cond_wait:{%s}", cname);
    pid_t *pids = calloc((size_t)procs, sizeof *pids);
    for (int i = 0; pids && i < procs; i++)
        if ((pids[i] = fork()) == 0) crowd_process(mname, cname, threads);
    int ok = pids && !await_waiters(c, key, (long long)procs * threads);
    rcond_t cv;
    ok = ok && !rcond_init(&cv, cname, NULL);
    redisReply *x = ok ? rcmd(c, "SLOWLOG RESET") : NULL;
    if (x) freeReplyObject(x);
    int64_t t0 = now_ns();
    ok = ok && !rcond_broadcast(&cv);
    int failed = 0;
    for (int i = 0; pids && i < procs; i++) {
        int status = 0;
        if (!ok) kill(pids[i], SIGKILL);
        waitpid(pids[i], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status)) failed = 1;
    }
    *all_ms = (double)(now_ns() - t0) / 1e6;
    *redis_us = ok ? broadcast_usec(c) : -1;
    if (ok) rcond_destroy(&cv);
    free(pids);
    if (failed) fprintf(stderr, "bench W10: a waiter process failed\n");
    return ok && !failed && *redis_us >= 0 ? 0 : -1;
}

static void broadcasts(redisContext *c)
{
    struct sample one = { .n = 0 }, ten = { .n = 0 }, many = { .n = 0 }, ratio = { .n = 0 },
                  same_fanout = { .n = 0 }, all = { .n = 0 };
    int own = srv.pid != 0, ok = own;
    redisReply *x = own ? rcmd(c, "CONFIG SET slowlog-log-slower-than 0") : NULL;
    if (x) freeReplyObject(x);
    x = own ? rcmd(c, "CONFIG SET slowlog-max-len 200000") : NULL;
    if (x) freeReplyObject(x);
    int reps = opt.quick ? 1 : 5; /* one broadcast per setup: a single, noisy sample */
    for (int rep = 0; ok && rep < reps; rep++) {
        double u1, u10, um, a;
        if (crowd(c, 1, 1, rep, &u1, &a) || crowd(c, 10, 1, rep, &u10, &a) ||
            crowd(c, 10, 100, rep, &um, &a)) {
            ok = 0;
            break;
        }
        sample_add(&one, u1);
        sample_add(&ten, u10);
        sample_add(&many, um);
        sample_add(&ratio, um / (u1 > 0 ? u1 : 1));
        sample_add(&same_fanout, um / (u10 > 0 ? u10 : 1));
        sample_add(&all, a);
        printf("  W10 broadcast in Redis: %.0f us with 1 waiter, %.0f us with 10 in 10 processes, "
               "%.0f us with 1000 in 10 processes; all 1000 returned after %.0f ms\n", u1, u10, um, a);
    }
    x = own ? rcmd(c, "CONFIG SET slowlog-log-slower-than 10000") : NULL;
    if (x) freeReplyObject(x);
    x = own ? rcmd(c, "CONFIG SET slowlog-max-len 128") : NULL;
    if (x) freeReplyObject(x);
    report_row("W10", "broadcast, Redis-side time, 1 waiter (1 process)", "µs", ok ? &one : NULL);
    report_row("W10", "broadcast, Redis-side time, 10 waiters in 10 processes", "µs", ok ? &ten : NULL);
    report_row("W10", "broadcast, Redis-side time, 1 000 waiters in 10 processes", "µs",
               ok ? &many : NULL);
    struct row *r = report_row("W10", "broadcast Redis time, 1 000 waiters ÷ 1 waiter", "ratio",
                               ok ? &ratio : NULL);
    row_target(r, "≤ 2", ON_VALUE, J_LE, 2, 0);
    if (!own) row_na(r, "needs the benchmark's own server (SLOWLOG)");
    report_row("W10", "broadcast Redis time, 1 000 ÷ 10 waiters (both in 10 processes)", "ratio",
               ok ? &same_fanout : NULL);
    report_row("W10", "broadcast → all 1 000 waiters returned (each retakes the mutex)", "ms",
               ok ? &all : NULL);
}

/* ---- the broadcast script alone, against the number of waiters ---- */

/* INFO commandstats around chunks of 25 calls of one(c, ctx), which makes
 * one EVALSHA (and what else it needs, not an EVALSHA): the mean µs per
 * EVALSHA of the median chunk (16 chunks, 4 with --quick), or -1. */
static double per_call_us(redisContext *c, int (*one)(redisContext *, void *), void *ctx)
{
    double chunk_us[16];
    int chunks = opt.quick ? 4 : 16;
    for (int k = 0; k < chunks; k++) {
        double c0, u0, c1, u1;
        if (evalsha_totals(c, &c0, &u0)) return -1;
        for (int i = 0; i < 25; i++)
            if (one(c, ctx)) return -1;
        if (evalsha_totals(c, &c1, &u1) || c1 <= c0) return -1;
        chunk_us[k] = (u1 - u0) / (c1 - c0);
    }
    sort_doubles(chunk_us, (size_t)chunks);
    return quantile_sorted(chunk_us, (size_t)chunks, 0.5);
}

struct cond_keys {
    const char *sha;
    char h[160], w[160], a[160], p[160], lock[160], terms[200];
    int grant;
};

static void cond_keys_make(struct cond_keys *k, const char *sha, const char *what)
{
    char base[128];
    lock_name(base, sizeof base, what);
    k->sha = sha;
    k->grant = 0;
    snprintf(k->h, sizeof k->h, "rmutex_cond:{%s}", base);
    snprintf(k->w, sizeof k->w, "rmutex_cond_wait:{%s}", base);
    snprintf(k->a, sizeof k->a, "rmutex_cond_alive:{%s}", base);
    snprintf(k->p, sizeof k->p, "rmutex_cond_channel:{%s}", base);
    snprintf(k->lock, sizeof k->lock, "{%s}:m", base);
    snprintf(k->terms, sizeof k->terms, "%s\n30000", k->lock);
}

/* One broadcast, and its cut reset (HSET) for the next. */
static int one_broadcast(redisContext *c, void *ctx)
{
    const struct cond_keys *k = ctx;
    const char *argv[] = { "EVALSHA", k->sha, "4", k->h, k->w, k->a, k->p, "broadcast", "", "3000", "",
                           "0", "publish", "" };
    redisReply *x = redisCommandArgv(c, 14, argv, NULL);
    if (x) freeReplyObject(x);
    x = rcmd(c, "HSET %s bcast 0", k->h);
    if (x) freeReplyObject(x);
    return 0;
}

/* cond.lua's broadcast on a condition with n synthetic waiters and no
 * subscriber, timed by INFO commandstats over chunks (the waiters are made
 * with ZADD, the cut is reset with HSET between calls: neither is an
 * EVALSHA).  Mean µs per call of the median chunk. */
static double script_broadcast_us(redisContext *c, const char *sha, int n)
{
    char tag[96], seq[24];
    struct cond_keys k;
    snprintf(tag, sizeof tag, "w10:iso%d", n);
    cond_keys_make(&k, sha, tag);
    for (int i = 1; i <= n; i++) {
        redisAppendCommand(c, "ZADD %s %d m%d", k.w, i, i);
        redisAppendCommand(c, "ZADD %s 9999999999999 m%d", k.a, i);
    }
    for (int i = 0; i < 2 * n; i++) {
        void *r;
        if (redisGetReply(c, &r) != REDIS_OK) return -1;
        freeReplyObject(r);
    }
    snprintf(seq, sizeof seq, "%d", n);
    redisReply *x = rcmd(c, "HSET %s seq %s", k.h, seq);
    if (x) freeReplyObject(x);
    double us = per_call_us(c, one_broadcast, &k);
    x = rcmd(c, "DEL %s %s %s", k.h, k.w, k.a);
    if (x) freeReplyObject(x);
    return us;
}

/* cond.lua's signal on one synthetic waiter (ticket 1, alive, and with
 * grant its mutex's terms, the mutex free), the keys made again between
 * calls (not EVALSHAs); sub is subscribed to the channel, so the PUBLISH
 * reaches a subscriber and the grant is made (it never reads: 25 short
 * messages a chunk).  Mean µs per call of the median chunk, or -1. */
/* One signal, the waiter made again first (none of that an EVALSHA). */
static int one_signal(redisContext *c, void *ctx)
{
    const struct cond_keys *k = ctx;
    const char *member = "w10-isolated:1 1";
    redisAppendCommand(c, "DEL %s %s %s %s", k->h, k->w, k->a, k->lock);
    redisAppendCommand(c, "HSET %s seq 1 mutex %s", k->h, k->lock);
    if (k->grant) redisAppendCommand(c, "HSET %s %s %s", k->h, "g w10-isolated:1 1", k->terms);
    redisAppendCommand(c, "ZADD %s 1 %s", k->w, member);
    redisAppendCommand(c, "ZADD %s 9999999999999 %s", k->a, member);
    redisAppendCommand(c, "PEXPIRE %s 60000", k->h);
    redisAppendCommand(c, "PEXPIRE %s 60000", k->w);
    redisAppendCommand(c, "PEXPIRE %s 60000", k->a);
    for (int j = 0; j < 7 + k->grant; j++) {
        void *r;
        if (redisGetReply(c, &r) != REDIS_OK) return -1;
        freeReplyObject(r);
    }
    const char *argv[] = { "EVALSHA", k->sha, "4", k->h, k->w, k->a, k->p, "signal", "w10-signaller:1 1",
                           "3000", "", "0", "publish", "" };
    redisReply *x = redisCommandArgv(c, 14, argv, NULL);
    int bad = !x || x->type == REDIS_REPLY_ERROR;
    if (x && bad) fprintf(stderr, "bench W10: signal script: %s\n", x->str);
    if (x) freeReplyObject(x);
    return bad ? -1 : 0;
}

/* cond.lua's signal on one synthetic waiter (ticket 1, alive, and with
 * grant its mutex's terms, the mutex free); sub is subscribed to the
 * channel, so the PUBLISH reaches a subscriber and the grant is made (it
 * never reads: 25 short messages a chunk). */
static double script_signal_us(redisContext *c, redisContext *sub, const char *sha, int grant)
{
    struct cond_keys k;
    cond_keys_make(&k, sha, grant ? "w10:isosig-g" : "w10:isosig");
    k.grant = grant;
    redisReply *x = redisCommand(sub, "SUBSCRIBE %s", k.p);
    if (!x) return -1;
    freeReplyObject(x);
    double us = per_call_us(c, one_signal, &k);
    x = rcmd(c, "DEL %s %s %s %s", k.h, k.w, k.a, k.lock);
    if (x) freeReplyObject(x);
    return us;
}

static void isolated_signal(redisContext *c, const char *sha)
{
    struct sample us[2] = { { .n = 0 }, { .n = 0 } };
    int ok = 1;
    for (int rep = 0; ok && rep < opt.reps; rep++)
        for (int g = 0; ok && g < 2; g++) {
            redisContext *sub = server_connect(); /* (subscribed: one per measure) */
            double v = sub ? script_signal_us(c, sub, sha, g) : -1;
            if (sub) redisFree(sub);
            if ((ok = v > 0)) sample_add(&us[g], v);
        }
    if (!ok) fprintf(stderr, "bench W10: the isolated signal failed\n");
    struct row *r = report_row("W10", "signal script alone, its mutex granted in place (commandstats)", "µs",
                               ok ? &us[1] : NULL);
    row_limit_ref(r, &lim.eval_rtt_us, 1, "EVALSHA RTT");
    r = report_row("W10", "signal script alone, no mutex to grant", "µs", ok ? &us[0] : NULL);
    row_limit_ref(r, &lim.eval_rtt_us, 1, "EVALSHA RTT");
}

static void isolated(redisContext *c)
{
    static const int ns[] = { 1, 1000, 10000 };
    struct sample us[3] = { { .n = 0 }, { .n = 0 }, { .n = 0 } }, r1000 = { .n = 0 },
                  r10000 = { .n = 0 };
    char path[1024], sha[41] = "";
    snprintf(path, sizeof path, "%s/cond.lua", opt.lua_dir);
    FILE *fp = fopen(path, "rb");
    static char text[65536];
    size_t len = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
    if (fp) fclose(fp);
    redisReply *x = len ? redisCommand(c, "SCRIPT LOAD %b", text, len) : NULL;
    int ok = x && x->type == REDIS_REPLY_STRING;
    if (ok) snprintf(sha, sizeof sha, "%s", x->str);
    if (x) freeReplyObject(x);
    for (int rep = 0; ok && rep < opt.reps; rep++) {
        double v[3];
        for (int i = 0; ok && i < 3; i++) ok = (v[i] = script_broadcast_us(c, sha, ns[i])) > 0;
        if (!ok) break;
        for (int i = 0; i < 3; i++) sample_add(&us[i], v[i]);
        sample_add(&r1000, v[1] / v[0]);
        sample_add(&r10000, v[2] / v[0]);
    }
    if (!ok) fprintf(stderr, "bench W10: the isolated broadcast failed (%s)\n", path);
    report_row("W10", "broadcast script alone, 1 waiter (commandstats)", "µs", ok ? &us[0] : NULL);
    report_row("W10", "broadcast script alone, 1 000 waiters", "µs", ok ? &us[1] : NULL);
    report_row("W10", "broadcast script alone, 10 000 waiters", "µs", ok ? &us[2] : NULL);
    struct row *r = report_row("W10", "broadcast script alone, 1 000 ÷ 1 waiter", "ratio",
                               ok ? &r1000 : NULL);
    row_target(r, "≤ 2", ON_VALUE, J_LE, 2, 0);
    report_row("W10", "broadcast script alone, 10 000 ÷ 1 waiter", "ratio", ok ? &r10000 : NULL);
    if (ok) isolated_signal(c, sha);
}

void w10_run(void)
{
    redisContext *c = server_connect();
    if (!c || bench_configure("")) {
        fprintf(stderr, "bench W10: cannot connect\n");
        if (c) redisFree(c);
        return;
    }
    raw_delivery(c);
    latency(c, 0);
    latency(c, 1);
    isolated(c);
    broadcasts(c);
    redisFree(c);
}
