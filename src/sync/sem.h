/* sem.h -- counting semaphores (sem.c): the async-signal-safe post, and
 * what the library's exit and fork (runtime.c) do to them.  The entry
 * points are public (rsem_* in rmutex.h). */
#ifndef RM_SEM_H
#define RM_SEM_H

#include <rmutex.h>

#include "clock.h"

struct rm_endpoint;

/* Post s from anywhere, a signal handler included: only atomics and a
 * write(2) to an eventfd made at rsem_init; the process's poster thread
 * makes the post soon after (and exit or rsem_destroy, if it has not).
 * 0, or EINVAL when s was never initialized (a static initializer's
 * handle is made by its first ordinary call) or was destroyed.  Its
 * outcome (EPERM, EOVERFLOW) is not reported. */
int rm_sem_post_deferred(rsem_t *s);

/* At exit: make the pending deferred posts, then give back in Redis, on
 * ep, every permit this process holds, before deadline. */
void rm_sem_release_all_at_exit(struct rm_endpoint *ep, rm_nsec deadline);

/* fork(): -1 lock the registry, 0 unlock, 1 child: nothing held, no
 * handle in use, no deferred post pending, no poster yet. */
void rm_sem_atfork(int who);

#endif
