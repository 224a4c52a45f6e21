/* lifecycle_test.cc -- rmutex_init, rmutex_destroy, the static initializers,
 * and mutexes no call accepts (NULL, zeroed, destroyed, a lock key holding
 * other data).
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

} // namespace
