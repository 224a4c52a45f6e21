/* progress.c -- the waiting line of rmutex run.
 *
 * DESIGN
 * ------
 * While run waits on a terminal (stderr a tty, not -q), a thread rewrites
 * one line each second: whom it waits for, the lease the holder has left,
 * its place in a fair mutex's or a read-write lock's queue, how long it
 * has waited.  The line is cleared
 * when the wait ends.  The thread blocks every signal; it only reads
 * (rmutex_inspect).  Not a terminal: no thread, nothing printed (outages
 * are told apart, common.c). */
#include "cli.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct progress {
    const char *name;
    const char *queue; /* "fair", "queue" (a read-write lock's) or NULL: no place shown */
    char owner[64];
    pthread_t t;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, started;
    int64_t since;
};

static void *progress_main(void *arg)
{
    struct progress *p = arg;
    pthread_mutex_lock(&p->mu);
    for (int shown = 0;;) {
        struct timespec at;
        clock_gettime(CLOCK_REALTIME, &at);
        at.tv_sec += 1;
        while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &at) != ETIMEDOUT) {
        }
        if (p->stop) {
            if (shown) fprintf(stderr, "\r\033[K");
            break;
        }
        pthread_mutex_unlock(&p->mu);
        rmutex_lockinfo_t in;
        int r = rmutex_inspect(p->name, &in, sizeof in);
        int64_t waited = (mono_ns() - p->since) / 1000000000;
        char place[64] = "";
        if (!r && p->queue) {
            unsigned ahead = in.queue_len;
            for (unsigned i = 0; i < in.queue_shown; i++)
                if (!strncmp(in.queue[i], p->owner, strlen(p->owner)) &&
                    in.queue[i][strlen(p->owner)] == '|')
                    ahead = i;
            snprintf(place, sizeof place, "; %u ahead (%s)", ahead, p->queue);
        }
        if (r) fprintf(stderr, "\rrmutex: waiting for %s (Redis: %s) %02lld:%02lld\033[K", p->name,
                       rmutex_detail(), (long long)(waited / 60), (long long)(waited % 60));
        else if (in.held) {
            char who[160];
            struct holder h = HOLDER_OF(&in);
            holder_name(&h, who, sizeof who);
            fprintf(stderr, "\rrmutex: waiting for %s -- held by %s, lease %.0fs left%s %02lld:%02lld\033[K",
                    p->name, who, (double)in.ttl_ms / 1000, place, (long long)(waited / 60),
                    (long long)(waited % 60));
        }
        else
            fprintf(stderr, "\rrmutex: waiting for %s -- free now%s %02lld:%02lld\033[K", p->name, place,
                    (long long)(waited / 60), (long long)(waited % 60));
        fflush(stderr);
        shown = 1;
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct progress *progress_start(const char *name, const char *queue)
{
    if (g.quiet || !isatty(2)) return NULL;
    struct progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->name = name;
    p->queue = queue;
    p->since = mono_ns();
    rmutex_owner_id(p->owner, sizeof p->owner);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    p->started = pthread_create(&p->t, NULL, progress_main, p) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!p->started) {
        progress_stop(p);
        return NULL;
    }
    return p;
}

void progress_stop(struct progress *p)
{
    if (!p) return;
    if (p->started) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->t, NULL);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
