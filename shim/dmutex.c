/* dmutex.c -- a distributed pthread mutex: the Redis lock (the name)
 * first, then the local mutex.
 *
 * DESIGN
 * ------
 * A distributed mutex is the program's own pthread_mutex_t (the "local"
 * mutex, called through the real glibc functions) plus an rmutex_t.  Lock
 * takes the name in Redis first and the local mutex second; unlock gives
 * the local mutex back first and the name second.  So:
 *
 *   - a name is one lock: several pthread mutexes may share one name (the
 *     mutexes a loop initializes at one call site under the header swap, two
 *     listed symbols with one name under the shim).  They serialize each
 *     other across and within processes, and since the name is always taken
 *     before any local mutex of it, sharing a name adds no lock-order
 *     deadlock: a thread that holds the name takes the local mutexes of that
 *     name without contention (no other thread of the process can hold one);
 *   - the rmutex is RECURSIVE: a thread holding the name through one mutex
 *     locks another mutex of the same name by counting one more level of the
 *     name (rmutex.h: a name is one lock), then taking that local mutex;
 *   - the mutex type is the local mutex's: a relock of the same mutex by its
 *     holder goes to the local mutex alone -- ERRORCHECK fails with EDEADLK,
 *     RECURSIVE counts locally (depth) and never reaches Redis, NORMAL
 *     deadlocks as in glibc; robust owner death inside the process shows up
 *     as the local EOWNERDEAD;
 *   - condition variables keep working: glibc's pthread_cond_*wait releases
 *     and retakes the local mutex through internal calls, so the name is
 *     given up before the real wait and, after it, the local mutex is let go
 *     again, the name taken, and the local mutex retaken -- in the one order
 *     (also when the thread is cancelled in the wait, by a cleanup handler
 *     that runs after glibc has retaken the local mutex and before the
 *     program's own cleanup handlers, which usually unlock).  A thread that
 *     waits while it also holds another mutex of the same name keeps the
 *     name for the wait (one level of it is given up).
 *
 * If a part fails (trylock busy, timeout) what was taken is given back and
 * the call fails: there is never a local hold without the Redis hold
 * except for the "inside" case below.  If the local acquisition reported
 * EOWNERDEAD and the call fails after all, the mutex is first made
 * consistent and the owner death is handed on (pending_dead) to the next
 * successful locker, who gets EOWNERDEAD in turn; otherwise the failed
 * attempt would have made the local mutex not recoverable for everyone.
 *
 * Ownership: holder is pthread_self() of the thread that holds both parts.
 * An unlock by another thread while holder is set is refused with EPERM
 * whatever the type (for NORMAL mutexes this is undefined behaviour in
 * POSIX; releasing somebody else's Redis hold is not possible).  An unlock
 * while holder is 0 goes to the local mutex alone: that hold was taken
 * without Redis (see "inside"), or there is none and glibc answers.
 *
 * "inside": a thread-local flag set while this thread runs librmutex code.
 * If that code meets a distributed mutex (an allocator that locks one, say)
 * the mutex is used as a plain local mutex instead of recursing.
 *
 * Redis trouble never reaches the program as an error: ported code does
 * not check what a lock returns.  The name is taken through take.c, which
 * sorts every answer of librmutex into one a pthread call may give and
 * waits through outages and refusals (a fair lock's wait is not sliced:
 * giving it up would lose the place in the queue).  A condition wait
 * that Redis cannot serve returns a spurious wake-up with the mutex held
 * again (after a pause with the name let go, if the refusal came before
 * the wait let go of it). */
#include "dmutex.h"
#include "policy.h"
#include "take.h"

#include <errno.h>
#include <stdint.h>

#define COND_PAUSE_MS 250 /* a condition wait refused: the spurious wake-up's pause */

#ifdef RM_DM_INITIAL_EXEC
#define RM_TLS __thread __attribute__((tls_model("initial-exec")))
#else
#define RM_TLS __thread
#endif

static RM_TLS int inside;

int rm_dm_inside(void) { return inside; }

int rm_dm_inside_set(int on)
{
    int was = inside;
    inside = on;
    return was;
}

