/* watchdog_test.cc -- leases: renewed by the watchdog, fixed, and lost.
 *
 * lease=1000 in the URL makes the watchdog lease 1 s (renewed every ~333 ms). */
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "harness.h"

namespace {

using namespace rmt;

struct LostLog {
    std::mutex mu;
    int calls = 0;
    rmutex_t *m = nullptr;
    std::string name;
    void *arg = nullptr;
    Clock::time_point at;
};

void on_lost(rmutex_t *m, const char *name, void *arg)
{
    auto *log = static_cast<LostLog *>(arg);
    std::lock_guard<std::mutex> g(log->mu);
    if (log->calls++ == 0) {
        log->m = m;
        log->name = name ? name : "<null>";
        log->arg = arg;
        log->at = Clock::now();
    }
}

int lost_calls(LostLog &log)
{
    std::lock_guard<std::mutex> g(log.mu);
    return log.calls;
}

class Watchdog : public RedisTest {
  protected:
    Watchdog() : RedisTest(false, "lease=1000") {}
};

TEST_F(Watchdog, RenewsAOneSecondLeaseHeldForFiveSeconds)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    long long lo = LLONG_MAX, hi = LLONG_MIN;
    int samples = 0;
    auto t0 = Clock::now();
    while (elapsed_ms(t0) < 5000) {
        long long p = redis().pttl(name);
        lo = std::min(lo, p);
        hi = std::max(hi, p);
        samples++;
        ASSERT_GT(p, 0) << "the lease ran out after " << elapsed_ms(t0) << " ms (PTTL " << p << ")";
        ASSERT_LE(p, 1000) << "a lease longer than 1000 ms";
        /* Sampling, not waiting for a condition: the property must hold at
         * every instant of the 5 s. */
        std::this_thread::sleep_for(ms(10));
    }
    rmutex_stats_t s = stats();
    EXPECT_GE(s.renewals, 3u);
    EXPECT_GE(s.renewal_calls, 1u);
    EXPECT_EQ(0u, s.locks_lost);
    EXPECT_GT(samples, 100);
    std::string me = std::to_string(getpid());
    EXPECT_EQ(1u, redis().client_ids("rmutex:wd:" + me).size()) << "the watchdog's connection is rmutex:wd:<pid>";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
    RecordProperty("pttl_min", static_cast<int>(lo));
    RecordProperty("pttl_max", static_cast<int>(hi));
}

int64_t mono_ms(const struct timespec &t) { return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000; }

int64_t mono_now_ms()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return mono_ms(t);
}

/* rmutex_hold_deadline: never later than Redis's own expiry of the hold,
 * moving forward with the renewals. */
TEST_F(Watchdog, TheHoldDeadlineNeverPassesRedisExpiryAndMovesWithTheRenewals)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    struct timespec d;
    EXPECT_RC(EPERM, rmutex_hold_deadline(&m, &d)) << "not held";
    EXPECT_RC(EINVAL, rmutex_hold_deadline(&m, nullptr));
    EXPECT_RC(EINVAL, rmutex_hold_deadline(nullptr, &d));
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_hold_deadline(&m, &d));
    int64_t first = mono_ms(d), left = first - mono_now_ms();
    EXPECT_GT(left, 0);
    EXPECT_LE(left, 1000);
    int64_t latest = first;
    auto t0 = Clock::now();
    while (elapsed_ms(t0) < 2000) {
        int64_t before = mono_now_ms();
        ASSERT_RC(0, rmutex_hold_deadline(&m, &d));
        int64_t client_left = mono_ms(d) - before;
        long long server_left = redis().pttl(name);
        /* The server's remaining life is measured after ours: it may be
         * shorter only by the time that took (a loaded machine can stall
         * this thread between the two), and a millisecond of rounding. */
        int64_t took = mono_now_ms() - before;
        EXPECT_LE(client_left, server_left + took + 2) << "the deadline is later than Redis's expiry";
        latest = std::max(latest, mono_ms(d));
        std::this_thread::sleep_for(ms(20));
    }
    EXPECT_GT(latest, first + 1000) << "the deadline did not follow the renewals";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(EPERM, rmutex_hold_deadline(&m, &d));
}

/* While Redis does not answer, the deadline stays at the last renewal it
 * acknowledged; once it has passed, the hold is lost. */
