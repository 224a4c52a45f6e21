/* rounds.c -- interleaved rounds of uncontended pairs (rounds.h).
 *
 * Redis time by commandstats is wall time inside Redis, and on a shared
 * 2-core machine a burst of other load inflates whatever stretch it falls
 * on: short stretches of every subject in turn, and the median of each
 * subject's, hold still where one long stretch each would not. */
#include "rounds.h"
#include "bench.h"
#include "cmdstats.h"
#include "report.h"

#include <stdio.h>
#include <string.h>

#define ROUNDS 5
#define MAXSUBJ 8

static int stretch(redisContext *c, const struct subject *s, double seconds, struct stretch *o)
{
    double calls0, usec0, calls1, usec1;
    rmutex_stats_t s0 = stats_now();
    if (evalsha_totals(c, &calls0, &usec0)) return -1;
    int r = s->pairs(s->arg, seconds, &o->rate);
    rmutex_stats_t s1 = stats_now();
    if (r || evalsha_totals(c, &calls1, &usec1)) return -1;
    double n = (double)(s1.acquisitions - s0.acquisitions);
    if (n <= 0) return -1;
    o->trips = (double)(s1.round_trips - s0.round_trips) / n;
    o->redis_us = (usec1 - usec0) / n;
    o->stray = calls1 - calls0 - 2 * n;
    return 0;
}

static double median_of(double *v, int n)
{
    sort_doubles(v, (size_t)n);
    return quantile_sorted(v, (size_t)n, 0.5);
}

int rounds_measure(redisContext *c, int n, const struct subject *s, double seconds, struct stretch *out)
{
    double v[4][MAXSUBJ][ROUNDS];
    if (n > MAXSUBJ) return -1;
    for (int r = 0; r < ROUNDS; r++)
        for (int j = 0; j < n; j++) {
            int i = (j + r) % n;
            struct stretch st;
            if (stretch(c, &s[i], seconds / ROUNDS, &st)) return -1;
            v[0][i][r] = st.rate, v[1][i][r] = st.trips, v[2][i][r] = st.redis_us, v[3][i][r] = st.stray;
        }
    for (int i = 0; i < n; i++)
        out[i] = (struct stretch){ median_of(v[0][i], ROUNDS), median_of(v[1][i], ROUNDS),
                                   median_of(v[2][i], ROUNDS), median_of(v[3][i], ROUNDS) };
    return 0;
}

int rounds_report(const char *id, int ok, redisContext *c, int n, const struct subject *s,
                  const char *const *name, const char *const *pair, double seconds, double *ref_us)
{
    struct sample rate[MAXSUBJ], us[MAXSUBJ], trips[MAXSUBJ], vs_raw[MAXSUBJ], vs_ref[MAXSUBJ],
                  us_vs_ref[MAXSUBJ];
    memset(rate, 0, sizeof rate);
    memset(us, 0, sizeof us);
    memset(trips, 0, sizeof trips);
    memset(vs_raw, 0, sizeof vs_raw);
    memset(vs_ref, 0, sizeof vs_ref);
    memset(us_vs_ref, 0, sizeof us_vs_ref);
    ok = ok && n <= MAXSUBJ;
    for (int i = 0; ok && i < opt.reps; i++) {
        double ev = limit_loop(c, (int)(seconds * lim.eval_rate), 1, NULL);
        struct stretch st[MAXSUBJ];
        if (!(ok = !rounds_measure(c, n, s, seconds, st))) break;
        printf("  %s pairs: EVALSHA loop %.0f/s;", id, ev);
        for (int k = 0; k < n; k++) {
            sample_add(&rate[k], st[k].rate);
            sample_add(&us[k], st[k].redis_us);
            sample_add(&trips[k], st[k].trips);
            sample_add(&vs_raw[k], st[k].rate / (ev / 2));
            sample_add(&vs_ref[k], st[k].rate / st[0].rate);
            sample_add(&us_vs_ref[k], st[k].redis_us / st[0].redis_us);
            printf(" %s %.0f pairs/s (%.2f RT, %.1f us in Redis%s)", name[k], st[k].rate, st[k].trips,
                   st[k].redis_us, st[k].stray ? ", stray calls" : "");
        }
        printf("\n");
    }
    if (ref_us) *ref_us = sample_median(&us[0]);
    char fig[96];
    for (int k = 0; k < n; k++) {
        snprintf(fig, sizeof fig, "%s %s pairs, 1 thread", name[k], pair[k]);
        struct row *r = report_row(id, fig, "pairs/s", ok ? &rate[k] : NULL);
        row_limit_ref(r, &lim.eval_rate, 0.5, "EVALSHA/2");
        if (!ok) row_na(r, "error, see stderr");
        snprintf(fig, sizeof fig, "%s pairs/s ÷ an EVALSHA/2 loop just before", name[k]);
        report_row(id, fig, "ratio", ok ? &vs_raw[k] : NULL);
        if (k) {
            snprintf(fig, sizeof fig, "%s pairs/s ÷ the mutex pair's, same rep", name[k]);
            report_row(id, fig, "ratio", ok ? &vs_ref[k] : NULL);
        }
        snprintf(fig, sizeof fig, "%s round trips per pair (calling thread)", name[k]);
        report_row(id, fig, "RT", ok ? &trips[k] : NULL);
        snprintf(fig, sizeof fig, "%s Redis time per pair (INFO commandstats)", name[k]);
        report_row(id, fig, "µs", ok ? &us[k] : NULL);
        if (k) {
            snprintf(fig, sizeof fig, "%s Redis time per pair ÷ the mutex pair's, same rep", name[k]);
            report_row(id, fig, "ratio", ok ? &us_vs_ref[k] : NULL);
        }
    }
    return ok ? 0 : -1;
}
