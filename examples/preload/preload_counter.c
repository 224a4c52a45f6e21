/* preload_counter.c -- a plain pthread program: no rmutex in its source or
 * on its link line.
 *
 * Its threads add to a counter kept in a file: each increment locks the
 * global counter_lock, reads the number, sleeps a little, writes it back
 * plus one and unlocks.  Within one process the mutex keeps the total
 * exact; several copies of the program lose each other's updates, because
 * a pthread mutex only excludes the threads of its own process.
 *
 *   preload_counter FILE [ITERS [THREADS]]
 *
 * Under librmutex_preload.so the same binary's counter_lock becomes a
 * Redis lock shared by every copy, and the total is exact again (run.sh
 * shows both):
 *
 *   LD_PRELOAD=librmutex_preload.so \
 *   RMUTEX_PRELOAD='preload_counter: counter_lock=example:preload:counter' \
 *   RMUTEX_URL=redis://127.0.0.1:6379 ./preload_counter /tmp/counter 50 2
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *path;
static int iters = 50;

static void *work(void *arg)
{
    for (int i = 0; i < iters; i++) {
        pthread_mutex_lock(&counter_lock);
        long v = 0;
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%ld", &v) != 1) v = 0;
            fclose(f);
        }
        struct timespec pause = { 0, 500000 }; /* 0.5 ms: the window for a lost update */
        nanosleep(&pause, NULL);
        if ((f = fopen(path, "w"))) {
            fprintf(f, "%ld\n", v + 1);
            fclose(f);
        }
        pthread_mutex_unlock(&counter_lock);
    }
    return arg;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: preload_counter FILE [ITERS [THREADS]]\n");
        return 2;
    }
    path = argv[1];
    if (argc > 2) iters = atoi(argv[2]);
    int threads = argc > 3 ? atoi(argv[3]) : 2;
    if (iters < 1 || threads < 1 || threads > 64) {
        fprintf(stderr, "preload_counter: ITERS >= 1, THREADS in [1, 64]\n");
        return 2;
    }
    pthread_t t[64];
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    return 0;
}
