/* barrierattr.h -- what the rest of the library reads of an rbarrierattr_t. */
#ifndef RM_BARRIERATTR_H
#define RM_BARRIERATTR_H

#include "internal.h"

/* attr's participant lease (0: the watchdog's); NULL gives the default.
 * EINVAL (with the detail) for attributes not initialized. */
int rm_barrierattr_read(const rbarrierattr_t *attr, unsigned long *lease_ms);

#endif
