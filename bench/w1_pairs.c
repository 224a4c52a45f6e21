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
 *     better than the run's single limit. */
#include "bench.h"
#include "clock.h"
#include "cmdstats.h"
#include "report.h"
#include "server.h"

#include <stdio.h>
#include <string.h>

static int pairs(rmutex_t *m, double seconds, double *rate)
{
    int64_t t0 = now_ns(), until = t0 + (int64_t)(seconds * 1e9), t;
    long n = 0;
    do {
        int r = rmutex_lock(m);
        if (r) {
            fprintf(stderr, "bench W1: lock: %s (%s)\n", strerror(r), rmutex_detail());
            return -1;
        }
        if ((r = rmutex_unlock(m))) {
            fprintf(stderr, "bench W1: unlock: %s (%s)\n", strerror(r), rmutex_detail());
            return -1;
        }
        n++;
    } while ((t = now_ns()) < until);
    *rate = n / ((double)(t - t0) / 1e9);
    return 0;
}

static double w1_trivial_us;

/* Redis-side µs of EVALSHA "return 1", by the same INFO commandstats. */
static double trivial_us(redisContext *c)
{
    double c0, u0, c1, u1;
    if (evalsha_totals(c, &c0, &u0)) return 0;
    limit_loop(c, 2000, 1, NULL);
    if (evalsha_totals(c, &c1, &u1) || c1 <= c0) return 0;
    return (u1 - u0) / (c1 - c0);
}

static void one(int fair)
{
    const char *kind = fair ? "fair" : "non-fair";
    struct sample rate = { .n = 0 }, trips = { .n = 0 }, pair_us = { .n = 0 }, redis_us = { .n = 0 },
                  near = { .n = 0 };
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
    ok = ok && !pairs(&m, 0.2, &warm);
    for (int i = 0; ok && i < opt.reps; i++) {
        double v, calls0, usec0, calls1, usec1;
        double ev = limit_loop(c, (int)(seconds * lim.eval_rate), 1, NULL);
        rmutex_stats_t s0 = stats_now();
        evalsha_totals(c, &calls0, &usec0);
        if (pairs(&m, seconds, &v)) {
            ok = 0;
            break;
        }
        rmutex_stats_t s1 = stats_now();
        evalsha_totals(c, &calls1, &usec1);
        sample_add(&rate, v);
        double n = (double)(s1.acquisitions - s0.acquisitions);
        sample_add(&trips, n ? (double)(s1.round_trips - s0.round_trips) / n : 0);
        sample_add(&pair_us, 1e6 / v);
        sample_add(&redis_us, n ? (usec1 - usec0) / n : 0);
        sample_add(&near, v / (ev / 2));
        printf("  W1 %s: %.0f pairs/s (%.1f us, of which %.1f us in Redis's scripts); EVALSHA loop "
               "just before: %.0f/s\n", kind, v, 1e6 / v, n ? (usec1 - usec0) / n : 0, ev);
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
    snprintf(fig, sizeof fig, "%s Redis-side script time per pair (2 calls)", kind);
    r = report_row("W1", fig, "µs", ok ? &redis_us : NULL);
    row_limit_ref(r, &w1_trivial_us, 2, "2×'return 1'");
}

void w1_run(void)
{
    redisContext *c = server_connect();
    if (c) {
        w1_trivial_us = trivial_us(c);
        redisFree(c);
    }
    one(0);
    one(1);
}
