/* port.c -- one pthread program, built twice: as is (port_pthread) and with
 * <rmutex/pthread.h> in place of <pthread.h> (port_rmutex).  Nothing else
 * in the source differs.
 *
 * A producer thread hands batches to two consumer threads through a queue
 * guarded by queue_lock and a condition variable; the consumers add each
 * batch to a counter kept in a file under counter_lock (read, pause,
 * write).  Within one process both builds are exact.  Run several copies at
 * once and only port_rmutex stays exact: its mutexes are Redis locks named
 * after where they are defined (see rmutex/pthread.h), the same in every
 * copy.  The queue stays per process (it is in each process's memory);
 * its mutex and condition variable are distributed too, which costs round
 * trips and wakes other copies' threads for nothing (they re-check their
 * own queue) but changes no result.  examples/queue shares the queue
 * itself.
 *
 *   port_pthread FILE [BATCHES]
 *   RMUTEX_URL=redis://127.0.0.1:6379 port_rmutex FILE [BATCHES]
 *
 * run.sh runs 3 copies of each.
 */
#define _POSIX_C_SOURCE 200809L

#ifdef PORT_WITH_RMUTEX
#include <rmutex/pthread.h> /* the only change */
#else
#include <pthread.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define QMAX 8

static pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cv = PTHREAD_COND_INITIALIZER;
static int queue[QMAX], qlen, done;
static const char *path;

static void add_to_file(int n)
{
    pthread_mutex_lock(&counter_lock);
    long v = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%ld", &v) != 1) v = 0;
        fclose(f);
    }
    struct timespec pause = { 0, 500000 };
    nanosleep(&pause, NULL);
    if ((f = fopen(path, "w"))) {
        fprintf(f, "%ld\n", v + n);
        fclose(f);
    }
    pthread_mutex_unlock(&counter_lock);
}

static void *consumer(void *arg)
{
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        while (qlen == 0 && !done) pthread_cond_wait(&queue_cv, &queue_lock);
        if (qlen == 0) { /* done and drained */
            pthread_mutex_unlock(&queue_lock);
            return arg;
        }
        int batch = queue[--qlen];
        pthread_cond_broadcast(&queue_cv); /* room for the producer */
        pthread_mutex_unlock(&queue_lock);
        add_to_file(batch);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s FILE [BATCHES]\n", argv[0]);
        return 2;
    }
    path = argv[1];
    int batches = argc > 2 ? atoi(argv[2]) : 20;
    pthread_t c[2];
    for (int i = 0; i < 2; i++) pthread_create(&c[i], NULL, consumer, NULL);
    for (int i = 0; i < batches; i++) {
        pthread_mutex_lock(&queue_lock);
        while (qlen == QMAX) pthread_cond_wait(&queue_cv, &queue_lock);
        queue[qlen++] = 1 + i % 3; /* batches of 1, 2, 3 */
        pthread_cond_broadcast(&queue_cv);
        pthread_mutex_unlock(&queue_lock);
    }
    pthread_mutex_lock(&queue_lock);
    done = 1;
    pthread_cond_broadcast(&queue_cv);
    pthread_mutex_unlock(&queue_lock);
    for (int i = 0; i < 2; i++) pthread_join(c[i], NULL);
    return 0;
}
