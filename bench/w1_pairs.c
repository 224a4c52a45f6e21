/* w1_pairs.c -- W1: one thread, lock+unlock pairs on one free lock.
 *
 * Measures pairs per second for a non-fair and a fair mutex, each
 * repetition a fixed time after a warm-up (connection, script load,
 * subscription), and holds it against half the EVALSHA-trivial rate of
 * this run: a pair is two script calls (acquire, release), so EVALSHA/2 is
 * the most one connection can do.  Also reports the calling thread's round
 * trips per pair from rmutex_stats (2 expected). */
#include "bench.h"
#include "clock.h"
#include "report.h"

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

static void one(int fair)
{
    const char *kind = fair ? "fair" : "non-fair";
    struct sample rate = { .n = 0 }, trips = { .n = 0 };
    double seconds = opt.quick ? 0.5 : 2;
    char name[128], fig[96];
    lock_name(name, sizeof name, fair ? "w1:fair" : "w1:nonfair");
    rmutexattr_t a;
    rmutex_t m;
    rmutexattr_init(&a);
    rmutexattr_setfair(&a, fair);
    int ok = !bench_configure("") && !rmutex_init(&m, name, &a);
    double warm;
    ok = ok && !pairs(&m, 0.2, &warm);
    for (int i = 0; ok && i < opt.reps; i++) {
        double v;
        rmutex_stats_t s0 = stats_now();
        if (pairs(&m, seconds, &v)) {
            ok = 0;
            break;
        }
        rmutex_stats_t s1 = stats_now();
        sample_add(&rate, v);
        double n = (double)(s1.acquisitions - s0.acquisitions);
        sample_add(&trips, n ? (double)(s1.round_trips - s0.round_trips) / n : 0);
        printf("  W1 %s: %.0f pairs/s\n", kind, v);
    }
    if (ok) rmutex_destroy(&m);
    snprintf(fig, sizeof fig, "%s lock+unlock pairs, 1 thread", kind);
    struct row *r = report_row("W1", fig, "pairs/s", &rate);
    row_limit_ref(r, &lim.eval_rate, 0.5, "EVALSHA/2");
    row_target(r, fair ? "ratio ≥ 0.85" : "ratio ≥ 0.90", ON_RATIO, J_GE, fair ? 0.85 : 0.90, 0);
    if (!ok) row_na(r, "error, see stderr");
    snprintf(fig, sizeof fig, "%s round trips per pair (calling thread)", kind);
    report_row("W1", fig, "RT", ok ? &trips : NULL);
}

void w1_run(void)
{
    one(0);
    one(1);
}
