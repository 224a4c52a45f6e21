/* acquire_test.cc -- rmutex_trylock, rmutex_timedlock and rmutex_clocklock:
 * what they return, when, and what they make of their deadlines.
 *
 * Every return code of every rmutex_* call, as rmutex.h specifies them,
 * against a real redis-server.  "Held elsewhere" means held by
 * rmutex_test_child (another process) unless a test says "another thread".
 * Where the header is silent, the assumption is written next to the
 * assertion that depends on it. */
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <regex>

#include "api_util.h"
#include "harness.h"

namespace {

using namespace rmt;

/* ===================================================================== */
/* rmutex_trylock                                                          */
/* ===================================================================== */

class RmutexTrylock : public RedisTest {};

TEST_F(RmutexTrylock, AcquiresAFreeMutex)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_trylock(&m));
    EXPECT_EQ("hash", redis().type(name));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
}

TEST_F(RmutexTrylock, ReturnsEbusyWhileAnotherProcessHoldsIt)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    std::string theirs = owner_field(redis(), name);
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    EXPECT_EQ(theirs, owner_field(redis(), name));
    EXPECT_EQ(1u, redis().hgetall(name).size());
    ASSERT_TRUE(child->write_line("unlock"));
    ASSERT_TRUE(child->expect_line("unlocked rc=0", ms(5000)));
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexTrylock, ReturnsEbusyWhileAnotherThreadHoldsIt)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    HolderThread holder(&m);
    ASSERT_RC(0, holder.wait_locked(ms(5000)));
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    /* A second handle on the same name in the same process too. */
    rmutex_t m2;
    init_mutex(&m2, name);
    EXPECT_RC(EBUSY, rmutex_trylock(&m2));
    EXPECT_RC(0, holder.release());
    EXPECT_RC(0, rmutex_trylock(&m2));
    EXPECT_RC(0, rmutex_unlock(&m2));
}

TEST_F(RmutexTrylock, NormalOwnerGetsEbusy)
{
    /* glibc: a NORMAL mutex's trylock by its owner fails with EBUSY. */
    rmutex_t m;
    init_mutex(&m, lock_name());
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(EPERM, rmutex_unlock(&m));
}

/* ===================================================================== */
/* rmutex_timedlock / rmutex_clocklock                                     */
/* ===================================================================== */

class RmutexTimedlock : public RedisTest {};

TEST_F(RmutexTimedlock, IgnoresAnInvalidAbstimeWhenTheMutexIsFree)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    struct timespec bad = abs_after(CLOCK_REALTIME, 1000);
    bad.tv_nsec = 2000000000;
    ASSERT_RC(0, rmutex_timedlock(&m, &bad));
    EXPECT_RC(0, rmutex_unlock(&m));
    bad.tv_nsec = -1;
    ASSERT_RC(0, rmutex_timedlock(&m, &bad));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexTimedlock, AcquiresAFreeMutexEvenWithAPastDeadline)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    struct timespec past = {0, 0};
    ASSERT_RC(0, rmutex_timedlock(&m, &past));
    EXPECT_RC(0, rmutex_unlock(&m));
    struct timespec recent = abs_after(CLOCK_REALTIME, -1000);
    ASSERT_RC(0, rmutex_timedlock(&m, &recent));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexTimedlock, AcceptsNullAbstimeWhenTheMutexIsFree)
{
    /* "abstime is only looked at when the call would block". */
    rmutex_t m;
    init_mutex(&m, lock_name());
    ASSERT_RC(0, rmutex_timedlock(&m, nullptr));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexTimedlock, RejectsAnInvalidAbstimeWhenItWouldBlock)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    struct timespec bad = abs_after(CLOCK_REALTIME, 1000);
    bad.tv_nsec = 2000000000;
    auto t0 = Clock::now();
    EXPECT_RC(EINVAL, rmutex_timedlock(&m, &bad));
    bad.tv_nsec = 1000000000;
    EXPECT_RC(EINVAL, rmutex_timedlock(&m, &bad));
    bad.tv_nsec = -1;
    EXPECT_RC(EINVAL, rmutex_timedlock(&m, &bad));
    EXPECT_RC(EINVAL, rmutex_timedlock(&m, nullptr));
    EXPECT_LT(elapsed_ms(t0), scaled(ms(900)).count()) << "EINVAL must come without waiting";
    EXPECT_EQ(1u, redis().hgetall(name).size());
}

TEST_F(RmutexTimedlock, RejectsAnInvalidAbstimeWhenAnotherThreadHoldsIt)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    HolderThread holder(&m);
    ASSERT_RC(0, holder.wait_locked(ms(5000)));
    struct timespec bad = abs_after(CLOCK_REALTIME, 1000);
    bad.tv_nsec = 2000000000;
    EXPECT_RC(EINVAL, rmutex_timedlock(&m, &bad));
    EXPECT_RC(EINVAL, rmutex_timedlock(&m, nullptr));
    EXPECT_RC(0, holder.release());
}

