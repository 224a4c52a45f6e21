/* stack_child.c -- every public rmutex call on a PTHREAD_STACK_MIN stack.
 *
 * usage: rmutex_stack_child nonfair|fair|robust|fair-robust|rwlock|rwlock-robust NAME
 * (RMUTEX_URL names the server).  The first phase runs on a small-stack
 * thread before anything else of rmutex has run in the process (the cold
 * path: configuration, the first connection, script loading, starting the
 * watchdog and the multiplexer); the second phase runs the same calls again
 * on a new small-stack thread (warm); the third waits on a small stack
 * for a lock another thread holds, which is how a waiter meets the
 * multiplexer.  For each phase it prints
 *     <phase> <bytes> <call>
 * the most stack one call used below the caller and which call that was,
 * then "ok".  A call that fails prints "fail ..." and the process exits 1;
 * a stack overflow kills it with SIGSEGV.  The rwlock kinds do the same
 * with the read-write lock's calls: every form of rdlock and wrlock, warm
 * and cold, waiting behind a writer and behind readers, timing out, and a
 * small-stack thread that exits reading (its reads given back by a
 * thread-exit handler on that stack); robust: a writer that exited
 * holding, EOWNERDEAD to the next reader. */
#include "small_stack.h"

#include <errno.h>
#include <rmutex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *kind, *name;
static rmutex_t m;
static rmutexattr_t attr;

struct step {
    const char *what;
    int rc;
};

static void check(const char *what, int rc, int want)
{
    if (rc == want) return;
    printf("fail %s rc=%d want=%d detail=%s\n", what, rc, want, rmutex_detail());
    fflush(stdout);
    exit(1);
}

