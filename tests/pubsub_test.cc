/* pubsub_test.cc -- the subscription multiplexer: one pub/sub connection per
 * process, waking waiters on release messages, resubscribing after the
 * connection is killed, and falling back to the bounded poll when a message
 * is lost.
 *
 * poll=10000 unless a test says otherwise, so that a wake-up within a second
 * can only have come from pub/sub. */
#include <unistd.h>

#include "harness.h"

namespace {

using namespace rmt;

std::string sub_name() { return "rmutex:sub:" + std::to_string(getpid()); }

class Pubsub : public RedisTest {
  protected:
    Pubsub() : RedisTest(false, "poll=10000") {}
    std::string channel(const std::string &name) { return "redisson_lock__channel:{" + name + "}"; }
};

TEST_F(Pubsub, ReleaseWakesAWaiterThroughPubsubNotThePoll)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    uint64_t subscribed = stats().wakeups_subscribe;
    Async waiter([&] { return rmutex_lock(&m); });
    /* Subscribed, and the subscription's confirmation seen by the waiter
     * (its re-check after it: the server may list the subscription before
     * the confirmation reaches this process). */
    ASSERT_TRUE(wait_until([&] { return redis().numsub(channel(name)) == 1 && stats().waiting == 1 &&
                                        stats().wakeups_subscribe > subscribed; }, ms(5000)));
    EXPECT_EQ(1u, redis().client_ids(sub_name()).size());
    rmutex_stats_t s0 = stats();
    auto t0 = Clock::now();
    ASSERT_TRUE(child->write_line("unlock"));
    /* The poll is 10 s: a waiter in within 1 s was woken by pub/sub. */
    ASSERT_TRUE(waiter.wait(ms(1000))) << "not woken within 1 s of the release";
    EXPECT_RC(0, waiter.rc());
    EXPECT_LT(std::chrono::duration_cast<ms>(waiter.finished_at() - t0).count(), scaled(ms(1000)).count());
    rmutex_stats_t s1 = stats();
    EXPECT_EQ(s0.wakeups_poll, s1.wakeups_poll) << "woken by the poll";
    /* Its one wake-up is the release's message -- unless the re-check that
     * follows the confirmation was still on its way and found the lock
     * free (a loaded machine): then it needed none. */
    EXPECT_LE(s1.wakeups_pubsub - s0.wakeups_pubsub, 1u);
    EXPECT_GE(s1.contended, 1u);
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
}

TEST_F(Pubsub, ResubscribesAfterClientKillAndTheNextWakeUpComesFromPubsub)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    /* Two waiters; each records the counters the moment it gets the lock. */
    std::mutex mu;
    std::vector<rmutex_stats_t> at_acquire;
    auto body = [&] {
        int rc = rmutex_lock(&m);
        if (rc == 0) {
            std::lock_guard<std::mutex> g(mu);
            at_acquire.push_back(stats());
        }
        int u = rc == 0 ? rmutex_unlock(&m) : rc;
        return rc != 0 ? rc : u;
    };
    Async w1(body), w2(body);
    ASSERT_TRUE(wait_until([&] { return stats().waiting == 2 && redis().numsub(channel(name)) == 1; }, ms(5000)));
    auto ids = redis().client_ids(sub_name());
    ASSERT_EQ(1u, ids.size()) << "one pub/sub connection named " << sub_name();
    rmutex_stats_t s0 = stats();
    ASSERT_TRUE(redis().client_kill_id(ids[0]));
    auto t_kill = Clock::now();
    ASSERT_TRUE(wait_until(
        [&] {
            auto now = redis().client_ids(sub_name());
            return now.size() == 1 && now[0] != ids[0] && redis().numsub(channel(name)) == 1 &&
                   stats().subscribes > s0.subscribes;
        },
        ms(1000)))
        << "not resubscribed " << elapsed_ms(t_kill) << " ms after CLIENT KILL";
    ASSERT_TRUE(wait_until([&] { return stats().waiting == 2; }, ms(1000)));
    EXPECT_FALSE(w1.done() || w2.done()) << "a waiter returned while the lock was held";
    rmutex_stats_t s1 = stats();
    EXPECT_GE(s1.reconnects, s0.reconnects + 1);

    ASSERT_TRUE(child->write_line("unlock"));
    ASSERT_TRUE(child->expect_line("unlocked rc=0", ms(2000)));
    auto t_unlock = Clock::now();
    ASSERT_TRUE(wait_until([&] { return w1.done() && w2.done(); }, ms(2000)))
        << "waiters not woken " << elapsed_ms(t_unlock) << " ms after the release (poll is 10 s)";
    EXPECT_RC(0, w1.rc());
    EXPECT_RC(0, w2.rc());
    std::lock_guard<std::mutex> g(mu);
    ASSERT_EQ(2u, at_acquire.size());
    /* The first one in was woken by the release message. */
    EXPECT_EQ(s1.wakeups_pubsub + 1, at_acquire[0].wakeups_pubsub);
    EXPECT_EQ(s1.wakeups_poll, at_acquire[0].wakeups_poll);
    EXPECT_EQ(s1.wakeups_poll, stats().wakeups_poll) << "nobody needed the poll";
}

