/* pthread_swap.c -- the functions behind <rmutex/pthread.h>.
 *
 * A rmutex_pthread_mutex_t is glibc's mutex (rm_local_) plus an rmutex
 * (rm_mutex_) plus dmutex.c's bookkeeping (rm_dm_); every lock call is
 * rm_dm_lock() with glibc's own functions as the "real" ones.  Redis
 * trouble is handled and said as under the preload shim (policy.c: lock
 * waits, trylock EBUSY, timed forms ETIMEDOUT; one line per outage and its
 * end, one per error; RMUTEX_ON_ERROR=abort); a lost hold makes unlock
 * return EPERM.  The library's outage callback is left to the program,
 * which may use it itself.
 *
 * The static initializer fills all three parts at compile time: the rmutex
 * gets its name there and makes its state on first use (librmutex), the
 * local mutex is glibc's static initializer of the requested type.
 * pthread_mutex_init makes the rmutex from the attribute's name, or the
 * symbol the mutex lives in (as a zero-filled one: symname.c), or for heap
 * and stack memory the call site's, and the local mutex from the
 * attribute's real part.
 *
 * A zero-filled mutex ("static pthread_mutex_t m;", or memset to 0: glibc's
 * PTHREAD_MUTEX_INITIALIZER is all zeros, and programs rely on it) has
 * neither.  Its first use names it after the symbol it lives in
 * (symname.c: "<program>:<symbol>"), so it is distributed like any other.
 * Where no symbol covers it (heap memory, a stripped binary) it becomes a
 * process-local mutex, and the process says so once on stderr (say.c),
 * because a mutex that silently stops excluding other processes is worse
 * than a noisy one.
 *
 * A rmutex_pthread_cond_t is an rcond (rm_cond_) plus glibc's condition
 * (rm_local_), named like the mutexes.  A wait with a named mutex is an
 * rcond wait (dmutex.c: the local mutex is let go, the rcond lets go of the
 * name and takes it back, the local mutex is retaken); a wait where either
 * has no name uses the local condition, and signal and broadcast wake
 * both.
 *
 * A rmutex_pthread_rwlock_t is an rrwlock (rm_rwlock_) taken through drwlock.c,
 * named like the mutexes, of the kind the program asked for (glibc's
 * values are the rrwlock's; the default, also of a zero-filled one, is
 * glibc's: readers preferred).  glibc's read-write lock (rm_local_) is used
 * only by one that has no name (zero-filled, in no symbol), which is then
 * process-local, said once. */
#define RMUTEX_PTHREAD_NO_MACROS
#include <rmutex/pthread.h>

#include "dmutex.h"
#include "drwlock.h"
#include "say.h"
#include "symname.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct rm_dm) <= sizeof(((rmutex_pthread_mutex_t *)0)->rm_dm_),
               "struct rm_dm must fit rmutex_pthread_mutex_t.rm_dm_");
_Static_assert(_Alignof(struct rm_dm) <= _Alignof(uintptr_t), "rm_dm alignment");

static const struct rm_dm_real glibc = {
    .lock = pthread_mutex_lock,
    .trylock = pthread_mutex_trylock,
    .timedlock = pthread_mutex_timedlock,
    .clocklock = pthread_mutex_clocklock,
    .unlock = pthread_mutex_unlock,
    .consistent = pthread_mutex_consistent,
    .cond_wait = pthread_cond_wait,
    .cond_timedwait = pthread_cond_timedwait,
    .cond_clockwait = pthread_cond_clockwait,
    .lost = NULL,
};

static struct rm_dm *dm_of(rmutex_pthread_mutex_t *m) { return (struct rm_dm *)(void *)m->rm_dm_; }

/* RMUTEX_CACHE=1: every mutex is cached unless its attribute says not. */
static int cache_by_default(void)
{
    static int v = -1;
    int c = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (c < 0) {
        const char *e = getenv("RMUTEX_CACHE");
        c = e && !strcmp(e, "1");
        __atomic_store_n(&v, c, __ATOMIC_RELAXED);
    }
    return c;
}

