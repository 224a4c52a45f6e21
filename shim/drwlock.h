/* drwlock.h -- a distributed pthread read-write lock: an rrwlock taken and
 * given back by a ported program's rules (drwlock.c). */
#ifndef RM_DRWLOCK_H
#define RM_DRWLOCK_H

#include <time.h>

#include <rmutex.h>

#include "take.h" /* RM_DM_TRY, RM_DM_FOREVER, RM_DM_TIMED */

/* pthread_rwlock_{rd,wr}lock, try..., timed... (CLOCK_REALTIME),
 * clock...: mode RM_DM_TIMED waits until abstime on clock.  Returns what
 * the pthread call returns (0, EBUSY, ETIMEDOUT, EDEADLK, EINVAL), never an
 * error of Redis's: while the name cannot be taken, lock waits, trylock
 * returns EBUSY and the timed forms ETIMEDOUT (take.c). */
int rm_drw_lock(rrwlock_t *l, int write, int mode, clockid_t clock, const struct timespec *abstime);

/* pthread_rwlock_unlock: 0, or EPERM when the calling thread holds nothing
 * of l or its hold was lost.  A release Redis refuses is the policy's and
 * returns 0 (the hold lapses with its lease). */
int rm_drw_unlock(rrwlock_t *l);

#endif
