/* w2_recursive.c -- W2: a RECURSIVE mutex locked and unlocked again while
 * held.
 *
 * The outer lock is one acquisition in Redis; the inner pairs are counted
 * by the library alone.  The figure is the calling thread's round trips
 * (rmutex_stats round_trips, which leaves out the watchdog's renewals) per
 * inner pair: 0 is the target and the limit.  The time per inner pair is
 * reported beside it. */
#include "bench.h"
#include "clock.h"
#include "report.h"

#include <stdio.h>
#include <string.h>

static void one(int fair)
{
    const char *kind = fair ? "fair" : "non-fair";
    struct sample trips = { .n = 0 }, ns = { .n = 0 };
    long inner = opt.quick ? 100000 : 1000000;
    char name[128], fig[96];
    lock_name(name, sizeof name, fair ? "w2:fair" : "w2:nonfair");
    rmutexattr_t a;
    rmutex_t m;
    rmutexattr_init(&a);
    rmutexattr_settype(&a, RMUTEX_RECURSIVE);
    rmutexattr_setfair(&a, fair);
    int ok = !bench_configure("") && !rmutex_init(&m, name, &a);
    for (int i = 0; ok && i < opt.reps; i++) {
        int r = rmutex_lock(&m);
        if (r) {
            fprintf(stderr, "bench W2: lock: %s (%s)\n", strerror(r), rmutex_detail());
            ok = 0;
            break;
        }
        rmutex_stats_t s0 = stats_now();
        int64_t t0 = now_ns();
        for (long k = 0; k < inner && !r; k++) {
            r = rmutex_lock(&m);
            if (!r) r = rmutex_unlock(&m);
        }
        int64_t t1 = now_ns();
        rmutex_stats_t s1 = stats_now();
        if (r || rmutex_unlock(&m)) {
            fprintf(stderr, "bench W2: inner pair failed: %s (%s)\n", strerror(r), rmutex_detail());
            ok = 0;
            break;
        }
        sample_add(&trips, (double)(s1.round_trips - s0.round_trips) / (double)inner);
        sample_add(&ns, (double)(t1 - t0) / (double)inner);
    }
    if (ok) rmutex_destroy(&m);
    snprintf(fig, sizeof fig, "%s RECURSIVE inner pair: round trips", kind);
    struct row *r = report_row("W2", fig, "RT/pair", &trips);
    row_limit(r, 0, "zero");
    row_target(r, "0", ON_VALUE, J_LE, 0, 1);
    if (!ok) row_na(r, "error, see stderr");
    snprintf(fig, sizeof fig, "%s RECURSIVE inner pair: time", kind);
    report_row("W2", fig, "ns/pair", ok ? &ns : NULL);
}

void w2_run(void)
{
    one(0);
    one(1);
}