static struct timespec in_ms(clockid_t clock, long ms)
{
    struct timespec t;
    clock_gettime(clock, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
    return t;
}

/* The calls, one per function so each is measured on its own. */
static void do_configure(void *p) { *(int *)p = rmutex_configure(getenv("RMUTEX_URL")); }
static void do_init(void *p) { *(int *)p = rmutex_init(&m, name, &attr); }
static void do_lock(void *p) { *(int *)p = rmutex_lock(&m); }
static void do_trylock(void *p) { *(int *)p = rmutex_trylock(&m); }
static void do_unlock(void *p) { *(int *)p = rmutex_unlock(&m); }
static void do_consistent(void *p) { *(int *)p = rmutex_consistent(&m); }
static void do_destroy(void *p) { *(int *)p = rmutex_destroy(&m); }
static void do_force(void *p) { *(int *)p = rmutex_force_unlock(name); }
static void do_detail(void *p) { *(int *)p = rmutex_detail() ? 0 : EINVAL; }
static void do_timedlock(void *p)
{
    struct timespec t = in_ms(CLOCK_REALTIME, 5000);
    *(int *)p = rmutex_timedlock(&m, &t);
}
static void do_clocklock(void *p)
{
    struct timespec t = in_ms(CLOCK_MONOTONIC, 5000);
    *(int *)p = rmutex_clocklock(&m, CLOCK_MONOTONIC, &t);
}
static void do_timeout(void *p)
{
    struct timespec t = in_ms(CLOCK_MONOTONIC, 300);
    *(int *)p = rmutex_clocklock(&m, CLOCK_MONOTONIC, &t);
}
static void do_fence(void *p)
{
    uint64_t tok;
    *(int *)p = rmutex_fence(&m, &tok);
}
static void do_holdcount(void *p)
{
    unsigned n;
    *(int *)p = rmutex_holdcount(&m, &n);
}
static rcond_t cv;
static void do_cinit(void *p) { *(int *)p = rcond_init(&cv, name, NULL); }
static void do_csignal(void *p) { *(int *)p = rcond_signal(&cv); }
static void do_cbroadcast(void *p) { *(int *)p = rcond_broadcast(&cv); }
static void do_cdestroy(void *p) { *(int *)p = rcond_destroy(&cv); }
static void do_cwait(void *p) { *(int *)p = rcond_wait(&cv, &m); }
static void do_ctimedwait(void *p)
{
    struct timespec t = in_ms(CLOCK_REALTIME, 50);
    *(int *)p = rcond_timedwait(&cv, &m, &t);
}
static void do_stats(void *p)
{
    rmutex_stats_t s;
    *(int *)p = rmutex_stats(&s, sizeof s);
}

static rrwlock_t rw;
static rrwlockattr_t rwattr;
static void do_rwinit(void *p) { *(int *)p = rrwlock_init(&rw, name, &rwattr); }
static void do_rdlock(void *p) { *(int *)p = rrwlock_rdlock(&rw); }
static void do_tryrdlock(void *p) { *(int *)p = rrwlock_tryrdlock(&rw); }
static void do_wrlock(void *p) { *(int *)p = rrwlock_wrlock(&rw); }
static void do_trywrlock(void *p) { *(int *)p = rrwlock_trywrlock(&rw); }
static void do_rwunlock(void *p) { *(int *)p = rrwlock_unlock(&rw); }
static void do_rwdestroy(void *p) { *(int *)p = rrwlock_destroy(&rw); }
/* The timed forms: rrwlock_timed* for CLOCK_REALTIME, rrwlock_clock*
 * otherwise, ms from now. */
static int rw_timed(int write, clockid_t clock, long ms)
{
    struct timespec t = in_ms(clock, ms);
    if (clock == CLOCK_REALTIME) return write ? rrwlock_timedwrlock(&rw, &t) : rrwlock_timedrdlock(&rw, &t);
    return write ? rrwlock_clockwrlock(&rw, clock, &t) : rrwlock_clockrdlock(&rw, clock, &t);
}
static void do_timedrdlock(void *p) { *(int *)p = rw_timed(0, CLOCK_REALTIME, 5000); }
static void do_clockrdlock(void *p) { *(int *)p = rw_timed(0, CLOCK_MONOTONIC, 5000); }
static void do_timedwrlock(void *p) { *(int *)p = rw_timed(1, CLOCK_REALTIME, 5000); }
static void do_clockwrlock(void *p) { *(int *)p = rw_timed(1, CLOCK_MONOTONIC, 5000); }
static void do_rdtimeout(void *p) { *(int *)p = rw_timed(0, CLOCK_MONOTONIC, 300); }
static void do_wrtimeout(void *p) { *(int *)p = rw_timed(1, CLOCK_REALTIME, 300); }
static void do_rwfence(void *p)
{
    uint64_t tok;
    *(int *)p = rrwlock_fence(&rw, &tok);
}

/* Semaphores, barriers and once (their names: the rwlock's; other keys). */
static rsem_t sem;
static rbarrier_t bar;
static ronce_t once_ctl;
static void do_seminit(void *p) { *(int *)p = rsem_init(&sem, name, 1, NULL); }
static void do_semwait(void *p) { *(int *)p = rsem_wait(&sem); }
static void do_semtrywait(void *p) { *(int *)p = rsem_trywait(&sem); }
static void do_sempost(void *p) { *(int *)p = rsem_post(&sem); }
static void do_semclockwait(void *p)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += 5;
    *(int *)p = rsem_clockwait(&sem, CLOCK_MONOTONIC, &t);
}
static void do_semgetvalue(void *p)
{
    int v;
    *(int *)p = rsem_getvalue(&sem, &v);
}
static void do_semdestroy(void *p) { *(int *)p = rsem_destroy(&sem); }
static void do_semunlink(void *p) { *(int *)p = rsem_unlink(name); }
static void do_barinit(void *p) { *(int *)p = rbarrier_init(&bar, name, 1, NULL); }
static void do_barwait(void *p) { *(int *)p = rbarrier_wait(&bar); }
static void do_bardestroy(void *p) { *(int *)p = rbarrier_destroy(&bar); }
static void once_routine(void) {}
static void do_once(void *p)
{
    ronce_t fresh = RONCE_INIT(name);
    once_ctl = fresh;
    *(int *)p = ronce(&once_ctl, once_routine);
}
static void do_oncereset(void *p) { *(int *)p = ronce_reset(name); }

struct phase {
    const char *name;
    size_t worst;
    const char *worst_call;
};

static void run(struct phase *ph, const char *what, void (*fn)(void *), int want)
{
    int rc = -12345;
    size_t used = small_stack_measure(fn, &rc);
    check(what, rc, want);
    if (used > ph->worst) {
        ph->worst = used;
        ph->worst_call = what;
    }
}

