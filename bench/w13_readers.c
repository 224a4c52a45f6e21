/* w13_readers.c -- W13's reader crowds: real read holds, many processes.
 *
 * A crowd is procs forked processes of threads threads each; every thread
 * takes a read of the name through the library (rrwlock_rdlock) and holds
 * it until the crowd is sent home.  So Redis holds what a real deployment
 * would: one reader entry per process (its member of the readers zset,
 * its anchor in the lock hash, its holds' hash of one field per thread).
 *
 * Nothing polls while the crowd holds: the reading threads sleep on a
 * condition variable of their process, and each process's main thread on
 * a process-shared one in the mapping the crowd shares with the parent,
 * where the parent posts what it wants (a stats mark, going home) and
 * counts the processes that did it.  With a fixed lease the crowd sends
 * nothing to Redis while it holds; with the watchdog, only its renewals
 * (and the registry's announcements). */
#include "w13.h"
#include "clock.h"

#include <errno.h>
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

enum { HOLD, MARK0, MARK1, HOME };

struct shared {
    pthread_mutex_t mu;          /* process-shared: what follows */
    pthread_cond_t cv;
    int step, seq;               /* what the parent asks, and its number */
    int done;                    /* processes that did request seq */
    _Atomic int holding, failed;
    _Atomic uint64_t renewal_calls, renewals, lost;
};

struct crowd {
    struct shared *sh;
    pid_t *pid;
    int procs, threads;
};

/* One process's state (a child has one crowd). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int home;
    rrwlock_t l;
    struct shared *sh;
} me = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };

static void *reader(void *arg)
{
    (void)arg;
    int r = rrwlock_rdlock(&me.l);
    if (r) {
        fprintf(stderr, "bench W13 crowd: rdlock: %s (%s)\n", strerror(r), rmutex_detail());
        atomic_store(&me.sh->failed, 1);
        return NULL;
    }
    atomic_fetch_add(&me.sh->holding, 1);
    pthread_mutex_lock(&me.mu);
    while (!me.home) pthread_cond_wait(&me.cv, &me.mu);
    pthread_mutex_unlock(&me.mu);
    if ((r = rrwlock_unlock(&me.l))) {
        fprintf(stderr, "bench W13 crowd: unlock: %s (%s)\n", strerror(r), rmutex_detail());
        atomic_store(&me.sh->failed, 1);
    }
    return NULL;
}

static void child(struct shared *sh, const char *name, int threads, unsigned long lease_ms)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    me.sh = sh;
    rrwlockattr_t a;
    rrwlockattr_init(&a);
    if (lease_ms) rrwlockattr_setlease(&a, lease_ms);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    int started = 0;
    if (!tid || rrwlock_init(&me.l, name, &a)) {
        fprintf(stderr, "bench W13 crowd: init: %s\n", rmutex_detail());
        atomic_store(&sh->failed, 1);
    } else {
        pthread_attr_t ta;
        pthread_attr_init(&ta);
        pthread_attr_setstacksize(&ta, 64 * 1024);
        for (; started < threads; started++)
            if (pthread_create(&tid[started], &ta, reader, NULL)) {
                fprintf(stderr, "bench W13 crowd: cannot start thread %d\n", started);
                atomic_store(&sh->failed, 1);
                break;
            }
    }
    rmutex_stats_t s0 = { 0 };
    int seen = 0;
    pthread_mutex_lock(&sh->mu);
    for (;;) {
        while (sh->seq == seen) pthread_cond_wait(&sh->cv, &sh->mu);
        seen = sh->seq;
        int step = sh->step;
        pthread_mutex_unlock(&sh->mu);
        if (step == HOME) break;
        rmutex_stats_t s;
        memset(&s, 0, sizeof s);
        rmutex_stats(&s, sizeof s);
        if (step == MARK0) {
            s0 = s;
        } else {
            atomic_fetch_add(&sh->renewal_calls, s.renewal_calls - s0.renewal_calls);
            atomic_fetch_add(&sh->renewals, s.renewals - s0.renewals);
            atomic_fetch_add(&sh->lost, s.locks_lost - s0.locks_lost);
        }
        pthread_mutex_lock(&sh->mu);
        sh->done++;
        pthread_cond_broadcast(&sh->cv);
    }
    pthread_mutex_lock(&me.mu);
    me.home = 1;
    pthread_cond_broadcast(&me.cv);
    pthread_mutex_unlock(&me.mu);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    if (started) rrwlock_destroy(&me.l);
    _exit(atomic_load(&sh->failed) ? 1 : 0);
}

/* Ask every process for step and wait (timeout_s at most) until each has
 * done it.  0 or -1. */
