/* w13_handoff.c -- W13's hand-off latency: a waiter in another process
 * gets in after the holder lets go.
 *
 * Three directions, taking turns run by run: a writer waiting behind a read
 * hold (read unlock -> the writer's wrlock returns), a reader waiting behind
 * a write hold (write unlock -> the reader's rdlock returns), and for
 * comparison a non-fair mutex's waiter behind its holder (unlock -> its
 * lock returns).  This process holds; a forked process waits.  Each run:
 * take the hold, let the waiter call, see it queued in Redis (the rwlock's
 * queue zset; the mutex keeps no queue), give it 10 ms more to be asleep,
 * unlock; the time is from this unlock returning to the waiter's lock
 * returning, CLOCK_MONOTONIC in both processes (it can be negative: the
 * release's message can reach the waiter before its reply reaches the
 * holder).  Per repetition, 60 runs of each direction (20 with --quick):
 * their p50 and p90, in ms and in RTT of this run. */
#include "bench.h"
#include "clock.h"
#include "report.h"
#include "server.h"
#include "w13.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

enum { RD_TO_WR, WR_TO_RD, MUTEX_TO_MUTEX, NDIR };
static const char *const dir_name[NDIR] = {
    "read unlock → waiting writer in", "write unlock → waiting reader in",
    "mutex unlock → waiting locker in (non-fair, for comparison)",
};

struct shared {
    _Atomic int go, calling, done, failed; /* run numbers; go < 0: exit */
    _Atomic int dir;
    _Atomic int64_t in;                    /* the waiter's lock returned */
};

static void waiter(struct shared *sh, const char *rwname, const char *mname)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rrwlock_t l;
    rmutex_t m;
    if (rrwlock_init(&l, rwname, NULL) || rmutex_init(&m, mname, NULL)) {
        fprintf(stderr, "bench W13 hand-off: init: %s\n", rmutex_detail());
        atomic_store(&sh->failed, 1);
        _exit(1);
    }
    for (int seen = 0;;) {
        int go;
        while ((go = atomic_load(&sh->go)) == seen) sleep_ns(100000);
        if (go < 0) break;
        seen = go;
        int dir = atomic_load(&sh->dir);
        atomic_store(&sh->calling, go);
        int r = dir == RD_TO_WR ? rrwlock_wrlock(&l) : dir == WR_TO_RD ? rrwlock_rdlock(&l)
                                                                       : rmutex_lock(&m);
        atomic_store(&sh->in, now_ns());
        if (!r) r = dir == MUTEX_TO_MUTEX ? rmutex_unlock(&m) : rrwlock_unlock(&l);
        if (r) {
            fprintf(stderr, "bench W13 hand-off: waiter: %s (%s)\n", strerror(r), rmutex_detail());
            atomic_store(&sh->failed, 1);
            _exit(1);
        }
        atomic_store(&sh->done, go);
    }
    rrwlock_destroy(&l);
    rmutex_destroy(&m);
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

/* Until the rwlock's queue has someone (two seconds at most).  0 or -1. */
static int queued(redisContext *c, const char *name)
{
    for (int64_t until = now_ns() + 2000000000LL; now_ns() < until; sleep_ns(200000))
        if (rcmd_int(c, "ZCARD rmutex_rw_queue:{%s}", name) > 0) return 0;
    fprintf(stderr, "bench W13 hand-off: the waiter did not queue\n");
    return -1;
}

/* One run, number run, in direction dir: the latency in ms to *ms. */
static int one_run(struct shared *sh, redisContext *c, int dir, int run, rrwlock_t *l, rmutex_t *m,
                   const char *rwname, double *ms)
{
    int r = dir == RD_TO_WR ? rrwlock_rdlock(l) : dir == WR_TO_RD ? rrwlock_wrlock(l) : rmutex_lock(m);
    if (r) {
        fprintf(stderr, "bench W13 hand-off: hold: %s (%s)\n", strerror(r), rmutex_detail());
        return -1;
    }
    atomic_store(&sh->dir, dir);
    atomic_store(&sh->go, run);
    int ok = !await(&sh->calling, run, sh, 5) && (dir == MUTEX_TO_MUTEX || !queued(c, rwname));
    sleep_ns(10000000);
    r = dir == MUTEX_TO_MUTEX ? rmutex_unlock(m) : rrwlock_unlock(l);
    int64_t out = now_ns();
    if (r) fprintf(stderr, "bench W13 hand-off: unlock: %s (%s)\n", strerror(r), rmutex_detail());
    if (r || await(&sh->done, run, sh, 10)) return -1;
    *ms = (double)(atomic_load(&sh->in) - out) / 1e6;
    return ok ? 0 : -1;
}

void w13_handoff_run(void)
{
    int runs = opt.quick ? 20 : 60;
    struct sample p50[NDIR], p90[NDIR];
    memset(p50, 0, sizeof p50);
    memset(p90, 0, sizeof p90);
    char rwname[128], mname[128];
    lock_name(rwname, sizeof rwname, "w13:handoff:rw");
    lock_name(mname, sizeof mname, "w13:handoff:mutex");
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double *lat = malloc(sizeof *lat * (size_t)(NDIR * runs));
    redisContext *c = server_connect();
    rrwlock_t l;
    rmutex_t m;
    int ok = sh != MAP_FAILED && lat && c && !bench_configure("");
    int made = ok && !rrwlock_init(&l, rwname, NULL) && !rmutex_init(&m, mname, NULL);
    ok = ok && made;
    pid_t pid = -1;
    if (ok) {
        memset(sh, 0, sizeof *sh);
        fflush(NULL);
        if ((pid = fork()) == 0) waiter(sh, rwname, mname);
        ok = pid > 0;
    }
    for (int rep = 0, run = 0; ok && rep < opt.reps; rep++) {
        for (int i = 0; ok && i < runs; i++)
            for (int d = 0; ok && d < NDIR; d++) ok = !one_run(sh, c, d, ++run, &l, &m, rwname, &lat[d * runs + i]);
        if (!ok) break;
        printf("  W13 hand-off:");
        for (int d = 0; d < NDIR; d++) {
            double *v = &lat[d * runs];
            sort_doubles(v, (size_t)runs);
            sample_add(&p50[d], quantile_sorted(v, (size_t)runs, 0.5));
            sample_add(&p90[d], quantile_sorted(v, (size_t)runs, 0.9));
            printf(" %s p50 %.3f p90 %.3f ms;", dir_name[d], p50[d].v[p50[d].n - 1], p90[d].v[p90[d].n - 1]);
        }
        printf("\n");
    }
    if (pid > 0) {
        atomic_store(&sh->go, -1);
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
    if (made) {
        rrwlock_destroy(&l);
        rmutex_destroy(&m);
    }
    if (c) redisFree(c);
    free(lat);
    if (sh != MAP_FAILED) munmap(sh, sizeof *sh);
    char fig[96];
    for (int d = 0; d < NDIR; d++) {
        for (int q = 0; q < 2; q++) {
            snprintf(fig, sizeof fig, "hand-off %s, p%d", dir_name[d], q ? 90 : 50);
            struct row *r = report_row("W13", fig, "ms", ok ? (q ? &p90[d] : &p50[d]) : NULL);
            row_limit_ref(r, &lim.ping_rtt_us, 0.001, "RTT");
            if (!ok) row_na(r, "error, see stderr");
        }
    }
}
