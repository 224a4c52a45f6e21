/* api_test.cc -- every return code of every rmutex_* call, as rmutex.h
 * specifies them, against a real redis-server.
 *
 * "Held elsewhere" means held by rmutex_test_child (another process) unless a
 * test says "another thread".  Where the header is silent, the assumption is
 * written next to the assertion that depends on it. */
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <regex>

#include "harness.h"

namespace {

using namespace rmt;

/* The first field of the lock hash, or "" if none. */
std::string owner_field(Redis &r, const std::string &name)
{
    auto h = r.hgetall(name);
    return h.empty() ? "" : h.begin()->first;
}

bool contains_ci(std::string hay, std::string needle)
{
    std::transform(hay.begin(), hay.end(), hay.begin(), ::tolower);
    std::transform(needle.begin(), needle.end(), needle.begin(), ::tolower);
    return hay.find(needle) != std::string::npos;
}

/* ===================================================================== */
/* rmutex_init / rmutex_destroy                                           */
/* ===================================================================== */

class RmutexInit : public RedisTest {};

TEST_F(RmutexInit, RejectsNullMutexAndNullName)
{
    rmutex_t m;
    EXPECT_RC(EINVAL, rmutex_init(nullptr, "x", nullptr));
    EXPECT_RC(EINVAL, rmutex_init(&m, nullptr, nullptr));
}

TEST_F(RmutexInit, RejectsEmptyAndOverlongNames)
{
    rmutex_t m;
    EXPECT_RC(EINVAL, rmutex_init(&m, "", nullptr));
    std::string huge(RMUTEX_NAME_MAX + 1, 'n');
    EXPECT_RC(EINVAL, rmutex_init(&m, huge.c_str(), nullptr));
    std::string enormous(1 << 20, 'n');
    EXPECT_RC(EINVAL, rmutex_init(&m, enormous.c_str(), nullptr));
}

TEST_F(RmutexInit, AcceptsANameOfExactlyTheMaximumLengthAndUsesItAsTheKey)
{
    std::string name = lock_name("max:");
    name.append(RMUTEX_NAME_MAX - name.size(), 'x');
    ASSERT_EQ(static_cast<size_t>(RMUTEX_NAME_MAX), name.size());
    rmutex_t m;
    ASSERT_RC(0, rmutex_init(&m, name.c_str(), nullptr));
    ASSERT_RC(0, rmutex_trylock(&m));
    EXPECT_EQ("hash", redis().type(name));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(RmutexInit, RejectsBracesThatDoNotFormAHashTag)
{
    rmutex_t m;
    for (const char *bad : {"a{b", "{}x", "a}b", "{", "}", "{}", "x{}", "{abc", "abc}"})
        EXPECT_RC(EINVAL, rmutex_init(&m, bad, nullptr)) << "name \"" << bad << "\"";
}

TEST_F(RmutexInit, AcceptsAValidHashTagAndLocksUnderThatExactKey)
{
    std::string name = "{" + lock_name("user:1") + "}:cart";
    rmutex_t m;
    ASSERT_RC(0, rmutex_init(&m, name.c_str(), nullptr));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_EQ("hash", redis().type(name));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(RmutexInit, CopiesTheNameAtInit)
{
    std::string name = lock_name();
    std::string buf = name;
    rmutex_t m;
    ASSERT_RC(0, rmutex_init(&m, buf.c_str(), nullptr));
    std::fill(buf.begin(), buf.end(), 'Z');
    ASSERT_RC(0, rmutex_trylock(&m));
    EXPECT_TRUE(redis().exists(name));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexInit, CopiesTheAttributesAtInit)
{
    std::string name = lock_name();
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_setlease(&a, 1500));
    rmutex_t m;
    ASSERT_RC(0, rmutex_init(&m, name.c_str(), &a));
    ASSERT_EQ(0, rmutexattr_setlease(&a, 0));
    ASSERT_EQ(0, rmutexattr_settype(&a, RMUTEX_RECURSIVE));
    ASSERT_EQ(0, rmutexattr_destroy(&a));
    ASSERT_RC(0, rmutex_lock(&m));
    long long pttl = redis().pttl(name);
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1500);
    /* Still NORMAL: a relock by the owner would deadlock; trylock says EBUSY. */
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

class RmutexDestroy : public RedisTest {};

TEST_F(RmutexDestroy, RejectsNullAndZeroedMutex)
{
    EXPECT_RC(EINVAL, rmutex_destroy(nullptr));
    rmutex_t z;
    memset(&z, 0, sizeof z);
    EXPECT_RC(EINVAL, rmutex_destroy(&z));
}

TEST_F(RmutexDestroy, ReturnsEbusyWhileHeldAndChangesNothing)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(EBUSY, rmutex_destroy(&m));
    EXPECT_EQ(1u, redis().hgetall(name).size());
    unsigned count = 0;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(1u, count);
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(RmutexDestroy, ReturnsEbusyWhileAnotherThreadOfThisProcessHoldsIt)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    HolderThread holder(&m);
    ASSERT_RC(0, holder.wait_locked(ms(5000)));
    EXPECT_RC(EBUSY, rmutex_destroy(&m));
    EXPECT_RC(0, holder.release());
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(RmutexDestroy, ReturnsEbusyWhileAThreadWaitsForIt)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    Async waiter([&] {
        int rc = rmutex_lock(&m);
        if (rc == 0)
            rc = rmutex_unlock(&m);
        return rc;
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting >= 1; }, ms(5000)));
    EXPECT_RC(EBUSY, rmutex_destroy(&m));
    ASSERT_TRUE(child->write_line("unlock"));
    ASSERT_TRUE(child->expect_line("unlocked rc=0", ms(5000)));
    ASSERT_TRUE(waiter.wait(ms(5000)));
    EXPECT_RC(0, waiter.rc());
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(RmutexDestroy, LeavesTheStorageReadyForANewInit)
{
    std::string a = lock_name("a"), b = lock_name("b");
    rmutex_t m;
    init_mutex(&m, a);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_RC(0, rmutex_destroy(&m));
    init_mutex(&m, b, RMUTEX_ERRORCHECK);
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_TRUE(redis().exists(b));
    EXPECT_FALSE(redis().exists(a));
    EXPECT_RC(EDEADLK, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
}

/* ===================================================================== */
/* Unusable mutexes: NULL, zeroed, destroyed                               */
/* ===================================================================== */

class RmutexUnusable : public RedisTest {};

void expect_every_call_rejects(rmutex_t *m, const char *what)
{
    SCOPED_TRACE(what);
    struct timespec ts = abs_after(CLOCK_REALTIME, 100);
    struct timespec mono = abs_after(CLOCK_MONOTONIC, 100);
    unsigned count;
    EXPECT_RC(EINVAL, rmutex_lock(m));
    EXPECT_RC(EINVAL, rmutex_trylock(m));
    EXPECT_RC(EINVAL, rmutex_timedlock(m, &ts));
    EXPECT_RC(EINVAL, rmutex_clocklock(m, CLOCK_MONOTONIC, &mono));
    EXPECT_RC(EINVAL, rmutex_unlock(m));
    EXPECT_RC(EINVAL, rmutex_consistent(m));
    EXPECT_RC(EINVAL, rmutex_holdcount(m, &count));
    EXPECT_RC(EINVAL, rmutex_destroy(m));
}

TEST_F(RmutexUnusable, NullMutexIsRejectedByEveryCall)
{
    expect_every_call_rejects(nullptr, "NULL");
    uint64_t token;
    EXPECT_RC(EINVAL, rmutex_fence(nullptr, &token));
}

TEST_F(RmutexUnusable, ZeroedMutexIsRejectedByEveryCall)
{
    rmutex_t z;
    memset(&z, 0, sizeof z);
    expect_every_call_rejects(&z, "zeroed");
}

TEST_F(RmutexUnusable, DestroyedMutexIsRejectedByEveryCall)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_RC(0, rmutex_destroy(&m));
    expect_every_call_rejects(&m, "destroyed");
    EXPECT_FALSE(redis().exists(name));
}

TEST_F(RmutexUnusable, LockKeyHoldingAStringIsEinvalAndTheStringIsUntouched)
{
    std::string name = lock_name();
    ASSERT_EQ("OK", redis().cmd({"SET", name, "not a lock"}).str());
    rmutex_t m;
    init_mutex(&m, name);
    struct timespec ts = abs_after(CLOCK_REALTIME, 500);
    EXPECT_RC(EINVAL, rmutex_trylock(&m));
    EXPECT_STRNE("", rmutex_detail());
    EXPECT_RC(EINVAL, rmutex_lock(&m));
    EXPECT_RC(EINVAL, rmutex_timedlock(&m, &ts));
    EXPECT_EQ("string", redis().type(name));
    EXPECT_EQ("not a lock", redis().get(name).value_or("<missing>"));
    EXPECT_EQ(-1, redis().pttl(name)) << "the string must not get an expiry";
    unsigned count = 9;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(0u, count);
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    EXPECT_EQ("not a lock", redis().get(name).value_or("<missing>"));
}

TEST_F(RmutexUnusable, LockKeyHoldingAListIsEinval)
{
    std::string name = lock_name();
    ASSERT_EQ(1, redis().cmd({"RPUSH", name, "x"}).integer());
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(EINVAL, rmutex_trylock(&m));
    EXPECT_EQ("list", redis().type(name));
}

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

/* ===================================================================== */
/* Types: ERRORCHECK, RECURSIVE, NORMAL                                    */
/* ===================================================================== */

class RmutexErrorcheck : public RedisTest {};

TEST_F(RmutexErrorcheck, RelockByTheOwnerIsEdeadlk)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_ERRORCHECK);
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(EDEADLK, rmutex_lock(&m));
    unsigned count = 0;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(1u, count);
    EXPECT_EQ("1", redis().hgetall(name).begin()->second);
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(EPERM, rmutex_unlock(&m));
}

