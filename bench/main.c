/* main.c -- rmutex-bench: holds rmutex against the raw Redis round trip,
 * measured in the same run.
 *
 *   rmutex-bench [--quick] [--long] [--reps N] [--url URL] [--csv FILE]
 *                [--md FILE] [--data DIR] [--only W1,W3,...]
 *
 * Starts its own redis-server on a free loopback port (unless --url),
 * measures the RTT limit (limits.c), runs the workloads W1..W15 (one file
 * each), measures the limit again, and prints one table: every figure as a
 * median with min-max over the repetitions, next to the limit of this run
 * and its ratio to it, and the target.  --data writes the distributions the
 * charts are drawn from (W3 hand-off latency, W4 cost against queue depth).
 * The exit status is 0 when everything ran, whether or not targets were
 * met. */
#include "bench.h"
#include "clock.h"
#include "machine.h"
#include "report.h"
#include "server.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef BENCH_SHIM_PROG
#define BENCH_SHIM_PROG ""
#endif
#ifndef BENCH_PRELOAD
#define BENCH_PRELOAD ""
#endif
#ifndef BENCH_LUA_DIR
#define BENCH_LUA_DIR ""
#endif

struct opts opt = { .reps = 3, .redis_server = "redis-server", .shim_prog = BENCH_SHIM_PROG,
                    .preload = BENCH_PRELOAD, .lua_dir = BENCH_LUA_DIR, .fifo_slack_ms = 10 };

