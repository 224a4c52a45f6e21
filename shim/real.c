/* real.c -- the real pthread functions behind the interposers.
 *
 * They are taken with dlvsym(RTLD_NEXT, name, version) where the version
 * matters and with dlsym(RTLD_NEXT) otherwise (or when the version is not
 * there, e.g. on another architecture).  The condition variable calls must
 * be the GLIBC_2.3.2 ones: RTLD_NEXT without a version gave the old
 * 2.2.5 ABI before glibc 2.36.  For the mutex calls every version is the
 * same code; the 2.34 names are asked for so that is explicit.
 *
 * Every pointer starts at a stub that resolves everything first, so calls
 * made before the shim's constructor (by other libraries' constructors)
 * work.  dlsym and dlvsym lock with the loader's internal lock, not through
 * pthread_mutex_lock, so resolving cannot come back here.  A function that
 * cannot be found at all answers ENOSYS rather than jumping to NULL. */
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>

/* ---- stubs used before rm_shim_boot() ---- */

static int boot_init(pthread_mutex_t *m, const pthread_mutexattr_t *a)
{
    rm_shim_boot();
    return RM_REAL(init)(m, a);
}
static int boot_destroy(pthread_mutex_t *m)
{
    rm_shim_boot();
    return RM_REAL(destroy)(m);
}
static int boot_lock(pthread_mutex_t *m)
{
    rm_shim_boot();
    return RM_REAL(dm.lock)(m);
}
static int boot_trylock(pthread_mutex_t *m)
{
    rm_shim_boot();
    return RM_REAL(dm.trylock)(m);
}
static int boot_timedlock(pthread_mutex_t *m, const struct timespec *t)
{
    rm_shim_boot();
    return RM_REAL(dm.timedlock)(m, t);
}
static int boot_clocklock(pthread_mutex_t *m, clockid_t c, const struct timespec *t)
{
    rm_shim_boot();
    return RM_REAL(dm.clocklock)(m, c, t);
}
static int boot_unlock(pthread_mutex_t *m)
{
    rm_shim_boot();
    return RM_REAL(dm.unlock)(m);
}
static int boot_consistent(pthread_mutex_t *m)
{
    rm_shim_boot();
    return RM_REAL(dm.consistent)(m);
}
static int boot_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    rm_shim_boot();
    return RM_REAL(dm.cond_wait)(c, m);
}
static int boot_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
{
    rm_shim_boot();
    return RM_REAL(dm.cond_timedwait)(c, m, t);
}
static int boot_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t k,
                               const struct timespec *t)
{
    rm_shim_boot();
    return RM_REAL(dm.cond_clockwait)(c, m, k, t);
}

static int boot_cond_init(pthread_cond_t *c, const pthread_condattr_t *a)
{
    rm_shim_boot();
    return RM_REAL(cond_init)(c, a);
}
static int boot_cond_destroy(pthread_cond_t *c)
{
    rm_shim_boot();
    return RM_REAL(cond_destroy)(c);
}
static int boot_cond_signal(pthread_cond_t *c)
{
    rm_shim_boot();
    return RM_REAL(cond_signal)(c);
}
static int boot_cond_broadcast(pthread_cond_t *c)
{
    rm_shim_boot();
    return RM_REAL(cond_broadcast)(c);
}

/* The read-write lock calls' stubs: (name, parameters, arguments). */
#define RW_BOOT(fn, params, args)        \
    static int boot_rw_##fn params       \
    {                                    \
        rm_shim_boot();                  \
        return RM_REAL(rw.fn) args;      \
    }
RW_BOOT(init, (pthread_rwlock_t *l, const pthread_rwlockattr_t *a), (l, a))
RW_BOOT(destroy, (pthread_rwlock_t *l), (l))
RW_BOOT(rdlock, (pthread_rwlock_t *l), (l))
RW_BOOT(tryrdlock, (pthread_rwlock_t *l), (l))
RW_BOOT(timedrdlock, (pthread_rwlock_t *l, const struct timespec *t), (l, t))
RW_BOOT(clockrdlock, (pthread_rwlock_t *l, clockid_t c, const struct timespec *t), (l, c, t))
RW_BOOT(wrlock, (pthread_rwlock_t *l), (l))
RW_BOOT(trywrlock, (pthread_rwlock_t *l), (l))
RW_BOOT(timedwrlock, (pthread_rwlock_t *l, const struct timespec *t), (l, t))
RW_BOOT(clockwrlock, (pthread_rwlock_t *l, clockid_t c, const struct timespec *t), (l, c, t))
RW_BOOT(unlock, (pthread_rwlock_t *l), (l))

struct rm_shim_real rm_shim_real = {
    .dm = {
        .lock = boot_lock,
        .trylock = boot_trylock,
        .timedlock = boot_timedlock,
        .clocklock = boot_clocklock,
        .unlock = boot_unlock,
        .consistent = boot_consistent,
        .cond_wait = boot_cond_wait,
        .cond_timedwait = boot_cond_timedwait,
        .cond_clockwait = boot_cond_clockwait,
        .lost = rm_shim_lost_at_unlock,
    },
    .init = boot_init,
    .destroy = boot_destroy,
    .cond_init = boot_cond_init,
    .cond_destroy = boot_cond_destroy,
    .cond_signal = boot_cond_signal,
    .cond_broadcast = boot_cond_broadcast,
    .rw = {
        .init = boot_rw_init,
        .destroy = boot_rw_destroy,
        .rdlock = boot_rw_rdlock,
        .tryrdlock = boot_rw_tryrdlock,
        .timedrdlock = boot_rw_timedrdlock,
        .clockrdlock = boot_rw_clockrdlock,
        .wrlock = boot_rw_wrlock,
        .trywrlock = boot_rw_trywrlock,
        .timedwrlock = boot_rw_timedwrlock,
        .clockwrlock = boot_rw_clockwrlock,
        .unlock = boot_rw_unlock,
    },
};