TEST_F(RmutexErrorcheck, TrylockByTheOwnerIsEbusy)
{
    rmutex_t m;
    init_mutex(&m, lock_name(), RMUTEX_ERRORCHECK);
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(EPERM, rmutex_unlock(&m));
}

TEST_F(RmutexErrorcheck, TimedlockByTheOwnerIsEdeadlkBeforeAbstimeIsChecked)
{
    rmutex_t m;
    init_mutex(&m, lock_name(), RMUTEX_ERRORCHECK);
    ASSERT_RC(0, rmutex_lock(&m));
    struct timespec bad = abs_after(CLOCK_REALTIME, 1000);
    bad.tv_nsec = 2000000000;
    EXPECT_RC(EDEADLK, rmutex_timedlock(&m, &bad));
    EXPECT_RC(EDEADLK, rmutex_timedlock(&m, nullptr));
    struct timespec past = {0, 0};
    EXPECT_RC(EDEADLK, rmutex_timedlock(&m, &past));
    struct timespec mono = abs_after(CLOCK_MONOTONIC, 1000);
    mono.tv_nsec = -5;
    EXPECT_RC(EDEADLK, rmutex_clocklock(&m, CLOCK_MONOTONIC, &mono));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(EPERM, rmutex_unlock(&m));
}

TEST_F(RmutexErrorcheck, UnlockOfAnUnlockedMutexIsEperm)
{
    rmutex_t m;
    init_mutex(&m, lock_name(), RMUTEX_ERRORCHECK);
    EXPECT_RC(EPERM, rmutex_unlock(&m));
}

class RmutexRecursive : public RedisTest {};

TEST_F(RmutexRecursive, CountsRelocksLocallyWithOneFieldInRedis)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_RECURSIVE);
    ASSERT_RC(0, rmutex_lock(&m));
    auto fields = redis().hgetall(name);
    ASSERT_EQ(1u, fields.size());
    EXPECT_EQ("1", fields.begin()->second);

    rmutex_stats_t before = stats();
    struct timespec bad = abs_after(CLOCK_REALTIME, 1000);
    bad.tv_nsec = 2000000000; /* the owner's relock does not block: not checked */
    struct timespec mono = abs_after(CLOCK_MONOTONIC, 1000);
    EXPECT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_timedlock(&m, &bad));
    EXPECT_RC(0, rmutex_clocklock(&m, CLOCK_MONOTONIC, &mono));
    unsigned count = 0;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(5u, count);
    EXPECT_EQ(fields, redis().hgetall(name)) << "the Redis count must stay 1";
    for (int i = 0; i < 4; i++)
        EXPECT_RC(0, rmutex_unlock(&m));
    rmutex_stats_t after = stats();
    EXPECT_EQ(before.round_trips, after.round_trips) << "inner lock/unlock pairs must not talk to Redis";
    EXPECT_EQ(before.acquisitions, after.acquisitions);

    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(1u, count);
    EXPECT_EQ(fields, redis().hgetall(name)) << "still held after inner unlocks";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(0u, count);
    EXPECT_RC(EPERM, rmutex_unlock(&m));
}

TEST_F(RmutexRecursive, AnotherProcessWaitsUntilTheLastUnlock)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_RECURSIVE);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    Child probe({"trylock", name}, url());
    auto line = probe.expect_line("trylock", ms(10000));
    ASSERT_TRUE(line);
    EXPECT_EQ(std::to_string(EBUSY), field(*line, "rc"));
    ASSERT_RC(0, rmutex_unlock(&m));
    Child probe2({"trylock", name}, url());
    line = probe2.expect_line("trylock", ms(10000));
    ASSERT_TRUE(line);
    EXPECT_EQ("0", field(*line, "rc"));
}

