/* listed.c -- the interposers' bodies for mutexes listed in RMUTEX_PRELOAD.
 *
 * The work is done by dmutex.c (local mutex, then Redis); this file adds
 * what is particular to a mutex the shim found by name in somebody else's
 * program:
 *
 *   - The rmutex is made at start, RECURSIVE (dmutex.c), with the
 *     configured name, fair and lease.  Robust only where the program made the mutex robust
 *     itself (pthread_mutexattr_setrobust before pthread_mutex_init): the
 *     program must be ready for EOWNERDEAD.  So ";robust" takes effect in
 *     the pthread_mutex_init of a robust mutex, which makes the rmutex again
 *     as robust; for a mutex that is not robust it is reported once and
 *     ignored (the mutex stays distributed, non-robust).
 *   - A mutex set up with a static initializer never passes through
 *     pthread_mutex_init: its table entry and rmutex exist from the start,
 *     so its first lock is like any other.
 *   - Re-initialization (pthread_mutex_init again, or after destroy)
 *     forgets every hold; initializing a mutex in use is undefined, as in
 *     POSIX.
 *   - A hold found lost (its lease ran out, Redis lost it) is said in one
 *     line: exclusion may have been broken at that moment. */
#include "shim.h"

#include <errno.h>
#include <stddef.h>

/* glibc's __kind bit for a robust mutex (PTHREAD_MUTEX_ROBUST_NORMAL_NP,
 * nptl/pthreadP.h); x86_64 ABI, stable since robust mutexes exist. */
#define GLIBC_KIND_ROBUST 16

static int locally_robust(const pthread_mutex_t *m) { return (m->__data.__kind & GLIBC_KIND_ROBUST) != 0; }

static void warn_robust(struct rm_shim_mutex *sm)
{
    if (__atomic_exchange_n(&sm->robust_warned, 1, __ATOMIC_RELAXED)) return;
    rm_say("'%s': robust ignored: the program did not make this mutex robust "
                "(pthread_mutexattr_setrobust); it is distributed as a non-robust mutex",
                sm->symbol);
}

int rm_shim_make_rmutex(struct rm_shim_mutex *sm, int robust, int fair)
{
    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_settype(&a, RMUTEX_RECURSIVE); /* dmutex.c: one name, many mutexes */
    rmutexattr_setrobust(&a, robust ? RMUTEX_ROBUST : RMUTEX_STALLED);
    rmutexattr_setlease(&a, sm->lease_ms);
    rmutexattr_setfair(&a, fair);
    rmutexattr_setcache(&a, sm->cache);
    int r = rmutex_init(&sm->rm, sm->name, &a);
    rmutexattr_destroy(&a);
    if (!r) __atomic_store_n(&sm->rm_robust, robust, __ATOMIC_RELAXED);
    return r;
}

int rm_shim_init(struct rm_shim_mutex *sm, const pthread_mutexattr_t *attr)
{
    int r = RM_REAL(init)(sm->addr, attr);
    if (r) return r;
    rm_dm_reset(&sm->dm);
    if (!sm->cfg_robust) return 0;
    int want = locally_robust(sm->addr);
    if (!want) warn_robust(sm);
    if (want != __atomic_load_n(&sm->rm_robust, __ATOMIC_RELAXED) && !rm_dm_inside()) {
        /* Nobody may use a mutex while it is initialized, so nobody holds
         * or waits for the rmutex: make it again with the new robustness. */
        if (!rmutex_destroy(&sm->rm) && rm_shim_make_rmutex(sm, want, sm->dm.fair))
            rm_say("'%s': cannot make its lock '%s' again: %s", sm->symbol, sm->name,
                        rmutex_detail());
    }
    return 0;
}

int rm_shim_destroy(struct rm_shim_mutex *sm)
{
    if (rm_dm_held(&sm->dm)) return EBUSY;
    /* The rmutex stays: the program may initialize the mutex again. */
    return RM_REAL(destroy)(sm->addr);
}

