/* w1_pairs.c -- W1: one thread, lock+unlock pairs on one free lock.
 *
 * Measures pairs per second for a non-fair and a fair mutex, each
 * repetition a fixed time after a warm-up (connection, script load,
 * subscription), and holds it against half the EVALSHA-trivial rate of
 * this run: a pair is two script calls (acquire, release), so EVALSHA/2 is
 * the most one connection can do.  Also reported, to see what limits it:
 *
 *   - the calling thread's round trips per pair (rmutex_stats; 2 expected);
 *   - the Redis-side time of the pair's two script calls (INFO
 *     commandstats, cmdstats.c) next to the pair's whole time;
 *   - the ratio against a raw hiredis EVALSHA loop run just before each
 *     repetition: on a busy machine that follows the drift of the machine
 *     better than the run's single limit;
 *   - the Redisson baseline, also just before each repetition: Redisson's
 *     own RLock scripts (tests/redisson_scripts.h, the ones the
 *     compatibility tests speak) driven from a raw hiredis client on the
 *     same server as Redisson drives them -- acquire; unlock with its
 *     request latch; DEL of the latch, sent with the next acquire -- so
 *     "rmutex ÷ Redisson" compares the protocols, not the clients' speed;
 *   - the Redis time per pair, rmutex's against Redisson's, and the fair
 *     lock's against the non-fair one's: the EVALSHA time per pair, plus
 *     for Redisson its client's DEL of the latch (one per pair, at the
 *     mean time of a DEL in that stretch: commandstats counts the DELs
 *     inside scripts under the same name). */
#include "bench.h"
#include "clock.h"
#include "cmdstats.h"
#include "report.h"
#include "server.h"
#include "redisson_scripts.h"

#include <stdio.h>
#include <string.h>

int lock_pairs(const char *id, rmutex_t *m, long n, double seconds, double *rate)
{
    int64_t t0 = now_ns(), until = t0 + (int64_t)(seconds * 1e9), t;
    long k = 0;
    do {
        int r = rmutex_lock(m);
        if (r) {
            fprintf(stderr, "bench %s: lock: %s (%s)\n", id, strerror(r), rmutex_detail());
            return -1;
        }
        if ((r = rmutex_unlock(m))) {
            fprintf(stderr, "bench %s: unlock: %s (%s)\n", id, strerror(r), rmutex_detail());
            return -1;
        }
        k++;
    } while ((t = now_ns()) < until || k < n);
    if (rate) *rate = k / ((double)(t - t0) / 1e9);
    return 0;
}

static double w1_redisson_us, w1_nonfair_us;

/* Redisson's protocol for seconds on c: *rate pairs/s, *us Redis time per
 * pair (every command).  0, or -1 on an unexpected reply. */
static int redisson_pairs(redisContext *c, const char *name, double seconds, double *rate, double *us)
{
    static char acq[41], unl[41];
    if (!acq[0]) {
        redisReply *a = redisCommand(c, "SCRIPT LOAD %s", REDISSON_ACQUIRE_LUA);
        redisReply *b = redisCommand(c, "SCRIPT LOAD %s", REDISSON_UNLOCK_LUA);
        if (a && a->type == REDIS_REPLY_STRING) snprintf(acq, sizeof acq, "%s", a->str);
        if (b && b->type == REDIS_REPLY_STRING) snprintf(unl, sizeof unl, "%s", b->str);
        if (a) freeReplyObject(a);
        if (b) freeReplyObject(b);
        if (!acq[0] || !unl[0]) return -1;
    }
    char channel[200], latch[240], prev[240] = "";
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    const char *owner = "6f1c1c52-4a56-4f51-9a57-6d1b3a2f0c11:1";
    double calls0, usec0, calls1, usec1, dcalls0, dusec0, dcalls1, dusec1;
    if (evalsha_totals(c, &calls0, &usec0) || command_totals(c, "del", &dcalls0, &dusec0)) return -1;
    int64_t t0 = now_ns(), until = t0 + (int64_t)(seconds * 1e9), t;
    long n = 0;
    int bad = 0;
    do {
        /* The acquire's answer is awaited before the unlock is sent, as
         * Redisson does (the critical section comes between them): two
         * round trips per pair, as rmutex's.  Sending both at once would
         * make one round trip of the pair. */
        if (prev[0]) redisAppendCommand(c, "DEL %s", prev);
        redisAppendCommand(c, "EVALSHA %s 1 %s 30000 %s", acq, name, owner);
        redisReply *r;
        for (int i = prev[0] ? 0 : 1; i < 2; i++) {
            if (redisGetReply(c, (void **)&r) != REDIS_OK) return -1;
            if (i == 1 && r->type != REDIS_REPLY_NIL) bad = 1;
            freeReplyObject(r);
        }
        snprintf(latch, sizeof latch, "redisson_unlock_latch:{%s}:%ld", name, n);
        r = redisCommand(c, "EVALSHA %s 3 %s %s %s 0 30000 %s publish 5000", unl, name, channel,
                         latch, owner);
        if (!r) return -1;
        if (!(r->type == REDIS_REPLY_INTEGER && r->integer == 1)) bad = 1;
        freeReplyObject(r);
        if (bad) {
            fprintf(stderr, "bench W1: the Redisson baseline got an unexpected reply\n");
            return -1;
        }
        memcpy(prev, latch, sizeof prev);
        n++;
    } while ((t = now_ns()) < until);
    redisReply *r = redisCommand(c, "DEL %s", prev);
    if (r) freeReplyObject(r);
    *rate = n / ((double)(t - t0) / 1e9);
    if (evalsha_totals(c, &calls1, &usec1) || command_totals(c, "del", &dcalls1, &dusec1)) return -1;
    double del_us = dcalls1 > dcalls0 ? (dusec1 - dusec0) / (dcalls1 - dcalls0) : 0;
    *us = (usec1 - usec0) / n + del_us;
    return 0;
}