class RmutexNormal : public RedisTest {};

TEST_F(RmutexNormal, TimedRelockByTheOwnerWaitsForTheDeadline)
{
    /* "A NORMAL mutex locked again by its owner deadlocks, as in glibc";
     * with a deadline, the deadlock ends in ETIMEDOUT (glibc does the same). */
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    struct timespec dl = abs_after(CLOCK_MONOTONIC, 300);
    EXPECT_RC(ETIMEDOUT, rmutex_clocklock(&m, CLOCK_MONOTONIC, &dl));
    EXPECT_TRUE(reached(CLOCK_MONOTONIC, dl));
    unsigned count = 0;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(1u, count);
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
}

/* ===================================================================== */
/* rmutex_unlock by somebody who does not hold it                          */
/* ===================================================================== */

class RmutexUnlock : public RedisTest {};

TEST_F(RmutexUnlock, ByANonOwnerThreadIsEpermForEveryTypeAndKeepsTheLock)
{
    for (int type : {RMUTEX_NORMAL, RMUTEX_ERRORCHECK, RMUTEX_RECURSIVE}) {
        SCOPED_TRACE("type " + std::to_string(type));
        std::string name = lock_name("t" + std::to_string(type));
        rmutex_t m;
        init_mutex(&m, name, type);
        HolderThread holder(&m);
        ASSERT_RC(0, holder.wait_locked(ms(5000)));
        auto held = redis().hgetall(name);
        ASSERT_EQ(1u, held.size());
        EXPECT_RC(EPERM, rmutex_unlock(&m));
        EXPECT_EQ(held, redis().hgetall(name)) << "an EPERM unlock must not release the lock";
        EXPECT_GT(redis().pttl(name), 0);
        EXPECT_RC(EBUSY, rmutex_trylock(&m));
        EXPECT_RC(0, holder.release());
        EXPECT_FALSE(redis().exists(name));
        EXPECT_RC(0, rmutex_destroy(&m));
    }
}

TEST_F(RmutexUnlock, OfAMutexHeldByAnotherProcessIsEpermAndKeepsTheLock)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    auto held = redis().hgetall(name);
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    EXPECT_EQ(held, redis().hgetall(name));
    ASSERT_TRUE(child->write_line("unlock"));
    EXPECT_TRUE(child->expect_line("unlocked rc=0", ms(5000)));
}

TEST_F(RmutexUnlock, OfAFreeMutexIsEpermForEveryType)
{
    for (int type : {RMUTEX_NORMAL, RMUTEX_ERRORCHECK, RMUTEX_RECURSIVE}) {
        rmutex_t m;
        init_mutex(&m, lock_name("t" + std::to_string(type)), type);
        EXPECT_RC(EPERM, rmutex_unlock(&m)) << "type " << type;
    }
}

/* ===================================================================== */
/* Static initializers                                                     */
/* ===================================================================== */

class RmutexInitializer : public RedisTest {};

TEST_F(RmutexInitializer, WorksWithoutInit)
{
    std::string name = lock_name();
    rmutex_t m = RMUTEX_INITIALIZER(name.c_str());
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_EQ("hash", redis().type(name));
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(RmutexInitializer, CopiesTheNameOnFirstUse)
{
    std::string name = lock_name();
    std::string buf = name;
    rmutex_t m = RMUTEX_INITIALIZER(buf.c_str());
    ASSERT_RC(0, rmutex_trylock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    std::fill(buf.begin(), buf.end(), 'Q');
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_TRUE(redis().exists(name));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexInitializer, NpCarriesTypeAndFlags)
{
    std::string e = lock_name("errorcheck"), r = lock_name("recursive");
    rmutex_t ec = RMUTEX_INITIALIZER_NP(e.c_str(), RMUTEX_ERRORCHECK, 0);
    rmutex_t rc = RMUTEX_INITIALIZER_NP(r.c_str(), static_cast<int>(RMUTEX_RECURSIVE), RMUTEX_FLAG_ROBUST);
    ASSERT_RC(0, rmutex_lock(&ec));
    EXPECT_RC(EDEADLK, rmutex_lock(&ec));
    EXPECT_RC(0, rmutex_unlock(&ec));
    ASSERT_RC(0, rmutex_lock(&rc));
    EXPECT_RC(0, rmutex_lock(&rc));
    unsigned count = 0;
    EXPECT_RC(0, rmutex_holdcount(&rc, &count));
    EXPECT_EQ(2u, count);
    /* Robust but consistent: not in the inconsistent state. */
    EXPECT_RC(EINVAL, rmutex_consistent(&rc));
    EXPECT_RC(0, rmutex_unlock(&rc));
    EXPECT_RC(0, rmutex_unlock(&rc));
    EXPECT_FALSE(redis().exists(r));
}

TEST_F(RmutexInitializer, RejectsABadNameOnFirstUse)
{
    rmutex_t m = RMUTEX_INITIALIZER("a{b");
    EXPECT_RC(EINVAL, rmutex_lock(&m));
    EXPECT_RC(EINVAL, rmutex_trylock(&m));
    rmutex_t e = RMUTEX_INITIALIZER("");
    EXPECT_RC(EINVAL, rmutex_trylock(&e));
}

/* ===================================================================== */
/* rmutex_consistent, rmutex_holdcount, rmutex_fence                       */
/* ===================================================================== */

class RmutexConsistent : public RedisTest {};

TEST_F(RmutexConsistent, IsEinvalForANonRobustOrConsistentHold)
{
    rmutex_t plain, robust;
    init_mutex(&plain, lock_name("plain"));
    init_mutex(&robust, lock_name("robust"), RMUTEX_NORMAL, RMUTEX_ROBUST);
    ASSERT_RC(0, rmutex_lock(&plain));
    EXPECT_RC(EINVAL, rmutex_consistent(&plain));
    EXPECT_RC(0, rmutex_unlock(&plain));
    ASSERT_RC(0, rmutex_lock(&robust));
    EXPECT_RC(EINVAL, rmutex_consistent(&robust));
    EXPECT_RC(0, rmutex_unlock(&robust));
}

class RmutexHoldcount : public RedisTest {};

TEST_F(RmutexHoldcount, RejectsNullArguments)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    unsigned c;
    EXPECT_RC(EINVAL, rmutex_holdcount(&m, nullptr));
    EXPECT_RC(EINVAL, rmutex_holdcount(nullptr, &c));
}

TEST_F(RmutexHoldcount, IsPerThread)
{
    rmutex_t m;
    init_mutex(&m, lock_name(), RMUTEX_RECURSIVE);
    HolderThread holder(&m);
    ASSERT_RC(0, holder.wait_locked(ms(5000)));
    unsigned c = 7;
    EXPECT_RC(0, rmutex_holdcount(&m, &c));
    EXPECT_EQ(0u, c);
    EXPECT_RC(0, holder.release());
}

class RmutexFence : public RedisTest {};

TEST_F(RmutexFence, TokensStrictlyIncreaseAcrossOwners)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    uint64_t t1 = 0, t3 = 0;
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_fence(&m, &t1));
    ASSERT_RC(0, rmutex_unlock(&m));

    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    ASSERT_TRUE(child->write_line("unlock"));
    ASSERT_TRUE(child->expect_line("unlocked rc=0", ms(5000)));
    ASSERT_TRUE(child->write_line("lock"));
    auto again = child->expect_line("held", ms(5000));
    ASSERT_TRUE(again);
    ASSERT_TRUE(child->write_line("unlock"));
    ASSERT_TRUE(child->expect_line("unlocked rc=0", ms(5000)));

    /* The child printed its first token in the line child_holding read; ask
     * for the second one through its second "held" line. */
    ASSERT_EQ("0", field(*again, "rc")) << *again;
    uint64_t t2 = std::stoull(field(*again, "fence"));

    HolderThread other(&m);
    ASSERT_RC(0, other.wait_locked(ms(5000)));
    ASSERT_RC(0, other.release());

    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_fence(&m, &t3));
    ASSERT_RC(0, rmutex_unlock(&m));
    EXPECT_LT(t1, t2);
    EXPECT_LT(t2 + 1, t3) << "the other thread's hold in between took a token too";
    /* The counter is the one key that does not expire. */
    std::string counter = "redisson_lock_token:{" + name + "}";
    EXPECT_TRUE(redis().exists(counter));
    EXPECT_EQ(-1, redis().pttl(counter));
}

