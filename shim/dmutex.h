/* dmutex.h -- a distributed pthread mutex: the program's own (real, local)
 * pthread_mutex_t plus an rmutex_t, taken local first, then Redis.
 *
 * Shared by the LD_PRELOAD shim (preload.c), whose real functions come from
 * dlsym, and by the header swap (pthread_swap.c), whose real functions are
 * glibc's.  Neither this file nor dmutex.c knows where the mutex lives. */
#ifndef RM_DMUTEX_H
#define RM_DMUTEX_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include <rmutex.h>

#include "take.h" /* RM_DM_TRY, RM_DM_FOREVER, RM_DM_TIMED */

/* The local functions a distributed mutex stands on, and how its owner
 * wants a lost hold handled (Redis trouble is policy.c's, the same for
 * both owners). */
struct rm_dm_real {
    int (*lock)(pthread_mutex_t *);
    int (*trylock)(pthread_mutex_t *);
    int (*timedlock)(pthread_mutex_t *, const struct timespec *);
    int (*clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
    int (*unlock)(pthread_mutex_t *);
    int (*consistent)(pthread_mutex_t *);
    int (*cond_wait)(pthread_cond_t *, pthread_mutex_t *);
    int (*cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    int (*cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
                          const struct timespec *);
    /* Told when an unlock finds the Redis hold was lost.  NULL: the unlock
     * returns EPERM instead (the local mutex is released either way). */
    void (*lost)(rmutex_t *rm);
};

/* Per-mutex bookkeeping.  depth and the *_dead flags are touched only by
 * the thread holding the local mutex; holder is read by any thread. */
struct rm_dm {
    uintptr_t holder;    /* pthread_self() of the thread holding both parts, 0: none */
    unsigned depth;      /* RECURSIVE levels taken through the distributed path */
    unsigned char remote_dead;  /* Redis hold acquired with EOWNERDEAD, not yet consistent */
    unsigned char local_dead;   /* local mutex acquired with EOWNERDEAD, not yet consistent */
    unsigned char virt_dead;    /* an owner death handed on from pending_dead, not yet consistent */
    unsigned char pending_dead; /* a local owner death seen by a locker that then failed */
    unsigned char fair;         /* set by the owner: the rmutex is fair (waits are not sliced) */
    unsigned char local_only;   /* set by the owner: no name, the local mutex alone (atomic) */
};

/* Forget every hold (after pthread_mutex_init); fair is kept. */
void rm_dm_reset(struct rm_dm *dm);

/* pthread_mutex_{lock,trylock,timedlock,clocklock} of a distributed mutex:
 * mode RM_DM_TIMED waits until abstime on clock.  Returns what the pthread
 * call returns, never an error of Redis's: while the name cannot be taken
 * (Redis unreachable, or refusing: policy.c) lock waits, trylock returns
 * EBUSY and the timed forms ETIMEDOUT. */
int rm_dm_lock(const struct rm_dm_real *real, struct rm_dm *dm, pthread_mutex_t *local,
               rmutex_t *rm, int mode, clockid_t clock, const struct timespec *abstime);

/* pthread_mutex_unlock: EPERM, changing nothing, when another thread holds
 * it through the distributed path (whatever the type).  A release Redis
 * refuses is the policy's; the unlock returns 0 (the name lapses with its
 * lease). */
int rm_dm_unlock(const struct rm_dm_real *real, struct rm_dm *dm, pthread_mutex_t *local,
                 rmutex_t *rm);

/* pthread_mutex_consistent. */
int rm_dm_consistent(const struct rm_dm_real *real, struct rm_dm *dm, pthread_mutex_t *local,
                     rmutex_t *rm);

/* pthread_cond_{wait,timedwait,clockwait} (mode RM_DM_FOREVER or
 * RM_DM_TIMED; clock -1 means the condition variable's own clock, i.e.
 * pthread_cond_timedwait).  The Redis hold is given up for the wait and
 * taken back before returning, also when the thread is cancelled in it. */
int rm_dm_cond_wait(const struct rm_dm_real *real, struct rm_dm *dm, pthread_mutex_t *local,
                    rmutex_t *rm, pthread_cond_t *cond, int mode,
                    clockid_t clock, const struct timespec *abstime);

/* pthread_cond_{wait,timedwait,clockwait} on a distributed condition rc
 * (rcond) with a distributed mutex: the local mutex is let go (at every
 * level), rcond_wait lets go of the name and takes it back, the local
 * mutex is retaken -- also when the thread is cancelled in the wait.
 * clock -1: the condition's own clock.  EPERM when the calling thread does
 * not hold the mutex through the distributed path; EINVAL while it also
 * holds another mutex of the same name (the wait would give up the name
 * under that mutex).  A wait Redis cannot serve (policy.c) returns 0, a
 * spurious wake-up, with both parts held again. */
int rm_dm_rcond_wait(const struct rm_dm_real *real, struct rm_dm *dm, pthread_mutex_t *local,
                     rmutex_t *rm, rcond_t *rc, int mode, clockid_t clock,
                     const struct timespec *abstime);

/* 1 if the calling thread holds the mutex through the distributed path. */
int rm_dm_held_by_self(const struct rm_dm *dm);
/* 1 if some thread does. */
int rm_dm_held(const struct rm_dm *dm);

/* 1 while the calling thread is inside librmutex on behalf of a distributed
 * mutex: a distributed mutex met again then (an allocator's lock, say) is
 * used as a plain local mutex instead of recursing into Redis. */
int rm_dm_inside(void);
/* Set that flag for the calling thread (a read-write lock's call into
 * librmutex: drwlock.c); returns what it was. */
int rm_dm_inside_set(int on);

#endif