/* The local mutex alone: inside librmutex, or a mutex with no name. */
static int local_path(const struct rm_dm *dm)
{
    return inside || __atomic_load_n(&dm->local_only, __ATOMIC_ACQUIRE);
}

static uintptr_t self_id(void) { return (uintptr_t)pthread_self(); }

static uintptr_t holder_of(const struct rm_dm *dm)
{
    return __atomic_load_n(&dm->holder, __ATOMIC_RELAXED);
}

static void set_holder(struct rm_dm *dm, uintptr_t h)
{
    __atomic_store_n(&dm->holder, h, __ATOMIC_RELAXED);
}

int rm_dm_held_by_self(const struct rm_dm *dm) { return holder_of(dm) == self_id(); }
int rm_dm_held(const struct rm_dm *dm) { return holder_of(dm) != 0; }

void rm_dm_reset(struct rm_dm *dm)
{
    set_holder(dm, 0);
    dm->depth = 0;
    dm->remote_dead = dm->local_dead = dm->virt_dead = dm->pending_dead = 0;
}

/* ---- Redis part ---- */

typedef rm_take_ns nsec;

static int rm_try(void *rm) { return rmutex_trylock(rm); }
static int rm_forever(void *rm) { return rmutex_lock(rm); }
static int rm_until(void *rm, const struct timespec *mono_abs)
{
    return rmutex_clocklock(rm, CLOCK_MONOTONIC, mono_abs);
}
static const struct rm_take_ops rmutex_ops = { rm_try, rm_forever, rm_until, RM_POLICY_MUTEXES };

/* Take the name (take.c): a fair lock's wait is not sliced. */
static int remote_acquire(rmutex_t *rm, int fair, int mode, clockid_t clock,
                          const struct timespec *abs)
{
    return rm_take(&rmutex_ops, rm, !fair, mode, clock, abs);
}

/* A release's answer, for the program: 0, or EPERM when the hold had been
 * lost and the owner has no lost hook.  Any other error is the policy's
 * (said once); the local mutex is let go of either way, and the name
 * lapses with its lease. */
static int released(const struct rm_dm_real *real, rmutex_t *rm, int r)
{
    if (r == EPERM) {
        if (!real->lost) return EPERM;
        real->lost(rm);
        return 0;
    }
    if (r) rm_policy_error(r, rmutex_detail());
    return 0;
}

/* ---- lock / unlock ---- */

static int local_acquire(const struct rm_dm_real *real, pthread_mutex_t *local, int mode,
                         clockid_t clock, const struct timespec *abs)
{
    switch (mode) {
    case RM_DM_TRY: return real->trylock(local);
    case RM_DM_FOREVER: return real->lock(local);
    default:
        return clock == CLOCK_REALTIME ? real->timedlock(local, abs)
                                       : real->clocklock(local, clock, abs);
    }
}

/* Give one level of the name back, as librmutex code. */
static int remote_release(rmutex_t *rm)
{
    inside = 1;
    int r = rmutex_unlock(rm);
    inside = 0;
    return r;
}

int rm_dm_lock(const struct rm_dm_real *real, struct rm_dm *dm, pthread_mutex_t *local,
               rmutex_t *rm, int mode, clockid_t clock, const struct timespec *abstime)
{
    if (local_path(dm)) return local_acquire(real, local, mode, clock, abstime);
    uintptr_t self = self_id();
    /* holder first: only the holder writes depth, so only it may read it
     * without the local mutex. */
    if (holder_of(dm) == self && dm->depth > 0) {
        /* A relock by the holder: the local mutex's type answers
         * (RECURSIVE counts, ERRORCHECK EDEADLK, NORMAL deadlocks). */
        int lr = local_acquire(real, local, mode, clock, abstime);
        if (!lr) dm->depth++;
        return lr;
    }
    inside = 1;
    int rr = remote_acquire(rm, dm->fair, mode, clock, abstime);
    inside = 0;
    if (rr != 0 && rr != EOWNERDEAD) return rr;

    int lr = local_acquire(real, local, mode, clock, abstime);
    if (lr != 0 && lr != EOWNERDEAD) {
        remote_release(rm);
        return lr;
    }
    if (lr == EOWNERDEAD) {
        /* The previous local owner died: whatever it held is gone. */
        dm->virt_dead = 0;
        dm->local_dead = 1;
    } else {
        dm->local_dead = 0;
    }
    dm->depth = 1;
    dm->remote_dead = rr == EOWNERDEAD;
    if (dm->pending_dead) {
        dm->pending_dead = 0;
        dm->virt_dead = 1;
    }
    set_holder(dm, self);
    return dm->local_dead || dm->remote_dead || dm->virt_dead ? EOWNERDEAD : 0;
}

