/* api_util.h -- what the API tests (tests/api/) share. */
#ifndef RMUTEX_TEST_API_UTIL_H
#define RMUTEX_TEST_API_UTIL_H

#include <algorithm>
#include <cctype>
#include <string>

#include "harness.h"

namespace rmt {

/* The first field of the lock hash, or "" if none. */
inline std::string owner_field(Redis &r, const std::string &name)
{
    auto h = r.hgetall(name);
    return h.empty() ? "" : h.begin()->first;
}

/* hay contains needle, ignoring case. */
inline bool contains_ci(std::string hay, std::string needle)
{
    std::transform(hay.begin(), hay.end(), hay.begin(), ::tolower);
    std::transform(needle.begin(), needle.end(), needle.begin(), ::tolower);
    return hay.find(needle) != std::string::npos;
}

} // namespace rmt

#endif