static void report(const struct phase *ph)
{
    printf("%s %zu %s\n", ph->name, ph->worst, ph->worst_call ? ph->worst_call : "-");
    fflush(stdout);
}

/* Every call, uncontended. */
static void *all_calls(void *p)
{
    struct phase *ph = p;
    int first = !strcmp(ph->name, "cold");
    if (first) run(ph, "rmutex_configure", do_configure, 0);
    run(ph, "rmutex_init", do_init, 0);
    run(ph, "rmutex_lock", do_lock, 0);
    run(ph, "rmutex_holdcount", do_holdcount, 0);
    run(ph, "rmutex_fence", do_fence, 0);
    run(ph, "rmutex_unlock", do_unlock, 0);
    run(ph, "rmutex_trylock", do_trylock, 0);
    run(ph, "rmutex_unlock", do_unlock, 0);
    run(ph, "rmutex_timedlock", do_timedlock, 0);
    run(ph, "rmutex_unlock", do_unlock, 0);
    run(ph, "rmutex_clocklock", do_clocklock, 0);
    run(ph, "rmutex_unlock", do_unlock, 0);
    run(ph, "rcond_init", do_cinit, 0);
    run(ph, "rcond_signal", do_csignal, 0);
    run(ph, "rcond_broadcast", do_cbroadcast, 0);
    run(ph, "rmutex_lock", do_lock, 0);
    run(ph, "rcond_timedwait (timeout)", do_ctimedwait, ETIMEDOUT);
    run(ph, "rmutex_unlock", do_unlock, 0);
    run(ph, "rcond_destroy", do_cdestroy, 0);
    run(ph, "rmutex_stats", do_stats, 0);
    run(ph, "rmutex_detail", do_detail, 0);
    run(ph, "rmutex_force_unlock", do_force, 0);
    run(ph, "rmutex_destroy", do_destroy, 0);
    return NULL;
}

/* A thread of normal size that holds m until told. */
static pthread_mutex_t hmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hcv = PTHREAD_COND_INITIALIZER;
static int held, release_it, exit_holding;
/* What the holder takes and gives back: m by default. */
static int take_m(void) { return rmutex_lock(&m); }
static int give_m(void) { return rmutex_unlock(&m); }
static int (*hold_take)(void) = take_m, (*hold_give)(void) = give_m;

static void *holder(void *p)
{
    (void)p;
    check("holder lock", hold_take(), 0);
    pthread_mutex_lock(&hmu);
    held = 1;
    pthread_cond_broadcast(&hcv);
    while (!release_it) pthread_cond_wait(&hcv, &hmu);
    pthread_mutex_unlock(&hmu);
    if (!exit_holding) {
        struct timespec d = { 0, 200 * 1000000L }; /* let the waiter start waiting */
        nanosleep(&d, NULL);
        check("holder unlock", hold_give(), 0);
    }
    return NULL;
}

static void holder_start(pthread_t *t)
{
    held = release_it = 0;
    pthread_create(t, NULL, holder, NULL);
    pthread_mutex_lock(&hmu);
    while (!held) pthread_cond_wait(&hcv, &hmu);
    pthread_mutex_unlock(&hmu);
}

static void holder_release(void)
{
    pthread_mutex_lock(&hmu);
    release_it = 1;
    pthread_cond_broadcast(&hcv);
    pthread_mutex_unlock(&hmu);
}

/* Wait on a small stack: a timeout, then a hand-off (and, robust, a dead
 * holder: EOWNERDEAD and rmutex_consistent). */
/* A thread of normal size that signals cv until told to stop. */
static volatile int stop_signalling;
static void *signaller(void *p)
{
    struct timespec pause = { 0, 50 * 1000000 };
    while (!stop_signalling) {
        rcond_signal(&cv);
        nanosleep(&pause, NULL);
    }
    return p;
}

