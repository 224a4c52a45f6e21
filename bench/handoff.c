/* handoff.c -- hand-off latency across processes (W13, W15).
 *
 * This process holds; one forked process waits, driven through a shared
 * mapping by run numbers: the holder takes, sets the run's kind and its
 * number (go); the waiter says it is calling (calling), calls take, stamps
 * the time it returned (in), lets go at once and says it is done (done).
 * The holder sees it waiting -- in Redis, for the kinds that keep a queue
 * -- gives it 10 ms more to be asleep, lets go and stamps that.  The time
 * in - out can be negative: the release's message can reach the waiter
 * before its reply reaches the holder. */
#include "handoff.h"
#include "bench.h"
#include "clock.h"
#include "report.h"
#include "server.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

struct shared {
    _Atomic int go, calling, done, failed; /* run numbers; go < 0: exit */
    _Atomic int kind;
    _Atomic int64_t in;                    /* the waiter's take returned */
};

/* One run's two times, ms: from let_go returning and from its call. */
struct lat {
    double ret, call;
};

static void waiter(struct shared *sh, const struct handoff_ops *ops, void *ctx)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    void *subj = ops->open(ctx);
    if (!subj) {
        atomic_store(&sh->failed, 1);
        _exit(1);
    }
    for (int seen = 0;;) {
        int go;
        while ((go = atomic_load(&sh->go)) == seen) sleep_ns(100000);
        if (go < 0) break;
        seen = go;
        int kind = atomic_load(&sh->kind);
        atomic_store(&sh->calling, go);
        int r = ops->take(subj, kind, 1);
        atomic_store(&sh->in, now_ns());
        if (!r) r = ops->let_go(subj, kind, 1);
        if (r) {
            fprintf(stderr, "bench hand-off: waiter: %s (%s)\n", strerror(r), rmutex_detail());
            atomic_store(&sh->failed, 1);
            _exit(1);
        }
        atomic_store(&sh->done, go);
    }
    ops->close(subj);
    _exit(0);
}

/* Wait (seconds at most) until *v == want, or the waiter failed.  0 or -1. */
static int await(_Atomic int *v, int want, const struct shared *sh, double seconds)
{
    for (int64_t until = now_ns() + (int64_t)(seconds * 1e9); atomic_load(v) != want;) {
        if (atomic_load(&sh->failed) || now_ns() > until) return -1;
        sleep_ns(50000);
    }
    return 0;
}

int handoff_queued(redisContext *c, const char *key)
{
    for (int64_t until = now_ns() + 2000000000LL; now_ns() < until; sleep_ns(200000))
        if (rcmd_int(c, "ZCARD %s", key) > 0) return 0;
    fprintf(stderr, "bench hand-off: the waiter did not queue (%s)\n", key);
    return -1;
}

/* One run, number run, of kind: the latencies in ms to *ms. */
static int one_run(struct shared *sh, redisContext *c, const struct handoff_ops *ops, void *ctx,
                   void *subj, int kind, int run, struct lat *ms)
{
    int r = ops->take(subj, kind, 0);
    if (r) {
        fprintf(stderr, "bench hand-off: hold: %s (%s)\n", strerror(r), rmutex_detail());
        return -1;
    }
    atomic_store(&sh->kind, kind);
    atomic_store(&sh->go, run);
    int ok = !await(&sh->calling, run, sh, 5) && (!ops->waiting || !ops->waiting(c, ctx, kind));
    sleep_ns(10000000);
    int64_t call = now_ns();
    r = ops->let_go(subj, kind, 0);
    int64_t out = now_ns();
    if (r) fprintf(stderr, "bench hand-off: let go: %s (%s)\n", strerror(r), rmutex_detail());
    if (r || await(&sh->done, run, sh, 10)) return -1;
    ms->ret = (double)(atomic_load(&sh->in) - out) / 1e6;
    ms->call = (double)(atomic_load(&sh->in) - call) / 1e6;
    return ok ? 0 : -1;
}

