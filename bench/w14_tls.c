/* w14_tls.c -- W14: W1 over TLS beside W1 over plain TCP, same server,
 * same run, and what a TLS connection costs to make.
 *
 * The benchmark's own redis-server listens on TLS too (server.c: a CA and
 * a certificate made for the run, no client certificate asked).  Each
 * repetition runs the non-fair lock+unlock pairs of W1 for the same time
 * over plain TCP and then over TLS (rediss://, the certificate checked),
 * so that the machine's drift hits both alike; the figure is TLS's pairs/s
 * divided by plain's (target >= 0.8).
 *
 * The cost of a connection: the first call after rmutex_configure dials
 * the pool's first connection (and, over TLS, does the handshake); the
 * scripts are already on the server.  Its time over TLS, over plain TCP,
 * and the difference -- the handshake -- are reported, each the median of
 * many fresh starts. */
#include "bench.h"
#include "clock.h"
#include "report.h"
#include "server.h"

#include <stdio.h>
#include <string.h>

/* The URL of our server's TLS port with opts. */
static void tls_url(const char *opts, char *out, size_t n)
{
    snprintf(out, n, "rediss://127.0.0.1:%d?cacert=%s%s%s", srv.tls_port, srv.ca, *opts ? "&" : "", opts);
}

static int configure_tls(int tls)
{
    if (!tls) return bench_configure("");
    char url[1024];
    tls_url("", url, sizeof url);
    int r = rmutex_shutdown();
    if (!r) r = rmutex_configure(url);
    if (r) fprintf(stderr, "bench W14: %s: %s (%s)\n", url, strerror(r), rmutex_detail());
    return r;
}

/* Pairs/s over tls or not for seconds, after a warm-up: 0 or -1. */
static int pairs(int tls, double seconds, double *rate)
{
    char name[128];
    lock_name(name, sizeof name, tls ? "w14:tls" : "w14:plain");
    rmutex_t m;
    if (configure_tls(tls) || rmutex_init(&m, name, NULL)) return -1;
    int r = lock_pairs("W14", &m, 200, 0.2, NULL);
    if (!r) r = lock_pairs("W14", &m, 1, seconds, rate);
    rmutex_destroy(&m);
    return r;
}

/* The first call after a fresh start, in µs, tls or not: 0 or -1. */
static int first_call(int tls, double *us)
{
    char name[128];
    lock_name(name, sizeof name, "w14:first");
    rmutex_t m;
    if (configure_tls(tls) || rmutex_init(&m, name, NULL)) return -1;
    int64_t t0 = now_ns();
    int r = rmutex_trylock(&m);
    int64_t t1 = now_ns();
    if (!r) r = rmutex_unlock(&m);
    rmutex_destroy(&m);
    if (r) fprintf(stderr, "bench W14: first call: %s (%s)\n", strerror(r), rmutex_detail());
    *us = (double)(t1 - t0) / 1e3;
    return r ? -1 : 0;
}

void w14_run(void)
{
    struct sample plain = { .n = 0 }, tls = { .n = 0 }, ratio = { .n = 0 };
    struct sample c_plain = { .n = 0 }, c_tls = { .n = 0 }, c_diff = { .n = 0 };
    double seconds = opt.quick ? 1 : 2;
    int ok = srv.tls_port > 0;
    if (!ok) fprintf(stderr, "bench W14: the server has no TLS port (--url, or no openssl)\n");
    for (int i = 0; ok && i < opt.reps; i++) {
        double p, t;
        if (pairs(0, seconds, &p) || pairs(1, seconds, &t)) {
            ok = 0;
            break;
        }
        sample_add(&plain, p);
        sample_add(&tls, t);
        sample_add(&ratio, t / p);
        printf("W14 rep %d: plain %.0f, TLS %.0f pairs/s (%.3f)\n", i + 1, p, t, t / p);
    }
    for (int i = 0; ok && i < (opt.quick ? 10 : 30); i++) {
        double a, b;
        if (first_call(0, &a) || first_call(1, &b)) {
            ok = 0;
            break;
        }
        sample_add(&c_plain, a);
        sample_add(&c_tls, b);
        sample_add(&c_diff, b - a);
    }
    bench_configure("");
    struct row *r = report_row("W14", "non-fair pairs over TLS ÷ over plain TCP (W1)", "ratio", ok ? &ratio : NULL);
    row_target(r, "≥ 0.80", ON_VALUE, J_GE, 0.8, 0);
    if (!ok) row_na(r, "no TLS, or an error: see stderr");
    report_row("W14", "non-fair pairs, plain TCP", "pairs/s", ok ? &plain : NULL);
    report_row("W14", "non-fair pairs, TLS", "pairs/s", ok ? &tls : NULL);
    report_row("W14", "first call after a start, plain TCP (connect + login)", "µs", ok ? &c_plain : NULL);
    report_row("W14", "first call after a start, TLS (connect + handshake + login)", "µs", ok ? &c_tls : NULL);
    report_row("W14", "the TLS handshake (the difference)", "µs", ok ? &c_diff : NULL);
}