/* ---- what a missing function does ---- */

static int none_init(pthread_mutex_t *m, const pthread_mutexattr_t *a) { (void)m, (void)a; return ENOSYS; }
static int none_m(pthread_mutex_t *m) { (void)m; return ENOSYS; }
static int none_mt(pthread_mutex_t *m, const struct timespec *t) { (void)m, (void)t; return ENOSYS; }
static int none_mct(pthread_mutex_t *m, clockid_t c, const struct timespec *t)
{
    (void)m, (void)c, (void)t;
    return ENOSYS;
}
static int none_cw(pthread_cond_t *c, pthread_mutex_t *m) { (void)c, (void)m; return ENOSYS; }
static int none_ctw(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
{
    (void)c, (void)m, (void)t;
    return ENOSYS;
}
static int none_ccw(pthread_cond_t *c, pthread_mutex_t *m, clockid_t k, const struct timespec *t)
{
    (void)c, (void)m, (void)k, (void)t;
    return ENOSYS;
}

static int none_ci(pthread_cond_t *c, const pthread_condattr_t *a) { (void)c, (void)a; return ENOSYS; }
static int none_c(pthread_cond_t *c) { (void)c; return ENOSYS; }

static int none_rwi(pthread_rwlock_t *l, const pthread_rwlockattr_t *a) { (void)l, (void)a; return ENOSYS; }
static int none_rw(pthread_rwlock_t *l) { (void)l; return ENOSYS; }
static int none_rwt(pthread_rwlock_t *l, const struct timespec *t) { (void)l, (void)t; return ENOSYS; }
static int none_rwct(pthread_rwlock_t *l, clockid_t c, const struct timespec *t)
{
    (void)l, (void)c, (void)t;
    return ENOSYS;
}

static void *find(const char *name, const char *version)
{
    void *p = version ? dlvsym(RTLD_NEXT, name, version) : NULL;
    return p ? p : dlsym(RTLD_NEXT, name);
}

#define TAKE(field, name, version, fallback)                                   \
    do {                                                                       \
        void *p_ = find(name, version);                                        \
        __typeof__(rm_shim_real.field) f_ = fallback;                          \
        if (p_) f_ = (__typeof__(rm_shim_real.field))p_;                       \
        __atomic_store_n(&rm_shim_real.field, f_, __ATOMIC_RELAXED);           \
    } while (0)

void rm_shim_boot(void)
{
    static int done;
    if (__atomic_load_n(&done, __ATOMIC_ACQUIRE)) return;
    /* Two threads racing here store the same values: harmless. */
    TAKE(init, "pthread_mutex_init", "GLIBC_2.2.5", none_init);
    TAKE(destroy, "pthread_mutex_destroy", "GLIBC_2.2.5", none_m);
    TAKE(dm.lock, "pthread_mutex_lock", "GLIBC_2.2.5", none_m);
    TAKE(dm.unlock, "pthread_mutex_unlock", "GLIBC_2.2.5", none_m);
    TAKE(dm.trylock, "pthread_mutex_trylock", "GLIBC_2.34", none_m);
    TAKE(dm.timedlock, "pthread_mutex_timedlock", "GLIBC_2.34", none_mt);
    TAKE(dm.clocklock, "pthread_mutex_clocklock", "GLIBC_2.34", none_mct);
    TAKE(dm.consistent, "pthread_mutex_consistent", "GLIBC_2.34", none_m);
    TAKE(dm.cond_wait, "pthread_cond_wait", "GLIBC_2.3.2", none_cw);
    TAKE(dm.cond_timedwait, "pthread_cond_timedwait", "GLIBC_2.3.2", none_ctw);
    TAKE(dm.cond_clockwait, "pthread_cond_clockwait", "GLIBC_2.34", none_ccw);
    TAKE(cond_init, "pthread_cond_init", "GLIBC_2.3.2", none_ci);
    TAKE(cond_destroy, "pthread_cond_destroy", "GLIBC_2.3.2", none_c);
    TAKE(cond_signal, "pthread_cond_signal", "GLIBC_2.3.2", none_c);
    TAKE(cond_broadcast, "pthread_cond_broadcast", "GLIBC_2.3.2", none_c);
    TAKE(rw.init, "pthread_rwlock_init", "GLIBC_2.34", none_rwi);
    TAKE(rw.destroy, "pthread_rwlock_destroy", "GLIBC_2.34", none_rw);
    TAKE(rw.rdlock, "pthread_rwlock_rdlock", "GLIBC_2.34", none_rw);
    TAKE(rw.tryrdlock, "pthread_rwlock_tryrdlock", "GLIBC_2.34", none_rw);
    TAKE(rw.timedrdlock, "pthread_rwlock_timedrdlock", "GLIBC_2.34", none_rwt);
    TAKE(rw.clockrdlock, "pthread_rwlock_clockrdlock", "GLIBC_2.34", none_rwct);
    TAKE(rw.wrlock, "pthread_rwlock_wrlock", "GLIBC_2.34", none_rw);
    TAKE(rw.trywrlock, "pthread_rwlock_trywrlock", "GLIBC_2.34", none_rw);
    TAKE(rw.timedwrlock, "pthread_rwlock_timedwrlock", "GLIBC_2.34", none_rwt);
    TAKE(rw.clockwrlock, "pthread_rwlock_clockwrlock", "GLIBC_2.34", none_rwct);
    TAKE(rw.unlock, "pthread_rwlock_unlock", "GLIBC_2.34", none_rw);
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
}
