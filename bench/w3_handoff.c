/* w3_handoff.c -- W3's hand-off to another process with nothing else
 * going on: one holder here, one waiter in a forked process, one run at a
 * time (handoff.c's runs), for a non-fair and a fair mutex, taking turns.
 *
 * W3's contended layouts measure the same path under saturation, where
 * the release call itself queues behind the other processes' scripts in
 * Redis and their threads on the CPU; this measures what the protocol
 * costs: the unlock call -> the waiting process's lock returning, against
 * the pub/sub floor of the same run (a raw PUBLISH -> a subscriber process
 * read it).  The non-fair waiter is told by Redisson's "0" and then takes
 * the lock with one more round trip; the fair waiter is granted the lock
 * by the release and owns it when the message arrives. */
#include "bench.h"
#include "handoff.h"
#include "server.h"

#include <stdio.h>
#include <stdlib.h>

enum { NONFAIR, FAIR, NKIND };
static const char *const label[NKIND] = { "non-fair", "fair" };
static const char *const figure[NKIND] = { "to another process, non-fair, 1 waiter",
                                           "to another process, fair, 1 waiter" };

struct names {
    char lock[NKIND][128];
    char queue[160];
};

static void *open_subjects(void *ctx)
{
    const struct names *n = ctx;
    rmutex_t *m = malloc(NKIND * sizeof *m);
    rmutexattr_t a;
    if (!m || rmutexattr_init(&a)) {
        free(m);
        return NULL;
    }
    rmutexattr_setfair(&a, 1);
    int r = rmutex_init(&m[NONFAIR], n->lock[NONFAIR], NULL);
    if (!r && (r = rmutex_init(&m[FAIR], n->lock[FAIR], &a))) rmutex_destroy(&m[NONFAIR]);
    rmutexattr_destroy(&a);
    if (r) {
        fprintf(stderr, "bench W3 hand-off: init: %s\n", rmutex_detail());
        free(m);
        return NULL;
    }
    return m;
}

static void close_subjects(void *subj)
{
    rmutex_t *m = subj;
    rmutex_destroy(&m[NONFAIR]);
    rmutex_destroy(&m[FAIR]);
    free(m);
}

static int take(void *subj, int kind, int waiter)
{
    (void)waiter;
    return rmutex_lock(&((rmutex_t *)subj)[kind]);
}

static int let_go(void *subj, int kind, int waiter)
{
    (void)waiter;
    return rmutex_unlock(&((rmutex_t *)subj)[kind]);
}

/* The fair waiter is seen in its queue; the non-fair one keeps none. */
static int waiting(redisContext *c, void *ctx, int kind)
{
    const struct names *n = ctx;
    return kind == FAIR ? handoff_queued(c, n->queue) : 0;
}

void w3_handoff_run(const double *floor_us)
{
    static const struct handoff_ops ops = { open_subjects, close_subjects, take, let_go, waiting };
    struct names n;
    lock_name(n.lock[NONFAIR], sizeof n.lock[NONFAIR], "w3:handoff:nonfair");
    lock_name(n.lock[FAIR], sizeof n.lock[FAIR], "w3:handoff:fair");
    snprintf(n.queue, sizeof n.queue, "rmutex_fair_queue:{%s}", n.lock[FAIR]);
    if (bench_configure("")) fprintf(stderr, "bench W3 hand-off: not configured\n");
    handoff_measure_floor("W3", &ops, &n, NKIND, label, figure, floor_us);
}