TEST_F(RmutexFence, StaysTheSameOnRecursiveRelock)
{
    rmutex_t m;
    init_mutex(&m, lock_name(), RMUTEX_RECURSIVE);
    uint64_t a = 0, b = 1, c = 2;
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_fence(&m, &a));
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_fence(&m, &b));
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_RC(0, rmutex_fence(&m, &c));
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, c);
    ASSERT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(EPERM, rmutex_fence(&m, &c));
}

TEST_F(RmutexFence, IsEpermWithoutAHoldAndEinvalForNull)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    uint64_t t;
    EXPECT_RC(EPERM, rmutex_fence(&m, &t));
    HolderThread holder(&m);
    ASSERT_RC(0, holder.wait_locked(ms(5000)));
    EXPECT_RC(EPERM, rmutex_fence(&m, &t)) << "another thread's hold is not ours";
    EXPECT_RC(0, holder.release());
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(EINVAL, rmutex_fence(&m, nullptr));
    EXPECT_RC(EINVAL, rmutex_fence(nullptr, &t));
    EXPECT_RC(0, rmutex_unlock(&m));
}

/* ===================================================================== */
/* rmutex_force_unlock                                                     */
/* ===================================================================== */

class RmutexForceUnlock : public RedisTest {
  protected:
    /* poll=10000: a waiter that gets in quickly was woken by the release. */
    RmutexForceUnlock() : RedisTest(false, "poll=10000") {}
};

TEST_F(RmutexForceUnlock, ReleasesALockHeldByAnotherProcessWhoseUnlockThenIsEperm)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
    EXPECT_FALSE(redis().exists(name));
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_trylock(&m));
    auto mine = redis().hgetall(name);
    ASSERT_TRUE(child->write_line("unlock"));
    auto line = child->expect_line("unlocked", ms(5000));
    ASSERT_TRUE(line);
    EXPECT_EQ(std::to_string(EPERM), field(*line, "rc"));
    EXPECT_EQ(mine, redis().hgetall(name)) << "the old holder's unlock released our hold";
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexForceUnlock, WakesWaiters)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    Async waiter([&] {
        int rc = rmutex_lock(&m);
        return rc == 0 ? rmutex_unlock(&m) : rc;
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting >= 1 && stats().channels >= 1; }, ms(5000)));
    auto t0 = Clock::now();
    ASSERT_RC(0, rmutex_force_unlock(name.c_str()));
    ASSERT_TRUE(waiter.wait(ms(2000))) << "not woken by the forced release";
    EXPECT_RC(0, waiter.rc());
    EXPECT_LT(std::chrono::duration_cast<ms>(waiter.finished_at() - t0).count(), scaled(ms(2000)).count());
}

TEST_F(RmutexForceUnlock, OfAFreeLockIsZeroAndBadNamesAreEinval)
{
    std::string name = lock_name();
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
    EXPECT_RC(EINVAL, rmutex_force_unlock(nullptr));
    EXPECT_RC(EINVAL, rmutex_force_unlock(""));
    EXPECT_RC(EINVAL, rmutex_force_unlock("a{b"));
    std::string huge(RMUTEX_NAME_MAX + 1, 'f');
    EXPECT_RC(EINVAL, rmutex_force_unlock(huge.c_str()));
}

TEST_F(RmutexForceUnlock, KeepsTheFencingCounter)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    uint64_t before = 0, after = 0;
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_fence(&m, &before));
    ASSERT_RC(0, rmutex_force_unlock(name.c_str()));
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_fence(&m, &after));
    EXPECT_LT(before, after);
    EXPECT_RC(0, rmutex_unlock(&m));
}

/* ===================================================================== */
/* rmutex_shutdown                                                         */
/* ===================================================================== */

class RmutexShutdown : public RedisTest {};

TEST_F(RmutexShutdown, IsEbusyWithAHoldOutstandingAndChangesNothing)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto held = redis().hgetall(name);
    EXPECT_RC(EBUSY, rmutex_shutdown());
    EXPECT_RC(EBUSY, rmutex_configure(url().c_str())) << "the library is still in use";
    EXPECT_EQ(held, redis().hgetall(name));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(0, rmutex_shutdown());
}

TEST_F(RmutexShutdown, IsEbusyWhileAThreadWaits)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    Async waiter([&] {
        int rc = rmutex_lock(&m);
        return rc == 0 ? rmutex_unlock(&m) : rc;
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting >= 1; }, ms(5000)));
    EXPECT_RC(EBUSY, rmutex_shutdown());
    ASSERT_TRUE(child->write_line("unlock"));
    ASSERT_TRUE(waiter.wait(ms(5000)));
    EXPECT_RC(0, waiter.rc());
    EXPECT_RC(0, rmutex_shutdown());
}

