/* limits.c -- the RTT limit every rate and latency is divided by.
 *
 * Sequential round trips on one connection, one request in flight: PING,
 * and EVALSHA of a script that returns 1 (the cheapest script call, so the
 * floor under any lock script).  Each is measured two ways -- by
 * redis-benchmark -c 1 -P 1 and by a raw hiredis loop like the library's
 * own -- and the limit is the faster of the two (by median over the
 * repetitions).  main() measures before and after the workloads, so the
 * min-max shows how much the machine drifted during the run.  Also here,
 * for the workloads that wait on pub/sub (W10, W11): one PUBLISH delivered
 * to a subscriber in another process. */
#include "bench.h"
#include "clock.h"
#include "proc.h"
#include "report.h"
#include "server.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct limits lim;

static double benchmark_rate(int n, int eval)
{
    const char *argv[32];
    char count[16];
    int k = 0;
    argv[k++] = "redis-benchmark";
    k += server_benchmark_args(argv + k, 20);
    snprintf(count, sizeof count, "%d", n);
    const char *tail[] = { "-c", "1", "-P", "1", "-n", count, "--csv" };
    for (size_t i = 0; i < sizeof tail / sizeof *tail; i++) argv[k++] = tail[i];
    if (eval) {
        argv[k++] = "EVALSHA";
        argv[k++] = lim.sha;
        argv[k++] = "0";
    } else {
        argv[k++] = "-t";
        argv[k++] = "ping_mbulk";
    }
    argv[k] = NULL;
    char out[4096];
    if (run_capture(argv, NULL, NULL, out, sizeof out) != 0) return NAN;
    /* "test","rps",...  then  "PING_MBULK","15948.96",... */
    char *line = strchr(out, '\n');
    if (!line) return NAN;
    char *q = strstr(line + 1, "\",\"");
    return q ? strtod(q + 3, NULL) : NAN;
}

double limit_loop(redisContext *c, int n, int eval, double *p50_us)
{
    const char *pa[] = { "PING" }, *ea[] = { "EVALSHA", lim.sha, "0" };
    size_t pl[] = { 4 }, el[] = { 7, 40, 1 };
    double *lat = p50_us ? malloc(sizeof *lat * (size_t)n) : NULL;
    int64_t t0 = now_ns(), prev = t0;
    for (int i = 0; i < n; i++) {
        redisReply *r = eval ? redisCommandArgv(c, 3, ea, el) : redisCommandArgv(c, 1, pa, pl);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            if (r) freeReplyObject(r);
            free(lat);
            return NAN;
        }
        freeReplyObject(r);
        if (lat) {
            int64_t t = now_ns();
            lat[i] = (double)(t - prev) / 1e3;
            prev = t;
        }
    }
    double rate = n / ((double)(now_ns() - t0) / 1e9);
    if (lat) {
        sort_doubles(lat, (size_t)n);
        *p50_us = quantile_sorted(lat, (size_t)n, 0.5);
        free(lat);
    }
    return rate;
}

static double delivery_p50(redisContext *c, const char *channel, int rounds, int gap_ms);

double pubsub_delivery_p50(redisContext *c, const char *channel, int rounds)
{
    return delivery_p50(c, channel, rounds, 0);
}

double pubsub_delivery_idle_p50(redisContext *c, const char *channel, int rounds, int gap_ms)
{
    return delivery_p50(c, channel, rounds, gap_ms);
}

