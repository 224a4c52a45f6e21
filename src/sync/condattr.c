/* condattr.c -- rcondattr_*: the clock of a condition's timed waits.  No
 * Redis here. */
#include "condattr.h"
#include "internal.h"

#include <errno.h>
#include <string.h>

#define MAGIC 0x52434e44u /* "RCND" */

_Static_assert(sizeof(rcondattr_t) == 64, "rcondattr_t size is part of the ABI");

static int valid(const rcondattr_t *a) { return a && a->rm_magic_ == MAGIC; }

RMUTEX_API int rcondattr_init(rcondattr_t *a)
{
    if (!a) return EINVAL;
    memset(a, 0, sizeof *a);
    a->rm_magic_ = MAGIC;
    a->rm_clock_ = CLOCK_REALTIME;
    return 0;
}

RMUTEX_API int rcondattr_destroy(rcondattr_t *a)
{
    if (!valid(a)) return EINVAL;
    a->rm_magic_ = 0;
    return 0;
}

RMUTEX_API int rcondattr_setclock(rcondattr_t *a, clockid_t clock)
{
    if (!valid(a) || (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC)) return EINVAL;
    a->rm_clock_ = (int)clock;
    return 0;
}

RMUTEX_API int rcondattr_getclock(const rcondattr_t *a, clockid_t *clock)
{
    if (!valid(a) || !clock) return EINVAL;
    *clock = (clockid_t)a->rm_clock_;
    return 0;
}

int rm_condattr_clock(const rcondattr_t *a, clockid_t *clock)
{
    if (!a) {
        *clock = CLOCK_REALTIME;
        return 0;
    }
    if (!valid(a)) {
        rm_detail("the condition attributes were not initialized");
        return EINVAL;
    }
    *clock = (clockid_t)a->rm_clock_;
    return 0;
}