static void *contended(void *p)
{
    struct phase *ph = p;
    pthread_t t;
    check("rcond_init", rcond_init(&cv, name, NULL), 0);
    pthread_create(&t, NULL, signaller, NULL);
    run(ph, "rmutex_lock", do_lock, 0);
    run(ph, "rcond_wait (signalled)", do_cwait, 0);
    run(ph, "rmutex_unlock", do_unlock, 0);
    stop_signalling = 1;
    pthread_join(t, NULL);
    check("rcond_destroy", rcond_destroy(&cv), 0);
    holder_start(&t);
    run(ph, "rmutex_clocklock (timeout)", do_timeout, ETIMEDOUT);
    run(ph, "rmutex_trylock (busy)", do_trylock, EBUSY);
    holder_release();
    run(ph, "rmutex_lock (waits)", do_lock, 0);
    run(ph, "rmutex_unlock", do_unlock, 0);
    pthread_join(t, NULL);
    if (strstr(kind, "robust")) {
        exit_holding = 1;
        holder_start(&t);
        holder_release();
        pthread_join(t, NULL); /* it exited holding m: its lease runs out */
        run(ph, "rmutex_lock (owner died)", do_lock, EOWNERDEAD);
        run(ph, "rmutex_consistent", do_consistent, 0);
        run(ph, "rmutex_unlock", do_unlock, 0);
    }
    return NULL;
}

/* ---- the read-write lock ---- */

/* Every call, uncontended. */
static void *rw_all_calls(void *p)
{
    struct phase *ph = p;
    if (!strcmp(ph->name, "cold")) run(ph, "rmutex_configure", do_configure, 0);
    run(ph, "rrwlock_init", do_rwinit, 0);
    run(ph, "rrwlock_rdlock", do_rdlock, 0);
    run(ph, "rrwlock_rdlock (again)", do_rdlock, 0);
    run(ph, "rrwlock_unlock", do_rwunlock, 0);
    run(ph, "rrwlock_unlock", do_rwunlock, 0);
    run(ph, "rrwlock_tryrdlock", do_tryrdlock, 0);
    run(ph, "rrwlock_unlock", do_rwunlock, 0);
    run(ph, "rrwlock_timedrdlock", do_timedrdlock, 0);
    run(ph, "rrwlock_unlock", do_rwunlock, 0);
    run(ph, "rrwlock_clockrdlock", do_clockrdlock, 0);
    run(ph, "rrwlock_unlock", do_rwunlock, 0);
    run(ph, "rrwlock_wrlock", do_wrlock, 0);
    run(ph, "rrwlock_fence", do_rwfence, 0);
    run(ph, "rrwlock_rdlock (the writer)", do_rdlock, EDEADLK);
    run(ph, "rrwlock_unlock", do_rwunlock, 0);
    run(ph, "rrwlock_trywrlock", do_trywrlock, 0);
    run(ph, "rrwlock_unlock", do_rwunlock, 0);
    run(ph, "rrwlock_timedwrlock", do_timedwrlock, 0);
    run(ph, "rrwlock_unlock", do_rwunlock, 0);
    run(ph, "rrwlock_clockwrlock", do_clockwrlock, 0);
    run(ph, "rrwlock_unlock", do_rwunlock, 0);
    run(ph, "rrwlock_unlock (nothing held)", do_rwunlock, EPERM);
    run(ph, "rrwlock_destroy", do_rwdestroy, 0);
    run(ph, "rsem_init", do_seminit, 0);
    run(ph, "rsem_wait", do_semwait, 0);
    run(ph, "rsem_trywait (none free)", do_semtrywait, EBUSY);
    run(ph, "rsem_post", do_sempost, 0);
    run(ph, "rsem_clockwait", do_semclockwait, 0);
    run(ph, "rsem_getvalue", do_semgetvalue, 0);
    run(ph, "rsem_post", do_sempost, 0);
    run(ph, "rsem_destroy", do_semdestroy, 0);
    run(ph, "rsem_unlink", do_semunlink, 0);
    run(ph, "rbarrier_init", do_barinit, 0);
    run(ph, "rbarrier_wait", do_barwait, RBARRIER_SERIAL_THREAD);
    run(ph, "rbarrier_destroy", do_bardestroy, 0);
    run(ph, "ronce", do_once, 0);
    run(ph, "ronce_reset", do_oncereset, 0);
    return NULL;
}

/* The holder of holder_start() on rw, for writing or reading. */
static int take_write(void) { return rrwlock_wrlock(&rw); }
static int take_read(void) { return rrwlock_rdlock(&rw); }
static int give_rw(void) { return rrwlock_unlock(&rw); }

static void rw_holder_start(pthread_t *t, int write)
{
    hold_take = write ? take_write : take_read;
    hold_give = give_rw;
    holder_start(t);
}

