/* shim.h -- what the files of the preload shim share: the real pthread
 * functions, the table of listed mutexes and its fast lookup, and the
 * one-line messages (say.h: rm_say).
 *
 * Naming: rm_shim_* are internal to librmutex_preload.so (hidden, like
 * everything in it but the interposed pthread names). */
#ifndef RM_SHIM_H
#define RM_SHIM_H

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

#include <rmutex.h>

#include "dmutex.h"
#include "say.h"

/* ---- real.c: the functions the interposers stand in front of ---- */

/* glibc's read-write lock calls (no local part is used for a listed one:
 * drwlock.c). */
struct rm_shim_real_rw {
    int (*init)(pthread_rwlock_t *, const pthread_rwlockattr_t *);
    int (*destroy)(pthread_rwlock_t *);
    int (*rdlock)(pthread_rwlock_t *);
    int (*tryrdlock)(pthread_rwlock_t *);
    int (*timedrdlock)(pthread_rwlock_t *, const struct timespec *);
    int (*clockrdlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
    int (*wrlock)(pthread_rwlock_t *);
    int (*trywrlock)(pthread_rwlock_t *);
    int (*timedwrlock)(pthread_rwlock_t *, const struct timespec *);
    int (*clockwrlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
    int (*unlock)(pthread_rwlock_t *);
};

struct rm_shim_real {
    struct rm_dm_real dm; /* what dmutex.c needs (lock, cond waits, hooks) */
    int (*init)(pthread_mutex_t *, const pthread_mutexattr_t *);
    int (*destroy)(pthread_mutex_t *);
    int (*cond_init)(pthread_cond_t *, const pthread_condattr_t *);
    int (*cond_destroy)(pthread_cond_t *);
    int (*cond_signal)(pthread_cond_t *);
    int (*cond_broadcast)(pthread_cond_t *);
    struct rm_shim_real_rw rw;
};

/* Until rm_shim_boot() has run, every pointer leads to a stub that runs it
 * and then calls the real function: a call that comes before the shim's
 * constructor (another library's constructor, say) still works. */
extern struct rm_shim_real rm_shim_real;
#define RM_REAL(fn) (__atomic_load_n(&rm_shim_real.fn, __ATOMIC_RELAXED))

/* Find the real functions (dlvsym/dlsym with RTLD_NEXT).  Idempotent. */
void rm_shim_boot(void);

/* ---- table.c: the listed mutexes ---- */

struct rm_shim_mutex {
    pthread_mutex_t *addr;  /* the program's mutex */
    char *symbol;           /* as listed, for messages */
    char *name;             /* lock name */
    unsigned long lease_ms;
    int cfg_robust;         /* ";robust" was asked for */
    int cache;              /* ";cache" */
    int rm_robust;          /* the rmutex is robust now */
    int robust_warned;
    rmutex_t rm;            /* the Redis lock */
    struct rm_dm dm;
};

/* One listed condition variable: waits on it go through rcond (with a
 * listed mutex only). */
struct rm_shim_cond {
    pthread_cond_t *addr;   /* the program's condition variable */
    char *symbol;           /* as listed, for messages */
    char *name;             /* the condition's name */
    int unlisted_warned;    /* waited on with an unlisted mutex: said once */
    rcond_t rc;
};

/* One listed read-write lock: an rrwlock (drwlock.c). */
struct rm_shim_rwlock {
    pthread_rwlock_t *addr; /* the program's read-write lock */
    char *symbol;           /* as listed, for messages */
    char *name;             /* lock name */
    unsigned long lease_ms;
    rrwlock_t rw;
};

/* The span of addresses that holds every listed mutex: [lo, lo + span).
 * span is 0 while nothing is listed, so the check below fails for every
 * address with one compare.  Written once, at start. */
extern uintptr_t rm_shim_lo, rm_shim_span;

/* The listed mutex at address m, or NULL (out of line, sorted search). */
struct rm_shim_mutex *rm_shim_lookup(const void *m);

/* The fast path of every interposer: one subtraction, one compare and one
 * well-predicted branch for a mutex that is not listed. */
static inline struct rm_shim_mutex *rm_shim_find(const void *m)
{
    uintptr_t off = (uintptr_t)m - __atomic_load_n(&rm_shim_lo, __ATOMIC_RELAXED);
    if (__builtin_expect(off >= __atomic_load_n(&rm_shim_span, __ATOMIC_RELAXED), 1)) return NULL;
    return rm_shim_lookup(m);
}

/* Publish the listed mutexes (sorted here); called once, by the
 * constructor.  Takes ownership of v. */
void rm_shim_publish(struct rm_shim_mutex **v, size_t n);

/* The same for condition variables, with a span of their own. */
extern uintptr_t rm_shim_cond_lo, rm_shim_cond_span;
struct rm_shim_cond *rm_shim_lookup_cond(const void *c);
static inline struct rm_shim_cond *rm_shim_find_cond(const void *c)
{
    uintptr_t off = (uintptr_t)c - __atomic_load_n(&rm_shim_cond_lo, __ATOMIC_RELAXED);
    if (__builtin_expect(off >= __atomic_load_n(&rm_shim_cond_span, __ATOMIC_RELAXED), 1))
        return NULL;
    return rm_shim_lookup_cond(c);
}
void rm_shim_publish_conds(struct rm_shim_cond **v, size_t n);

/* And for read-write locks: the pthread_rwlock_* interposers' fast path. */
extern uintptr_t rm_shim_rw_lo, rm_shim_rw_span;
struct rm_shim_rwlock *rm_shim_lookup_rwlock(const void *l);
static inline struct rm_shim_rwlock *rm_shim_find_rwlock(const void *l)
{
    uintptr_t off = (uintptr_t)l - __atomic_load_n(&rm_shim_rw_lo, __ATOMIC_RELAXED);
    if (__builtin_expect(off >= __atomic_load_n(&rm_shim_rw_span, __ATOMIC_RELAXED), 1))
        return NULL;
    return rm_shim_lookup_rwlock(l);
}
void rm_shim_publish_rwlocks(struct rm_shim_rwlock **v, size_t n);

/* One listed pthread_once_t (";once"): pthread_once on it is a ronce of
 * the entry's name, once for every process. */
struct rm_shim_once {
    pthread_once_t *addr;   /* the program's once control */
    char *symbol;           /* as listed, for messages */
    ronce_t once;           /* its name: the entry's */
};
extern uintptr_t rm_shim_once_lo, rm_shim_once_span;
struct rm_shim_once *rm_shim_lookup_once(const void *o);
static inline struct rm_shim_once *rm_shim_find_once(const void *o)
{
    uintptr_t off = (uintptr_t)o - __atomic_load_n(&rm_shim_once_lo, __ATOMIC_RELAXED);
    if (__builtin_expect(off >= __atomic_load_n(&rm_shim_once_span, __ATOMIC_RELAXED), 1))
        return NULL;
    return rm_shim_lookup_once(o);
}
void rm_shim_publish_onces(struct rm_shim_once **v, size_t n);
/* pthread_once on a listed one: ronce through Redis trouble (take.c's
 * pause); glibc's pthread_once on any other. */
int rm_shim_once_run(struct rm_shim_once *so, void (*routine)(void));
int rm_shim_once_real(pthread_once_t *o, void (*routine)(void));

/* ---- semlisted.c: semaphores opened by a listed name ---- */

/* One "/pattern" entry of RMUTEX_PRELOAD. */
struct rm_shim_sempattern {
    char *pattern;          /* fnmatch(3) pattern of sem_open names */
    int fair;
    unsigned long lease_ms;
};

/* The arena of the semaphores opened by a listed name: the sem_* calls'
 * fast path, as for mutexes (span 0 while no pattern is listed). */
extern uintptr_t rm_shim_sem_lo, rm_shim_sem_span;
static inline int rm_shim_is_sem(const void *s)
{
    uintptr_t off = (uintptr_t)s - __atomic_load_n(&rm_shim_sem_lo, __ATOMIC_RELAXED);
    return __builtin_expect(off < __atomic_load_n(&rm_shim_sem_span, __ATOMIC_RELAXED), 0);
}

/* Publish the patterns and map the arena (once, by the constructor).
 * Takes ownership of v.  0 or an errno (mmap's). */
int rm_shim_publish_sems(struct rm_shim_sempattern *v, size_t n);

/* sem_open: a listed name's semaphore, else glibc's (mode and value as
 * given with O_CREAT). */
sem_t *rm_shim_sem_open(const char *name, int oflag, unsigned mode, unsigned value);
/* On one of ours (rm_shim_is_sem); -1 and errno as POSIX's. */
int rm_shim_sem_wait(sem_t *s, int mode, clockid_t clock, const struct timespec *abs);
int rm_shim_sem_post(sem_t *s);
int rm_shim_sem_getvalue(sem_t *s, int *value);
int rm_shim_sem_close(sem_t *s);
/* sem_unlink: a listed name's, else glibc's. */
int rm_shim_sem_unlink(const char *name);
/* glibc's, for a semaphore not ours. */
int rm_shim_sem_real_wait(sem_t *s, int mode, clockid_t clock, const struct timespec *abs);
int rm_shim_sem_real_post(sem_t *s);
int rm_shim_sem_real_getvalue(sem_t *s, int *value);
int rm_shim_sem_real_close(sem_t *s);

/* ---- rwlisted.c: interposer bodies for listed read-write locks ---- */

/* Make sl's rrwlock of the given kind (glibc's values).  0 or the
 * rrwlock_init error. */
int rm_shim_rw_make(struct rm_shim_rwlock *sl, int kind);
/* The kind of the program's lock as it is now (its static initializer's,
 * or its last pthread_rwlock_init's). */
int rm_shim_rw_kind_of(const pthread_rwlock_t *l);
int rm_shim_rw_init(struct rm_shim_rwlock *sl, const pthread_rwlockattr_t *attr);
int rm_shim_rw_destroy(struct rm_shim_rwlock *sl);

/* ---- listed.c: interposer bodies for listed mutexes ---- */

int rm_shim_init(struct rm_shim_mutex *sm, const pthread_mutexattr_t *attr);
int rm_shim_destroy(struct rm_shim_mutex *sm);
int rm_shim_lock(struct rm_shim_mutex *sm, int mode, clockid_t clock, const struct timespec *abs);
int rm_shim_unlock(struct rm_shim_mutex *sm);
int rm_shim_consistent(struct rm_shim_mutex *sm);
int rm_shim_cond_wait(struct rm_shim_mutex *sm, pthread_cond_t *c, int mode, clockid_t clock,
                      const struct timespec *abs);
/* A wait on a listed condition: through rcond when the mutex is listed
 * too, else EINVAL and one line. */
int rm_shim_rcond_wait(struct rm_shim_cond *sc, struct rm_shim_mutex *sm, pthread_mutex_t *m,
                       int mode, clockid_t clock, const struct timespec *abs);
int rm_shim_cond_signal(struct rm_shim_cond *sc, int all);
/* pthread_cond_init of a listed condition: glibc's, and the rcond takes
 * the attribute's clock. */
int rm_shim_cond_init(struct rm_shim_cond *sc, const pthread_condattr_t *attr);
/* Make sc's rcond on clock.  0 or the rcond_init error. */
int rm_shim_make_rcond(struct rm_shim_cond *sc, clockid_t clock);

/* Make sm's rmutex with the given robustness and fairness (and sm's
 * lease).  Returns 0 or the rmutex_init error. */
int rm_shim_make_rmutex(struct rm_shim_mutex *sm, int robust, int fair);

/* ---- listed.c: a lost hold of a listed mutex, said in one line ---- */

/* dmutex's lost hook: an unlock found its hold lost. */
void rm_shim_lost_at_unlock(rmutex_t *rm);
/* rmutex_set_lost_callback(): the watchdog found a hold lost. */
void rm_shim_lost_callback(rmutex_t *m, const char *name, void *arg);

#endif
