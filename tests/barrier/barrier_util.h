/* barrier_util.h -- what the barrier and once tests share: the fixture (a
 * server, a participant and runner lease of 1.5 s and a poll of 1 s, so
 * that a death shows within seconds and only through the leases), forked
 * processes (cond_util.h's), and names. */
#ifndef RMUTEX_TEST_BARRIER_UTIL_H
#define RMUTEX_TEST_BARRIER_UTIL_H

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "../cond/cond_util.h"

namespace rmt {
namespace barrier {

using cond::Forked;
using cond::readable_within;

constexpr int kLeaseMs = 1500;
constexpr int kPollMs = 1000;

class Barrier : public RedisTest {
  protected:
    Barrier() : RedisTest(false, "lease=1500&poll=1000") {}

    /* A connection to the test's server, for a thread or a forked child. */
    std::unique_ptr<Redis> connect() { return std::make_unique<Redis>(host(), port(), password_); }

    static std::string state_key(const std::string &name) { return "rmutex_barrier:{" + name + "}"; }
    static std::string parts_key(const std::string &name)
    {
        return "rmutex_barrier_parts:{" + name + "}";
    }

    /* Wait until the open generation of name has n arrivals. */
    bool arrived(const std::string &name, long long n)
    {
        std::string key = "rmutex_barrier_arrivals:{" + name + "}";
        return wait_until([&] { return redis().cmd({ "ZCARD", key }).integer() == n; }, ms(5000));
    }
};

/* Init b as name for count members; the result. */
inline int init(rbarrier_t *b, const std::string &name, unsigned count, unsigned long lease = 0)
{
    rbarrierattr_t a;
    int r = rbarrierattr_init(&a);
    if (!r) r = rbarrierattr_setlease(&a, lease);
    if (!r) r = rbarrier_init(b, name.c_str(), count, &a);
    rbarrierattr_destroy(&a);
    return r;
}

/* A wait's result as the tests count it: 1 serial, 0 the others, else
 * the error. */
inline bool passed(int rc) { return rc == 0 || rc == RBARRIER_SERIAL_THREAD; }

/* How many of the results are RBARRIER_SERIAL_THREAD. */
inline int serials(std::initializer_list<int> rcs)
{
    int n = 0;
    for (int rc : rcs) n += rc == RBARRIER_SERIAL_THREAD;
    return n;
}

/* A forked member's life: init name for count, wait once; its exit code:
 * 0 passed, 1 passed as the serial member, 2 EOWNERDEAD, 10 the init
 * failed, 12 another result. */
inline int member_once(const std::string &name, unsigned count)
{
    rbarrier_t mine;
    if (init(&mine, name, count)) return 10;
    int rc = rbarrier_wait(&mine);
    return rc == 0 ? 0 : rc == RBARRIER_SERIAL_THREAD ? 1 : rc == EOWNERDEAD ? 2 : 12;
}

} // namespace barrier
} // namespace rmt

#endif