static void one(int fair)
{
    const char *kind = fair ? "fair" : "non-fair";
    struct sample rate = { .n = 0 }, trips = { .n = 0 }, pair_us = { .n = 0 },
                  near = { .n = 0 }, all_us = { .n = 0 }, rs_rate = { .n = 0 }, rs_us = { .n = 0 },
                  vs_rs = { .n = 0 };
    double seconds = opt.quick ? 0.5 : 2;
    char name[128], fig[96];
    lock_name(name, sizeof name, fair ? "w1:fair" : "w1:nonfair");
    rmutexattr_t a;
    rmutex_t m;
    rmutexattr_init(&a);
    rmutexattr_setfair(&a, fair);
    redisContext *c = server_connect();
    int ok = c && !bench_configure("") && !rmutex_init(&m, name, &a);
    double warm;
    ok = ok && !lock_pairs("W1", &m, 0, 0.2, &warm);
    char rs_name[128];
    lock_name(rs_name, sizeof rs_name, "w1:redisson");
    for (int i = 0; ok && i < opt.reps; i++) {
        double v, calls0, usec0, calls1, usec1, rv, rus;
        double ev = limit_loop(c, (int)(seconds * lim.eval_rate), 1, NULL);
        if (redisson_pairs(c, rs_name, seconds, &rv, &rus)) {
            ok = 0;
            break;
        }
        rmutex_stats_t s0 = stats_now();
        evalsha_totals(c, &calls0, &usec0);
        if (lock_pairs("W1", &m, 0, seconds, &v)) {
            ok = 0;
            break;
        }
        rmutex_stats_t s1 = stats_now();
        evalsha_totals(c, &calls1, &usec1);
        sample_add(&rate, v);
        double n = (double)(s1.acquisitions - s0.acquisitions);
        sample_add(&trips, n ? (double)(s1.round_trips - s0.round_trips) / n : 0);
        sample_add(&pair_us, 1e6 / v);
        sample_add(&near, v / (ev / 2));
        double all = n ? (usec1 - usec0) / n : 0; /* rmutex sends only EVALSHA */
        sample_add(&all_us, all);
        sample_add(&rs_rate, rv);
        sample_add(&rs_us, rus);
        sample_add(&vs_rs, v / rv);
        printf("  W1 %s: %.0f pairs/s (%.1f us, of which %.1f us in Redis); EVALSHA loop just "
               "before: %.0f/s; Redisson's protocol just before: %.0f pairs/s, %.1f us in Redis\n",
               kind, v, 1e6 / v, all, ev, rv, rus);
    }
    if (!fair) {
        w1_redisson_us = sample_median(&rs_us);
        w1_nonfair_us = sample_median(&all_us);
    }
    if (ok) rmutex_destroy(&m);
    if (c) redisFree(c);
    snprintf(fig, sizeof fig, "%s lock+unlock pairs, 1 thread", kind);
    struct row *r = report_row("W1", fig, "pairs/s", &rate);
    row_limit_ref(r, &lim.eval_rate, 0.5, "EVALSHA/2");
    row_target(r, fair ? "ratio ≥ 0.85" : "ratio ≥ 0.90", ON_RATIO, J_GE, fair ? 0.85 : 0.90, 0);
    if (!ok) row_na(r, "error, see stderr");
    snprintf(fig, sizeof fig, "%s ratio to an EVALSHA/2 loop just before each rep", kind);
    report_row("W1", fig, "ratio", ok ? &near : NULL);
    snprintf(fig, sizeof fig, "%s round trips per pair (calling thread)", kind);
    report_row("W1", fig, "RT", ok ? &trips : NULL);
    snprintf(fig, sizeof fig, "%s time per pair", kind);
    r = report_row("W1", fig, "µs", ok ? &pair_us : NULL);
    row_limit_ref(r, &lim.eval_rtt_us, 2, "2×EVALSHA RTT");
    snprintf(fig, sizeof fig, "%s Redis time per pair (INFO commandstats)", kind);
    r = report_row("W1", fig, "µs", ok ? &all_us : NULL);
    if (fair) {
        row_limit_ref(r, &w1_nonfair_us, 1, "non-fair pair");
        row_target(r, "≤ 1.3 × non-fair", ON_RATIO, J_LE, 1.3, 0);
    } else {
        row_limit_ref(r, &w1_redisson_us, 1, "Redisson's pair");
        row_target(r, "≤ Redisson's", ON_RATIO, J_LE, 1.0, 0);
    }
    if (!fair) {
        r = report_row("W1", "Redisson's protocol: lock+unlock pairs, 1 thread (its scripts, C client)",
                       "pairs/s", ok ? &rs_rate : NULL);
        row_limit_ref(r, &lim.eval_rate, 0.5, "EVALSHA/2");
        report_row("W1", "Redisson's protocol: Redis time per pair (scripts + its DEL of the latch)", "µs",
                   ok ? &rs_us : NULL);
    }
    snprintf(fig, sizeof fig, "%s pairs/s ÷ Redisson's just before each rep", kind);
    r = report_row("W1", fig, "ratio", ok ? &vs_rs : NULL);
    row_target(r, "≥ 1", ON_VALUE, J_GE, 1.0, 0);
}

void w1_run(void)
{
    one(0);
    one(1);
}