TEST_F(Watchdog, TheHoldDeadlineStandsStillWhileRedisIsPausedAndThenTheHoldIsLost)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    std::this_thread::sleep_for(ms(100));
    ASSERT_TRUE(redis().cmd({"CLIENT", "PAUSE", "2500", "ALL"}));
    struct timespec d0, d1;
    ASSERT_RC(0, rmutex_hold_deadline(&m, &d0));
    std::this_thread::sleep_for(ms(500));
    int r = rmutex_hold_deadline(&m, &d1);
    if (r == 0) {
        EXPECT_EQ(mono_ms(d0), mono_ms(d1)) << "the deadline moved while Redis was paused";
    }
    EXPECT_TRUE(wait_until([&] { return rmutex_hold_deadline(&m, &d1) == EPERM; }, ms(2000)))
        << "the hold was not reported lost after its deadline";
    EXPECT_GE(mono_now_ms() + 50, mono_ms(d0)) << "reported lost before its deadline";
    redis().cmd({"CLIENT", "UNPAUSE"});
    EXPECT_RC(EPERM, rmutex_unlock(&m));
}

TEST_F(Watchdog, RenewsManyHoldsInFewScriptCalls)
{
    constexpr int kHolds = 20;
    std::vector<rmutex_t> mutexes(kHolds);
    for (int i = 0; i < kHolds; i++) {
        init_mutex(&mutexes[static_cast<size_t>(i)], lock_name("m" + std::to_string(i)));
        ASSERT_RC(0, rmutex_lock(&mutexes[static_cast<size_t>(i)]));
    }
    rmutex_stats_t s0 = stats();
    auto t0 = Clock::now();
    while (elapsed_ms(t0) < 2000) {
        for (int i = 0; i < kHolds; i++)
            ASSERT_GT(redis().pttl(lock_name("m" + std::to_string(i))), 0) << "hold " << i << " ran out";
        std::this_thread::sleep_for(ms(20));
    }
    rmutex_stats_t s1 = stats();
    uint64_t renewals = s1.renewals - s0.renewals, calls = s1.renewal_calls - s0.renewal_calls;
    EXPECT_GE(renewals, static_cast<uint64_t>(kHolds) * 3);
    /* Renewals are batched: many holds per script call. */
    EXPECT_LE(calls * 4, renewals) << calls << " calls for " << renewals << " renewals";
    for (int i = 0; i < kHolds; i++)
        EXPECT_RC(0, rmutex_unlock(&mutexes[static_cast<size_t>(i)]));
}

/* After SCRIPT FLUSH the next renewal is answered NOSCRIPT and goes again
 * as EVAL, which caches the script again: the renewals after it are
 * EVALSHA once more, not the whole script body every time. */
class WatchdogOwnServer : public RedisTest {
  protected:
    WatchdogOwnServer() : RedisTest(/*own_server=*/true, "lease=1000") {}
    long long evals()
    {
        std::string info = redis().cmd({ "INFO", "commandstats" }).str();
        auto at = info.find("cmdstat_eval:calls=");
        return at == std::string::npos ? 0 : atoll(info.c_str() + at + 19);
    }
};

TEST_F(WatchdogOwnServer, AfterAScriptFlushRenewalsGoBackToEvalsha)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_TRUE(wait_until([] { return stats().renewals >= 1; }, ms(3000)));
    ASSERT_FALSE(redis().cmd({ "SCRIPT", "FLUSH" }).is_error());
    uint64_t loads = stats().script_loads;
    ASSERT_TRUE(wait_until([&] { return stats().script_loads > loads; }, ms(3000))) << "no NOSCRIPT seen";
    long long after_reload = evals();
    uint64_t renewals = stats().renewals;
    ASSERT_TRUE(wait_until([&] { return stats().renewals >= renewals + 6; }, ms(6000)));
    /* At most the renewal's own EVAL and the registry announcement's, each
     * answered NOSCRIPT once; sent as EVAL for good, it would be 6 or more. */
    EXPECT_LE(evals() - after_reload, 2) << "renewals still sent as EVAL after the script was cached again";
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Watchdog, StopsRenewingAtUnlock)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_TRUE(wait_until([] { return stats().renewals >= 1; }, ms(3000)));
    ASSERT_RC(0, rmutex_unlock(&m));
    uint64_t after_unlock = stats().renewals;
    /* Nothing of ours is held: there is nothing to renew over three periods. */
    EXPECT_FALSE(wait_until_unscaled([&] { return stats().renewals > after_unlock; }, ms(1200)));
}

