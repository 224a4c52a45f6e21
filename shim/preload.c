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
#include "drwlock.h"
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
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

/* A wait: a listed condition goes through rcond; otherwise a listed mutex
 * gives up its name for glibc's wait (dmutex.c); otherwise glibc alone. */
EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    struct rm_shim_cond *sc = rm_shim_find_cond(c);
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sc && !sm, 1)) return RM_REAL(dm.cond_wait)(c, m);
    if (sc) return rm_shim_rcond_wait(sc, sm, m, RM_DM_FOREVER, CLOCK_REALTIME, NULL);
    return rm_shim_cond_wait(sm, c, RM_DM_FOREVER, CLOCK_REALTIME, NULL);
}

EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  const struct timespec *abstime)
{
    struct rm_shim_cond *sc = rm_shim_find_cond(c);
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sc && !sm, 1)) return RM_REAL(dm.cond_timedwait)(c, m, abstime);
    if (sc) return rm_shim_rcond_wait(sc, sm, m, RM_DM_TIMED, (clockid_t)-1, abstime);
    return rm_shim_cond_wait(sm, c, RM_DM_TIMED, (clockid_t)-1, abstime);
}

EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
                                  const struct timespec *abstime)
{
    struct rm_shim_cond *sc = rm_shim_find_cond(c);
    struct rm_shim_mutex *sm = rm_shim_find(m);
    if (__builtin_expect(!sc && !sm, 1)) return RM_REAL(dm.cond_clockwait)(c, m, clock, abstime);
    if (sc) return rm_shim_rcond_wait(sc, sm, m, RM_DM_TIMED, clock, abstime);
    return rm_shim_cond_wait(sm, c, RM_DM_TIMED, clock, abstime);
}

EXPORT int pthread_cond_signal(pthread_cond_t *c)
{
    struct rm_shim_cond *sc = rm_shim_find_cond(c);
    if (__builtin_expect(!sc, 1)) return RM_REAL(cond_signal)(c);
    return rm_shim_cond_signal(sc, 0);
}

EXPORT int pthread_cond_broadcast(pthread_cond_t *c)
{
    struct rm_shim_cond *sc = rm_shim_find_cond(c);
    if (__builtin_expect(!sc, 1)) return RM_REAL(cond_broadcast)(c);
    return rm_shim_cond_signal(sc, 1);
}

EXPORT int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *attr)
{
    struct rm_shim_cond *sc = rm_shim_find_cond(c);
    if (__builtin_expect(!sc, 1)) return RM_REAL(cond_init)(c, attr);
    return rm_shim_cond_init(sc, attr);
}

/* destroy of a listed condition is glibc's: the rcond was made at start
 * and lives as long as the symbol (the program may initialize it again). */

EXPORT int pthread_cond_destroy(pthread_cond_t *c)
{
    return RM_REAL(cond_destroy)(c);
}

/* ---- read-write locks: a listed one is an rrwlock alone (drwlock.c) ---- */

EXPORT int pthread_rwlock_init(pthread_rwlock_t *l, const pthread_rwlockattr_t *attr)
{
    struct rm_shim_rwlock *sl = rm_shim_find_rwlock(l);
    if (__builtin_expect(!sl, 1)) return RM_REAL(rw.init)(l, attr);
    return rm_shim_rw_init(sl, attr);
}

EXPORT int pthread_rwlock_destroy(pthread_rwlock_t *l)
{
    struct rm_shim_rwlock *sl = rm_shim_find_rwlock(l);
    if (__builtin_expect(!sl, 1)) return RM_REAL(rw.destroy)(l);
    return rm_shim_rw_destroy(sl);
}

/* One interposer: unlisted, glibc's call (args); listed, drwlock.c's. */
#define RW_LOCK(fn, write, mode, params, args, clock, abs)                \
    EXPORT int pthread_rwlock_##fn params                                 \
    {                                                                     \
        struct rm_shim_rwlock *sl = rm_shim_find_rwlock(l);               \
        if (__builtin_expect(!sl, 1)) return RM_REAL(rw.fn) args;         \
        return rm_drw_lock(&sl->rw, write, mode, clock, abs);             \
    }

RW_LOCK(rdlock, 0, RM_DM_FOREVER, (pthread_rwlock_t *l), (l), CLOCK_REALTIME, NULL)
RW_LOCK(tryrdlock, 0, RM_DM_TRY, (pthread_rwlock_t *l), (l), CLOCK_REALTIME, NULL)
RW_LOCK(timedrdlock, 0, RM_DM_TIMED, (pthread_rwlock_t *l, const struct timespec *t), (l, t),
        CLOCK_REALTIME, t)