int rm_dm_unlock(const struct rm_dm_real *real, struct rm_dm *dm, pthread_mutex_t *local,
                 rmutex_t *rm)
{
    if (local_path(dm)) return real->unlock(local); /* taken local-only */
    uintptr_t h = holder_of(dm);
    if (h != self_id()) return h ? EPERM : real->unlock(local);
    if (dm->depth > 1) {
        dm->depth--;
        return real->unlock(local);
    }
    dm->depth = 0;
    set_holder(dm, 0);
    if (dm->virt_dead) {
        /* Released without pthread_mutex_consistent: the death stays. */
        dm->virt_dead = 0;
        dm->pending_dead = 1;
    }
    dm->remote_dead = 0;
    dm->local_dead = 0;
    int lr = real->unlock(local);
    int ur = released(real, rm, remote_release(rm));
    return lr ? lr : ur;
}

int rm_dm_consistent(const struct rm_dm_real *real, struct rm_dm *dm, pthread_mutex_t *local,
                     rmutex_t *rm)
{
    if (local_path(dm) || holder_of(dm) != self_id() ||
        !(dm->local_dead || dm->remote_dead || dm->virt_dead))
        return real->consistent(local);
    int r = 0;
    if (dm->local_dead) {
        r = real->consistent(local);
        if (!r) dm->local_dead = 0;
    }
    if (!r && dm->remote_dead) {
        inside = 1;
        r = rmutex_consistent(rm);
        inside = 0;
        if (!r) dm->remote_dead = 0;
    }
    if (!r) dm->virt_dead = 0;
    return r;
}

/* ---- condition variables ---- */

struct cond_ctx {
    const struct rm_dm_real *real;
    struct rm_dm *dm;
    pthread_mutex_t *local;
    rmutex_t *rm;
    unsigned depth;
};

/* glibc has retaken the local mutex after the wait: let it go, take the
 * name, take the local mutex again -- the one order, name first.  The local
 * mutex is held again whatever the name's answer. */
static int retake(struct cond_ctx *c)
{
    c->real->unlock(c->local);
    inside = 1;
    int r = remote_acquire(c->rm, c->dm->fair, RM_DM_FOREVER, CLOCK_MONOTONIC, NULL);
    inside = 0;
    int lr = c->real->lock(c->local);
    if (lr == EOWNERDEAD) c->dm->local_dead = 1;
    if (r == 0 || r == EOWNERDEAD) {
        c->dm->depth = c->depth;
        c->dm->remote_dead = r == EOWNERDEAD;
        set_holder(c->dm, self_id());
    }
    return r;
}

/* Cancelled in the wait: glibc has retaken the local mutex by now. */
static void cond_cancelled(void *p) { retake(p); }

