/* redisson_compat_test.cc -- rmutex and a Redisson RLock exclude each other.
 *
 * The second client here is written from the protocol notes
 * (redisson-lock-design.md §2), not from rmutex's sources: its own Lua for
 * acquire (§2.1), unlock with the request-id latch (§2.2) and renewal (§2.3),
 * sent through hiredis with EVAL.  Its owner id is "<uuid>:<thread-id>" like
 * Redisson's.  The tests also look at the raw Redis state rmutex leaves
 * (key type, the one field, its value, the PTTL) and at the release message
 * on the channel a plain SUBSCRIBE sees.
 */
#include <unistd.h>

#include <regex>

#include "harness.h"
#include "redisson_client.h"

namespace {

using namespace rmt;

const char *kJavaUuid = "0f8fad5b-d9cb-469f-a165-70867728950e";

/* poll=10000 so that a waiter that gets in quickly was woken by the message. */
class RedissonCompat : public RedisTest {
  protected:
    RedissonCompat() : RedisTest(false, "poll=10000") {}
};

TEST_F(RedissonCompat, RedissonHolderMakesRmutexTrylockReturnEbusy)
{
    std::string name = lock_name();
    RedissonClient java(redis(), kJavaUuid, 1);
    ASSERT_EQ(-1, java.acquire(name, 30000));
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    struct timespec dl = abs_after(CLOCK_MONOTONIC, 200);
    EXPECT_RC(ETIMEDOUT, rmutex_clocklock(&m, CLOCK_MONOTONIC, &dl));
    auto h = redis().hgetall(name);
    ASSERT_EQ(1u, h.size()) << "rmutex added a field to a lock it does not hold";
    EXPECT_EQ("1", h[java.owner()]);
    EXPECT_EQ(1, java.unlock(name));
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RedissonCompat, RedissonReentrantHoldKeepsRmutexOutUntilItsLastUnlock)
{
    std::string name = lock_name();
    RedissonClient java(redis(), kJavaUuid, 7);
    ASSERT_EQ(-1, java.acquire(name, 30000));
    ASSERT_EQ(-1, java.acquire(name, 30000));
    EXPECT_EQ("2", redis().hgetall(name)[java.owner()]);
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    EXPECT_EQ(0, java.unlock(name));
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    EXPECT_EQ(1, java.unlock(name));
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RedissonCompat, RmutexLockWaitsUntilTheRedissonUnlockPublishes)
{
    std::string name = lock_name();
    RedissonClient java(redis(), kJavaUuid, 1);
    ASSERT_EQ(-1, java.acquire(name, 30000));
    rmutex_t m;
    init_mutex(&m, name);
    Async waiter([&] { return rmutex_lock(&m); });
    ASSERT_TRUE(wait_until([&] { return redis().numsub(prefixed("redisson_lock__channel", name)) >= 1; }, ms(5000)))
        << "rmutex did not subscribe to the Redisson channel";
    EXPECT_FALSE(wait_until_unscaled([&] { return waiter.done(); }, ms(300)))
        << "rmutex_lock returned " << err_name(waiter.rc()) << " while Redisson held the lock";
    rmutex_stats_t before = stats();
    auto t0 = Clock::now();
    ASSERT_EQ(1, java.unlock(name));
    ASSERT_TRUE(waiter.wait(ms(1000))) << "not woken by the Redisson release message";
    EXPECT_RC(0, waiter.rc());
    EXPECT_LT(std::chrono::duration_cast<ms>(waiter.finished_at() - t0).count(), scaled(ms(1000)).count());
    rmutex_stats_t after = stats();
    EXPECT_EQ(before.wakeups_pubsub + 1, after.wakeups_pubsub);
    EXPECT_EQ(before.wakeups_poll, after.wakeups_poll);
    /* Now Redisson is kept out. */
    long long pttl = java.acquire(name, 30000);
    EXPECT_GT(pttl, 0);
    EXPECT_EQ(1u, redis().hgetall(name).size());
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
}

TEST_F(RedissonCompat, RmutexHolderMakesTheRedissonAcquireReturnAPttl)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_STALLED, 2000);
    ASSERT_RC(0, rmutex_lock(&m));
    auto before = redis().hgetall(name);
    RedissonClient java(redis(), kJavaUuid, 1);
    long long pttl = java.acquire(name, 30000);
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 2000);
    EXPECT_EQ(before, redis().hgetall(name)) << "the Redisson attempt changed rmutex's hold";
    /* Redisson's unlock and renewal of a lock it does not own do nothing. */
    EXPECT_EQ(-1, java.unlock(name));
    EXPECT_EQ(0, java.renew(name, 30000));
    EXPECT_EQ(before, redis().hgetall(name));
    EXPECT_LE(redis().pttl(name), 2000);
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(-1, java.acquire(name, 30000)) << "Redisson gets in after rmutex's unlock";
    EXPECT_EQ(1, java.unlock(name));
}