RW_LOCK(wrlock, 1, RM_DM_FOREVER, (pthread_rwlock_t *l), (l), CLOCK_REALTIME, NULL)
RW_LOCK(trywrlock, 1, RM_DM_TRY, (pthread_rwlock_t *l), (l), CLOCK_REALTIME, NULL)
RW_LOCK(timedwrlock, 1, RM_DM_TIMED, (pthread_rwlock_t *l, const struct timespec *t), (l, t),
        CLOCK_REALTIME, t)

/* The clock forms: glibc refuses other clocks at entry. */
#define RW_CLOCK(fn, write)                                                            \
    EXPORT int pthread_rwlock_##fn(pthread_rwlock_t *l, clockid_t c, const struct timespec *t) \
    {                                                                                  \
        struct rm_shim_rwlock *sl = rm_shim_find_rwlock(l);                            \
        if (__builtin_expect(!sl, 1)) return RM_REAL(rw.fn)(l, c, t);                  \
        if (c != CLOCK_REALTIME && c != CLOCK_MONOTONIC) return EINVAL;                \
        return rm_drw_lock(&sl->rw, write, RM_DM_TIMED, c, t);                         \
    }

RW_CLOCK(clockrdlock, 0)
RW_CLOCK(clockwrlock, 1)

EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
    struct rm_shim_rwlock *sl = rm_shim_find_rwlock(l);
    if (__builtin_expect(!sl, 1)) return RM_REAL(rw.unlock)(l);
    return rm_drw_unlock(&sl->rw);
}

/* ---- semaphores: one opened by a listed name is an rsem (semlisted.c) ---- */

EXPORT sem_t *sem_open(const char *name, int oflag, ...)
{
    unsigned mode = 0, value = 0;
    if (oflag & O_CREAT) {
        va_list ap;
        va_start(ap, oflag);
        mode = va_arg(ap, unsigned); /* mode_t, promoted */
        value = va_arg(ap, unsigned);
        va_end(ap);
    }
    return rm_shim_sem_open(name, oflag, mode, value);
}

EXPORT int sem_close(sem_t *s)
{
    return rm_shim_is_sem(s) ? rm_shim_sem_close(s) : rm_shim_sem_real_close(s);
}

EXPORT int sem_unlink(const char *name) { return rm_shim_sem_unlink(name); }

EXPORT int sem_wait(sem_t *s)
{
    return (rm_shim_is_sem(s) ? rm_shim_sem_wait : rm_shim_sem_real_wait)(s, RM_DM_FOREVER,
                                                                         CLOCK_REALTIME, NULL);
}

EXPORT int sem_trywait(sem_t *s)
{
    return (rm_shim_is_sem(s) ? rm_shim_sem_wait : rm_shim_sem_real_wait)(s, RM_DM_TRY,
                                                                         CLOCK_REALTIME, NULL);
}

EXPORT int sem_timedwait(sem_t *s, const struct timespec *t)
{
    return (rm_shim_is_sem(s) ? rm_shim_sem_wait : rm_shim_sem_real_wait)(s, RM_DM_TIMED,
                                                                         CLOCK_REALTIME, t);
}

EXPORT int sem_clockwait(sem_t *s, clockid_t c, const struct timespec *t)
{
    if (!rm_shim_is_sem(s)) return rm_shim_sem_real_wait(s, RM_DM_TIMED, c, t);
    if (c != CLOCK_REALTIME && c != CLOCK_MONOTONIC) {
        errno = EINVAL;
        return -1;
    }
    return rm_shim_sem_wait(s, RM_DM_TIMED, c, t);
}

EXPORT int sem_post(sem_t *s)
{
    return rm_shim_is_sem(s) ? rm_shim_sem_post(s) : rm_shim_sem_real_post(s);
}

EXPORT int sem_getvalue(sem_t *s, int *v)
{
    return rm_shim_is_sem(s) ? rm_shim_sem_getvalue(s, v) : rm_shim_sem_real_getvalue(s, v);
}

/* ---- once: a listed pthread_once_t is a ronce (oncelisted.c) ---- */

EXPORT int pthread_once(pthread_once_t *o, void (*routine)(void))
{
    struct rm_shim_once *so = rm_shim_find_once(o);
    if (__builtin_expect(!so, 1)) return rm_shim_once_real(o, routine);
    return rm_shim_once_run(so, routine);
}