TEST_F(RmutexShutdown, ClosesConnectionsAndTheLibraryWorksAgainAfterwards)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    std::string me = std::to_string(getpid());
    ASSERT_FALSE(redis().client_ids("rmutex:cmd:" + me).empty()) << "pool connections are named rmutex:cmd:<pid>";
    ASSERT_RC(0, rmutex_shutdown());
    EXPECT_TRUE(wait_until(
        [&] {
            for (auto &c : redis().client_list())
                if (c["name"].rfind("rmutex:", 0) == 0 && c["name"].size() > me.size() &&
                    c["name"].compare(c["name"].size() - me.size(), me.size(), me) == 0)
                    return false;
            return true;
        },
        ms(2000)))
        << "connections left open after rmutex_shutdown()";
    ASSERT_RC(0, rmutex_shutdown()) << "a second shutdown is harmless";
    /* configure may be called again, then the same mutex works. */
    ASSERT_RC(0, rmutex_configure(url_with("pool=2").c_str()));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_TRUE(redis().exists(name));
    EXPECT_RC(0, rmutex_unlock(&m));
}

/* ===================================================================== */
/* rmutex_configure and the process-wide settings                          */
/* ===================================================================== */

class RmutexConfigure : public RedisTest {
  protected:
    RmutexConfigure() : RedisTest(false, "", /*configure=*/false) {}
};

TEST_F(RmutexConfigure, RejectsMalformedUrls)
{
    std::string hp = host() + ":" + std::to_string(port());
    for (const std::string &bad : std::vector<std::string>{std::string(""), std::string("garbage"), std::string("redis//") + hp,
                            std::string("http://") + hp, std::string("redis://"), std::string("redis://:"),
                            "redis://" + host() + ":99999", "redis://" + host() + ":-1",
                            "redis://" + host() + ":abc", "redis://" + host() + ":6379x",
                            "redis://" + hp + "/notadb", "redis://" + hp + "/-3", "redis://[::1",
                            std::string("unix://"), "redis://" + hp + "?lease", "redis://" + hp + "?lease=abc",
                            "redis://" + hp + "?lease=-5", "redis://" + hp + "?pool=0",
                            "redis://" + hp + "?pool=100000", "redis://" + hp + "?poll=x"}) {
        EXPECT_RC(EINVAL, rmutex_configure(bad.c_str())) << "URL \"" << bad << "\"";
        EXPECT_STRNE("", rmutex_detail()) << "URL \"" << bad << "\"";
    }
    /* None of them counted as a use: a good URL is still accepted. */
    ASSERT_RC(0, rmutex_configure(url().c_str()));
}

TEST_F(RmutexConfigure, RejectsUnknownOptions)
{
    EXPECT_RC(EINVAL, rmutex_configure((base_url() + "?bogus=1").c_str()));
    EXPECT_RC(EINVAL, rmutex_configure((base_url() + "?lease=1000&nosuch=2").c_str()));
    ASSERT_RC(0, rmutex_configure(url().c_str()));
}

TEST_F(RmutexConfigure, RejectsTlsWithEnotsupAndSaysWhy)
{
    EXPECT_RC(ENOTSUP, rmutex_configure(("rediss://" + host() + ":" + std::to_string(port())).c_str()));
    EXPECT_TRUE(contains_ci(rmutex_detail(), "tls")) << "detail: " << rmutex_detail();
    ASSERT_RC(0, rmutex_configure(url().c_str()));
}

TEST_F(RmutexConfigure, RejectsAHostThatDoesNotResolve)
{
    int rc = rmutex_configure("redis://no-such-host.invalid:6379");
    /* EINVAL for a name that does not exist; EAGAIN is the documented code
     * when the resolver fails temporarily (no DNS in a sandbox). */
    EXPECT_TRUE(rc == EINVAL || rc == EAGAIN) << err_name(rc);
    EXPECT_STRNE("", rmutex_detail());
}

TEST_F(RmutexConfigure, IsEbusyAfterFirstUseUntilShutdown)
{
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    rmutex_t m;
    init_mutex(&m, lock_name());
    ASSERT_RC(0, rmutex_trylock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(EBUSY, rmutex_configure(url().c_str()));
    EXPECT_RC(EBUSY, rmutex_configure(url_with("lease=1000").c_str()));
    ASSERT_RC(0, rmutex_shutdown());
    EXPECT_RC(0, rmutex_configure(url_with("lease=1000").c_str()));
    ASSERT_RC(0, rmutex_lock(&m));
    long long pttl = redis().pttl(lock_name());
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1000) << "the new configuration's lease applies";
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexConfigure, AcceptsEveryDocumentedFormAndOption)
{
    if (!server())
        GTEST_SKIP() << "needs the harness's own server (unix socket)";
    std::string hp = host() + ":" + std::to_string(port());
    std::vector<std::string> good = {
        "redis://" + hp,
        "redis://" + hp + "/0",
        "redis://" + hp + "/3?pool=2&lease=1000&poll=500&idle=500&command_timeout=1000&connect_timeout=500",
        "redis://localhost:" + std::to_string(port()),
        "redis://" + hp + "?replicas=0&wait_timeout=100",
        "unix://" + server()->unix_socket(),
        "unix://" + server()->unix_socket() + "?db=2&pool=1",
    };
    std::string name = lock_name();
    for (auto &u : good) {
        SCOPED_TRACE(u);
        ASSERT_RC(0, rmutex_configure(u.c_str()));
        rmutex_t m;
        init_mutex(&m, name);
        ASSERT_RC(0, rmutex_trylock(&m));
        ASSERT_RC(0, rmutex_unlock(&m));
        ASSERT_RC(0, rmutex_destroy(&m));
        ASSERT_RC(0, rmutex_shutdown());
    }
}

TEST_F(RmutexConfigure, SelectsTheDatabaseFromTheUrl)
{
    if (!server())
        GTEST_SKIP() << "writes to database 5 of the harness's own server";
    ASSERT_RC(0, rmutex_configure((base_url() + "/5").c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_FALSE(redis().exists(name)) << "locked in database 0";
    Redis db5(host(), port());
    ASSERT_EQ("OK", db5.cmd({"SELECT", "5"}).str());
    EXPECT_EQ("hash", db5.type(name));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexConfigure, NullMeansTheRmutexUrlEnvironmentVariable)
{
    setenv("RMUTEX_URL", url_with("lease=1200").c_str(), 1);
    ASSERT_RC(0, rmutex_configure(nullptr));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    long long pttl = redis().pttl(name);
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1200);
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexConfigure, WithoutAnyCallUsesRmutexUrl)
{
    setenv("RMUTEX_URL", url_with("lease=1300").c_str(), 1);
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    long long pttl = redis().pttl(name);
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1300);
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexConfigure, SettersCheckTheirRanges)
{
    EXPECT_RC(EINVAL, rmutex_set_pool_size(0));
    EXPECT_RC(EINVAL, rmutex_set_pool_size(1025));
    EXPECT_RC(0, rmutex_set_pool_size(1));
    EXPECT_RC(0, rmutex_set_pool_size(1024));
    EXPECT_RC(0, rmutex_set_pool_size(4));
    EXPECT_RC(EINVAL, rmutex_set_default_lease(0));
    EXPECT_RC(EINVAL, rmutex_set_default_lease(99));
    EXPECT_RC(EINVAL, rmutex_set_default_lease(2147483648UL));
    EXPECT_RC(0, rmutex_set_default_lease(2147483647UL));
    EXPECT_RC(0, rmutex_set_default_lease(100));
    EXPECT_RC(0, rmutex_set_wait_replicas(0, 0));
    EXPECT_RC(0, rmutex_set_lost_callback(nullptr, nullptr));
}

