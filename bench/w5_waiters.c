/* w5_waiters.c -- W5: 1 000 threads of one process waiting on 100 locks.
 *
 * A forked holder process takes the 100 locks.  Here 1 000 threads (10 per
 * lock) are started and parked; the heap in use (mallinfo2: every arena,
 * plus mmap'ed chunks) is read; they are let go into rmutex_lock and we
 * wait until rmutex_stats says they wait (and, for the fair lock, the
 * queues in Redis hold them), 500 first, then all 1 000.  Then:
 *
 *   - connections: this process's entries in CLIENT LIST by name
 *     (rmutex:sub:<pid>, rmutex:cmd:<pid>, rmutex:wd:<pid>);
 *   - memory per waiting thread, excluding its stack: the net heap
 *     allocated (heapcount.c) while the second 500 threads went from parked
 *     to waiting, over 500 -- the first 500 pay the process's fixed costs
 *     (pool connections, channels, per-lock state), and that average is
 *     reported too.  The library's per-thread state is thread-local, i.e.
 *     in the stack mapping, so it is left out with the stack.  Beside it:
 *     the heap in use by mallinfo2(), which also counts the freed blocks
 *     glibc keeps in each thread's cache (each parked thread has malloc'ed
 *     once, so the cache itself is in the baseline), and Redis's
 *     used_memory grown per waiter;
 *   - wake-up latency: the holder releases the locks one by one, 5 ms
 *     apart, taking the time when each rmutex_unlock returns; the first
 *     waiter of that lock to return from rmutex_lock takes its time (each
 *     waiter unlocks at once, so all 1 000 get through).
 *
 * Limits: one pub/sub connection per process, and the RTT limit for the
 * wake-up. */
#include "bench.h"
#include "clock.h"
#include "heapcount.h"
#include "report.h"
#include "server.h"

#include <malloc.h>
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

#define NLOCKS 100
#define NTHREADS 1000

enum { H_START, H_HELD, H_RELEASE, H_DONE, H_FAILED };

struct holder_shm {
    _Atomic int phase;
    int64_t released[NLOCKS];
};

static void lock_names(char names[NLOCKS][96], int fair, int rep)
{
    char what[64];
    for (int j = 0; j < NLOCKS; j++) {
        snprintf(what, sizeof what, "w5:%s:%d:%d", fair ? "fair" : "nonfair", rep, j);
        lock_name(names[j], sizeof names[j], what);
    }
}

static void holder(struct holder_shm *sh, char names[NLOCKS][96], int fair)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    static rmutex_t m[NLOCKS];
    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_setfair(&a, fair);
    for (int j = 0; j < NLOCKS; j++) {
        if (rmutex_init(&m[j], names[j], &a) || rmutex_lock(&m[j])) {
            fprintf(stderr, "bench W5 holder: %s\n", rmutex_detail());
            atomic_store(&sh->phase, H_FAILED);
            exit(1);
        }
    }
    atomic_store(&sh->phase, H_HELD);
    while (atomic_load(&sh->phase) == H_HELD) sleep_ns(1000000);
    for (int j = 0; j < NLOCKS; j++) {
        rmutex_unlock(&m[j]);
        sh->released[j] = now_ns();
        sleep_ns(5000000);
    }
    atomic_store(&sh->phase, H_DONE);
    exit(0);
}

struct park {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int parked, go; /* threads with index < go may lock */
};

struct waiter {
    struct park *pk;
    rmutex_t *m;
    int index;
    int64_t ret;
    int err;
};