static double delivery_p50(redisContext *c, const char *channel, int rounds, int gap_ms)
{
    int fds[2];
    double *lat = calloc((size_t)rounds, sizeof *lat);
    if (!lat || pipe(fds)) {
        free(lat);
        return NAN;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        redisContext *s = server_connect();
        redisReply *r = s ? rcmd(s, "SUBSCRIBE %s", channel) : NULL;
        if (!r) _exit(1);
        freeReplyObject(r);
        for (int i = 0; i < rounds; i++) {
            void *m;
            if (redisGetReply(s, &m) != REDIS_OK) _exit(2);
            int64_t t = now_ns();
            freeReplyObject(m);
            if (write(fds[1], &t, sizeof t) != (ssize_t)sizeof t) _exit(3);
        }
        _exit(0);
    }
    close(fds[1]); /* a subscriber that dies is an end of file */
    int ok = pid > 0;
    for (int64_t until = now_ns() + 5000000000LL; ok && now_ns() < until;) {
        redisReply *r = rcmd(c, "PUBSUB NUMSUB %s", channel);
        long long n = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? r->element[1]->integer : 0;
        if (r) freeReplyObject(r);
        if (n == 1) break;
        sleep_ns(1000000);
    }
    for (int i = 0; ok && i < rounds; i++) {
        if (gap_ms) sleep_ns((int64_t)gap_ms * 1000000);
        int64_t t0 = now_ns(), t1;
        redisReply *r = rcmd(c, "PUBLISH %s x", channel);
        if (r) freeReplyObject(r);
        ok = r && read(fds[0], &t1, sizeof t1) == (ssize_t)sizeof t1;
        if (ok) lat[i] = (double)(t1 - t0) / 1e3;
    }
    if (pid > 0) {
        if (!ok) kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    close(fds[0]);
    double p50 = NAN;
    if (ok) {
        sort_doubles(lat, (size_t)rounds);
        p50 = quantile_sorted(lat, (size_t)rounds, 0.5);
    }
    free(lat);
    return p50;
}

int limits_measure(int reps)
{
    redisContext *c = server_connect();
    if (!c) return -1;
    redisReply *r = rcmd(c, "SCRIPT LOAD %s", "return 1");
    if (!r) {
        redisFree(c);
        return -1;
    }
    snprintf(lim.sha, sizeof lim.sha, "%s", r->str);
    freeReplyObject(r);
    int n = opt.quick ? 10000 : 30000;
    /* Warm both paths up once. */
    limit_loop(c, 1000, 0, NULL);
    limit_loop(c, 1000, 1, NULL);
    for (int i = 0; i < reps; i++) {
        double p50;
        sample_add(&lim.ping_rb, benchmark_rate(n, 0));
        sample_add(&lim.ping_hr, limit_loop(c, n, 0, &p50));
        sample_add(&lim.ping_p50_us, p50);
        sample_add(&lim.eval_rb, benchmark_rate(n, 1));
        sample_add(&lim.eval_hr, limit_loop(c, n, 1, NULL));
    }
    redisFree(c);
    return 0;
}

static double pick(const struct sample *rb, const struct sample *hr, char *by, size_t n)
{
    double a = sample_median(rb), b = sample_median(hr);
    if (isnan(a) || b > a) {
        snprintf(by, n, "hiredis loop");
        return b;
    }
    snprintf(by, n, "redis-benchmark");
    return a;
}

void limits_compute(void)
{
    lim.ping_rate = pick(&lim.ping_rb, &lim.ping_hr, lim.ping_by, sizeof lim.ping_by);
    lim.eval_rate = pick(&lim.eval_rb, &lim.eval_hr, lim.eval_by, sizeof lim.eval_by);
    lim.ping_rtt_us = 1e6 / lim.ping_rate;
    lim.eval_rtt_us = 1e6 / lim.eval_rate;
}

void limits_finish(void)
{
    limits_compute();
    struct row *r;
    report_row("RTT", "PING, redis-benchmark -c 1 -P 1", "req/s", &lim.ping_rb);
    report_row("RTT", "PING, hiredis loop", "req/s", &lim.ping_hr);
    r = report_row("RTT", "PING round trip, hiredis loop median", "µs", &lim.ping_p50_us);
    snprintf(r->note, sizeof r->note, "per request; the limit below is 1/rate");
    report_row("RTT", "EVALSHA 'return 1', redis-benchmark", "req/s", &lim.eval_rb);
    report_row("RTT", "EVALSHA 'return 1', hiredis loop", "req/s", &lim.eval_hr);
    struct sample s = { { lim.ping_rtt_us }, 1 };
    r = report_row("RTT", "RTT limit = 1 / PING rate (faster method)", "µs", &s);
    snprintf(r->note, sizeof r->note, "%s", lim.ping_by);
    struct sample e = { { lim.eval_rate }, 1 };
    r = report_row("RTT", "EVALSHA-trivial rate limit (faster method)", "req/s", &e);
    snprintf(r->note, sizeof r->note, "%s; RTT %.1f µs", lim.eval_by, lim.eval_rtt_us);
}
