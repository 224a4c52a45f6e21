/* attr.h -- what the rest of the library reads of an rmutexattr_t. */
#ifndef RM_ATTR_H
#define RM_ATTR_H

#include "internal.h"

/* The mutex kind (type | RMUTEX_FLAG_*) and fixed lease (0: renewed) that
 * attr asks for.  0, or EINVAL if attr was not initialized. */
int rm_attr_kind(const rmutexattr_t *attr, int *kind, unsigned long *lease);

#endif