static void *waiter(void *arg)
{
    struct waiter *w = arg;
    /* glibc gives a thread its malloc cache (tcache, ~0.6 KiB) at its first
     * malloc; any thread of a real program has one already, so it belongs
     * to the baseline, not to the waiter. */
    free(malloc(1));
    pthread_mutex_lock(&w->pk->mu);
    w->pk->parked++;
    pthread_cond_broadcast(&w->pk->cv);
    while (w->index >= w->pk->go) pthread_cond_wait(&w->pk->cv, &w->pk->mu);
    pthread_mutex_unlock(&w->pk->mu);
    w->err = rmutex_lock(w->m);
    w->ret = now_ns();
    if (!w->err) w->err = rmutex_unlock(w->m);
    return NULL;
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static int count_clients(redisContext *c, const char *role)
{
    char want[64];
    snprintf(want, sizeof want, "name=rmutex:%s:%d ", role, (int)getpid());
    redisReply *r = rcmd(c, "CLIENT LIST");
    int n = 0;
    for (const char *p = r ? r->str : NULL; p && (p = strstr(p, want)); p++) n++;
    if (r) freeReplyObject(r);
    return n;
}

static long queued(redisContext *c, char names[NLOCKS][96])
{
    long n = 0;
    for (int j = 0; j < NLOCKS; j++) {
        long long z = rcmd_int(c, "ZCARD rmutex_fair_queue:{%s}", names[j]);
        n += z > 0 ? z : 0;
    }
    return n;
}

struct w5_out {
    double sub, cmd, wd, heap, heap_all, inuse, redis, wake_p50, wake_max;
};

static int rep(int fair, int r, struct w5_out *o)
{
    static char names[NLOCKS][96];
    static rmutex_t m[NLOCKS];
    static struct waiter w[NTHREADS];
    static pthread_t tid[NTHREADS];
    lock_names(names, fair, r);
    struct holder_shm *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return -1;
    redisContext *c = server_connect();
    if (!c) return -1;
    fflush(NULL);
    pid_t hp = fork();
    if (hp == 0) holder(sh, names, fair);
    int ok = 1, started = 0;
    for (int64_t until = now_ns() + 30000000000LL; atomic_load(&sh->phase) == H_START && now_ns() < until;)
        sleep_ns(1000000);
    if (atomic_load(&sh->phase) != H_HELD) ok = 0;

    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_setfair(&a, fair);
    for (int j = 0; ok && j < NLOCKS; j++) ok = !rmutex_init(&m[j], names[j], &a);
    struct park pk = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
    pthread_attr_t ta;
    pthread_attr_init(&ta);
    pthread_attr_setstacksize(&ta, 256 * 1024);
    for (int i = 0; ok && i < NTHREADS; i++) {
        w[i] = (struct waiter){ &pk, &m[i % NLOCKS], i, 0, 0 };
        if (pthread_create(&tid[i], &ta, waiter, &w[i])) {
            fprintf(stderr, "bench W5: pthread_create failed after %d threads\n", i);
            ok = 0;
        } else {
            started++;
        }
    }
    pthread_mutex_lock(&pk.mu);
    while (pk.parked < started) pthread_cond_wait(&pk.cv, &pk.mu);
    pthread_mutex_unlock(&pk.mu);

    /* Two stages: the first half of the waiters pays the process's fixed
     * costs (pool connections, channels, per-lock state); the second half
     * shows what one more waiting thread costs. */
    double redis0 = info_field(c, "memory", "used_memory");
    size_t heap_half = 0;
    int64_t net_half = 0;
    heapcount_start();
    for (int stage = 1; ok && stage <= 2; stage++) {
        int want = stage * NTHREADS / 2;
        pthread_mutex_lock(&pk.mu);
        pk.go = want;
        pthread_cond_broadcast(&pk.cv);
        pthread_mutex_unlock(&pk.mu);
        int64_t until = now_ns() + 60000000000LL;
        for (;;) {
            rmutex_stats_t st = stats_now();
            if (st.waiting >= (uint64_t)want && (!fair || queued(c, names) >= want)) break;
            if (now_ns() >= until) {
                fprintf(stderr, "bench W5: the threads did not all wait in time\n");
                ok = 0;
                break;
            }
            sleep_ns(20000000);
        }
        /* Subscriptions confirmed, and (fair) one round of the watchdog's
         * renewals of the queued waiters (every waiter_lease/3 = 1 s):
         * the steady state, with its buffers grown. */
        sleep_ns(1300000000);
        if (stage == 1) {
            heap_half = heap_in_use();
            net_half = heapcount_net();
        }
    }
    size_t heap1 = heap_in_use();
    int64_t net1 = heapcount_net();
    heapcount_stop();
    double redis1 = info_field(c, "memory", "used_memory");
    o->heap = (double)(net1 - net_half) / (NTHREADS / 2);
    o->heap_all = (double)net1 / NTHREADS;
    o->inuse = ((double)heap1 - (double)heap_half) / (NTHREADS / 2);
    o->sub = count_clients(c, "sub");
    o->cmd = count_clients(c, "cmd");
    o->wd = count_clients(c, "wd");
    o->redis = (redis1 - redis0) / NTHREADS;

    atomic_store(&sh->phase, H_RELEASE);
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    int status;
    waitpid(hp, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status)) ok = 0;
    double wake[NLOCKS];
    int nw = 0;
    for (int j = 0; ok && j < NLOCKS; j++) {
        int64_t first = INT64_MAX;
        for (int i = j; i < started; i += NLOCKS) {
            if (w[i].err) ok = 0;
            if (w[i].ret < first) first = w[i].ret;
        }
        wake[nw++] = (double)(first - sh->released[j]) / 1e3;
    }
    sort_doubles(wake, (size_t)nw);
    o->wake_p50 = quantile_sorted(wake, (size_t)nw, 0.5);
    o->wake_max = quantile_sorted(wake, (size_t)nw, 1);
    for (int j = 0; j < NLOCKS; j++) rmutex_destroy(&m[j]);
    munmap(sh, sizeof *sh);
    redisFree(c);
    return ok ? 0 : -1;
}

