/* barrierattr.c -- rbarrierattr_*: a barrier's participant lease, checked
 * on the first line of each call.  No Redis. */
#include "barrierattr.h"
#include "internal.h"

#include <errno.h>
#include <string.h>

#define MAGIC 0x52424141u /* "RBAA" */

_Static_assert(sizeof(rbarrierattr_t) == 64, "rbarrierattr_t size is part of the ABI");

static int valid(const rbarrierattr_t *a) { return a && a->rm_magic_ == MAGIC; }

RMUTEX_API int rbarrierattr_init(rbarrierattr_t *a)
{
    if (!a) return EINVAL;
    memset(a, 0, sizeof *a);
    a->rm_magic_ = MAGIC;
    return 0;
}

RMUTEX_API int rbarrierattr_destroy(rbarrierattr_t *a)
{
    if (!valid(a)) return EINVAL;
    a->rm_magic_ = 0;
    return 0;
}

RMUTEX_API int rbarrierattr_setlease(rbarrierattr_t *a, unsigned long lease_ms)
{
    if (!valid(a) || lease_ms > RM_LEASE_MAX) return EINVAL;
    a->rm_lease_ms_ = lease_ms;
    return 0;
}

RMUTEX_API int rbarrierattr_getlease(const rbarrierattr_t *a, unsigned long *lease_ms)
{
    if (!valid(a) || !lease_ms) return EINVAL;
    *lease_ms = a->rm_lease_ms_;
    return 0;
}

int rm_barrierattr_read(const rbarrierattr_t *a, unsigned long *lease_ms)
{
    *lease_ms = 0;
    if (!a) return 0;
    if (!valid(a)) {
        rm_detail("the attributes were not initialized");
        return EINVAL;
    }
    *lease_ms = a->rm_lease_ms_;
    return 0;
}
