/* dsem.h -- a distributed POSIX semaphore for ported programs (dsem.c). */
#ifndef RM_SHIM_DSEM_H
#define RM_SHIM_DSEM_H

#include <time.h>

#include <rmutex.h>

/* Take a permit as mode (take.h's RM_DM_*) allows: 0; EAGAIN (a try and no
 * permit free, or Redis cannot be used); ETIMEDOUT; EINVAL (a bad abstime
 * when the call would block).  Redis trouble is waited through and said. */
int rm_ds_wait(rsem_t *s, int mode, clockid_t clock, const struct timespec *abstime);

/* Post: 0; EOVERFLOW; EPERM (the process's permits were lost: said);
 * EINVAL.  Waits until Redis has the post.  From a handler that
 * interrupted a call of this library: handed to the library's thread. */
int rm_ds_post(rsem_t *s);

/* The free permits: 0 or EINVAL.  Waits until Redis answers. */
int rm_ds_getvalue(rsem_t *s, int *value);

#endif