/* A zero-filled object at obj (a pthread_mutex_t, _cond_t, _rwlock_t: what)
 * gets the name of the symbol it lives in, installed in *slot with a
 * compare-and-swap (racing first users agree).  0 when no symbol covers
 * it: the caller makes it process-local, and the process says so once per
 * type (warned). */
static int name_by_symbol(const void *obj, const char **slot, int *warned, const char *what)
{
    char *name = rm_symbol_name_of(obj);
    if (!name) {
        if (!__atomic_exchange_n(warned, 1, __ATOMIC_RELAXED))
            rm_say("the zero-filled %s_t at %p is in no symbol (heap memory or a stripped "
                   "binary): it and any like it are process-local; give them names with "
                   "%s_init (docs/porting.md)", what, obj, what);
        return 0;
    }
    const char *expected = NULL;
    if (!__atomic_compare_exchange_n(slot, &expected, name, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        free(name); /* another thread named it first (the same name) */
    /* else: the name lives as long as the program, like a literal's. */
    return 1;
}

/* m as a distributed mutex is ready to use: a zero-filled one gets its
 * name now, or becomes process-local.  Racing first users agree: the name
 * is installed with a compare-and-swap. */
static rmutex_pthread_mutex_t *ready(rmutex_pthread_mutex_t *m)
{
    if (m && !__atomic_load_n(&m->rm_mutex_.rm_state_, __ATOMIC_ACQUIRE) && cache_by_default() &&
        !__atomic_load_n(&dm_of(m)->local_only, __ATOMIC_ACQUIRE) &&
        !(__atomic_load_n(&m->rm_mutex_.rm_kind_, __ATOMIC_RELAXED) & RMUTEX_FLAG_CACHE))
        /* A static initializer's state is made by this caller's first
         * rmutex call, which reads the kind after this. */
        __atomic_fetch_or(&m->rm_mutex_.rm_kind_, RMUTEX_FLAG_CACHE, __ATOMIC_ACQ_REL);
    if (!m || __atomic_load_n(&m->rm_mutex_.rm_state_, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&m->rm_mutex_.rm_name_, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&dm_of(m)->local_only, __ATOMIC_ACQUIRE))
        return m;
    static int warned;
    __atomic_store_n(&m->rm_mutex_.rm_kind_, RMUTEX_RECURSIVE | (cache_by_default() ? RMUTEX_FLAG_CACHE : 0),
                     __ATOMIC_RELAXED);
    if (!name_by_symbol(m, &m->rm_mutex_.rm_name_, &warned, "pthread_mutex"))
        __atomic_store_n(&dm_of(m)->local_only, 1, __ATOMIC_RELEASE);
    return m;
}

/* The name of an object that pthread_*_init initializes without a name in
 * its attribute: the symbol it lives in, as a zero-filled one is named, so
 * that each element of a static array initialized in a loop is a lock of
 * its own; else (heap or stack memory) the call site.  *owned is what to
 * free after the init has copied the name. */
static const char *init_name(const void *obj, const char *site, char **owned)
{
    *owned = rm_symbol_name_of(obj);
    return *owned ? *owned : site;
}

int rmutex_pthread_mutex_init(rmutex_pthread_mutex_t *m, const rmutex_pthread_mutexattr_t *attr,
                              const char *site)
{
    if (!m) return EINVAL;
    int robust = 0, r;
    rmutexattr_t ra;
    rmutexattr_init(&ra);
    rmutexattr_settype(&ra, RMUTEX_RECURSIVE); /* dmutex.c: one name, many mutexes */
    if (attr) {
        pthread_mutexattr_getrobust(&attr->rm_attr_, &robust);
        rmutexattr_setrobust(&ra, robust ? RMUTEX_ROBUST : RMUTEX_STALLED);
        rmutexattr_setfair(&ra, attr->rm_fair_);
        rmutexattr_setlease(&ra, attr->rm_lease_ms_);
    }
    int cache = attr && attr->rm_cache_ >= 0 ? attr->rm_cache_ : cache_by_default();
    rmutexattr_setcache(&ra, cache && !(attr && attr->rm_lease_ms_));
    char *owned = NULL;
    r = rmutex_init(&m->rm_mutex_, attr && attr->rm_name_ ? attr->rm_name_ : init_name(m, site, &owned), &ra);
    free(owned);
    rmutexattr_destroy(&ra);
    if (r) return r;
    if ((r = pthread_mutex_init(&m->rm_local_, attr ? &attr->rm_attr_ : NULL))) {
        rmutex_destroy(&m->rm_mutex_);
        return r;
    }
    memset(m->rm_dm_, 0, sizeof m->rm_dm_);
    dm_of(m)->fair = attr && attr->rm_fair_;
    return 0;
}

int rmutex_pthread_mutex_destroy(rmutex_pthread_mutex_t *m)
{
    if (!m) return EINVAL;
    if (rm_dm_held(dm_of(m))) return EBUSY;
    int r = pthread_mutex_destroy(&m->rm_local_);
    if (r) return r;
    r = rmutex_destroy(&m->rm_mutex_);
    return r == EINVAL ? 0 : r; /* a static mutex never used has no rmutex state yet */
}

int rmutex_pthread_mutex_lock(rmutex_pthread_mutex_t *m)
{
    m = ready(m);
    return rm_dm_lock(&glibc, dm_of(m), &m->rm_local_, &m->rm_mutex_, RM_DM_FOREVER, CLOCK_REALTIME, NULL);
}

int rmutex_pthread_mutex_trylock(rmutex_pthread_mutex_t *m)
{
    m = ready(m);
    return rm_dm_lock(&glibc, dm_of(m), &m->rm_local_, &m->rm_mutex_, RM_DM_TRY, CLOCK_REALTIME, NULL);
}

int rmutex_pthread_mutex_timedlock(rmutex_pthread_mutex_t *m, const struct timespec *abstime)
{
    m = ready(m);
    return rm_dm_lock(&glibc, dm_of(m), &m->rm_local_, &m->rm_mutex_, RM_DM_TIMED, CLOCK_REALTIME,
                      abstime);
}

int rmutex_pthread_mutex_clocklock(rmutex_pthread_mutex_t *m, clockid_t clock,
                                   const struct timespec *abstime)
{
    m = ready(m);
    return rm_dm_lock(&glibc, dm_of(m), &m->rm_local_, &m->rm_mutex_, RM_DM_TIMED, clock, abstime);
}

int rmutex_pthread_mutex_unlock(rmutex_pthread_mutex_t *m)
{
    m = ready(m);
    return rm_dm_unlock(&glibc, dm_of(m), &m->rm_local_, &m->rm_mutex_);
}

int rmutex_pthread_mutex_consistent(rmutex_pthread_mutex_t *m)
{
    m = ready(m);
    return rm_dm_consistent(&glibc, dm_of(m), &m->rm_local_, &m->rm_mutex_);
}

int rmutex_pthread_mutex_getprioceiling(const rmutex_pthread_mutex_t *m, int *ceiling)
{
    return pthread_mutex_getprioceiling(&m->rm_local_, ceiling);
}

int rmutex_pthread_mutex_setprioceiling(rmutex_pthread_mutex_t *m, int ceiling, int *old)
{
    return pthread_mutex_setprioceiling(&m->rm_local_, ceiling, old);
}

/* ---- attributes ---- */

int rmutex_pthread_mutexattr_init(rmutex_pthread_mutexattr_t *a)
{
    a->rm_name_ = NULL;
    a->rm_fair_ = 0;
    a->rm_cache_ = -1;
    a->rm_lease_ms_ = 0;
    return pthread_mutexattr_init(&a->rm_attr_);
}

int rmutex_pthread_mutexattr_destroy(rmutex_pthread_mutexattr_t *a)
{
    return pthread_mutexattr_destroy(&a->rm_attr_);
}

int rmutex_pthread_mutexattr_settype(rmutex_pthread_mutexattr_t *a, int type)
{
    return pthread_mutexattr_settype(&a->rm_attr_, type);
}

int rmutex_pthread_mutexattr_gettype(const rmutex_pthread_mutexattr_t *a, int *type)
{
    return pthread_mutexattr_gettype(&a->rm_attr_, type);
}

int rmutex_pthread_mutexattr_setrobust(rmutex_pthread_mutexattr_t *a, int robust)
{
    return pthread_mutexattr_setrobust(&a->rm_attr_, robust);
}

int rmutex_pthread_mutexattr_getrobust(const rmutex_pthread_mutexattr_t *a, int *robust)
{
    return pthread_mutexattr_getrobust(&a->rm_attr_, robust);
}

int rmutex_pthread_mutexattr_setpshared(rmutex_pthread_mutexattr_t *a, int pshared)
{
    if (pshared == PTHREAD_PROCESS_SHARED) return ENOTSUP;
    return pthread_mutexattr_setpshared(&a->rm_attr_, pshared);
}

int rmutex_pthread_mutexattr_getpshared(const rmutex_pthread_mutexattr_t *a, int *pshared)
{
    return pthread_mutexattr_getpshared(&a->rm_attr_, pshared);
}

int rmutex_pthread_mutexattr_setprotocol(rmutex_pthread_mutexattr_t *a, int protocol)
{
    return pthread_mutexattr_setprotocol(&a->rm_attr_, protocol);
}

int rmutex_pthread_mutexattr_getprotocol(const rmutex_pthread_mutexattr_t *a, int *protocol)
{
    return pthread_mutexattr_getprotocol(&a->rm_attr_, protocol);
}

int rmutex_pthread_mutexattr_setprioceiling(rmutex_pthread_mutexattr_t *a, int ceiling)
{
    return pthread_mutexattr_setprioceiling(&a->rm_attr_, ceiling);
}

int rmutex_pthread_mutexattr_getprioceiling(const rmutex_pthread_mutexattr_t *a, int *ceiling)
{
    return pthread_mutexattr_getprioceiling(&a->rm_attr_, ceiling);
}

int rmutex_pthread_mutexattr_setname(rmutex_pthread_mutexattr_t *a, const char *name)
{
    if (!a || (name && (!*name || strlen(name) > RMUTEX_NAME_MAX))) return EINVAL;
    a->rm_name_ = name;
    return 0;
}

int rmutex_pthread_mutexattr_setcache(rmutex_pthread_mutexattr_t *a, int cache)
{
    if (!a || (cache != 0 && cache != 1)) return EINVAL;
    a->rm_cache_ = cache;
    return 0;
}

int rmutex_pthread_mutexattr_setfair(rmutex_pthread_mutexattr_t *a, int fair)
{
    if (!a || (fair != 0 && fair != 1)) return EINVAL;
    a->rm_fair_ = fair;
    return 0;
}

int rmutex_pthread_mutexattr_setlease(rmutex_pthread_mutexattr_t *a, unsigned long lease_ms)
{
    if (!a || lease_ms > 2147483647UL) return EINVAL;
    a->rm_lease_ms_ = lease_ms;
    return 0;
}

/* ---- condition variables ---- */

/* c as a distributed condition is ready: a zero-filled one is named after
 * its symbol now, or becomes process-local (as ready() for mutexes). */
static rmutex_pthread_cond_t *cond_ready(rmutex_pthread_cond_t *c)
{
    if (!c || __atomic_load_n(&c->rm_cond_.rm_state_, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&c->rm_cond_.rm_name_, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&c->rm_local_only_, __ATOMIC_ACQUIRE))
        return c;
    static int warned;
    if (!name_by_symbol(c, &c->rm_cond_.rm_name_, &warned, "pthread_cond"))
        __atomic_store_n(&c->rm_local_only_, 1, __ATOMIC_RELEASE);
    return c;
}

static int local_cond(const rmutex_pthread_cond_t *c)
{
    return __atomic_load_n(&c->rm_local_only_, __ATOMIC_ACQUIRE) != 0;
}

int rmutex_pthread_cond_init_named(rmutex_pthread_cond_t *c, const pthread_condattr_t *attr,
                                   const char *name)
{
    if (!c) return EINVAL;
    clockid_t clock = CLOCK_REALTIME;
    rcondattr_t ra;
    if (attr) pthread_condattr_getclock(attr, &clock);
    rcondattr_init(&ra);
    int r = rcondattr_setclock(&ra, clock);
    if (!r) r = rcond_init(&c->rm_cond_, name, &ra);
    rcondattr_destroy(&ra);
    if (r) return r;
    c->rm_local_only_ = 0;
    if ((r = pthread_cond_init(&c->rm_local_, attr))) rcond_destroy(&c->rm_cond_);
    return r;
}

int rmutex_pthread_cond_init(rmutex_pthread_cond_t *c, const pthread_condattr_t *attr,
                             const char *site)
{
    if (!c) return EINVAL;
    char *owned = NULL;
    int r = rmutex_pthread_cond_init_named(c, attr, init_name(c, site, &owned));
    free(owned);
    return r;
}

int rmutex_pthread_cond_destroy(rmutex_pthread_cond_t *c)
{
    if (!c) return EINVAL;
    int r = local_cond(c) ? 0 : rcond_destroy(&c->rm_cond_);
    if (r == EINVAL) r = 0; /* a static condition never used has no rcond state yet */
    return r ? r : pthread_cond_destroy(&c->rm_local_);
}

/* Wake the local part too: waits with a mutex that has no name use it. */
int rmutex_pthread_cond_signal(rmutex_pthread_cond_t *c)
{
    c = cond_ready(c);
    if (!c) return EINVAL;
    pthread_cond_signal(&c->rm_local_);
    return local_cond(c) ? 0 : rcond_signal(&c->rm_cond_);
}

int rmutex_pthread_cond_broadcast(rmutex_pthread_cond_t *c)
{
    c = cond_ready(c);
    if (!c) return EINVAL;
    pthread_cond_broadcast(&c->rm_local_);
    return local_cond(c) ? 0 : rcond_broadcast(&c->rm_cond_);
}

/* A wait: on the rcond when both have names, else on the local condition
 * as before (dmutex.c gives the mutex's name up for it). */
static int cond_wait(rmutex_pthread_cond_t *c, rmutex_pthread_mutex_t *m, int mode,
                     clockid_t clock, const struct timespec *abstime)
{
    c = cond_ready(c);
    m = ready(m);
    if (!c || !m) return EINVAL;
    if (local_cond(c) || __atomic_load_n(&dm_of(m)->local_only, __ATOMIC_ACQUIRE))
        return rm_dm_cond_wait(&glibc, dm_of(m), &m->rm_local_, &m->rm_mutex_, &c->rm_local_, mode,
                               clock, abstime);
    return rm_dm_rcond_wait(&glibc, dm_of(m), &m->rm_local_, &m->rm_mutex_, &c->rm_cond_, mode, clock,
                            abstime);
}

int rmutex_pthread_cond_wait(rmutex_pthread_cond_t *c, rmutex_pthread_mutex_t *m)
{
    return cond_wait(c, m, RM_DM_FOREVER, CLOCK_REALTIME, NULL);
}

int rmutex_pthread_cond_timedwait(rmutex_pthread_cond_t *c, rmutex_pthread_mutex_t *m,
                                  const struct timespec *abstime)
{
    return cond_wait(c, m, RM_DM_TIMED, (clockid_t)-1, abstime);
}

int rmutex_pthread_cond_clockwait(rmutex_pthread_cond_t *c, rmutex_pthread_mutex_t *m,
                                  clockid_t clock, const struct timespec *abstime)
{
    return cond_wait(c, m, RM_DM_TIMED, clock, abstime);
}

/* ---- read-write locks ---- */

/* l as a distributed read-write lock is ready: a zero-filled one is named
 * after its symbol now, or becomes process-local (as ready() for mutexes;
 * its kind, 0, is glibc's default: readers preferred). */
static rmutex_pthread_rwlock_t *rw_ready(rmutex_pthread_rwlock_t *l)
{
    if (!l || __atomic_load_n(&l->rm_rwlock_.rm_state_, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&l->rm_rwlock_.rm_name_, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&l->rm_local_only_, __ATOMIC_ACQUIRE))
        return l;
    static int warned;
    if (!name_by_symbol(l, &l->rm_rwlock_.rm_name_, &warned, "pthread_rwlock"))
        __atomic_store_n(&l->rm_local_only_, 1, __ATOMIC_RELEASE);
    return l;
}

static int local_rw(const rmutex_pthread_rwlock_t *l)
{
    return __atomic_load_n(&l->rm_local_only_, __ATOMIC_ACQUIRE) != 0;
}

/* glibc's own call on a process-local one. */
static int local_rw_lock(pthread_rwlock_t *l, int write, int mode, clockid_t clock,
                         const struct timespec *abs)
{
    switch (mode) {
    case RM_DM_TRY: return write ? pthread_rwlock_trywrlock(l) : pthread_rwlock_tryrdlock(l);
    case RM_DM_FOREVER: return write ? pthread_rwlock_wrlock(l) : pthread_rwlock_rdlock(l);
    default:
        return write ? pthread_rwlock_clockwrlock(l, clock, abs) : pthread_rwlock_clockrdlock(l, clock, abs);
    }
}

static int rw_lock(rmutex_pthread_rwlock_t *l, int write, int mode, clockid_t clock,
                   const struct timespec *abs)
{
    if (!(l = rw_ready(l))) return EINVAL;
    if (local_rw(l)) return local_rw_lock(&l->rm_local_, write, mode, clock, abs);
    return rm_drw_lock(&l->rm_rwlock_, write, mode, clock, abs);
}

int rmutex_pthread_rwlock_init(rmutex_pthread_rwlock_t *l, const rmutex_pthread_rwlockattr_t *attr,
                               const char *site)
{
    if (!l) return EINVAL;
    int kind = PTHREAD_RWLOCK_DEFAULT_NP, r;
    rrwlockattr_t ra;
    rrwlockattr_init(&ra);
    if (attr) {
        pthread_rwlockattr_getkind_np(&attr->rm_attr_, &kind);
        rrwlockattr_setlease(&ra, attr->rm_lease_ms_);
    }
    rrwlockattr_setkind_np(&ra, kind); /* glibc's values are the rrwlock's */
    char *owned = NULL;
    r = rrwlock_init(&l->rm_rwlock_, attr && attr->rm_name_ ? attr->rm_name_ : init_name(l, site, &owned), &ra);
    free(owned);
    rrwlockattr_destroy(&ra);
    if (r) return r;
    if ((r = pthread_rwlock_init(&l->rm_local_, attr ? &attr->rm_attr_ : NULL))) {
        rrwlock_destroy(&l->rm_rwlock_);
        return r;
    }
    __atomic_store_n(&l->rm_local_only_, 0, __ATOMIC_RELEASE);
    return 0;
}

int rmutex_pthread_rwlock_destroy(rmutex_pthread_rwlock_t *l)
{
    if (!l) return EINVAL;
    int r = local_rw(l) ? 0 : rrwlock_destroy(&l->rm_rwlock_);
    if (r == EINVAL) r = 0; /* a zero-filled one never used has no rrwlock */
    return r ? r : pthread_rwlock_destroy(&l->rm_local_);
}

int rmutex_pthread_rwlock_rdlock(rmutex_pthread_rwlock_t *l)
{
    return rw_lock(l, 0, RM_DM_FOREVER, CLOCK_REALTIME, NULL);
}

int rmutex_pthread_rwlock_tryrdlock(rmutex_pthread_rwlock_t *l)
{
    return rw_lock(l, 0, RM_DM_TRY, CLOCK_REALTIME, NULL);
}

int rmutex_pthread_rwlock_timedrdlock(rmutex_pthread_rwlock_t *l, const struct timespec *abstime)
{
    return rw_lock(l, 0, RM_DM_TIMED, CLOCK_REALTIME, abstime);
}

int rmutex_pthread_rwlock_clockrdlock(rmutex_pthread_rwlock_t *l, clockid_t clock,
                                      const struct timespec *abstime)
{
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) return EINVAL; /* glibc: at entry */
    return rw_lock(l, 0, RM_DM_TIMED, clock, abstime);
}

int rmutex_pthread_rwlock_wrlock(rmutex_pthread_rwlock_t *l)
{
    return rw_lock(l, 1, RM_DM_FOREVER, CLOCK_REALTIME, NULL);
}

int rmutex_pthread_rwlock_trywrlock(rmutex_pthread_rwlock_t *l)
{
    return rw_lock(l, 1, RM_DM_TRY, CLOCK_REALTIME, NULL);
}

int rmutex_pthread_rwlock_timedwrlock(rmutex_pthread_rwlock_t *l, const struct timespec *abstime)
{
    return rw_lock(l, 1, RM_DM_TIMED, CLOCK_REALTIME, abstime);
}

int rmutex_pthread_rwlock_clockwrlock(rmutex_pthread_rwlock_t *l, clockid_t clock,
                                      const struct timespec *abstime)
{
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) return EINVAL;
    return rw_lock(l, 1, RM_DM_TIMED, clock, abstime);
}

