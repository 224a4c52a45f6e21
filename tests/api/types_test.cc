/* types_test.cc -- the mutex types (ERRORCHECK, RECURSIVE, NORMAL),
 * rmutex_unlock, rmutex_consistent, rmutex_holdcount and rmutex_fence.
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
    EXPECT_LT(t2, t3);
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

} // namespace