int rm_shim_lock(struct rm_shim_mutex *sm, int mode, clockid_t clock, const struct timespec *abs)
{
    if (sm->cfg_robust && !__atomic_load_n(&sm->rm_robust, __ATOMIC_RELAXED)) warn_robust(sm);
    return rm_dm_lock(&rm_shim_real.dm, &sm->dm, sm->addr, &sm->rm, mode, clock, abs);
}

int rm_shim_unlock(struct rm_shim_mutex *sm)
{
    return rm_dm_unlock(&rm_shim_real.dm, &sm->dm, sm->addr, &sm->rm);
}

int rm_shim_consistent(struct rm_shim_mutex *sm)
{
    return rm_dm_consistent(&rm_shim_real.dm, &sm->dm, sm->addr, &sm->rm);
}

int rm_shim_cond_wait(struct rm_shim_mutex *sm, pthread_cond_t *c, int mode, clockid_t clock,
                      const struct timespec *abs)
{
    return rm_dm_cond_wait(&rm_shim_real.dm, &sm->dm, sm->addr, &sm->rm, c, mode, clock, abs);
}

int rm_shim_rcond_wait(struct rm_shim_cond *sc, struct rm_shim_mutex *sm, pthread_mutex_t *m,
                       int mode, clockid_t clock, const struct timespec *abs)
{
    if (!sm) {
        if (!__atomic_exchange_n(&sc->unlisted_warned, 1, __ATOMIC_RELAXED))
            rm_say("'%s' (a listed condition variable) waited on with the mutex at %p, "
                        "which is not listed: EINVAL; list the mutex too", sc->symbol, (void *)m);
        return EINVAL;
    }
    return rm_dm_rcond_wait(&rm_shim_real.dm, &sm->dm, sm->addr, &sm->rm, &sc->rc, mode, clock,
                            abs);
}

int rm_shim_cond_signal(struct rm_shim_cond *sc, int all)
{
    /* The local condition too: a wait that began before the table was
     * published is on it. */
    if (all) RM_REAL(cond_broadcast)(sc->addr);
    else RM_REAL(cond_signal)(sc->addr);
    return all ? rcond_broadcast(&sc->rc) : rcond_signal(&sc->rc);
}

int rm_shim_make_rcond(struct rm_shim_cond *sc, clockid_t clock)
{
    rcondattr_t a;
    rcondattr_init(&a);
    rcondattr_setclock(&a, clock);
    int r = rcond_init(&sc->rc, sc->name, &a);
    rcondattr_destroy(&a);
    return r;
}

int rm_shim_cond_init(struct rm_shim_cond *sc, const pthread_condattr_t *attr)
{
    int r = RM_REAL(cond_init)(sc->addr, attr);
    if (r) return r;
    clockid_t clock = CLOCK_REALTIME;
    if (attr) pthread_condattr_getclock(attr, &clock);
    /* Nobody may use a condition while it is initialized: no wait is on
     * the rcond, which is made again with the attribute's clock. */
    if (!rcond_destroy(&sc->rc) && rm_shim_make_rcond(sc, clock))
        rm_say("'%s': cannot make its condition '%s' again: %s", sc->symbol, sc->name,
                    rmutex_detail());
    return 0;
}

/* ---- lost holds ---- */

static struct rm_shim_mutex *of_rmutex(rmutex_t *rm)
{
    return (struct rm_shim_mutex *)((char *)rm - offsetof(struct rm_shim_mutex, rm));
}

void rm_shim_lost_at_unlock(rmutex_t *rm)
{
    struct rm_shim_mutex *sm = of_rmutex(rm);
    /* With a watchdog lease the callback below has said it already. */
    if (sm->lease_ms)
        rm_say("the hold of '%s' (%s) had run out before it was unlocked: its lease of %lu ms "
               "was too short, another process may have held it meanwhile",
               sm->name, sm->symbol, sm->lease_ms);
}

void rm_shim_lost_callback(rmutex_t *m, const char *name, void *arg)
{
    (void)m;
    (void)arg;
    rm_say("the hold of '%s' was lost while held (lease expired or Redis lost it); another "
           "process may enter it before this one unlocks", name);
}
