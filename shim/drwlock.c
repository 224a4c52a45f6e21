/* drwlock.c -- a distributed pthread read-write lock, for the header swap
 * (pthread_swap.c) and the preload shim (rwlisted.c).
 *
 * DESIGN
 * ------
 * Unlike a mutex (dmutex.c), a read-write lock needs no local part: an
 * rrwlock already excludes the threads of its own process (it counts each
 * thread's reads and knows its writer), answers the pthread rules itself
 * (a re-read is counted, wrlock by a reader or the writer is EDEADLK, an
 * unlock by a thread that holds nothing EPERM) and no pthread call waits
 * on a read-write lock the way pthread_cond_wait waits on a mutex.  So a
 * distributed pthread_rwlock_t is the rrwlock alone, and this file adds
 * only what a ported program needs around it: Redis trouble never reaches
 * the program as an error (take.c: lock waits, trylock EBUSY, timed forms
 * ETIMEDOUT, one line per problem, RMUTEX_ON_ERROR=abort).  The wait is
 * not sliced: an rrwlock's waiters queue in Redis, and giving up a wait
 * would lose the place (and a writer that leaves lets the readers behind
 * it go).
 *
 * While a thread is in librmutex for a read-write lock it is "inside"
 * (dmutex.c): a listed mutex met there is used as a plain local mutex. */
#include "drwlock.h"
#include "dmutex.h"
#include "policy.h"
#include "take.h"

#include <errno.h>

static int rd_try(void *l) { return rrwlock_tryrdlock(l); }
static int rd_forever(void *l) { return rrwlock_rdlock(l); }
static int rd_until(void *l, const struct timespec *t) { return rrwlock_clockrdlock(l, CLOCK_MONOTONIC, t); }
static int wr_try(void *l) { return rrwlock_trywrlock(l); }
static int wr_forever(void *l) { return rrwlock_wrlock(l); }
static int wr_until(void *l, const struct timespec *t) { return rrwlock_clockwrlock(l, CLOCK_MONOTONIC, t); }

static const struct rm_take_ops reading = { rd_try, rd_forever, rd_until, RM_POLICY_RWLOCKS };
static const struct rm_take_ops writing = { wr_try, wr_forever, wr_until, RM_POLICY_RWLOCKS };

int rm_drw_lock(rrwlock_t *l, int write, int mode, clockid_t clock, const struct timespec *abstime)
{
    int was = rm_dm_inside_set(1);
    int r = rm_take(write ? &writing : &reading, l, 0, mode, clock, abstime);
    rm_dm_inside_set(was);
    return r;
}

int rm_drw_unlock(rrwlock_t *l)
{
    int was = rm_dm_inside_set(1);
    int r = rrwlock_unlock(l);
    rm_dm_inside_set(was);
    if (r == EPERM || r == EINVAL) return r;
    if (r) rm_policy_error(r, rmutex_detail());
    return 0;
}
