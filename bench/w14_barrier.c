/* w14_barrier.c -- W14's barrier part: how long one generation of an
 * rbarrier_t takes, for 2, 10 and 100 members across processes.
 *
 * Members are threads of forked processes (2 = 2 x 1, 10 = 5 x 2, 100 =
 * 10 x 10, processes x threads), every thread waiting on the same barrier
 * round after round with no work between.  The first thread of the first
 * process notes when each of its waits returns (CLOCK_MONOTONIC); a
 * round's time is the gap between two of them: the cycle of the whole
 * barrier, the last arrival's round trip and the broadcast that lets the
 * others go included.  Per repetition, 200 rounds (50 with --quick) after
 * 5 not counted: their median, in ms and in RTT of this run. */
#include "bench.h"
#include "clock.h"
#include "report.h"
#include "server.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define WARMUP 5
#define MAXROUNDS 200

static const struct {
    int procs, threads;
} shapes[] = { { 2, 1 }, { 5, 2 }, { 10, 10 } };
#define NSHAPES (int)(sizeof shapes / sizeof *shapes)

struct shared {
    _Atomic int failed;
    int64_t returned[WARMUP + MAXROUNDS]; /* the first member's waits */
};

struct member {
    rbarrier_t *b;
    struct shared *sh;
    int rounds, first;
};

static void *member_loop(void *arg)
{
    struct member *m = arg;
    for (int k = 0; k < WARMUP + m->rounds && !atomic_load(&m->sh->failed); k++) {
        int r = rbarrier_wait(m->b);
        if (r && r != RBARRIER_SERIAL_THREAD) {
            fprintf(stderr, "bench W14 barrier: wait: %s (%s)\n", strerror(r), rmutex_detail());
            atomic_store(&m->sh->failed, 1);
            break;
        }
        if (m->first) m->sh->returned[k] = now_ns();
    }
    return NULL;
}

static void process(struct shared *sh, const char *name, int count, int threads, int rounds,
                    int first)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rbarrier_t b;
    if (rbarrier_init(&b, name, (unsigned)count, NULL)) {
        fprintf(stderr, "bench W14 barrier: init: %s\n", rmutex_detail());
        atomic_store(&sh->failed, 1);
        _exit(1);
    }
    pthread_t t[16];
    struct member m[16];
    for (int i = 0; i < threads; i++) {
        m[i] = (struct member){ &b, sh, rounds, first && i == 0 };
        if (pthread_create(&t[i], NULL, member_loop, &m[i])) atomic_store(&sh->failed, 1);
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    rbarrier_destroy(&b);
    _exit(atomic_load(&sh->failed) ? 1 : 0);
}

/* One repetition of one shape: the median round in ms to *ms.  0 or -1. */
static int one_rep(const char *name, int shape, int rounds, double *ms)
{
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                             -1, 0);
    if (sh == MAP_FAILED) return -1;
    memset(sh, 0, sizeof *sh);
    int procs = shapes[shape].procs, threads = shapes[shape].threads;
    pid_t pid[16];
    int forked = 0;
    fflush(NULL);
    for (; forked < procs; forked++)
        if ((pid[forked] = fork()) == 0)
            process(sh, name, procs * threads, threads, rounds, forked == 0);
        else if (pid[forked] < 0)
            break;
    int ok = forked == procs;
    int64_t until = now_ns() + 120000000000LL;
    for (int i = 0; i < forked; i++) {
        int status = 0;
        while (waitpid(pid[i], &status, WNOHANG) != pid[i]) {
            if (!ok || atomic_load(&sh->failed) || now_ns() > until) kill(pid[i], SIGKILL);
            sleep_ns(1000000);
        }
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    if (ok) {
        double d[MAXROUNDS];
        for (int k = 0; k < rounds; k++)
            d[k] = (double)(sh->returned[WARMUP + k] - sh->returned[WARMUP + k - 1]) / 1e6;
        sort_doubles(d, (size_t)rounds);
        *ms = quantile_sorted(d, (size_t)rounds, 0.5);
    }
    munmap(sh, sizeof *sh);
    return ok ? 0 : -1;
}

void w14_barrier_run(void)
{
    int rounds = opt.quick ? 50 : MAXROUNDS;
    struct sample med[NSHAPES];
    memset(med, 0, sizeof med);
    int ok = !bench_configure("");
    for (int rep = 0; ok && rep < opt.reps; rep++) {
        printf("  W14 barrier:");
        for (int s = 0; ok && s < NSHAPES; s++) {
            char name[128], what[64];
            snprintf(what, sizeof what, "w14:barrier:%d:%d", s, rep);
            lock_name(name, sizeof name, what);
            double ms = 0;
            ok = !one_rep(name, s, rounds, &ms);
            if (ok) {
                sample_add(&med[s], ms);
                printf(" %d members %.3f ms (%.1f RTT);", shapes[s].procs * shapes[s].threads, ms,
                       ms * 1000 / lim.ping_rtt_us);
            }
        }
        printf("\n");
    }
    for (int s = 0; s < NSHAPES; s++) {
        char fig[96];
        snprintf(fig, sizeof fig, "barrier round, %d members (%d processes x %d threads), median",
                 shapes[s].procs * shapes[s].threads, shapes[s].procs, shapes[s].threads);
        struct row *r = report_row("W14", fig, "ms", ok ? &med[s] : NULL);
        row_limit_ref(r, &lim.ping_rtt_us, 0.001, "RTT");
        if (!ok) row_na(r, "error, see stderr");
    }
}