/* Redisson keeps a hold count in its field's value; rmutex counts
 * recursion in the client and keeps the acquisition's number there (a
 * late release ends only the hold it names).  Neither reads the other's
 * field. */
TEST_F(RedissonCompat, RmutexHoldIsAHashWithOneOwnerFieldNamingTheAcquisition)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_EQ("hash", redis().type(name));
    auto h = redis().hgetall(name);
    ASSERT_EQ(1u, h.size());
    const std::regex owner("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9]+$");
    EXPECT_TRUE(std::regex_match(h.begin()->first, owner)) << "field " << h.begin()->first;
    EXPECT_TRUE(std::regex_match(h.begin()->second, std::regex("^[1-9][0-9]*$"))) << h.begin()->second;
    long long pttl = redis().pttl(name);
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 30000) << "the default watchdog lease is 30000 ms";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
}

TEST_F(RedissonCompat, PttlIsWithinTheFixedLease)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_STALLED, 1500);
    ASSERT_RC(0, rmutex_lock(&m));
    long long pttl = redis().pttl(name);
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1500);
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RedissonCompat, OwnerIsOneUuidPerProcessAndANumberPerThread)
{
    std::string a = lock_name("a"), b = lock_name("b");
    rmutex_t ma, mb;
    init_mutex(&ma, a);
    init_mutex(&mb, b);
    ASSERT_RC(0, rmutex_lock(&ma));
    HolderThread other(&mb);
    ASSERT_RC(0, other.wait_locked(ms(5000)));
    std::string fa = redis().hgetall(a).begin()->first, fb = redis().hgetall(b).begin()->first;
    auto uuid = [](const std::string &f) { return f.substr(0, f.rfind(':')); };
    EXPECT_EQ(uuid(fa), uuid(fb)) << "one process, one uuid";
    EXPECT_NE(fa, fb) << "two threads, two thread numbers";
    EXPECT_RC(0, other.release());
    EXPECT_RC(0, rmutex_unlock(&ma));

    /* Another process has another uuid. */
    auto child = child_holding(a, url());
    ASSERT_TRUE(child);
    std::string fc = redis().hgetall(a).begin()->first;
    EXPECT_NE(uuid(fa), uuid(fc));
}

TEST_F(RedissonCompat, RmutexUnlockPublishesZeroOnTheRedissonChannel)
{
    std::string name = lock_name();
    Redis sub(host(), port(), password_);
    ASSERT_TRUE(sub.ok());
    std::string channel = "redisson_lock__channel:{" + name + "}";
    Reply r = sub.cmd({"SUBSCRIBE", channel});
    ASSERT_TRUE(r);
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    auto msg = sub.next_message(ms(2000));
    ASSERT_TRUE(msg) << "no message on " << channel;
    EXPECT_EQ(channel, msg->first);
    EXPECT_EQ("0", msg->second);
}

TEST_F(RedissonCompat, ANameWithAHashTagPublishesOnTheChannelWithoutExtraBraces)
{
    std::string name = "{" + lock_name("tag") + "}:cart";
    Redis sub(host(), port(), password_);
    ASSERT_TRUE(sub.ok());
    std::string channel = "redisson_lock__channel:" + name;
    ASSERT_TRUE(sub.cmd({"SUBSCRIBE", channel}));
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    /* And the Redisson client agrees on every key. */
    RedissonClient java(redis(), kJavaUuid, 3);
    EXPECT_GT(java.acquire(name, 30000), 0);
    ASSERT_RC(0, rmutex_unlock(&m));
    auto msg = sub.next_message(ms(2000));
    ASSERT_TRUE(msg) << "no message on " << channel;
    EXPECT_EQ(channel, msg->first);
    EXPECT_EQ("0", msg->second);
    EXPECT_EQ(-1, java.acquire(name, 30000));
    EXPECT_EQ(1, java.unlock(name));
}

TEST_F(RedissonCompat, RmutexWaiterGetsInWhenARedissonLeaseExpires)
{
    /* No message is published when a lease runs out: the waiter's bounded
     * wait (at most the lock's remaining lease) must find it free. */
    std::string name = lock_name();
    RedissonClient java(redis(), kJavaUuid, 1);
    rmutex_t m;
    init_mutex(&m, name);
    auto t0 = Clock::now(); /* before the lease starts: a slow machine only adds */
    ASSERT_EQ(-1, java.acquire(name, 700));
    ASSERT_RC(0, rmutex_lock(&m));
    auto waited = elapsed_ms(t0);
    EXPECT_GE(waited, 690) << "acquired before the Redisson lease ran out";
    EXPECT_LT(waited, 700 + scaled(ms(1000)).count());
    EXPECT_RC(0, rmutex_unlock(&m));
}

} // namespace