TEST_F(RmutexConfigure, DefaultLeaseAppliesToLaterHolds)
{
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    ASSERT_RC(0, rmutex_set_default_lease(1100));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    long long pttl = redis().pttl(name);
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1100);
    EXPECT_RC(0, rmutex_unlock(&m));
}

/* ===================================================================== */
/* rmutex_stats                                                            */
/* ===================================================================== */

class RmutexStats : public RedisTest {};

TEST_F(RmutexStats, RejectsNullAndWritesOnlyTheGivenSize)
{
    EXPECT_RC(EINVAL, rmutex_stats(nullptr, sizeof(rmutex_stats_t)));
    unsigned char buf[sizeof(rmutex_stats_t) + 16];
    memset(buf, 0xAB, sizeof buf);
    EXPECT_RC(0, rmutex_stats(reinterpret_cast<rmutex_stats_t *>(buf), 8));
    for (size_t i = 8; i < sizeof buf; i++)
        ASSERT_EQ(0xAB, buf[i]) << "byte " << i << " written past the given size";
}

TEST_F(RmutexStats, CountsAcquisitionsAndGauges)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    rmutex_stats_t s0 = stats();
    ASSERT_RC(0, rmutex_lock(&m));
    rmutex_stats_t s1 = stats();
    EXPECT_EQ(s0.acquisitions + 1, s1.acquisitions);
    EXPECT_EQ(1u, s1.held);
    EXPECT_GE(s1.connections, 1u);
    EXPECT_GT(s1.round_trips, s0.round_trips);
    ASSERT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(0u, stats().held);
}

/* ===================================================================== */
/* errno and rmutex_detail                                                 */
/* ===================================================================== */

class RmutexErrno : public RedisTest {};

TEST_F(RmutexErrno, IsLeftAsItWasByEveryCallAlsoWhenTheyFail)
{
    const int sentinel = 31337;
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    auto check = [&](int rc, const char *call) {
        EXPECT_EQ(sentinel, errno) << call << " returned " << err_name(rc);
        errno = sentinel;
    };
    rmutex_t m, mine, rec;
    unsigned count;
    uint64_t token;
    rmutex_stats_t s;
    struct timespec past = {0, 0}, soon = abs_after(CLOCK_REALTIME, 50), bad = soon;
    bad.tv_nsec = 2000000000;
    errno = sentinel;
    check(rmutex_init(&m, nullptr, nullptr), "init(NULL name)");
    check(rmutex_init(&m, "a{b", nullptr), "init(bad braces)");
    check(rmutex_init(&m, name.c_str(), nullptr), "init");
    check(rmutex_trylock(&m), "trylock (EBUSY)");
    check(rmutex_timedlock(&m, &past), "timedlock (past)");
    check(rmutex_timedlock(&m, &soon), "timedlock (ETIMEDOUT)");
    check(rmutex_timedlock(&m, &bad), "timedlock (EINVAL)");
    check(rmutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, &soon), "clocklock (bad clock)");
    check(rmutex_unlock(&m), "unlock (EPERM)");
    check(rmutex_consistent(&m), "consistent (EINVAL)");
    check(rmutex_fence(&m, &token), "fence (EPERM)");
    check(rmutex_holdcount(&m, &count), "holdcount");
    check(rmutex_holdcount(nullptr, &count), "holdcount(NULL)");
    check(rmutex_destroy(&m), "destroy");
    check(rmutex_init(&mine, lock_name("mine").c_str(), nullptr), "init mine");
    check(rmutex_lock(&mine), "lock");
    check(rmutex_fence(&mine, &token), "fence");
    check(rmutex_destroy(&mine), "destroy (EBUSY)");
    check(rmutex_unlock(&mine), "unlock");
    check(rmutex_unlock(&mine), "unlock again (EPERM)");
    rmutexattr_t a;
    check(rmutexattr_init(&a), "attr init");
    check(rmutexattr_settype(&a, RMUTEX_ERRORCHECK), "settype");
    check(rmutex_init(&rec, lock_name("ec").c_str(), &a), "init errorcheck");
    check(rmutex_lock(&rec), "lock errorcheck");
    check(rmutex_lock(&rec), "relock (EDEADLK)");
    check(rmutex_trylock(&rec), "trylock by owner (EBUSY)");
    check(rmutex_unlock(&rec), "unlock errorcheck");
    check(rmutexattr_destroy(&a), "attr destroy");
    check(rmutex_force_unlock(lock_name("free").c_str()), "force_unlock");
    check(rmutex_force_unlock(""), "force_unlock(\"\")");
    check(rmutex_stats(&s, sizeof s), "stats");
    check(rmutex_stats(nullptr, sizeof s), "stats(NULL)");
    check(rmutex_configure(url().c_str()), "configure (EBUSY)");
    check(rmutex_set_pool_size(0), "set_pool_size(0)");
    check(rmutex_set_default_lease(1), "set_default_lease(1)");
    check(rmutex_set_lost_callback(nullptr, nullptr), "set_lost_callback");
    (void)rmutex_detail();
    check(0, "detail");
    (void)rmutex_version();
    (void)rmutex_version_string();
    check(0, "version");
    check(rmutex_shutdown(), "shutdown");
    check(rmutex_configure("garbage"), "configure (EINVAL)");
}

TEST(RmutexErrnoUnreachable, IsLeftAsItWasWhenRedisCannotBeReached)
{
    std::string url = "redis://127.0.0.1:" + std::to_string(free_port());
    ASSERT_RC(0, rmutex_configure(url.c_str()));
    rmutex_t m;
    ASSERT_RC(0, rmutex_init(&m, "rmt:errno:unreachable", nullptr));
    errno = 777;
    EXPECT_RC(EAGAIN, rmutex_trylock(&m));
    EXPECT_EQ(777, errno);
    struct timespec dl = abs_after(CLOCK_REALTIME, 100);
    EXPECT_RC(ETIMEDOUT, rmutex_timedlock(&m, &dl));
    EXPECT_EQ(777, errno);
}

class RmutexDetail : public RedisTest {
  protected:
    RmutexDetail() : RedisTest(true, "", false) {}
};

