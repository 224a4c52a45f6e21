/* rwlisted.c -- the interposers' bodies for read-write locks listed in
 * RMUTEX_PRELOAD (";rwlock").
 *
 * A listed pthread_rwlock_t is an rrwlock alone (drwlock.c): the
 * program's own lock is initialized and destroyed by glibc, as the
 * program asks, but never locked.  The rrwlock is made at start with the
 * configured name and lease, of the kind the program's lock has then (its
 * static initializer's: PTHREAD_RWLOCK_INITIALIZER prefers readers,
 * PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP does not let writers
 * starve), and made again by the program's pthread_rwlock_init with the
 * attribute's kind (pthread_rwlockattr_setkind_np).  Nobody may use a lock
 * while it is initialized, so nobody holds or waits for the old rrwlock
 * then.  Destroy leaves the rrwlock: the program may initialize the lock
 * again. */
#include "shim.h"

#include <errno.h>

int rm_shim_rw_kind_of(const pthread_rwlock_t *l) { return l->__data.__flags; }

int rm_shim_rw_make(struct rm_shim_rwlock *sl, int kind)
{
    rrwlockattr_t a;
    rrwlockattr_init(&a);
    int r = rrwlockattr_setkind_np(&a, kind); /* glibc's values are the rrwlock's */
    if (!r) r = rrwlockattr_setlease(&a, sl->lease_ms);
    if (!r) r = rrwlock_init(&sl->rw, sl->name, &a);
    rrwlockattr_destroy(&a);
    return r;
}

int rm_shim_rw_init(struct rm_shim_rwlock *sl, const pthread_rwlockattr_t *attr)
{
    int r = RM_REAL(rw.init)(sl->addr, attr);
    if (r) return r;
    int kind = rm_shim_rw_kind_of(sl->addr);
    if (rrwlock_destroy(&sl->rw) == 0 && rm_shim_rw_make(sl, kind))
        rm_say("'%s': cannot make its read-write lock '%s' again: %s", sl->symbol, sl->name,
               rmutex_detail());
    return 0;
}

int rm_shim_rw_destroy(struct rm_shim_rwlock *sl)
{
    return RM_REAL(rw.destroy)(sl->addr);
}