TEST_F(RmutexTimedlock, ReturnsEtimedoutForAPastDeadlineWhenHeld)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    struct timespec past = {0, 0};
    EXPECT_RC(ETIMEDOUT, rmutex_timedlock(&m, &past));
    struct timespec recent = abs_after(CLOCK_REALTIME, -10);
    EXPECT_RC(ETIMEDOUT, rmutex_timedlock(&m, &recent));
    /* glibc checks tv_sec < 0 before tv_nsec; the header promises EINVAL for
     * a bad tv_nsec whenever the call would block, so we only require one of
     * the two documented failures here. */
    struct timespec negative = {-1, 2000000000};
    int rc = rmutex_timedlock(&m, &negative);
    EXPECT_TRUE(rc == ETIMEDOUT || rc == EINVAL) << err_name(rc);
}

TEST_F(RmutexTimedlock, NeverReturnsEtimedoutBeforeItsDeadline)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    for (int offset : {1, 50, 250, 600}) {
        struct timespec dl = abs_after(CLOCK_REALTIME, offset);
        auto t0 = Clock::now();
        ASSERT_RC(ETIMEDOUT, rmutex_timedlock(&m, &dl));
        EXPECT_TRUE(reached(CLOCK_REALTIME, dl)) << "returned before a deadline " << offset << " ms away";
        EXPECT_LE(elapsed_ms(t0), offset + scaled(ms(1000)).count()) << "deadline " << offset << " ms";
    }
    EXPECT_EQ(1u, redis().hgetall(name).size());
}

TEST_F(RmutexTimedlock, AcquiresWhenTheHolderReleasesBeforeTheDeadline)
{
    std::string name = lock_name();
    auto child = child_holding(name, url(), {"--hold-ms=300"});
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    struct timespec dl = abs_after(CLOCK_REALTIME, scaled(ms(10000)).count());
    auto t0 = Clock::now();
    ASSERT_RC(0, rmutex_timedlock(&m, &dl));
    EXPECT_LT(elapsed_ms(t0), scaled(ms(3000)).count());
    EXPECT_TRUE(child->expect_line("unlocked rc=0", ms(1000)));
    EXPECT_RC(0, rmutex_unlock(&m));
}

class RmutexClocklock : public RedisTest {};

TEST_F(RmutexClocklock, RejectsOtherClocksEvenWhenTheMutexIsFree)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    struct timespec dl = abs_after(CLOCK_REALTIME, 1000);
    for (clockid_t c : {CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID, CLOCK_BOOTTIME, CLOCK_MONOTONIC_RAW,
                        CLOCK_REALTIME_COARSE, static_cast<clockid_t>(-1), static_cast<clockid_t>(12345)}) {
        EXPECT_RC(EINVAL, rmutex_clocklock(&m, c, &dl)) << "clock " << c;
        EXPECT_FALSE(redis().exists(name)) << "clock " << c << " acquired the lock";
    }
    unsigned count = 9;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(0u, count);
}

TEST_F(RmutexClocklock, AcquiresAFreeMutexOnBothAcceptedClocks)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    for (clockid_t c : {CLOCK_MONOTONIC, CLOCK_REALTIME}) {
        struct timespec dl = abs_after(c, 1000);
        ASSERT_RC(0, rmutex_clocklock(&m, c, &dl));
        EXPECT_RC(0, rmutex_unlock(&m));
        struct timespec past = abs_after(c, -1000);
        ASSERT_RC(0, rmutex_clocklock(&m, c, &past));
        EXPECT_RC(0, rmutex_unlock(&m));
        struct timespec bad = dl;
        bad.tv_nsec = 2000000000;
        ASSERT_RC(0, rmutex_clocklock(&m, c, &bad));
        EXPECT_RC(0, rmutex_unlock(&m));
    }
}

TEST_F(RmutexClocklock, HonoursAMonotonicDeadline)
{
    /* A step of the wall clock cannot be made without privileges; a deadline
     * on CLOCK_MONOTONIC exercises the same monotonic wait. */
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    for (int offset : {1, 100, 400}) {
        struct timespec dl = abs_after(CLOCK_MONOTONIC, offset);
        auto t0 = Clock::now();
        ASSERT_RC(ETIMEDOUT, rmutex_clocklock(&m, CLOCK_MONOTONIC, &dl));
        EXPECT_TRUE(reached(CLOCK_MONOTONIC, dl)) << "returned before a deadline " << offset << " ms away";
        EXPECT_LE(elapsed_ms(t0), offset + scaled(ms(1000)).count());
    }
    struct timespec past = abs_after(CLOCK_MONOTONIC, -5);
    EXPECT_RC(ETIMEDOUT, rmutex_clocklock(&m, CLOCK_MONOTONIC, &past));
    struct timespec bad = abs_after(CLOCK_MONOTONIC, 1000);
    bad.tv_nsec = 1000000000;
    EXPECT_RC(EINVAL, rmutex_clocklock(&m, CLOCK_MONOTONIC, &bad));
    EXPECT_RC(EINVAL, rmutex_clocklock(&m, CLOCK_MONOTONIC, nullptr));
    EXPECT_RC(EINVAL, rmutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, &bad));
}

TEST_F(RmutexClocklock, MonotonicWaitAcquiresWhenReleased)
{
    std::string name = lock_name();
    auto child = child_holding(name, url(), {"--hold-ms=300"});
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    struct timespec dl = abs_after(CLOCK_MONOTONIC, scaled(ms(10000)).count());
    ASSERT_RC(0, rmutex_clocklock(&m, CLOCK_MONOTONIC, &dl));
    EXPECT_FALSE(reached(CLOCK_MONOTONIC, dl));
    EXPECT_RC(0, rmutex_unlock(&m));
}

} // namespace
