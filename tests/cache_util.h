/* cache_util.h -- what the lock-caching tests share (cache_test.cc,
 * fair/fair_cache_test.cc): a cached mutex of either kind, and the field
 * under which the caching process holds a lock in Redis. */
#ifndef RMUTEX_TEST_CACHE_UTIL_H
#define RMUTEX_TEST_CACHE_UTIL_H

#include "harness.h"

#include <string>

namespace rmt {

/* Init m on name, cached, fair or not (asserts). */
inline void init_cached(rmutex_t *m, const std::string &name, bool fair, int robust = RMUTEX_STALLED,
                        int type = RMUTEX_NORMAL)
{
    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_setcache(&a, 1);
    rmutexattr_setfair(&a, fair);
    rmutexattr_setrobust(&a, robust);
    rmutexattr_settype(&a, type);
    int rc = rmutex_init(m, name.c_str(), &a);
    rmutexattr_destroy(&a);
    ASSERT_RC(0, rc);
}

/* The field of the process's cached hold: "<uuid>:0". */
inline std::string process_field()
{
    char owner[96];
    EXPECT_RC(0, rmutex_owner_id(owner, sizeof owner));
    std::string s = owner;
    return s.substr(0, s.rfind(':')) + ":0";
}

} // namespace rmt

#endif
