/* shimprog.c -- an ordinary pthread program (no rmutex in its source or on
 * its link line) that the shim tests run under LD_PRELOAD.  One command per
 * run; it reports on stdout, one line per event, and waits for the test on
 * stdin where the test must look at Redis in between.
 *
 * Its mutexes, by the name the commands take:
 *
 *   global     counter_lock   global, PTHREAD_MUTEX_INITIALIZER (only in .symtab)
 *   static     s_lock         file-local static, PTHREAD_MUTEX_INITIALIZER
 *   dyn        dyn_lock       global, pthread_mutex_init(NULL) in main
 *   rec        rec_lock       global, PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP
 *   err        err_lock       global, ERRORCHECK by pthread_mutex_init
 *   robust     robust_lock    global, robust by pthread_mutex_init
 *   plain      plain_lock     global, never listed by the tests
 *   lib        lib_lock       exported by libshimlib.so
 *   libstatic  lib_static_lock  file-local in libshimlib.so
 *
 * and its read-write locks: table_rw (global,
 * PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP) and plain_rw (global,
 * PTHREAD_RWLOCK_INITIALIZER, never listed by the tests).  "rwcount FILE
 * ITERS", "rwtry", "rwtimed MS": rwcount.h on table_rw; "rwbench N": N
 * rdlock/unlock pairs of plain_rw, "rwbench ns_per_pair=X".
 */
#define _GNU_SOURCE
#include "../../tests/stack/small_stack.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rwcount.h"

extern pthread_mutex_t lib_lock;
pthread_mutex_t *shimlib_static_lock(void);

pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t dyn_lock;
pthread_mutex_t rec_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
pthread_mutex_t err_lock;
pthread_mutex_t robust_lock;
pthread_mutex_t plain_lock = PTHREAD_MUTEX_INITIALIZER;

pthread_rwlock_t table_rw = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
pthread_rwlock_t plain_rw = PTHREAD_RWLOCK_INITIALIZER;

static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int item;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* Block until the test writes a line (or closes stdin). */
static void await_line(void)
{
    char buf[64];
    if (!fgets(buf, sizeof buf, stdin)) return;
}

static pthread_mutex_t *mutex_named(const char *n)
{
    if (!strcmp(n, "global")) return &counter_lock;
    if (!strcmp(n, "static")) return &s_lock;
    if (!strcmp(n, "dyn")) return &dyn_lock;
    if (!strcmp(n, "rec")) return &rec_lock;
    if (!strcmp(n, "err")) return &err_lock;
    if (!strcmp(n, "robust")) return &robust_lock;
    if (!strcmp(n, "plain")) return &plain_lock;
    if (!strcmp(n, "lib")) return &lib_lock;
    if (!strcmp(n, "libstatic")) return shimlib_static_lock();
    fprintf(stderr, "shimprog: unknown mutex %s\n", n);
    exit(2);
}

static struct timespec after_ms(clockid_t clock, long ms)
{
    struct timespec t;
    clock_gettime(clock, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    return t;
}

/* ---- count: the lost-update counter ---- */

static const char *count_file;
static int count_iters;
static pthread_mutex_t *count_mu;

static void *count_thread(void *arg)
{
    for (int i = 0; i < count_iters; i++) {
        pthread_mutex_lock(count_mu);
        long v = 0;
        FILE *f = fopen(count_file, "r");
        if (f) {
            if (fscanf(f, "%ld", &v) != 1) v = 0;
            fclose(f);
        }
        struct timespec pause = { 0, 300000 }; /* widen the window for lost updates */
        nanosleep(&pause, NULL);
        f = fopen(count_file, "w");
        if (f) {
            fprintf(f, "%ld\n", v + 1);
            fclose(f);
        }
        pthread_mutex_unlock(count_mu);
    }
    return arg;
}

static int cmd_count(char **argv)
{
    count_file = argv[0];
    count_iters = atoi(argv[1]);
    int threads = atoi(argv[2]);
    count_mu = mutex_named(argv[3]);
    int small = argv[4] && !strcmp(argv[4], "small");
    pthread_t t[16];
    pthread_attr_t a;
    if (threads < 1 || threads > 16) return 2;
    pthread_attr_init(&a);
    /* "small": the threads have the smallest stack POSIX allows, and the
     * process's first lock (the shim's and rmutex's cold path) runs there. */
    if (small) pthread_attr_setstacksize(&a, SMALL_STACK_SANITIZED ? 65536 : PTHREAD_STACK_MIN);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], &a, count_thread, NULL)) return 3;
    pthread_attr_destroy(&a);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    say("done");
    return 0;
}

/* ---- hold / try / timed / clock ---- */

static int cmd_hold(char **argv)
{
    pthread_mutex_t *m = mutex_named(argv[0]);
    say("locked rc=%d", pthread_mutex_lock(m));
    await_line();
    say("unlocked rc=%d", pthread_mutex_unlock(m));
    return 0;
}

