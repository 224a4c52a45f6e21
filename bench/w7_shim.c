/* w7_shim.c -- W7: what the LD_PRELOAD shim costs a mutex it does not
 * distribute.
 *
 * Runs rmutex-bench-shim (shimprog.c) alternately as it is and under
 * librmutex_preload.so with its bench_listed_lock listed in RMUTEX_PRELOAD
 * (so the program holds one listed, resolved mutex that went through
 * Redis), and compares the ns per lock+unlock pair of its unlisted mutex:
 * the ratio of each shimmed run to the plain run next to it, median over
 * the repetitions.  Limit: plain glibc in the same run.  That the listed
 * mutex really went through Redis is checked by its fencing counter (a key
 * that every new owner increments and that never expires).
 *
 * The program keeps one idle thread in both runs (see shimprog.c: glibc's
 * single-threaded mutex path has no atomics, and under the shim the
 * process always has librmutex's threads).  What a single-threaded program
 * loses that way is measured too, as information. */
#include "bench.h"
#include "proc.h"
#include "report.h"
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct run {
    double ns;
    int listed;
    char provider[512];
};

static int run(int shim, int single, const char *name, struct run *out)
{
    char pairs[32], url[2048], preload[1100], conf[256], buf[2048];
    snprintf(pairs, sizeof pairs, "%d", opt.quick ? 3000000 : 10000000);
    const char *argv[] = { opt.shim_prog, pairs, opt.quick ? "3" : "5", single ? "single" : NULL, NULL };
    server_url("", url, sizeof url);
    char env_url[2100];
    snprintf(env_url, sizeof env_url, "RMUTEX_URL=%s", url);
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", opt.preload);
    snprintf(conf, sizeof conf, "RMUTEX_PRELOAD=rmutex-bench-shim: bench_listed_lock=%s", name);
    const char *add[] = { preload, conf, env_url, NULL };
    const char *del[] = { "LD_PRELOAD", "RMUTEX_PRELOAD", NULL };
    int st = run_capture(argv, shim ? add : NULL, shim ? NULL : del, buf, sizeof buf);
    if (st != 0 || sscanf(buf, "ns_per_pair=%lf listed=%d provider=%511s", &out->ns, &out->listed,
                          out->provider) != 3) {
        fprintf(stderr, "bench W7: %s run failed (status %d): %s\n", shim ? "shim" : "plain", st, buf);
        return -1;
    }
    return 0;
}

static double plain_med;

void w7_run(void)
{
    struct sample plain = { .n = 0 }, shimmed = { .n = 0 }, ratio = { .n = 0 }, redis = { .n = 0 },
                  plain1 = { .n = 0 }, ratio1 = { .n = 0 };
    char name[128];
    lock_name(name, sizeof name, "w7");
    const char *why = NULL;
    if (!opt.shim_prog[0] || access(opt.shim_prog, X_OK)) why = "rmutex-bench-shim not built";
    else if (!opt.preload[0] || access(opt.preload, R_OK)) why = "librmutex_preload.so not available";
    redisContext *c = why ? NULL : server_connect();
    if (!why && !c) why = "no connection";
    for (int r = 0; !why && r < opt.reps; r++) {
        struct run p, s, p1, s1;
        if (run(0, 0, name, &p) || run(1, 0, name, &s) || run(0, 1, name, &p1) || run(1, 1, name, &s1)) {
            why = "error, see stderr";
            break;
        }
        long long before = rcmd_int(c, "EXISTS redisson_lock_token:{%s}", name);
        printf("  W7: plain %.2f ns/pair, shim %.2f ns/pair (x%.2f), pthread_mutex_lock from %s, "
               "listed mutex in Redis: %s\n",
               p.ns, s.ns, s.ns / p.ns, s.provider, before == 1 ? "yes" : "no");
        if (!strstr(s.provider, "rmutex_preload")) {
            fprintf(stderr, "bench W7: the shim did not interpose (pthread_mutex_lock from %s)\n", s.provider);
            why = "the shim did not interpose";
            break;
        }
        sample_add(&plain, p.ns);
        sample_add(&shimmed, s.ns);
        sample_add(&ratio, s.ns / p.ns);
        sample_add(&plain1, p1.ns);
        sample_add(&ratio1, s1.ns / p1.ns);
        sample_add(&redis, before == 1 && s.listed == 0);
        rcmd_int(c, "DEL redisson_lock_token:{%s}", name);
    }
    if (c) redisFree(c);
    plain_med = sample_median(&plain);
    struct row *r = report_row("W7", "plain glibc lock+unlock pair", "ns", why ? NULL : &plain);
    if (why) row_na(r, why);
    r = report_row("W7", "unlisted mutex pair under LD_PRELOAD shim", "ns", why ? NULL : &shimmed);
    row_limit_ref(r, &plain_med, 1, "glibc");
    row_target(r, "ratio ≤ 1.3", ON_RATIO, J_LE, 1.3, 0);
    if (why) row_na(r, why);
    report_row("W7", "shim ÷ plain, per adjacent pair of runs", "ratio", why ? NULL : &ratio);
    report_row("W7", "single-threaded program: plain glibc pair", "ns", why ? NULL : &plain1);
    r = report_row("W7", "single-threaded program: shim ÷ plain", "ratio", why ? NULL : &ratio1);
    snprintf(r->note, sizeof r->note, "glibc skips atomics while single-threaded; librmutex's threads end that");
    r = report_row("W7", "listed mutex went through Redis (1 = yes)", "", why ? NULL : &redis);
    row_target(r, "1", ON_VALUE, J_GE, 1, 1);
}
