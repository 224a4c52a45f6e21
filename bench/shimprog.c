/* shimprog.c -- rmutex-bench-shim, W7's program: the cost of an unlisted
 * mutex in a program that also has a listed one.
 *
 *   rmutex-bench-shim [PAIRS [TRIALS [single]]]
 *
 * A plain pthread program: nothing of rmutex in its source or on its link
 * line.  bench_listed_lock is the mutex the benchmark lists in
 * RMUTEX_PRELOAD when it runs this program under librmutex_preload.so; it
 * is locked and unlocked once, so under the shim it has been resolved and
 * has gone through Redis.  Then TRIALS times PAIRS lock+unlock pairs of
 * bench_plain_lock, which is not listed, are timed; under the shim each
 * call passes the shim's is-it-listed check before reaching glibc.
 *
 * One idle thread is started first, in both runs.  glibc (2.34 and later)
 * takes and releases a private mutex without atomic instructions while the
 * process has a single thread; under the shim the process always has
 * librmutex's threads (watchdog, subscriptions) once the listed mutex was
 * used, so a single-threaded plain run would compare the shim against a
 * path no program that needs a mutex takes.  With "single" no thread is
 * started: that shows what a single-threaded program loses under the shim.
 *
 * Prints one line: "ns_per_pair=<median of the trials> listed=<rc>
 * provider=<object that pthread_mutex_lock resolved to>". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

pthread_mutex_t bench_listed_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t bench_plain_lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *idle(void *arg)
{
    for (;;) pause();
    return arg;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long pairs = argc > 1 ? atol(argv[1]) : 10000000;
    int trials = argc > 2 ? atoi(argv[2]) : 5;
    if (pairs < 1 || trials < 1 || trials > 100) {
        fprintf(stderr, "usage: rmutex-bench-shim [PAIRS [TRIALS<=100 [single]]]\n");
        return 2;
    }
    pthread_t helper;
    int single = argc > 3 && !strcmp(argv[3], "single");
    if (!single && pthread_create(&helper, NULL, idle, NULL)) {
        fprintf(stderr, "rmutex-bench-shim: pthread_create failed\n");
        return 1;
    }
    int listed = pthread_mutex_lock(&bench_listed_lock);
    if (!listed) listed = pthread_mutex_unlock(&bench_listed_lock);

    double ns[100];
    for (long i = 0; i < pairs / 10; i++) { /* warm-up */
        pthread_mutex_lock(&bench_plain_lock);
        pthread_mutex_unlock(&bench_plain_lock);
    }
    for (int t = 0; t < trials; t++) {
        double t0 = now();
        for (long i = 0; i < pairs; i++) {
            pthread_mutex_lock(&bench_plain_lock);
            pthread_mutex_unlock(&bench_plain_lock);
        }
        ns[t] = (now() - t0) / (double)pairs;
    }
    qsort(ns, (size_t)trials, sizeof *ns, cmp);
    double med = trials % 2 ? ns[trials / 2] : (ns[trials / 2 - 1] + ns[trials / 2]) / 2;

    Dl_info info;
    int (*fn)(pthread_mutex_t *) = pthread_mutex_lock;
    const char *provider = dladdr((void *)fn, &info) && info.dli_fname ? info.dli_fname : "?";
    printf("ns_per_pair=%.3f listed=%d provider=%s\n", med, listed, provider);
    return 0;
}