static int cmd_try(char **argv, int kind)
{
    pthread_mutex_t *m = mutex_named(argv[0]);
    int rc;
    if (kind == 0) {
        rc = pthread_mutex_trylock(m);
    } else if (kind == 1) {
        struct timespec t = after_ms(CLOCK_REALTIME, atol(argv[1]));
        rc = pthread_mutex_timedlock(m, &t);
    } else {
        struct timespec t = after_ms(CLOCK_MONOTONIC, atol(argv[1]));
        rc = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &t);
    }
    say("rc=%d", rc);
    if (rc == 0) pthread_mutex_unlock(m);
    return 0;
}

/* ---- types ---- */

static int cmd_rec(void)
{
    int a = pthread_mutex_lock(&rec_lock), b = pthread_mutex_lock(&rec_lock);
    say("depth2 rc=%d,%d", a, b);
    await_line();
    say("depth1 rc=%d", pthread_mutex_unlock(&rec_lock));
    await_line();
    say("free rc=%d", pthread_mutex_unlock(&rec_lock));
    return 0;
}

static int cmd_err(void)
{
    int lock = pthread_mutex_lock(&err_lock);
    int relock = pthread_mutex_lock(&err_lock);
    int trylock = pthread_mutex_trylock(&err_lock);
    int unlock = pthread_mutex_unlock(&err_lock);
    int unlock2 = pthread_mutex_unlock(&err_lock);
    say("err lock=%d relock=%d trylock=%d unlock=%d unlock2=%d", lock, relock, trylock, unlock,
        unlock2);
    return 0;
}

/* A NORMAL mutex that nobody lists, and an ERRORCHECK one: glibc's answers. */
static int cmd_plain(void)
{
    for (int i = 0; i < 100000; i++) {
        pthread_mutex_lock(&plain_lock);
        pthread_mutex_unlock(&plain_lock);
    }
    pthread_mutexattr_t a;
    pthread_mutex_t e;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&e, &a);
    int lock = pthread_mutex_lock(&e), relock = pthread_mutex_lock(&e);
    int unlock = pthread_mutex_unlock(&e), unlock2 = pthread_mutex_unlock(&e);
    pthread_mutex_destroy(&e);
    say("plain lock=%d relock=%d unlock=%d unlock2=%d", lock, relock, unlock, unlock2);
    return 0;
}

/* ---- condition variables ---- */

static pthread_mutex_t *cond_mu;

static void *consumer(void *arg)
{
    pthread_mutex_lock(cond_mu);
    while (!item) {
        say("waiting");
        pthread_cond_wait(&cond, cond_mu);
    }
    int got = item;
    pthread_mutex_unlock(cond_mu);
    say("got %d", got);
    return arg;
}

static int cmd_cond(char **argv)
{
    cond_mu = mutex_named(argv[0]);
    pthread_t t;
    pthread_create(&t, NULL, consumer, NULL);
    await_line();
    pthread_mutex_lock(cond_mu);
    item = 42;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(cond_mu);
    pthread_join(t, NULL);
    say("done");
    return 0;
}

static int cmd_condtimed(char **argv)
{
    pthread_mutex_t *m = mutex_named(argv[0]);
    pthread_mutex_lock(m);
    struct timespec t = after_ms(CLOCK_REALTIME, atol(argv[1]));
    int rc = pthread_cond_timedwait(&cond, m, &t);
    struct timespec c = after_ms(CLOCK_MONOTONIC, atol(argv[1]));
    int rc2 = pthread_cond_clockwait(&cond, m, CLOCK_MONOTONIC, &c);
    say("timedwait rc=%d clockwait rc=%d", rc, rc2);
    await_line();
    say("unlocked rc=%d", pthread_mutex_unlock(m));
    return 0;
}

/* One timed wait (10 s) on cond, which the tests may list as a distributed
 * condition: "woke rc=N" says how it ended. */
static int cmd_cwait(char **argv)
{
    pthread_mutex_t *m = mutex_named(argv[0]);
    int rc = pthread_mutex_lock(m);
    say("waiting");
    struct timespec t = after_ms(CLOCK_REALTIME, 10000);
    if (!rc) rc = pthread_cond_timedwait(&cond, m, &t);
    say("woke rc=%d", rc);
    say("unlocked rc=%d", pthread_mutex_unlock(m));
    return 0;
}

static int cmd_csignal(char **argv)
{
    pthread_mutex_t *m = mutex_named(argv[0]);
    pthread_mutex_lock(m);
    int rc = !strcmp(argv[1], "all") ? pthread_cond_broadcast(&cond) : pthread_cond_signal(&cond);
    pthread_mutex_unlock(m);
    say("signalled rc=%d", rc);
    return 0;
}