TEST_F(Pubsub, OneConnectionAndOneSubscriptionPerLockForTheWholeProcess)
{
    std::vector<std::string> names = {lock_name("a"), lock_name("b"), lock_name("c")};
    std::vector<std::unique_ptr<Child>> holders;
    for (auto &n : names) {
        holders.push_back(child_holding(n, url()));
        ASSERT_TRUE(holders.back());
    }
    std::vector<rmutex_t> ms_(3);
    std::vector<std::unique_ptr<Async>> waiters;
    for (size_t i = 0; i < names.size(); i++) {
        init_mutex(&ms_[i], names[i]);
        for (int k = 0; k < 2; k++)
            waiters.push_back(std::make_unique<Async>([&, i] {
                int rc = rmutex_lock(&ms_[i]);
                return rc == 0 ? rmutex_unlock(&ms_[i]) : rc;
            }));
    }
    ASSERT_TRUE(wait_until([&] { return stats().waiting == 6; }, ms(5000)));
    ASSERT_TRUE(wait_until(
        [&] {
            for (auto &n : names)
                if (redis().numsub(channel(n)) != 1)
                    return false;
            return true;
        },
        ms(2000)));
    EXPECT_EQ(1u, redis().client_ids(sub_name()).size());
    rmutex_stats_t s = stats();
    EXPECT_EQ(1u, s.pubsub_connections);
    EXPECT_EQ(3u, s.channels);
    for (auto &h : holders)
        ASSERT_TRUE(h->write_line("unlock"));
    for (auto &w : waiters) {
        ASSERT_TRUE(w->wait(ms(3000)));
        EXPECT_RC(0, w->rc());
    }
}

class PubsubIdle : public RedisTest {
  protected:
    PubsubIdle() : RedisTest(false, "poll=10000&idle=300") {}
};

TEST_F(PubsubIdle, UnusedSubscriptionIsDroppedAfterTheIdleTime)
{
    std::string name = lock_name();
    auto child = child_holding(name, url(), {"--hold-ms=200"});
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    std::string ch = "redisson_lock__channel:{" + name + "}";
    EXPECT_TRUE(wait_until([&] { return redis().numsub(ch) == 0; }, ms(300 + 1000)))
        << "still subscribed long after the idle time";
    EXPECT_GE(stats().unsubscribes, 1u);
    EXPECT_EQ(0u, stats().channels);
}

class PubsubPoll : public RedisTest {
  protected:
    PubsubPoll() : RedisTest(false, "poll=300") {}
};

TEST_F(PubsubPoll, LostReleaseMessageIsCoveredByThePoll)
{
    /* A holder whose release publishes nothing: a raw hash deleted without a
     * PUBLISH.  The waiter must find out within its poll bound. */
    std::string name = lock_name();
    ASSERT_EQ(1, redis().cmd({"HSET", name, "11111111-2222-3333-4444-555555555555:1", "1"}).integer());
    ASSERT_EQ(1, redis().cmd({"PEXPIRE", name, "60000"}).integer());
    rmutex_t m;
    init_mutex(&m, name);
    Async waiter([&] { return rmutex_lock(&m); });
    /* The waiter re-checks at least every 300 ms while the lock is held
     * (its lease is 60 s, so only the poll bound can wake it). */
    ASSERT_TRUE(wait_until([&] { return stats().wakeups_poll >= 1; }, ms(300 + 1000)))
        << "no poll wake-up while the lock was held";
    EXPECT_FALSE(waiter.done());
    rmutex_stats_t s0 = stats();
    auto t0 = Clock::now();
    ASSERT_EQ(1, redis().cmd({"DEL", name}).integer());
    ASSERT_TRUE(waiter.wait(ms(300 + 1000))) << "the poll bound of 300 ms was not honoured";
    EXPECT_RC(0, waiter.rc());
    EXPECT_LT(std::chrono::duration_cast<ms>(waiter.finished_at() - t0).count(), 300 + scaled(ms(1000)).count());
    rmutex_stats_t s1 = stats();
    EXPECT_EQ(s0.wakeups_pubsub, s1.wakeups_pubsub) << "no release message was published";
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
}

TEST_F(Pubsub, ExpiryWithoutReleaseIsNoticedWithinTheRemainingLease)
{
    /* poll=10000, but the lock's remaining lease (700 ms) bounds the wait.
     * The lower bound is anchored before the PEXPIRE: the lease cannot have
     * run out sooner, however slow the machine. */
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_EQ(1, redis().cmd({"HSET", name, "11111111-2222-3333-4444-555555555555:1", "1"}).integer());
    auto t0 = Clock::now();
    ASSERT_EQ(1, redis().cmd({"PEXPIRE", name, "700"}).integer());
    ASSERT_RC(0, rmutex_lock(&m));
    auto waited = elapsed_ms(t0);
    EXPECT_GE(waited, 690) << "acquired before the lease ran out";
    EXPECT_LT(waited, 700 + scaled(ms(1000)).count());
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Pubsub, KilledCommandConnectionIsRedialled)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    auto ids = redis().client_ids("rmutex:cmd:" + std::to_string(getpid()));
    ASSERT_FALSE(ids.empty());
    for (auto id : ids)
        redis().client_kill_id(id);
    rmutex_stats_t s0 = stats();
    /* The next calls find dead connections and must not fail because of it. */
    for (int i = 0; i < 3; i++) {
        ASSERT_RC(0, rmutex_lock(&m));
        ASSERT_RC(0, rmutex_unlock(&m));
    }
    EXPECT_GE(stats().reconnects, s0.reconnects + 1);
    EXPECT_FALSE(redis().exists(name));
}

} // namespace
