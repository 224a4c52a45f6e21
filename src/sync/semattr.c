/* semattr.c -- rsemattr_*: fairness, lease and reclaim of a semaphore,
 * checked on the first line of each setter.  No Redis. */
#include "semattr.h"
#include "internal.h"

#include <errno.h>
#include <string.h>

#define MAGIC 0x5253454du /* "RSEM" */

_Static_assert(sizeof(rsemattr_t) == 64, "rsemattr_t size is part of the ABI");

static int valid(const rsemattr_t *a) { return a && a->rm_magic_ == MAGIC; }

RMUTEX_API int rsemattr_init(rsemattr_t *a)
{
    if (!a) return EINVAL;
    memset(a, 0, sizeof *a);
    a->rm_magic_ = MAGIC;
    a->rm_reclaim_ = 1;
    return 0;
}

RMUTEX_API int rsemattr_destroy(rsemattr_t *a)
{
    if (!valid(a)) return EINVAL;
    a->rm_magic_ = 0;
    return 0;
}

RMUTEX_API int rsemattr_setfair(rsemattr_t *a, int fair)
{
    if (!valid(a) || (fair != 0 && fair != 1)) return EINVAL;
    a->rm_fair_ = fair;
    return 0;
}

RMUTEX_API int rsemattr_getfair(const rsemattr_t *a, int *fair)
{
    if (!valid(a) || !fair) return EINVAL;
    *fair = a->rm_fair_;
    return 0;
}

RMUTEX_API int rsemattr_setlease(rsemattr_t *a, unsigned long lease_ms)
{
    if (!valid(a) || lease_ms > RM_LEASE_MAX) return EINVAL;
    a->rm_lease_ms_ = lease_ms;
    return 0;
}

RMUTEX_API int rsemattr_getlease(const rsemattr_t *a, unsigned long *lease_ms)
{
    if (!valid(a) || !lease_ms) return EINVAL;
    *lease_ms = a->rm_lease_ms_;
    return 0;
}

RMUTEX_API int rsemattr_setreclaim(rsemattr_t *a, int reclaim)
{
    if (!valid(a) || (reclaim != 0 && reclaim != 1)) return EINVAL;
    a->rm_reclaim_ = reclaim;
    return 0;
}

RMUTEX_API int rsemattr_getreclaim(const rsemattr_t *a, int *reclaim)
{
    if (!valid(a) || !reclaim) return EINVAL;
    *reclaim = a->rm_reclaim_;
    return 0;
}

int rm_semattr_read(const rsemattr_t *a, int *fair, unsigned long *lease_ms, int *reclaim)
{
    if (!a) {
        *fair = 0;
        *lease_ms = 0;
        *reclaim = 1;
        return 0;
    }
    if (!valid(a)) {
        rm_detail("the attributes were not initialized");
        return EINVAL;
    }
    *fair = a->rm_fair_;
    *lease_ms = a->rm_lease_ms_;
    *reclaim = a->rm_reclaim_;
    return 0;
}
