/* preload.c -- the functions librmutex_preload.so exports: the interposed
 * pthread calls, and nothing else (preload.map hides every other symbol,
 * librmutex's and hiredis's included).
 *
 * The exports are unversioned, so they stand in front of both the old
 * references (pthread_mutex_trylock@GLIBC_2.2.5) and the new ones
 * (pthread_mutex_trylock@GLIBC_2.34) of the programs and libraries they
 * are preloaded into.
 *
 * Each one is the fast path of table.c: a mutex that is not listed goes
 * straight on to the real function (a tail call).  librmutex's own
 * internal mutexes, hiredis's and libc's callers arrive here too (calls
 * inside this object bind to these exports); they are never listed, so
 * they cost the same check and can never recurse into Redis. */
#include "shim.h"

#include <time.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sm, 1)) return RM_REAL(init)(m, attr);
    return rm_shim_init(sm, attr);
}

EXPORT int pthread_mutex_destroy(pthread_mutex_t *m)
{
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sm, 1)) return RM_REAL(destroy)(m);
    return rm_shim_destroy(sm);
}

EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sm, 1)) return RM_REAL(dm.lock)(m);
    return rm_shim_lock(sm, RM_DM_FOREVER, CLOCK_REALTIME, NULL);
}

EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sm, 1)) return RM_REAL(dm.trylock)(m);
    return rm_shim_lock(sm, RM_DM_TRY, CLOCK_REALTIME, NULL);
}

EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sm, 1)) return RM_REAL(dm.timedlock)(m, abstime);
    return rm_shim_lock(sm, RM_DM_TIMED, CLOCK_REALTIME, abstime);
}

EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock,
                                   const struct timespec *abstime)
{
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sm, 1)) return RM_REAL(dm.clocklock)(m, clock, abstime);
    return rm_shim_lock(sm, RM_DM_TIMED, clock, abstime);
}

EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sm, 1)) return RM_REAL(dm.unlock)(m);
    return rm_shim_unlock(sm);
}

EXPORT int pthread_mutex_consistent(pthread_mutex_t *m)
{
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sm, 1)) return RM_REAL(dm.consistent)(m);
    return rm_shim_consistent(sm);
}

EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sm, 1)) return RM_REAL(dm.cond_wait)(c, m);
    return rm_shim_cond_wait(sm, c, RM_DM_FOREVER, CLOCK_REALTIME, NULL);
}

EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  const struct timespec *abstime)
{
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sm, 1)) return RM_REAL(dm.cond_timedwait)(c, m, abstime);
    return rm_shim_cond_wait(sm, c, RM_DM_TIMED, (clockid_t)-1, abstime);
}

EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
                                  const struct timespec *abstime)
{
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sm, 1)) return RM_REAL(dm.cond_clockwait)(c, m, clock, abstime);
    return rm_shim_cond_wait(sm, c, RM_DM_TIMED, clock, abstime);
}