TEST_F(RmutexDetail, SaysWhyAfterAFailure)
{
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    std::string name = lock_name();
    ASSERT_EQ("OK", redis().cmd({"SET", name, "x"}).str());
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(EINVAL, rmutex_trylock(&m));
    ASSERT_NE(nullptr, rmutex_detail());
    EXPECT_STRNE("", rmutex_detail());
}

TEST_F(RmutexDetail, IsThreadLocal)
{
    ASSERT_RC(EINVAL, rmutex_configure("garbage"));
    std::string mine = rmutex_detail();
    ASSERT_NE("", mine);
    std::string theirs = "unset";
    std::thread([&] { theirs = rmutex_detail(); }).join();
    EXPECT_EQ("", theirs) << "another thread sees this thread's detail";
    EXPECT_EQ(mine, rmutex_detail());
}

TEST_F(RmutexDetail, NeverContainsThePassword)
{
    const std::string pw = "Sup3rS3cretPw";
    auto srv = RedisServer::start({"--requirepass", pw});
    ASSERT_TRUE(srv);
    std::string hp = srv->host() + ":" + std::to_string(srv->port());
    auto no_pw = [&](const char *what) {
        std::string d = rmutex_detail();
        EXPECT_EQ(std::string::npos, d.find(pw)) << what << ": " << d;
        EXPECT_EQ(std::string::npos, d.find("S3cret")) << what << ": " << d;
    };

    /* Rejected URLs that carry the password. */
    EXPECT_RC(EINVAL, rmutex_configure(("redis://:" + pw + "@" + hp + "?bogus=1").c_str()));
    no_pw("unknown option");
    EXPECT_RC(EINVAL, rmutex_configure(("redis://:" + pw + "@" + srv->host() + ":notaport").c_str()));
    no_pw("bad port");
    EXPECT_RC(ENOTSUP, rmutex_configure(("rediss://:" + pw + "@" + hp).c_str()));
    no_pw("rediss");

    /* The right password, then a failure of a lock call. */
    ASSERT_RC(0, rmutex_configure(("redis://:" + pw + "@" + hp).c_str()));
    std::string name = lock_name();
    Redis raw(srv->host(), srv->port(), pw);
    ASSERT_EQ("OK", raw.cmd({"SET", name, "not a lock"}).str());
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(EINVAL, rmutex_trylock(&m));
    EXPECT_STRNE("", rmutex_detail());
    no_pw("string key");
    ASSERT_RC(0, rmutex_shutdown());

    /* A wrong password: Redis refuses the credentials. */
    const std::string wrong = "Wr0ngS3cretPw";
    ASSERT_RC(0, rmutex_configure(("redis://:" + wrong + "@" + hp).c_str()));
    rmutex_t m2;
    init_mutex(&m2, lock_name("other"));
    EXPECT_RC(EACCES, rmutex_trylock(&m2));
    std::string d = rmutex_detail();
    EXPECT_NE("", d);
    EXPECT_EQ(std::string::npos, d.find(wrong)) << d;
    EXPECT_EQ(std::string::npos, d.find("S3cret")) << d;
    struct timespec dl = abs_after(CLOCK_REALTIME, 300);
    int rc = rmutex_timedlock(&m2, &dl);
    /* The header lists EACCES among lock's codes; a timed wait might also
     * keep retrying until its deadline. */
    EXPECT_TRUE(rc == EACCES || rc == ETIMEDOUT) << err_name(rc);
    d = rmutex_detail();
    EXPECT_EQ(std::string::npos, d.find(wrong)) << d;
}

TEST_F(RmutexDetail, AclUserAndPasswordAuthenticate)
{
    ASSERT_EQ("OK", redis().cmd({"ACL", "SETUSER", "rmtuser", "on", ">UserPw123", "~*", "&*", "+@all"}).str());
    ASSERT_RC(0, rmutex_configure(("redis://rmtuser:UserPw123@" + host() + ":" + std::to_string(port())).c_str()));
    rmutex_t m;
    init_mutex(&m, lock_name());
    ASSERT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    bool seen = false;
    for (auto &c : redis().client_list())
        if (c["user"] == "rmtuser")
            seen = true;
    EXPECT_TRUE(seen) << "no connection authenticated as rmtuser";
}

/* ===================================================================== */
/* Redis unreachable                                                       */
/* ===================================================================== */

class RmutexUnreachable : public ::testing::Test {
  protected:
    void SetUp() override
    {
        port_ = free_port();
        url_ = "redis://127.0.0.1:" + std::to_string(port_);
        ASSERT_RC(0, rmutex_configure(url_.c_str()));
        ASSERT_RC(0, rmutex_init(&m_, "rmt:unreachable", nullptr));
    }
    int port_ = 0;
    std::string url_;
    rmutex_t m_;
};

TEST_F(RmutexUnreachable, TrylockIsEagainWithADetail)
{
    auto t0 = Clock::now();
    EXPECT_RC(EAGAIN, rmutex_trylock(&m_));
    EXPECT_STRNE("", rmutex_detail());
    EXPECT_LT(elapsed_ms(t0), scaled(ms(3000)).count()) << "trylock must not wait long";
}

TEST_F(RmutexUnreachable, TimedlockIsEtimedoutNearItsDeadline)
{
    struct timespec dl = abs_after(CLOCK_REALTIME, 500);
    auto t0 = Clock::now();
    EXPECT_RC(ETIMEDOUT, rmutex_timedlock(&m_, &dl));
    EXPECT_TRUE(reached(CLOCK_REALTIME, dl));
    EXPECT_LE(elapsed_ms(t0), 500 + scaled(ms(1000)).count());
    EXPECT_STRNE("", rmutex_detail());
    struct timespec mono = abs_after(CLOCK_MONOTONIC, 300);
    EXPECT_RC(ETIMEDOUT, rmutex_clocklock(&m_, CLOCK_MONOTONIC, &mono));
    EXPECT_TRUE(reached(CLOCK_MONOTONIC, mono));
}

TEST_F(RmutexUnreachable, LockKeepsWaitingAndSucceedsOnceAServerAppears)
{
    Async locker([&] { return rmutex_lock(&m_); });
    /* A negative check: it must not come back while nothing listens. */
    EXPECT_FALSE(wait_until_unscaled([&] { return locker.done(); }, ms(1500)))
        << "rmutex_lock returned " << err_name(locker.rc()) << " while Redis was unreachable";
    auto srv = RedisServer::start({}, port_);
    ASSERT_TRUE(srv);
    ASSERT_TRUE(locker.wait(ms(10000))) << "rmutex_lock did not notice the server";
    EXPECT_RC(0, locker.rc());
    Redis raw(srv->host(), srv->port());
    EXPECT_EQ("hash", raw.type("rmt:unreachable"));
    /* The hold belongs to the locker thread, which has ended; force it free
     * so the test leaves nothing behind. */
    EXPECT_RC(0, rmutex_force_unlock("rmt:unreachable"));
}

