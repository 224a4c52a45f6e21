/* semattr.h -- a semaphore's attributes (semattr.c): what rsem_init reads. */
#ifndef RM_SEMATTR_H
#define RM_SEMATTR_H

#include <rmutex.h>

/* Read attr (NULL: the defaults: not fair, lease 0 -- renewed by the
 * watchdog --, reclaim on).  EINVAL (with the detail) if attr was not
 * initialized. */
int rm_semattr_read(const rsemattr_t *attr, int *fair, unsigned long *lease_ms, int *reclaim);

#endif
