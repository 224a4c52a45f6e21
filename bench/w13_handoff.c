/* w13_handoff.c -- W13's hand-off latency: a waiter in another process
 * gets in after the holder lets go.
 *
 * Three directions, taking turns run by run: a writer waiting behind a read
 * hold (read unlock -> the writer's wrlock returns), a reader waiting behind
 * a write hold (write unlock -> the reader's rdlock returns), and for
 * comparison a non-fair mutex's waiter behind its holder (unlock -> its
 * lock returns).  This process holds; a forked process waits.  Each run:
 * take the hold, let the waiter call, see it queued in Redis (the rwlock's
 * queue zset; the mutex keeps no queue), give it 10 ms more to be asleep,
 * unlock; the time is from this unlock returning to the waiter's lock
 * returning, CLOCK_MONOTONIC in both processes (it can be negative: the
 * release's message can reach the waiter before its reply reaches the
 * holder).  Per repetition, 60 runs of each direction (20 with --quick):
 * their p50 and p90, in ms and in RTT of this run.  The runs are
 * handoff.c's (shared with W15). */
#include "bench.h"
#include "handoff.h"
#include "server.h"
#include "w13.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RD_TO_WR, WR_TO_RD, MUTEX_TO_MUTEX, NDIR };
static const char *const dir_name[NDIR] = {
    "read unlock → waiting writer in", "write unlock → waiting reader in",
    "mutex unlock → waiting locker in (non-fair, for comparison)",
};

struct names {
    char rw[128], mutex[128], queue[160];
};

struct subjects {
    rrwlock_t l;
    rmutex_t m;
};

static void *open_subjects(void *ctx)
{
    const struct names *n = ctx;
    struct subjects *o = malloc(sizeof *o);
    if (!o || rrwlock_init(&o->l, n->rw, NULL)) {
        fprintf(stderr, "bench W13 hand-off: init: %s\n", rmutex_detail());
        free(o);
        return NULL;
    }
    if (rmutex_init(&o->m, n->mutex, NULL)) {
        fprintf(stderr, "bench W13 hand-off: init: %s\n", rmutex_detail());
        rrwlock_destroy(&o->l);
        free(o);
        return NULL;
    }
    return o;
}

static void close_subjects(void *subj)
{
    struct subjects *o = subj;
    rrwlock_destroy(&o->l);
    rmutex_destroy(&o->m);
    free(o);
}

/* The holder takes a read before a waiting writer, a write before a
 * waiting reader. */
static int take(void *subj, int dir, int waiter)
{
    struct subjects *o = subj;
    if (dir == MUTEX_TO_MUTEX) return rmutex_lock(&o->m);
    return (dir == RD_TO_WR) == waiter ? rrwlock_wrlock(&o->l) : rrwlock_rdlock(&o->l);
}

static int let_go(void *subj, int dir, int waiter)
{
    struct subjects *o = subj;
    (void)waiter;
    return dir == MUTEX_TO_MUTEX ? rmutex_unlock(&o->m) : rrwlock_unlock(&o->l);
}

/* The rwlock's waiters queue; the mutex keeps no queue. */
static int waiting(redisContext *c, void *ctx, int dir)
{
    const struct names *n = ctx;
    return dir == MUTEX_TO_MUTEX ? 0 : handoff_queued(c, n->queue);
}

void w13_handoff_run(void)
{
    static const struct handoff_ops ops = { open_subjects, close_subjects, take, let_go, waiting };
    struct names n;
    lock_name(n.rw, sizeof n.rw, "w13:handoff:rw");
    lock_name(n.mutex, sizeof n.mutex, "w13:handoff:mutex");
    snprintf(n.queue, sizeof n.queue, "rmutex_rw_queue:{%s}", n.rw);
    if (bench_configure("")) fprintf(stderr, "bench W13 hand-off: not configured\n");
    handoff_measure("W13", &ops, &n, NDIR, dir_name, dir_name);
}
