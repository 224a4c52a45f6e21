/* rwlockattr.h -- what the rest of the library reads of an rrwlockattr_t. */
#ifndef RM_RWLOCKATTR_H
#define RM_RWLOCKATTR_H

#include "internal.h"

/* attr's kind, lease (0: renewed) and robustness (1 robust); NULL gives
 * the defaults.  EINVAL (with the detail) for attributes not initialized. */
int rm_rwlockattr_read(const rrwlockattr_t *attr, int *kind, unsigned long *lease_ms,
                       int *robust);

#endif
