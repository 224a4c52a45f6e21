/* rwlockattr.c -- rrwlockattr_*: kind, lease and robustness of a
 * read-write lock, checked on the first line of each setter.  No Redis. */
#include "rwlockattr.h"
#include "internal.h"

#include <errno.h>
#include <string.h>

#define MAGIC 0x52525741u /* "RRWA" */

_Static_assert(sizeof(rrwlockattr_t) == 64, "rrwlockattr_t size is part of the ABI");

static int valid(const rrwlockattr_t *a) { return a && a->rm_magic_ == MAGIC; }

RMUTEX_API int rrwlockattr_init(rrwlockattr_t *a)
{
    if (!a) return EINVAL;
    memset(a, 0, sizeof *a);
    a->rm_magic_ = MAGIC;
    a->rm_kind_ = RRWLOCK_DEFAULT;
    return 0;
}

RMUTEX_API int rrwlockattr_destroy(rrwlockattr_t *a)
{
    if (!valid(a)) return EINVAL;
    a->rm_magic_ = 0;
    return 0;
}

RMUTEX_API int rrwlockattr_setkind_np(rrwlockattr_t *a, int kind)
{
    if (!valid(a) || (kind != RRWLOCK_PREFER_READER && kind != RRWLOCK_PREFER_WRITER &&
                      kind != RRWLOCK_PREFER_WRITER_NONRECURSIVE))
        return EINVAL;
    a->rm_kind_ = kind;
    return 0;
}

RMUTEX_API int rrwlockattr_getkind_np(const rrwlockattr_t *a, int *kind)
{
    if (!valid(a) || !kind) return EINVAL;
    *kind = a->rm_kind_;
    return 0;
}

RMUTEX_API int rrwlockattr_setlease(rrwlockattr_t *a, unsigned long lease_ms)
{
    if (!valid(a) || lease_ms > RM_LEASE_MAX) return EINVAL;
    a->rm_lease_ms_ = lease_ms;
    return 0;
}

RMUTEX_API int rrwlockattr_getlease(const rrwlockattr_t *a, unsigned long *lease_ms)
{
    if (!valid(a) || !lease_ms) return EINVAL;
    *lease_ms = a->rm_lease_ms_;
    return 0;
}

RMUTEX_API int rrwlockattr_setrobust(rrwlockattr_t *a, int robust)
{
    if (!valid(a) || (robust != RMUTEX_STALLED && robust != RMUTEX_ROBUST)) return EINVAL;
    a->rm_robust_ = robust;
    return 0;
}

RMUTEX_API int rrwlockattr_getrobust(const rrwlockattr_t *a, int *robust)
{
    if (!valid(a) || !robust) return EINVAL;
    *robust = a->rm_robust_;
    return 0;
}

int rm_rwlockattr_read(const rrwlockattr_t *a, int *kind, unsigned long *lease_ms, int *robust)
{
    if (!a) {
        *kind = RRWLOCK_DEFAULT;
        *lease_ms = 0;
        *robust = 0;
        return 0;
    }
    if (!valid(a)) {
        rm_detail("the attributes were not initialized");
        return EINVAL;
    }
    *kind = a->rm_kind_;
    *lease_ms = a->rm_lease_ms_;
    *robust = a->rm_robust_ == RMUTEX_ROBUST;
    return 0;
}
