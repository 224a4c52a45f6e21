/* swapprog.c -- a pthread counter built with <rmutex/pthread.h>: each run
 * adds ITERS to the number in FILE under a static mutex (read, pause,
 * write), so runs in several processes lose updates unless the mutex
 * excludes them all.  usage: swapprog FILE ITERS */
#define _POSIX_C_SOURCE 200809L
#include <rmutex/pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;

int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    for (int i = 0; i < atoi(argv[2]); i++) {
        if (pthread_mutex_lock(&counter_lock)) return 1;
        long v = 0;
        FILE *f = fopen(argv[1], "r");
        if (f) {
            if (fscanf(f, "%ld", &v) != 1) v = 0;
            fclose(f);
        }
        struct timespec pause = { 0, 300000 };
        nanosleep(&pause, NULL);
        if ((f = fopen(argv[1], "w"))) {
            fprintf(f, "%ld\n", v + 1);
            fclose(f);
        }
        if (pthread_mutex_unlock(&counter_lock)) return 1;
    }
    printf("done\n");
    return 0;
}
