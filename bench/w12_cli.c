/* w12_cli.c -- W12: the rmutex command.
 *
 *   - `rmutex run NAME -- true`, uncontended: wall time from spawning
 *     rmutex to its exit (median of 40 runs), and the commands Redis ran
 *     for one run (INFO commandstats: every command, all connections, so
 *     also the connection's setup);
 *   - hand-off between two runs: the first holds the lock for 200 ms, the
 *     second waits; from the first command's last moment (it prints
 *     CLOCK_MONOTONIC as it ends) to the second command's first (the
 *     same).  Both are shells: their own start costs are in the figure. */
#include "bench.h"
#include "clock.h"
#include "report.h"
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef BENCH_CLI
#define BENCH_CLI ""
#endif

static double total_calls(redisContext *c)
{
    redisReply *r = rcmd(c, "INFO commandstats");
    double sum = 0;
    for (const char *p = r ? r->str : NULL; p && (p = strstr(p, "calls=")); p += 6) sum += atof(p + 6);
    if (r) freeReplyObject(r);
    return sum;
}

/* Run rmutex with args (NULL-terminated); its exit status, or -1. */
static int run_cli(const char *url, char *const *args, int quiet)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("RMUTEX_URL", url, 1);
        if (quiet && !freopen("/dev/null", "w", stdout)) _exit(126);
        execv(BENCH_CLI, args);
        _exit(127);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void w12_run(void)
{
    if (!*BENCH_CLI || access(BENCH_CLI, X_OK)) {
        report_row("W12", "rmutex run -- true, uncontended", "ms", NULL);
        return;
    }
    char url[2048], name[128];
    server_url("", url, sizeof url);
    redisContext *c = server_connect();
    if (!c) return;
    struct sample wall = { .n = 0 }, cmds = { .n = 0 }, handoff = { .n = 0 };
    int runs = opt.quick ? 10 : 40;
    double *t = calloc((size_t)runs, sizeof *t);
    for (int rep = 0; t && rep < opt.reps; rep++) {
        lock_name(name, sizeof name, "w12");
        char *args[] = { (char *)"rmutex", (char *)"run", name, (char *)"--", (char *)"true", NULL };
        double c0 = total_calls(c);
        int ok = 1;
        for (int i = 0; ok && i < runs; i++) {
            int64_t t0 = now_ns();
            ok = run_cli(url, args, 0) == 0;
            t[i] = (double)(now_ns() - t0) / 1e6;
        }
        double c1 = total_calls(c);
        if (!ok) break;
        sort_doubles(t, (size_t)runs);
        sample_add(&wall, quantile_sorted(t, (size_t)runs, 0.5));
        sample_add(&cmds, (c1 - c0 - 1) / runs); /* (less the INFO itself) */

        /* Hand-off: A holds 200 ms, B waits; each command prints its
         * CLOCK_MONOTONIC stamp (this program, as "rmutex-bench --stamp"). */
        char a_out[256], b_out[256], cmd_a[600], cmd_b[600];
        snprintf(a_out, sizeof a_out, "/tmp/rmutex-w12-a.%d", (int)getpid());
        snprintf(b_out, sizeof b_out, "/tmp/rmutex-w12-b.%d", (int)getpid());
        snprintf(cmd_a, sizeof cmd_a, "sleep 0.2; %s --stamp > %s", opt.self, a_out);
        snprintf(cmd_b, sizeof cmd_b, "%s --stamp > %s", opt.self, b_out);
        char *argsa[] = { (char *)"rmutex", (char *)"run", name, (char *)"-c", cmd_a, NULL };
        char *argsb[] = { (char *)"rmutex", (char *)"run", name, (char *)"-c", cmd_b, NULL };
        pid_t pa = fork();
        if (pa == 0) _exit(run_cli(url, argsa, 0));
        sleep_ns(50000000);
        int rb = run_cli(url, argsb, 0);
        waitpid(pa, NULL, 0);
        long long sa = 0, sb = 0;
        FILE *fa = fopen(a_out, "r"), *fb = fopen(b_out, "r");
        if (fa && fscanf(fa, "%lld", &sa) != 1) sa = 0;
        if (fb && fscanf(fb, "%lld", &sb) != 1) sb = 0;
        if (fa) fclose(fa);
        if (fb) fclose(fb);
        unlink(a_out);
        unlink(b_out);
        if (rb == 0 && sa && sb > sa) sample_add(&handoff, (double)(sb - sa) / 1e6);
        printf("  W12 rmutex run -- true: p50 %.2f ms, %.1f Redis commands per run; hand-off "
               "%.2f ms\n", quantile_sorted(t, (size_t)runs, 0.5), (c1 - c0 - 1) / runs,
               sb > sa && sa ? (double)(sb - sa) / 1e6 : -1.0);
    }
    free(t);
    redisFree(c);
    report_row("W12", "rmutex run NAME -- true, uncontended: spawn to exit, p50", "ms", &wall);
    report_row("W12", "Redis commands per uncontended run (all connections)", "cmds", &cmds);
    report_row("W12", "hand-off between two runs: first command's end → second's start", "ms",
               &handoff);
}