static void cancel_cleanup(void *arg)
{
    say("cleanup");
    await_line();
    say("cleanup-unlocked rc=%d", pthread_mutex_unlock(arg));
}

static void *cancel_waiter(void *arg)
{
    pthread_mutex_t *m = arg;
    pthread_mutex_lock(m);
    pthread_cleanup_push(cancel_cleanup, m);
    say("waiting");
    for (;;) pthread_cond_wait(&cond, m);
    pthread_cleanup_pop(1);
    return NULL;
}

static int cmd_cancel(char **argv)
{
    pthread_mutex_t *m = mutex_named(argv[0]);
    pthread_t t;
    pthread_create(&t, NULL, cancel_waiter, m);
    await_line();
    pthread_cancel(t);
    void *res;
    pthread_join(t, &res);
    say("joined canceled=%d", res == PTHREAD_CANCELED);
    int rc = pthread_mutex_lock(m);
    say("relocked rc=%d", rc);
    await_line();
    say("unlocked rc=%d", pthread_mutex_unlock(m));
    return 0;
}

/* ---- exec ---- */

static int cmd_exec(char **argv)
{
    pthread_mutex_t *m = mutex_named(argv[0]);
    say("locked rc=%d", pthread_mutex_lock(m));
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    say("child exit=%d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    say("unlocked rc=%d", pthread_mutex_unlock(m));
    return 0;
}

/* ---- robust ---- */

static int cmd_robust(char **argv)
{
    pthread_mutex_t *m = mutex_named(argv[0]);
    if (!strcmp(argv[1], "die")) {
        say("locked rc=%d", pthread_mutex_lock(m));
        await_line();
        _exit(0); /* dies holding it */
    }
    int rc = pthread_mutex_lock(m);
    int cons = rc == EOWNERDEAD ? pthread_mutex_consistent(m) : -1;
    say("locked rc=%d consistent=%d unlock=%d", rc, cons, pthread_mutex_unlock(m));
    return 0;
}

/* N rdlock/unlock pairs of an unlisted rwlock: the interposers' fast path. */
static int cmd_rwbench(char **argv)
{
    long n = atol(argv[0]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        pthread_rwlock_rdlock(&plain_rw);
        pthread_rwlock_unlock(&plain_rw);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    say("rwbench ns_per_pair=%.2f", n > 0 ? ns / (double)n : 0.0);
    return 0;
}

int main(int argc, char **argv)
{
    /* count ... small: no pthread call before the small-stack threads, so
     * that the shim's set-up runs on one of them too. */
    if (argc == 7 && !strcmp(argv[1], "count")) return cmd_count(argv + 2);
    pthread_mutexattr_t a;
    pthread_mutex_init(&dyn_lock, NULL);
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&err_lock, &a);
    pthread_mutexattr_destroy(&a);
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&robust_lock, &a);
    pthread_mutexattr_destroy(&a);

    if (argc < 2) return 2;
    const char *c = argv[1];
    char **rest = argv + 2;
    int n = argc - 2;
    if (!strcmp(c, "count") && n == 4) return cmd_count(rest); /* argv[4]: NULL */
    if (!strcmp(c, "hold") && n == 1) return cmd_hold(rest);
    if (!strcmp(c, "try") && n == 1) return cmd_try(rest, 0);
    if (!strcmp(c, "timed") && n == 2) return cmd_try(rest, 1);
    if (!strcmp(c, "clock") && n == 2) return cmd_try(rest, 2);
    if (!strcmp(c, "rec")) return cmd_rec();
    if (!strcmp(c, "err")) return cmd_err();
    if (!strcmp(c, "plain")) return cmd_plain();
    if (!strcmp(c, "cond") && n == 1) return cmd_cond(rest);
    if (!strcmp(c, "condtimed") && n == 2) return cmd_condtimed(rest);
    if (!strcmp(c, "cancel") && n == 1) return cmd_cancel(rest);
    if (!strcmp(c, "cwait") && n == 1) return cmd_cwait(rest);
    if (!strcmp(c, "csignal") && n == 2) return cmd_csignal(rest);
    if (!strcmp(c, "exec") && n >= 2) return cmd_exec(rest);
    if (!strcmp(c, "robust") && n == 2) return cmd_robust(rest);
    if (!strcmp(c, "rwcount") && n == 2) return rwc_count(&table_rw, rest[0], atoi(rest[1]));
    if (!strcmp(c, "rwtry") && n == 0) return rwc_attempt(&table_rw, "try", 0);
    if (!strcmp(c, "rwtimed") && n == 1) return rwc_attempt(&table_rw, "timed", atol(rest[0]));
    if (!strcmp(c, "rwbench") && n == 1) return cmd_rwbench(rest);
    fprintf(stderr, "shimprog: bad command\n");
    return 2;
}
