/* restart_test.cc -- redis-server restarted (no persistence: every key is
 * gone) or killed while rmutex waits or holds.  Waiters resume and acquire;
 * a holder is told through the lost-lock callback and gets EPERM at unlock.
 * These tests always run their own server. */
#include <signal.h>

#include <atomic>

#include "harness.h"

namespace {

using namespace rmt;

std::atomic<int> g_lost{0};
std::atomic<rmutex_t *> g_lost_m{nullptr};

void on_lost(rmutex_t *m, const char *, void *)
{
    g_lost_m = m;
    g_lost++;
}

class Restart : public RedisTest {
  protected:
    Restart() : RedisTest(/*own_server=*/true, "lease=1000") {}
};

TEST_F(Restart, WaitersResumeAndAcquireAfterARestart)
{
    std::string name = lock_name();
    auto child = child_holding(name, url_with("lease=30000"));
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    auto body = [&] {
        int rc = rmutex_lock(&m);
        return rc == 0 ? rmutex_unlock(&m) : rc;
    };
    Async w1(body), w2(body);
    ASSERT_TRUE(wait_until([] { return stats().waiting == 2; }, ms(5000)));
    ASSERT_TRUE(server()->restart());
    auto t0 = Clock::now();
    /* The new server is empty: the lock is free.  Resubscription wakes the
     * waiters; at worst the 2 s poll does. */
    ASSERT_TRUE(wait_until([&] { return w1.done() && w2.done(); }, ms(2000 + 3000)))
        << "waiters still blocked " << elapsed_ms(t0) << " ms after the restart";
    EXPECT_RC(0, w1.rc());
    EXPECT_RC(0, w2.rc());
    EXPECT_FALSE(redis().exists(name));
}

TEST_F(Restart, WaitersResumeAfterTheServerWasKilledAndStartedAgain)
{
    std::string name = lock_name();
    auto child = child_holding(name, url_with("lease=30000"));
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    Async w([&] {
        int rc = rmutex_lock(&m);
        return rc == 0 ? rmutex_unlock(&m) : rc;
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting == 1; }, ms(5000)));
    server()->kill9();
    /* Down for a while: the waiter keeps waiting, it does not fail. */
    EXPECT_FALSE(wait_until_unscaled([&] { return w.done(); }, ms(700)))
        << "rmutex_lock returned " << err_name(w.rc()) << " while the server was down";
    ASSERT_TRUE(server()->restart());
    ASSERT_TRUE(w.wait(ms(2000 + 3000)));
    EXPECT_RC(0, w.rc());
}

TEST_F(Restart, HolderIsToldAndItsUnlockIsEperm)
{
    ASSERT_RC(0, rmutex_set_lost_callback(on_lost, nullptr));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_TRUE(server()->restart());
    auto t0 = Clock::now();
    /* lease/3 + 1 s, plus a second for the watchdog to reconnect. */
    ASSERT_TRUE(wait_until([] { return g_lost.load() > 0; }, ms(1000 / 3 + 1000 + 1000)))
        << "no lost-lock callback " << elapsed_ms(t0) << " ms after the restart";
    EXPECT_EQ(&m, g_lost_m.load());
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    EXPECT_EQ(1u, stats().locks_lost);
    EXPECT_FALSE(redis().exists(name)) << "the watchdog must not recreate a lost hold";
    EXPECT_RC(0, rmutex_lock(&m)) << "usable again";
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Restart, HolderWhoseServerWasKilledIsToldToo)
{
    ASSERT_RC(0, rmutex_set_lost_callback(on_lost, nullptr));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    server()->kill9();
    /* The server stays down longer than the lease: the hold must be marked
     * lost once the lease would have run out, server or no server. */
    auto t0 = Clock::now();
    EXPECT_TRUE(wait_until([] { return g_lost.load() > 0; }, ms(1000 + 1000)))
        << "no lost-lock callback " << elapsed_ms(t0) << " ms after the server died";
    ASSERT_TRUE(server()->restart());
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Restart, TrylockIsEagainWhileTheServerIsDownAndWorksAfterwards)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_trylock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    server()->stop();
    EXPECT_RC(EAGAIN, rmutex_trylock(&m));
    EXPECT_STRNE("", rmutex_detail());
    ASSERT_TRUE(server()->restart());
    EXPECT_TRUE(wait_until([&] { return rmutex_trylock(&m) == 0; }, ms(3000)));
    EXPECT_RC(0, rmutex_unlock(&m));
}

} // namespace
