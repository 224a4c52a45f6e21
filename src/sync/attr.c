/* attr.c -- rmutexattr_*: type, robustness, fairness, caching, deadlock
 * detection and lease, checked
 * on the first line of each setter (musl style).  No Redis here. */
#include "attr.h"
#include "internal.h"

#include <errno.h>
#include <string.h>

#define MAGIC 0x524d5458u /* "RMTX" */
#define TYPE_MASK 0xff

static int valid(const rmutexattr_t *a) { return a && a->rm_magic_ == MAGIC; }

RMUTEX_API int rmutexattr_init(rmutexattr_t *a)
{
    if (!a) return EINVAL;
    memset(a, 0, sizeof *a);
    a->rm_magic_ = MAGIC;
    return 0;
}

RMUTEX_API int rmutexattr_destroy(rmutexattr_t *a)
{
    if (!valid(a)) return EINVAL;
    a->rm_magic_ = 0;
    return 0;
}

RMUTEX_API int rmutexattr_settype(rmutexattr_t *a, int type)
{
    if (!valid(a) || (type != RMUTEX_NORMAL && type != RMUTEX_RECURSIVE && type != RMUTEX_ERRORCHECK))
        return EINVAL;
    a->rm_kind_ = (a->rm_kind_ & ~TYPE_MASK) | type;
    return 0;
}

RMUTEX_API int rmutexattr_gettype(const rmutexattr_t *a, int *type)
{
    if (!valid(a) || !type) return EINVAL;
    *type = a->rm_kind_ & TYPE_MASK;
    return 0;
}

static int set_flag(rmutexattr_t *a, int flag, int on)
{
    if (!valid(a) || (on != 0 && on != 1)) return EINVAL;
    a->rm_kind_ = on ? (a->rm_kind_ | flag) : (a->rm_kind_ & ~flag);
    return 0;
}

static int get_flag(const rmutexattr_t *a, int flag, int *out)
{
    if (!valid(a) || !out) return EINVAL;
    *out = !!(a->rm_kind_ & flag);
    return 0;
}

RMUTEX_API int rmutexattr_setrobust(rmutexattr_t *a, int robust)
{
    return set_flag(a, RMUTEX_FLAG_ROBUST, robust);
}

RMUTEX_API int rmutexattr_getrobust(const rmutexattr_t *a, int *robust)
{
    return get_flag(a, RMUTEX_FLAG_ROBUST, robust);
}

RMUTEX_API int rmutexattr_setfair(rmutexattr_t *a, int fair)
{
    return set_flag(a, RMUTEX_FLAG_FAIR, fair);
}

RMUTEX_API int rmutexattr_getfair(const rmutexattr_t *a, int *fair)
{
    return get_flag(a, RMUTEX_FLAG_FAIR, fair);
}

RMUTEX_API int rmutexattr_setcache(rmutexattr_t *a, int cache)
{
    return set_flag(a, RMUTEX_FLAG_CACHE, cache);
}

RMUTEX_API int rmutexattr_getcache(const rmutexattr_t *a, int *cache)
{
    return get_flag(a, RMUTEX_FLAG_CACHE, cache);
}

RMUTEX_API int rmutexattr_setdeadlock_detect(rmutexattr_t *a, int detect)
{
    return set_flag(a, RMUTEX_FLAG_DEADLOCK_DETECT, detect);
}

RMUTEX_API int rmutexattr_getdeadlock_detect(const rmutexattr_t *a, int *detect)
{
    return get_flag(a, RMUTEX_FLAG_DEADLOCK_DETECT, detect);
}

RMUTEX_API int rmutexattr_setlease(rmutexattr_t *a, unsigned long lease_ms)
{
    if (!valid(a) || lease_ms > RM_LEASE_MAX) return EINVAL;
    a->rm_lease_ms_ = lease_ms;
    return 0;
}

RMUTEX_API int rmutexattr_getlease(const rmutexattr_t *a, unsigned long *lease_ms)
{
    if (!valid(a) || !lease_ms) return EINVAL;
    *lease_ms = a->rm_lease_ms_;
    return 0;
}

/* For rmutex_init: the kind (type | flags) and lease of a. */
int rm_attr_kind(const rmutexattr_t *a, int *kind, unsigned long *lease)
{
    if (!valid(a)) return EINVAL;
    *kind = a->rm_kind_;
    *lease = a->rm_lease_ms_;
    return 0;
}