static void one(int fair)
{
    const char *kind = fair ? "fair" : "non-fair";
    struct sample sub = { .n = 0 }, cmd = { .n = 0 }, wd = { .n = 0 }, heap = { .n = 0 }, heap_all = { .n = 0 }, inuse = { .n = 0 },
                  redis = { .n = 0 }, p50 = { .n = 0 }, mx = { .n = 0 };
    int ok = !bench_configure("");
    for (int r = 0; ok && r < opt.reps; r++) {
        struct w5_out o;
        if (rep(fair, r, &o)) {
            ok = 0;
            break;
        }
        printf("  W5 %s: sub %.0f cmd %.0f wd %.0f, heap %.0f B/waiter (%.0f with fixed costs, %.0f mallinfo2), redis %.0f B/waiter, "
               "wake-up p50 %.1f us max %.1f us\n",
               kind, o.sub, o.cmd, o.wd, o.heap, o.heap_all, o.inuse, o.redis, o.wake_p50, o.wake_max);
        sample_add(&sub, o.sub);
        sample_add(&cmd, o.cmd);
        sample_add(&wd, o.wd);
        sample_add(&heap, o.heap);
        sample_add(&heap_all, o.heap_all);
        sample_add(&inuse, o.inuse);
        sample_add(&redis, o.redis);
        sample_add(&p50, o.wake_p50);
        sample_add(&mx, o.wake_max);
        /* Start the next repetition with the library's state rebuilt. */
        if (bench_configure("")) ok = 0;
    }
    char fig[96];
    struct row *r;
    snprintf(fig, sizeof fig, "%s: pub/sub connections (CLIENT LIST)", kind);
    r = report_row("W5", fig, "conns", &sub);
    row_limit(r, 1, "one");
    row_target(r, "1", ON_VALUE, J_LE, 1, 1);
    if (!ok) row_na(r, "error, see stderr");
    snprintf(fig, sizeof fig, "%s: command connections (pool, default 8)", kind);
    report_row("W5", fig, "conns", ok ? &cmd : NULL);
    snprintf(fig, sizeof fig, "%s: watchdog connections", kind);
    report_row("W5", fig, "conns", ok ? &wd : NULL);
    snprintf(fig, sizeof fig, "%s: heap allocated per waiting thread (no stack), 501-1000", kind);
    r = report_row("W5", fig, "bytes", ok ? &heap : NULL);
    row_target(r, "≤ 1024", ON_VALUE, J_LE, 1024, 0);
    snprintf(fig, sizeof fig, "%s: heap allocated per waiting thread, 1-1000 (fixed costs)", kind);
    report_row("W5", fig, "bytes", ok ? &heap_all : NULL);
    snprintf(fig, sizeof fig, "%s: heap in use per waiting thread (mallinfo2, 501-1000)", kind);
    r = report_row("W5", fig, "bytes", ok ? &inuse : NULL);
    snprintf(r->note, sizeof r->note, "includes freed blocks in glibc's per-thread caches");
    snprintf(fig, sizeof fig, "%s: Redis used_memory per waiting thread", kind);
    report_row("W5", fig, "bytes", ok ? &redis : NULL);
    snprintf(fig, sizeof fig, "%s: wake-up p50 (unlock ret → first waiter's lock ret)", kind);
    r = report_row("W5", fig, "µs", ok ? &p50 : NULL);
    row_limit_ref(r, &lim.ping_rtt_us, 1, "RTT");
    snprintf(fig, sizeof fig, "%s: wake-up, slowest of the 100 locks", kind);
    r = report_row("W5", fig, "µs", ok ? &mx : NULL);
    row_limit_ref(r, &lim.ping_rtt_us, 1, "RTT");
}

void w5_run(void)
{
    one(0);
    one(1);
}