struct OutageLog {
    std::mutex mu;
    std::vector<int> calls; /* the down argument of each call, in order */
    std::string first_detail;
};

static void on_outage(int down, const char *detail, void *arg)
{
    auto *log = static_cast<OutageLog *>(arg);
    std::lock_guard<std::mutex> g(log->mu);
    if (log->calls.empty()) log->first_detail = detail ? detail : "(null)";
    log->calls.push_back(down);
}

TEST_F(RmutexUnreachable, OutageCallbackSaysDownOnceThenUpOnce)
{
    OutageLog log;
    ASSERT_RC(0, rmutex_set_outage_callback(on_outage, &log));
    auto calls = [&] { std::lock_guard<std::mutex> g(log.mu); return log.calls; };
    EXPECT_RC(EAGAIN, rmutex_trylock(&m_));
    Async locker([&] { return rmutex_lock(&m_); });
    /* The lock keeps dialling; the callback must not repeat itself. */
    EXPECT_FALSE(wait_until_unscaled([&] { return calls().size() > 1; }, ms(1500)));
    ASSERT_EQ(std::vector<int>{1}, calls()) << "one call, down = 1";
    EXPECT_NE(std::string::npos, log.first_detail.find("127.0.0.1")) << log.first_detail;
    auto srv = RedisServer::start({}, port_);
    ASSERT_TRUE(srv);
    ASSERT_TRUE(locker.wait(ms(10000)));
    EXPECT_RC(0, locker.rc());
    ASSERT_TRUE(wait_until([&] { return calls().size() >= 2; }, ms(3000)));
    EXPECT_EQ((std::vector<int>{1, 0}), calls()) << "then one call, down = 0";
    EXPECT_RC(0, rmutex_force_unlock("rmt:unreachable"));
    EXPECT_RC(0, rmutex_set_outage_callback(nullptr, nullptr));
}

/* ===================================================================== */
/* Refusals by the server: replica, OOM, missing replicas                  */
/* ===================================================================== */

class RmutexServerRefuses : public RedisTest {
  protected:
    RmutexServerRefuses() : RedisTest(/*own_server=*/true, "", /*configure=*/false) {}
};

TEST_F(RmutexServerRefuses, AReadOnlyReplicaIsErofs)
{
    auto replica = RedisServer::start({"--replicaof", host(), std::to_string(port())});
    ASSERT_TRUE(replica);
    ASSERT_RC(0, rmutex_configure(replica->url().c_str()));
    rmutex_t m;
    init_mutex(&m, lock_name());
    EXPECT_RC(EROFS, rmutex_trylock(&m));
    EXPECT_STRNE("", rmutex_detail());
    EXPECT_RC(EROFS, rmutex_lock(&m));
    struct timespec dl = abs_after(CLOCK_REALTIME, 2000);
    EXPECT_RC(EROFS, rmutex_timedlock(&m, &dl));
    EXPECT_FALSE(redis().exists(lock_name()));
}

TEST_F(RmutexServerRefuses, OutOfMemoryIsEnomemAndPassesWhenMemoryIsBack)
{
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    rmutex_t m;
    init_mutex(&m, lock_name());
    ASSERT_RC(0, rmutex_trylock(&m)); /* connections and scripts are in place */
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_EQ("OK", redis().cmd({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).str());
    ASSERT_EQ("OK", redis().cmd({"CONFIG", "SET", "maxmemory", "1"}).str());
    EXPECT_RC(ENOMEM, rmutex_trylock(&m));
    EXPECT_STRNE("", rmutex_detail());
    EXPECT_RC(ENOMEM, rmutex_lock(&m));
    EXPECT_FALSE(redis().exists(lock_name()));
    ASSERT_EQ("OK", redis().cmd({"CONFIG", "SET", "maxmemory", "0"}).str());
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexServerRefuses, AUserWithoutScriptPermissionIsEacces)
{
    ASSERT_EQ("OK", redis().cmd({"ACL", "SETUSER", "noscripts", "on", ">NoScriptPw1", "~*", "&*", "+@all",
                                 "-@scripting"}).str());
    ASSERT_RC(0, rmutex_configure(("redis://noscripts:NoScriptPw1@" + host() + ":" + std::to_string(port())).c_str()));
    rmutex_t m;
    init_mutex(&m, lock_name());
    EXPECT_RC(EACCES, rmutex_trylock(&m));
    std::string d = rmutex_detail();
    EXPECT_NE("", d);
    EXPECT_EQ(std::string::npos, d.find("NoScriptPw1")) << d;
    EXPECT_RC(EACCES, rmutex_lock(&m));
    EXPECT_FALSE(redis().exists(lock_name()));
}

TEST_F(RmutexServerRefuses, TooFewReplicasIsEnoreplicasAndTheHoldIsGivenBack)
{
    /* The server has no replica at all; WAIT 1 can only time out. */
    ASSERT_RC(0, rmutex_configure(url_with("replicas=1&wait_timeout=100").c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_trylock(&m));
    EXPECT_STRNE("", rmutex_detail());
    EXPECT_FALSE(redis().exists(name)) << "the unacknowledged hold was not given back";
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_lock(&m));
    EXPECT_FALSE(redis().exists(name));
    unsigned count = 9;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(0u, count);
    EXPECT_RC(EPERM, rmutex_unlock(&m));
}

TEST_F(RmutexServerRefuses, WaitReplicasSetAtRunTimeAppliesToo)
{
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    ASSERT_RC(0, rmutex_set_wait_replicas(1, 100));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_trylock(&m));
    EXPECT_FALSE(redis().exists(name));
    ASSERT_RC(0, rmutex_set_wait_replicas(0, 0));
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexServerRefuses, WaitForAReplicaThatExistsSucceeds)
{
    /* Redis 7 waits 5 s before a diskless full sync by default. */
    ASSERT_EQ("OK", redis().cmd({"CONFIG", "SET", "repl-diskless-sync-delay", "0"}).str());
    auto replica = RedisServer::start({"--replicaof", host(), std::to_string(port())});
    ASSERT_TRUE(replica);
    ASSERT_TRUE(wait_until(
        [&] { return redis().cmd({"INFO", "replication"}).str().find("state=online") != std::string::npos; },
        ms(10000)))
        << "the replica did not connect";
    ASSERT_RC(0, rmutex_configure(url_with("replicas=1&wait_timeout=2000").c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_trylock(&m));
    Redis r(replica->host(), replica->port());
    EXPECT_EQ("hash", r.type(name)) << "acknowledged means the replica has it";
    EXPECT_RC(0, rmutex_unlock(&m));
}

} // namespace