/* On a small stack: time out and be refused behind a writer, wait for it;
 * wait for a reader as a writer; (robust) meet a dead writer. */
static void *rw_contended(void *p)
{
    struct phase *ph = p;
    pthread_t t;
    rw_holder_start(&t, 1);
    run(ph, "rrwlock_clockrdlock (timeout)", do_rdtimeout, ETIMEDOUT);
    run(ph, "rrwlock_timedwrlock (timeout)", do_wrtimeout, ETIMEDOUT);
    run(ph, "rrwlock_tryrdlock (busy)", do_tryrdlock, EBUSY);
    run(ph, "rrwlock_trywrlock (busy)", do_trywrlock, EBUSY);
    holder_release();
    run(ph, "rrwlock_rdlock (waits for the writer)", do_rdlock, 0);
    run(ph, "rrwlock_unlock", do_rwunlock, 0);
    pthread_join(t, NULL);
    rw_holder_start(&t, 0);
    holder_release();
    run(ph, "rrwlock_wrlock (waits for the reader)", do_wrlock, 0);
    run(ph, "rrwlock_unlock", do_rwunlock, 0);
    pthread_join(t, NULL);
    if (strstr(kind, "robust")) {
        exit_holding = 1;
        rw_holder_start(&t, 1);
        holder_release();
        pthread_join(t, NULL); /* it exited writing: its lease runs out */
        run(ph, "rrwlock_rdlock (writer died)", do_rdlock, EOWNERDEAD);
        run(ph, "rrwlock_unlock", do_rwunlock, 0);
    }
    return NULL;
}

/* A small-stack thread that exits reading: the thread-exit handler gives
 * the read back on that stack. */
static void *rw_exit_reading(void *p)
{
    struct phase *ph = p;
    run(ph, "rrwlock_rdlock (then exits reading)", do_rdlock, 0);
    return NULL;
}

static int rw_main(void)
{
    rrwlockattr_init(&rwattr);
    if (strstr(kind, "robust")) {
        rrwlockattr_setrobust(&rwattr, RMUTEX_ROBUST);
        rrwlockattr_setlease(&rwattr, 1000); /* a dead writer's lease runs out soon */
    }
    struct phase cold = { "cold", 0, NULL }, warm = { "warm", 0, NULL },
                 wait = { "contended", 0, NULL };
    if (small_stack_run(rw_all_calls, &cold)) return 1;
    report(&cold);
    if (small_stack_run(rw_all_calls, &warm)) return 1;
    report(&warm);
    check("rrwlock_init", rrwlock_init(&rw, name, &rwattr), 0);
    if (small_stack_run(rw_contended, &wait) || small_stack_run(rw_exit_reading, &wait)) return 1;
    check("trywrlock after a reader exited", rrwlock_trywrlock(&rw), 0);
    check("rrwlock_unlock", rrwlock_unlock(&rw), 0);
    report(&wait);
    check("rrwlock_destroy", rrwlock_destroy(&rw), 0);
    check("rmutex_shutdown", rmutex_shutdown(), 0);
    printf("ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s nonfair|fair|robust|fair-robust|rwlock|rwlock-robust NAME\n",
                argv[0]);
        return 2;
    }
    kind = argv[1];
    name = argv[2];
    if (!strncmp(kind, "rwlock", 6)) return rw_main();
    rmutexattr_init(&attr);
    if (!strncmp(kind, "fair", 4)) rmutexattr_setfair(&attr, 1);
    if (strstr(kind, "robust")) {
        rmutexattr_setrobust(&attr, RMUTEX_ROBUST);
        rmutexattr_setlease(&attr, 1000); /* a dead holder's lease runs out soon */
    }
    struct phase cold = { "cold", 0, NULL }, warm = { "warm", 0, NULL },
                 wait = { "contended", 0, NULL };
    if (small_stack_run(all_calls, &cold)) return 1;
    report(&cold);
    if (small_stack_run(all_calls, &warm)) return 1;
    report(&warm);
    check("rmutex_init", rmutex_init(&m, name, &attr), 0);
    if (small_stack_run(contended, &wait)) return 1;
    report(&wait);
    check("rmutex_destroy", rmutex_destroy(&m), 0);
    check("rmutex_shutdown", rmutex_shutdown(), 0);
    printf("ok\n");
    return 0;
}