int rmutex_pthread_rwlock_unlock(rmutex_pthread_rwlock_t *l)
{
    if (!(l = rw_ready(l))) return EINVAL;
    return local_rw(l) ? pthread_rwlock_unlock(&l->rm_local_) : rm_drw_unlock(&l->rm_rwlock_);
}

int rmutex_pthread_rwlockattr_init(rmutex_pthread_rwlockattr_t *a)
{
    a->rm_name_ = NULL;
    a->rm_lease_ms_ = 0;
    return pthread_rwlockattr_init(&a->rm_attr_);
}

int rmutex_pthread_rwlockattr_destroy(rmutex_pthread_rwlockattr_t *a)
{
    return pthread_rwlockattr_destroy(&a->rm_attr_);
}

int rmutex_pthread_rwlockattr_setkind_np(rmutex_pthread_rwlockattr_t *a, int kind)
{
    return pthread_rwlockattr_setkind_np(&a->rm_attr_, kind);
}

int rmutex_pthread_rwlockattr_getkind_np(const rmutex_pthread_rwlockattr_t *a, int *kind)
{
    return pthread_rwlockattr_getkind_np(&a->rm_attr_, kind);
}

int rmutex_pthread_rwlockattr_setpshared(rmutex_pthread_rwlockattr_t *a, int pshared)
{
    if (pshared == PTHREAD_PROCESS_SHARED) return ENOTSUP; /* shared through Redis already */
    return pthread_rwlockattr_setpshared(&a->rm_attr_, pshared);
}

int rmutex_pthread_rwlockattr_getpshared(const rmutex_pthread_rwlockattr_t *a, int *pshared)
{
    return pthread_rwlockattr_getpshared(&a->rm_attr_, pshared);
}

int rmutex_pthread_rwlockattr_setname(rmutex_pthread_rwlockattr_t *a, const char *name)
{
    if (!a || (name && (!*name || strlen(name) > RMUTEX_NAME_MAX))) return EINVAL;
    a->rm_name_ = name;
    return 0;
}

int rmutex_pthread_rwlockattr_setlease(rmutex_pthread_rwlockattr_t *a, unsigned long lease_ms)
{
    if (!a || lease_ms > 2147483647UL) return EINVAL;
    a->rm_lease_ms_ = lease_ms;
    return 0;
}
