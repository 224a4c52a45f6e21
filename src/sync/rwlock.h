/* rwlock.h -- read-write locks (rwlock.c): what the library's shutdown,
 * fork and exit (runtime.c) do to them.  The entry points are public
 * (rrwlock_* in rmutex.h). */
#ifndef RM_RWLOCK_H
#define RM_RWLOCK_H

#include "clock.h"

struct rm_endpoint;

/* At exit: release in Redis, on ep, every read and write hold of this
 * process, before deadline. */
void rm_rwlock_release_all_at_exit(struct rm_endpoint *ep, rm_nsec deadline);

/* fork(): -1 lock the registry of names, 0 unlock, 1 child: nothing held,
 * no handle in use. */
void rm_rwlock_atfork(int who);

#endif