/* The waiter exits when told; SIGKILL after 10 s. */
static void reap(pid_t pid)
{
    int status;
    int64_t until = now_ns() + 10000000000LL;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (now_ns() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        sleep_ns(1000000);
    }
}

#define MAXKIND 8

static void measure(const char *id, const struct handoff_ops *ops, void *ctx, int nkind,
                    const char *const *label, const char *const *figure, const double *floor_us)
{
    int runs = opt.quick ? 20 : 60;
    struct sample p50[MAXKIND], p90[MAXKIND], p50c[MAXKIND];
    memset(p50, 0, sizeof p50);
    memset(p90, 0, sizeof p90);
    memset(p50c, 0, sizeof p50c);
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    struct lat *lat = malloc(sizeof *lat * (size_t)(nkind * runs));
    double *v = malloc(sizeof *v * (size_t)runs);
    redisContext *c = server_connect();
    void *subj = NULL;
    int ok = nkind <= MAXKIND && sh != MAP_FAILED && lat && v && c && (subj = ops->open(ctx));
    pid_t pid = -1;
    if (ok) {
        memset(sh, 0, sizeof *sh);
        fflush(NULL);
        if ((pid = fork()) == 0) waiter(sh, ops, ctx);
        ok = pid > 0;
    }
    for (int rep = 0, run = 0; ok && rep < opt.reps; rep++) {
        for (int i = 0; ok && i < runs; i++)
            for (int k = 0; ok && k < nkind; k++)
                ok = !one_run(sh, c, ops, ctx, subj, k, ++run, &lat[k * runs + i]);
        if (!ok) break;
        printf("  %s hand-off:", id);
        for (int k = 0; k < nkind; k++) {
            for (int i = 0; i < runs; i++) v[i] = lat[k * runs + i].ret;
            sort_doubles(v, (size_t)runs);
            sample_add(&p50[k], quantile_sorted(v, (size_t)runs, 0.5));
            sample_add(&p90[k], quantile_sorted(v, (size_t)runs, 0.9));
            for (int i = 0; i < runs; i++) v[i] = lat[k * runs + i].call * 1000;
            sort_doubles(v, (size_t)runs);
            sample_add(&p50c[k], quantile_sorted(v, (size_t)runs, 0.5));
            printf(" %s p50 %.3f p90 %.3f ms (from the call: p50 %.1f us);", label[k],
                   p50[k].v[p50[k].n - 1], p90[k].v[p90[k].n - 1], p50c[k].v[p50c[k].n - 1]);
        }
        printf("\n");
    }
    if (pid > 0) {
        atomic_store(&sh->go, -1);
        reap(pid);
    }
    if (subj) ops->close(subj);
    if (c) redisFree(c);
    free(lat);
    free(v);
    if (sh != MAP_FAILED) munmap(sh, sizeof *sh);
    char fig[96];
    for (int k = 0; k < nkind; k++)
        for (int q = 0; q < 2; q++) {
            snprintf(fig, sizeof fig, "hand-off %s, p%d", figure[k], q ? 90 : 50);
            struct row *r = report_row(id, fig, "ms", ok ? (q ? &p90[k] : &p50[k]) : NULL);
            row_limit_ref(r, &lim.ping_rtt_us, 0.001, "RTT");
            if (!ok) row_na(r, "error, see stderr");
        }
    for (int k = 0; floor_us && k < nkind; k++) {
        snprintf(fig, sizeof fig, "hand-off %s, p50 from the unlock call", figure[k]);
        struct row *r = report_row(id, fig, "µs", ok ? &p50c[k] : NULL);
        row_limit_ref(r, floor_us, 1, "pub/sub floor");
        if (!ok) row_na(r, "error, see stderr");
    }
}

void handoff_measure(const char *id, const struct handoff_ops *ops, void *ctx, int nkind,
                     const char *const *label, const char *const *figure)
{
    measure(id, ops, ctx, nkind, label, figure, NULL);
}

void handoff_measure_floor(const char *id, const struct handoff_ops *ops, void *ctx, int nkind,
                           const char *const *label, const char *const *figure,
                           const double *floor_us)
{
    measure(id, ops, ctx, nkind, label, figure, floor_us);
}