static int post(struct crowd *c, int step, double timeout_s)
{
    struct shared *sh = c->sh;
    pthread_mutex_lock(&sh->mu);
    sh->step = step;
    sh->seq++;
    sh->done = 0;
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
    if (step == HOME) return 0;
    for (int64_t until = now_ns() + (int64_t)(timeout_s * 1e9);;) {
        pthread_mutex_lock(&sh->mu);
        int done = sh->done;
        pthread_mutex_unlock(&sh->mu);
        if (done == c->procs) return 0;
        if (now_ns() > until) {
            fprintf(stderr, "bench W13 crowd: %d of %d processes answered\n", done, c->procs);
            return -1;
        }
        sleep_ns(200000);
    }
}

struct crowd *crowd_start(const char *name, int procs, int threads, unsigned long lease_ms)
{
    struct crowd *c = calloc(1, sizeof *c);
    pid_t *pid = calloc((size_t)procs, sizeof *pid);
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!c || !pid || sh == MAP_FAILED) {
        fprintf(stderr, "bench W13 crowd: out of memory\n");
        free(c);
        free(pid);
        if (sh != MAP_FAILED) munmap(sh, sizeof *sh);
        return NULL;
    }
    memset(sh, 0, sizeof *sh);
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&sh->mu, &ma);
    pthread_cond_init(&sh->cv, &ca);
    *c = (struct crowd){ sh, pid, 0, threads };
    fflush(NULL);
    for (; c->procs < procs; c->procs++) {
        pid_t p = fork();
        if (p == 0) child(sh, name, threads, lease_ms);
        if (p < 0) {
            perror("bench W13 crowd: fork");
            atomic_store(&sh->failed, 1);
            break;
        }
        pid[c->procs] = p;
    }
    int want = procs * threads;
    for (int64_t until = now_ns() + 120000000000LL;
         atomic_load(&sh->holding) < want && !atomic_load(&sh->failed);) {
        if (now_ns() > until) {
            fprintf(stderr, "bench W13 crowd: %d of %d readers got in\n", atomic_load(&sh->holding), want);
            atomic_store(&sh->failed, 1);
            break;
        }
        sleep_ns(5000000);
    }
    if (atomic_load(&sh->failed)) {
        crowd_stop(c);
        return NULL;
    }
    return c;
}

int crowd_mark(struct crowd *c, int mark)
{
    if (mark == 0) {
        atomic_store(&c->sh->renewal_calls, 0);
        atomic_store(&c->sh->renewals, 0);
        atomic_store(&c->sh->lost, 0);
    }
    return post(c, mark ? MARK1 : MARK0, 10);
}

struct crowd_totals crowd_totals(const struct crowd *c)
{
    return (struct crowd_totals){ atomic_load(&c->sh->renewal_calls), atomic_load(&c->sh->renewals),
                                  atomic_load(&c->sh->lost) };
}

int crowd_stop(struct crowd *c)
{
    post(c, HOME, 0);
    int ok = !atomic_load(&c->sh->failed);
    int64_t until = now_ns() + 60000000000LL;
    for (int p = 0; p < c->procs; p++) {
        int status, waited;
        while (!(waited = waitpid(c->pid[p], &status, WNOHANG) == c->pid[p]) && now_ns() < until)
            sleep_ns(5000000);
        if (!waited) {
            fprintf(stderr, "bench W13 crowd: a reader process did not exit; killed\n");
            kill(c->pid[p], SIGKILL);
            waitpid(c->pid[p], &status, 0);
            ok = 0;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
            ok = 0;
        }
    }
    munmap(c->sh, sizeof *c->sh);
    free(c->pid);
    free(c);
    return ok ? 0 : -1;
}
