/* condattr.h -- condition variables' attributes (condattr.c). */
#ifndef RM_CONDATTR_H
#define RM_CONDATTR_H

#include <time.h>

#include "internal.h"

/* The clock attr asks for (CLOCK_REALTIME for NULL); EINVAL when attr was
 * not initialized. */
int rm_condattr_clock(const rcondattr_t *attr, clockid_t *clock);

#endif