int selected(const char *id)
{
    if (!opt.only) return 1;
    size_t n = strlen(id);
    for (const char *p = opt.only; (p = strcasestr(p, id)); p += n)
        if ((p == opt.only || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

void lock_name(char *buf, size_t n, const char *what)
{
    snprintf(buf, n, "bench:%d:%s", (int)getpid(), what);
}

int bench_configure(const char *o)
{
    char url[2048];
    int r = rmutex_shutdown();
    if (r) {
        fprintf(stderr, "bench: rmutex_shutdown: %s (%s)\n", strerror(r), rmutex_detail());
        return r;
    }
    server_url(o, url, sizeof url);
    r = rmutex_configure(url);
    if (r) fprintf(stderr, "bench: rmutex_configure(%s): %s (%s)\n", url, strerror(r), rmutex_detail());
    return r;
}

rmutex_stats_t stats_now(void)
{
    rmutex_stats_t s;
    memset(&s, 0, sizeof s);
    rmutex_stats(&s, sizeof s);
    return s;
}

/* Every key this run made has "bench:<pid>:" in its name (the fencing
 * counters never expire): remove them, for servers given by --url. */
static void cleanup_keys(void)
{
    redisContext *c = server_connect();
    if (!c) return;
    char pattern[64], cursor[32] = "0";
    snprintf(pattern, sizeof pattern, "*bench:%d:*", (int)getpid());
    long removed = 0;
    do {
        redisReply *r = rcmd(c, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            if (r) freeReplyObject(r);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        redisReply *keys = r->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            redisReply *d = rcmd(c, "UNLINK %b", keys->element[i]->str, keys->element[i]->len);
            if (d) freeReplyObject(d);
            removed++;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0"));
    redisFree(c);
    if (removed) printf("removed %ld keys of this run\n", removed);
}

static char log_path[320], rdb_path[320];

static void on_signal(int sig)
{
    if (srv.pid && srv.owner == getpid()) {
        kill(srv.pid, SIGKILL);
        unlink(log_path);
        unlink(rdb_path);
        rmdir(srv.dir);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: rmutex-bench [--quick] [--long] [--reps N] [--url URL] [--csv FILE] [--md FILE]\n"
            "                    [--data DIR] [--only W1,W2,...] [--w3-seconds S] [--fifo-slack-ms MS]\n"
            "                    [--redis-server PATH] [--shim-prog PATH] [--preload PATH] [--lua-dir DIR]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    /* W12's commands: print CLOCK_MONOTONIC in ns and nothing else. */
    if (argc == 2 && !strcmp(argv[1], "--stamp")) {
        printf("%lld\n", (long long)now_ns());
        return 0;
    }
    static char self[4096];
    ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sn > 0) self[sn] = 0;
    opt.self = sn > 0 ? self : argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define VAL (v ? (i++, v) : (usage(), ""))
        if (!strcmp(a, "--quick")) opt.quick = 1;
        else if (!strcmp(a, "--long")) opt.long_run = 1;
        else if (!strcmp(a, "--reps")) opt.reps = atoi(VAL);
        else if (!strcmp(a, "--url")) opt.url = VAL;
        else if (!strcmp(a, "--csv")) opt.csv = VAL;
        else if (!strcmp(a, "--md")) opt.md = VAL;
        else if (!strcmp(a, "--data")) opt.data_dir = VAL;
        else if (!strcmp(a, "--only")) opt.only = VAL;
        else if (!strcmp(a, "--w3-seconds")) opt.w3_seconds = atof(VAL);
        else if (!strcmp(a, "--fifo-slack-ms")) opt.fifo_slack_ms = atof(VAL);
        else if (!strcmp(a, "--redis-server")) opt.redis_server = VAL;
        else if (!strcmp(a, "--shim-prog")) opt.shim_prog = VAL;
        else if (!strcmp(a, "--preload")) opt.preload = VAL;
        else if (!strcmp(a, "--lua-dir")) opt.lua_dir = VAL;
        else usage();
#undef VAL
    }
    if (opt.reps < 3) opt.reps = 3;
    if (opt.reps > MAXREP / 2) opt.reps = MAXREP / 2;
    if (opt.w3_seconds <= 0) opt.w3_seconds = opt.quick ? 3 : 10;
    if (opt.data_dir && mkdir(opt.data_dir, 0755) && errno != EEXIST) {
        perror(opt.data_dir);
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if (opt.url ? server_use_url(opt.url) : server_start(opt.redis_server)) return 1;
    atexit(server_stop);
    atexit(bench_cluster_stop);
    snprintf(log_path, sizeof log_path, "%s/redis.log", srv.dir);
    snprintf(rdb_path, sizeof rdb_path, "%s/dump.rdb", srv.dir);
    int64_t t0 = now_ns();
    machine_facts(argc, argv);
    printf("rmutex-bench: server %s, %d repetitions%s\n", srv.base, opt.reps,
           opt.quick ? ", quick" : opt.long_run ? ", long" : "");

    printf("RTT limit ...\n");
    if (limits_measure(opt.reps)) return 1;
    limits_compute();
    struct {
        const char *id;
        void (*run)(void);
    } work[] = { { "W1", w1_run }, { "W2", w2_run }, { "W3", w3_run }, { "W4", w4_run },
                 { "W5", w5_run }, { "W6", w6_run }, { "W7", w7_run }, { "W8", w8_run },
                 { "W9", w9_run }, { "W10", w10_run }, { "W11", w11_run },
                 { "W12", w12_run }, { "W13", w13_run }, { "W14", w14_run },
                 { "W14b", w14_barrier_run }, { "W15", w15_run } };
    for (size_t i = 0; i < sizeof work / sizeof *work; i++) {
        if (!selected(work[i].id)) continue;
        printf("%s ...\n", work[i].id);
        work[i].run();
    }
    printf("RTT limit again ...\n");
    limits_measure(opt.reps);
    limits_finish();
    rmutex_shutdown();
    if (!srv.pid) cleanup_keys();
    machine_end((double)(now_ns() - t0) / 1e9);

    report_judge();
    printf("\n");
    report_print(stdout);
    if (opt.csv && report_csv(opt.csv)) perror(opt.csv);
    if (opt.md && report_markdown(opt.md)) perror(opt.md);
    return 0;
}