int rm_dm_cond_wait(const struct rm_dm_real *real, struct rm_dm *dm, pthread_mutex_t *local,
                    rmutex_t *rm, pthread_cond_t *cond, int mode,
                    clockid_t clock, const struct timespec *abstime)
{
    if (local_path(dm) || holder_of(dm) != self_id()) {
        /* Not ours through Redis: glibc decides (EPERM for ERRORCHECK, a
         * local-only hold, or undefined behaviour as in plain pthreads). */
        if (mode == RM_DM_FOREVER) return real->cond_wait(cond, local);
        if (clock == (clockid_t)-1) return real->cond_timedwait(cond, local, abstime);
        return real->cond_clockwait(cond, local, clock, abstime);
    }
    struct cond_ctx ctx = { real, dm, local, rm, dm->depth };
    dm->depth = 0;
    set_holder(dm, 0);
    released(real, rm, remote_release(rm));

    int r;
    pthread_cleanup_push(cond_cancelled, &ctx);
    if (mode == RM_DM_FOREVER) r = real->cond_wait(cond, local);
    else if (clock == (clockid_t)-1) r = real->cond_timedwait(cond, local, abstime);
    else r = real->cond_clockwait(cond, local, clock, abstime);
    pthread_cleanup_pop(0);

    if (r == EOWNERDEAD) {
        /* Made consistent before retake() lets it go for a moment (else it
         * would become not recoverable); the owner death is still reported. */
        real->consistent(local);
        dm->local_dead = 1;
    }
    int rr = retake(&ctx);
    if (rr != 0 && rr != EOWNERDEAD) return rr; /* the local mutex alone is held */
    if (rr == EOWNERDEAD && r == 0) r = EOWNERDEAD;
    return r;
}

/* ---- distributed condition variables ---- */

struct rcond_ctx {
    const struct rm_dm_real *real;
    struct rm_dm *dm;
    pthread_mutex_t *local;
    unsigned depth;
};

/* The name is held again (or could not be retaken: r): take the local
 * mutex back at every level. */
static void rcond_retake_local(struct rcond_ctx *c, int r)
{
    inside = 0;
    for (unsigned i = 0; i < c->depth; i++) {
        int lr = c->real->lock(c->local);
        if (lr == EOWNERDEAD) c->dm->local_dead = 1;
    }
    if (r == 0 || r == EOWNERDEAD) {
        c->dm->depth = c->depth;
        c->dm->remote_dead = r == EOWNERDEAD;
        set_holder(c->dm, self_id());
    }
}

/* Cancelled in the wait: rcond's own cleanup has taken the name back. */
static void rcond_cancelled(void *p) { rcond_retake_local(p, 0); }

int rm_dm_rcond_wait(const struct rm_dm_real *real, struct rm_dm *dm, pthread_mutex_t *local,
                     rmutex_t *rm, rcond_t *rc, int mode, clockid_t clock,
                     const struct timespec *abstime)
{
    if (local_path(dm) || holder_of(dm) != self_id()) return EPERM;
    unsigned names = 0;
    if (rmutex_holdcount(rm, &names) == 0 && names > 1) return EINVAL;
    struct rcond_ctx ctx = { real, dm, local, dm->depth };
    dm->depth = 0;
    set_holder(dm, 0);
    for (unsigned i = 0; i < ctx.depth; i++) real->unlock(local);

    int r;
    pthread_cleanup_push(rcond_cancelled, &ctx);
    inside = 1;
    if (mode == RM_DM_FOREVER) r = rcond_wait(rc, rm);
    else if (clock == (clockid_t)-1) r = rcond_timedwait(rc, rm, abstime);
    else r = rcond_clockwait(rc, rm, clock, abstime);
    pthread_cleanup_pop(0);
    if (rm_take_final(r) || r == ETIMEDOUT || r == EINVAL || r == EPERM) {
        /* Answered: EINVAL (the condition is bound to another mutex) and
         * ETIMEDOUT come with the name held. */
        rcond_retake_local(&ctx, r == ETIMEDOUT || r == EINVAL ? 0 : r);
        return r;
    }
    /* Redis could not be used (said by settle): a spurious wake-up, with
     * the name held again whatever it takes.  Refused before the wait let
     * go of the name, it is let go of for a pause first, so that the
     * program's loop on its predicate lets other threads and processes in
     * rather than spinning on a refusal. */
    rm_take_settle(r);
    names = 0;
    inside = 1;
    if (!rmutex_holdcount(rm, &names) && names) {
        released(real, rm, rmutex_unlock(rm));
        rm_take_pause_until(rm_take_now(CLOCK_MONOTONIC) + (nsec)COND_PAUSE_MS * 1000000);
    }
    r = remote_acquire(rm, dm->fair, RM_DM_FOREVER, CLOCK_MONOTONIC, NULL);
    rcond_retake_local(&ctx, r);
    return r;
}
