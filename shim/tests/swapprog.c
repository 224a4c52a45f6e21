/* swapprog.c -- a pthread counter built with <rmutex/pthread.h>: each run
 * adds ITERS to the number in FILE under a static mutex (read, pause,
 * write), so runs in several processes lose updates unless the mutex
 * excludes them all.  usage: swapprog FILE ITERS [small|zero|heap]:
 *   small  the loop runs on a thread with a PTHREAD_STACK_MIN stack;
 *   zero   under zero_lock, a global with no initializer (all zeros);
 *   heap   under a calloc'd mutex (all zeros, in no symbol).
 * It prints "done cache_hits=N" (rmutex_stats: RMUTEX_CACHE=1 caches). */
#define _GNU_SOURCE
#include <rmutex/pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../tests/stack/small_stack.h"

static pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t zero_lock; /* no initializer: zero-filled */
static pthread_mutex_t *lock = &counter_lock;
static const char *file;
static int iters, failed;

static void *count(void *arg)
{
    for (int i = 0; i < iters; i++) {
        if (pthread_mutex_lock(lock)) {
            failed = 1;
            return arg;
        }
        long v = 0;
        FILE *f = fopen(file, "r");
        if (f) {
            if (fscanf(f, "%ld", &v) != 1) v = 0;
            fclose(f);
        }
        struct timespec pause = { 0, 300000 };
        nanosleep(&pause, NULL);
        if ((f = fopen(file, "w"))) {
            fprintf(f, "%ld\n", v + 1);
            fclose(f);
        }
        if (pthread_mutex_unlock(lock)) {
            failed = 1;
            return arg;
        }
    }
    return arg;
}

int main(int argc, char **argv)
{
    const char *mode = argc == 4 ? argv[3] : "";
    int small = !strcmp(mode, "small");
    if (argc != 3 && !(argc == 4 && (small || !strcmp(mode, "zero") || !strcmp(mode, "heap"))))
        return 2;
    if (!strcmp(mode, "zero")) lock = &zero_lock;
    if (!strcmp(mode, "heap") && !(lock = calloc(1, sizeof *lock))) return 1;
    file = argv[1];
    iters = atoi(argv[2]);
    if (small ? small_stack_run(count, NULL) != 0 : count(NULL) != NULL) return 1;
    if (failed) return 1;
    rmutex_stats_t st;
    memset(&st, 0, sizeof st);
    rmutex_stats(&st, sizeof st);
    printf("done cache_hits=%llu\n", (unsigned long long)st.cache_hits);
    return 0;
}