TEST_F(Watchdog, FixedLeaseIsNotRenewedAndExpiresOnTime)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_STALLED, 1000);
    auto t_before = Clock::now();
    ASSERT_RC(0, rmutex_lock(&m));
    auto t_after = Clock::now();
    long long prev = redis().pttl(name);
    EXPECT_GT(prev, 0);
    EXPECT_LE(prev, 1000);
    /* Sample until the key is gone: the PTTL only ever goes down. */
    Clock::time_point gone_at;
    bool gone = wait_until(
        [&] {
            long long p = redis().pttl(name);
            if (p == -2) {
                gone_at = Clock::now();
                return true;
            }
            EXPECT_LE(p, prev) << "the fixed lease was extended";
            prev = p;
            return false;
        },
        ms(2500));
    ASSERT_TRUE(gone) << "a 1000 ms lease still there after " << elapsed_ms(t_before) << " ms";
    auto lived = std::chrono::duration_cast<ms>(gone_at - t_before).count();
    EXPECT_GE(lived, 990) << "expired early";
    EXPECT_LE(std::chrono::duration_cast<ms>(gone_at - t_after).count(), 1000 + scaled(ms(500)).count());
    EXPECT_EQ(0u, stats().renewals);
    EXPECT_RC(EPERM, rmutex_unlock(&m)) << "unlock after the fixed lease lapsed must not be silent";
    unsigned count = 9;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(0u, count);
    /* And it is free for the next one. */
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Watchdog, FixedLeaseTakenOverByAnotherProcessGivesEpermAndKeepsTheirHold)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_STALLED, 500);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_TRUE(wait_until([&] { return !redis().exists(name); }, ms(2000)));
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    auto theirs = redis().hgetall(name);
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    EXPECT_EQ(theirs, redis().hgetall(name)) << "our late unlock released their hold";
}

TEST_F(Watchdog, DeletedKeyFiresTheLostCallbackAndUnlockIsEperm)
{
    LostLog log;
    ASSERT_RC(0, rmutex_set_lost_callback(on_lost, &log));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_EQ(1, redis().cmd({"DEL", name}).integer());
    auto t_del = Clock::now();
    /* lease/3 + 1 s */
    ASSERT_TRUE(wait_until([&] { return lost_calls(log) > 0; }, ms(1000 / 3 + 1000)))
        << "no lost-lock callback " << elapsed_ms(t_del) << " ms after the key was deleted";
    {
        std::lock_guard<std::mutex> g(log.mu);
        EXPECT_EQ(&m, log.m);
        EXPECT_EQ(name, log.name);
        EXPECT_EQ(&log, log.arg);
    }
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    rmutex_stats_t s = stats();
    EXPECT_EQ(1u, s.locks_lost);
    EXPECT_EQ(1, lost_calls(log)) << "one loss, one callback";
    EXPECT_FALSE(redis().exists(name)) << "nothing may recreate a lost hold";
    EXPECT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(1u, stats().locks_lost);
}

TEST_F(Watchdog, FlushallIsALostLockToo)
{
    if (!server())
        GTEST_SKIP() << "FLUSHALL needs the harness's own server";
    LostLog log;
    ASSERT_RC(0, rmutex_set_lost_callback(on_lost, &log));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_RECURSIVE);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_EQ("OK", redis().cmd({"FLUSHALL"}).str());
    ASSERT_TRUE(wait_until([&] { return lost_calls(log) > 0; }, ms(1000 / 3 + 1000)));
    /* Every level of a lost recursive hold reports the loss. */
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    unsigned count = 9;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(0u, count) << "a lost hold is held no more";
}

TEST_F(Watchdog, KeyTakenByAnotherOwnerIsALostLock)
{
    LostLog log;
    ASSERT_RC(0, rmutex_set_lost_callback(on_lost, &log));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    /* Somebody replaces the hash with their own hold. */
    ASSERT_EQ(1, redis().cmd({"DEL", name}).integer());
    ASSERT_EQ(1, redis().cmd({"HSET", name, "00000000-0000-0000-0000-000000000000:1", "1"}).integer());
    ASSERT_EQ(1, redis().cmd({"PEXPIRE", name, "30000"}).integer());
    ASSERT_TRUE(wait_until([&] { return lost_calls(log) > 0; }, ms(1000 / 3 + 1000)));
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    auto h = redis().hgetall(name);
    EXPECT_EQ(1u, h.size());
    EXPECT_EQ(1u, h.count("00000000-0000-0000-0000-000000000000:1")) << "their hold was released";
    EXPECT_GT(redis().pttl(name), 28000) << "their lease was changed";
}

} // namespace
