/* mutex.h -- handles: made, found and destroyed (mutex.c), and what a
 * condition wait does to the mutex it waits with. */
#ifndef RM_MUTEX_H
#define RM_MUTEX_H

#include "handle.h"

struct rm_endpoint;
struct rm_thread;

/* The state of m, created on first use for a static initializer.  NULL
 * with EINVAL in *err for a NULL, zeroed or destroyed m. */
struct rm_mutex *rm_mutex_get(rmutex_t *m, int *err);

/* The handle m and the calling thread, for a call that only reads or
 * fences the hold (api.c, fence.c): NULL with *r set when m or out is bad. */
struct rm_mutex *rm_mutex_query(rmutex_t *m, const void *out, struct rm_thread **self, int *r);

/* Create m's state from a name and attributes; destroy it. */
int rm_mutex_init(rmutex_t *m, const char *name, int kind, unsigned long lease_ms);
int rm_mutex_destroy(rmutex_t *m);

/* A condition wait (cond.c) lets go of the mutex and takes it back:
 * begin: EPERM unless self holds mx's name; counts the caller as a user
 * of mx (destroy is EBUSY) until end.  release: unlock at every level,
 * *depth the count to restore; the hold's own errors (EPERM: its lease was
 * lost) are returned, the mutex is let go of all the same.  retake: lock
 * through mx (a fair mutex through its queue), waiting as long as it takes,
 * and restore depth; 0, EOWNERDEAD or the lock's error. */
int rm_mutex_wait_begin(struct rm_mutex *mx, struct rm_thread *self);
int rm_mutex_wait_release(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                          unsigned *depth);
int rm_mutex_wait_retake(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                         unsigned depth);
void rm_mutex_wait_end(struct rm_mutex *mx);

/* Wait morphing (cond.c, cond.lua): can a signal take mx in Redis for a
 * waiter -- a non-fair, uncached, non-robust mutex whose lock key shares
 * the condition's slot in a cluster?  Its hold lease in ms, or 0: no.
 * own: such a signal took mx for self as acquisition acq (not before
 * granted_after: the wait's registration, or its last look that found it
 * waiting): make the local hold as a successful lock does, with no round
 * trip, and restore depth.  A granted_after older than a renewal period
 * (lease/3): mx is retaken as retake does (its acquire finds the field it
 * was handed), since the hold's lease is not known to be ahead.  If
 * another thread of this process is in the lock's gate, the grant is given
 * back and mx retaken as retake does.  0, or the retake's result. */
unsigned long rm_mutex_wait_grantable(const struct rm_mutex *mx, const struct rm_endpoint *ep,
                                      int slot);
int rm_mutex_wait_own(struct rm_mutex *mx, struct rm_thread *self, struct rm_endpoint *ep,
                      uint64_t acq, rm_nsec granted_after, unsigned depth);

/* fork(): -1 lock the list of handles, 0 unlock, 1 child: no handle has
 * a caller any more. */
void rm_mutex_atfork(int who);

/* At exit: release in Redis, on ep, every hold of this process, within
 * ~1 s. */
void rm_mutex_release_all_at_exit(struct rm_endpoint *ep);


#endif
