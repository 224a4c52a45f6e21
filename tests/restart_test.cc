/* restart_test.cc -- redis-server restarted (no persistence: every key is
 * gone) or killed while rmutex waits or holds.  Waiters resume and acquire;
 * a holder is told through the lost-lock callback and gets EPERM at unlock.
 * These tests always run their own server. */
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

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


TEST_F(Restart, AnUnlockAfterItsIdleConnectionsWereKilledIsNotWrittenToADeadOne)
{
    /* The server closed the pooled connections (CLIENT KILL; a restart
     * does the same): the release goes out on a new one at once -- no lost
     * reply to resolve, nothing left to guess. */
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto ids = redis().client_ids("rmutex:cmd:" + std::to_string(getpid()));
    ASSERT_FALSE(ids.empty());
    for (long long id : ids) ASSERT_TRUE(redis().client_kill_id(id));
    uint64_t indeterminate = stats().indeterminate;
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name)) << "the unlock did not release";
    EXPECT_EQ(indeterminate, stats().indeterminate)
        << "the release was written to a connection the server had closed";
}

TEST_F(Restart, FencingTokensAfterARestartWithoutDataAreGreaterThanEveryTokenBefore)
{
    /* The counter is wiped with the data; the next token must still be
     * above every one handed out before (a fenced resource that saw them
     * would refuse every writer otherwise, or see a token twice). */
    std::string name = lock_name(), cached = lock_name("cached"), fair = lock_name("fair");
    rmutex_t m, c, f;
    init_mutex(&m, name);
    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_setcache(&a, 1);
    ASSERT_RC(0, rmutex_init(&c, cached.c_str(), &a));
    rmutexattr_setcache(&a, 0);
    rmutexattr_setfair(&a, 1);
    ASSERT_RC(0, rmutex_init(&f, fair.c_str(), &a));
    rmutexattr_destroy(&a);
    uint64_t before = 0, t = 0;
    for (rmutex_t *x : { &m, &c, &f })
        for (int i = 0; i < 3; i++) {
            ASSERT_RC(0, rmutex_lock(x));
            ASSERT_RC(0, rmutex_fence(x, &t));
            EXPECT_GT(t, before) << "tokens of one name go up";
            before = std::max(before, t);
            ASSERT_RC(0, rmutex_unlock(x));
        }
    ASSERT_RC(0, rmutex_lock(&c)); /* a cache kept across the restart */
    ASSERT_RC(0, rmutex_unlock(&c));
    server()->stop();
    ASSERT_TRUE(server()->restart());
    EXPECT_FALSE(redis().exists("redisson_lock_token:{" + name + "}")) << "the data was not wiped";
    for (rmutex_t *x : { &m, &c, &f }) {
        ASSERT_RC(0, rmutex_lock(x));
        ASSERT_RC(0, rmutex_fence(x, &t));
        EXPECT_GT(t, before) << "a token after the wipe is not above the tokens before it";
        rmutex_unlock(x);
    }
    /* A fair hand-off takes its token in the releasing script. */
    ASSERT_RC(0, rmutex_lock(&f));
    auto child = std::make_unique<Child>(std::vector<std::string>{ "hold", fair, "--fair" }, url());
    ASSERT_TRUE(wait_until([&] { return redis().exists("rmutex_fair_queue:{" + fair + "}"); }, ms(5000)));
    ASSERT_RC(0, rmutex_unlock(&f));
    auto held = child->expect_line("held", ms(5000));
    ASSERT_TRUE(held);
    EXPECT_GT(std::stoull(field(*held, "fence")), before) << *held;
    for (rmutex_t *x : { &m, &c, &f }) EXPECT_RC(0, rmutex_destroy(x));
}

#ifdef RMUTEX_CLI
TEST_F(Restart, RmutexRunKillsItsCommandWithinASecondOfAWipeAndExits75)
{
    /* The default lease (30 s): the loss is found when the server answers
     * again, not at the next renewal, 10 s later -- the window in which two
     * commands run under one name is what the loss takes to be found. */
    std::string name = lock_name();
    std::map<std::string, std::string> env{ { "RMUTEX_URL", base_url() } };
    Child first({ RMUTEX_CLI, "run", name, "--", "sleep", "30" }, env);
    ASSERT_TRUE(wait_until([&] { return redis().exists(name); }, ms(5000)));
    server()->stop();
    std::this_thread::sleep_for(ms(500)); /* the outage injected */
    ASSERT_TRUE(server()->restart());
    auto back = Clock::now();
    Child second({ RMUTEX_CLI, "run", name, "--", "sleep", "30" }, env);
    int st = first.wait(ms(1500));
    int64_t window = elapsed_ms(back);
    ASSERT_GE(st, 0) << "the first command still ran " << window << " ms after the wipe";
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 75) << "status " << st << "; " << first.err();
    EXPECT_LE(window, scaled(ms(1500)).count());
    EXPECT_NE(std::string::npos, first.err().find("lost")) << first.err();
    std::cerr << "[restart] the first rmutex run ended " << window << " ms after the server was back\n";
    second.kill(SIGTERM);
    second.wait(ms(5000));
}
#endif

/* ---- a hold wiped by a restart, for every kind of mutex ---------------- */

struct Kind {
    const char *name;
    std::vector<std::string> opts; /* the child's flags */
    int fair, robust, cache;
};

std::ostream &operator<<(std::ostream &o, const Kind &k) { return o << k.name; }

std::atomic<int64_t> g_lost_at_ms{0}; /* steady clock, ms */

void on_lost_timed(rmutex_t *m, const char *, void *)
{
    g_lost_m = m;
    g_lost_at_ms = std::chrono::duration_cast<ms>(Clock::now().time_since_epoch()).count();
    g_lost++;
}

/* The default lease (30 s, renewed every 10 s): a loss must not wait for
 * the next renewal to be found. */
class RestartWipe : public RedisTest, public ::testing::WithParamInterface<Kind> {
  protected:
    RestartWipe() : RedisTest(/*own_server=*/true, "") {}

    void init(rmutex_t *m, const std::string &name)
    {
        rmutexattr_t a;
        rmutexattr_init(&a);
        rmutexattr_setfair(&a, GetParam().fair);
        rmutexattr_setrobust(&a, GetParam().robust ? RMUTEX_ROBUST : RMUTEX_STALLED);
        rmutexattr_setcache(&a, GetParam().cache);
        ASSERT_RC(0, rmutex_init(m, name.c_str(), &a));
        rmutexattr_destroy(&a);
    }

    /* Three processes wait for name (each holds it 200 ms once it gets it). */
    std::vector<std::unique_ptr<Child>> waiters(const std::string &name)
    {
        std::vector<std::unique_ptr<Child>> w;
        for (int i = 0; i < 3; i++) {
            std::vector<std::string> args{ "hold", name, "--hold-ms=200" };
            args.insert(args.end(), GetParam().opts.begin(), GetParam().opts.end());
            w.push_back(std::make_unique<Child>(args, url()));
        }
        /* Waiting: each has its subscription (and nobody got in). */
        EXPECT_TRUE(wait_until([&] {
            for (auto &c : w)
                if (redis().client_ids("rmutex:sub:" + std::to_string(c->pid())).empty()) return false;
            return true;
        }, ms(5000))) << "the three waiters did not subscribe";
        for (auto &c : w) EXPECT_FALSE(c->poll_line()) << "a waiter got the lock while it was held";
        return w;
    }

    /* Stop the server (no persistence: every key is gone) and start it
     * again on the same port half a second later.  Returns when it was
     * back, or nothing. */
    std::optional<Clock::time_point> wipe()
    {
        server()->stop();
        std::this_thread::sleep_for(ms(500)); /* the outage injected */
        if (!server()->restart()) return std::nullopt;
        return Clock::now();
    }
};

TEST_P(RestartWipe, TheHolderIsToldWithinASecondAndItsUnlockAfterTheWaitersIsEpermNotZero)
{
    g_lost = 0;
    g_lost_m = nullptr;
    ASSERT_RC(0, rmutex_set_lost_callback(on_lost_timed, nullptr));
    std::string name = lock_name();
    rmutex_t m;
    init(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto w = waiters(name);
    auto back = wipe();
    ASSERT_TRUE(back) << "the server did not start again";
    /* The waiters find the lock free (the data is gone) and take turns. */
    for (auto &c : w) {
        auto held = c->expect_line("held", ms(5000));
        ASSERT_TRUE(held) << "a waiter did not get the lock after the restart";
        EXPECT_EQ("0", field(*held, "rc"));
    }
    for (auto &c : w) ASSERT_TRUE(c->expect_line("unlocked rc=0", ms(5000)));
    /* The holder was told long before it unlocks, whatever the lease. */
    ASSERT_GT(g_lost.load(), 0) << "no lost-lock callback by the time the waiters were done";
    EXPECT_EQ(&m, g_lost_m.load());
    int64_t told_after = g_lost_at_ms.load() -
                         std::chrono::duration_cast<ms>(back->time_since_epoch()).count();
    EXPECT_LE(told_after, scaled(ms(1500)).count())
        << "the loss was found " << told_after << " ms after the server answered again";
    std::cerr << "[restart] " << GetParam().name << ": the holder was told " << told_after
              << " ms after the server was back\n";
    EXPECT_RC(EPERM, rmutex_unlock(&m)) << "an unlock after a wipe must not say it released";
    EXPECT_EQ(1, g_lost.load()) << "one loss, one callback";
    EXPECT_EQ(1u, stats().locks_lost);
    EXPECT_RC(0, rmutex_lock(&m)) << "usable again";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_P(RestartWipe, AnUnlockRightAfterTheWipeIsEpermWithOneCallbackNotZero)
{
    /* Whoever finds the loss first -- the watchdog, checking the holds of
     * a connection that dropped, or the unlock's own release -- the holder
     * is told exactly once and the unlock is EPERM. */
    g_lost = 0;
    ASSERT_RC(0, rmutex_set_lost_callback(on_lost_timed, nullptr));
    std::string name = lock_name();
    rmutex_t m;
    init(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_TRUE(wipe());
    /* Somebody else takes the name on the empty server at once. */
    auto other = child_holding(name, url(), GetParam().opts);
    ASSERT_TRUE(other);
    int rc = rmutex_unlock(&m);
    EXPECT_RC(EPERM, rc) << "the hold was wiped and another process holds the name";
    EXPECT_EQ(1, g_lost.load()) << "the loss is reported at the latest at the unlock";
    EXPECT_EQ(&m, g_lost_m.load());
    other->write_line("unlock");
    EXPECT_TRUE(other->expect_line("unlocked rc=0", ms(3000)));
    EXPECT_RC(0, rmutex_destroy(&m));
}

/* The server goes away while the watchdog has a call on the wire -- a
 * registry announcement held up by CLIENT PAUSE WRITE here, as a server
 * shutting down with replicas holds writes before it closes.  The holds
 * that were not in that call are checked at once as well, not at their
 * next renewal 10 s later. */
class RestartMidCall : public RedisTest {
  protected:
    RestartMidCall() : RedisTest(/*own_server=*/true, "") {}
};

TEST_F(RestartMidCall, HoldsNotInTheCallCutByTheRestartAreStillCheckedAtOnce)
{
    g_lost = 0;
    ASSERT_RC(0, rmutex_set_lost_callback(on_lost_timed, nullptr));
    rmutex_t a, b;
    ASSERT_RC(0, rmutex_init(&a, (lock_name() + "a").c_str(), nullptr));
    ASSERT_RC(0, rmutex_init(&b, (lock_name() + "b").c_str(), nullptr));
    ASSERT_RC(0, rmutex_lock(&a));
    /* The first announcement of this process's holds has been written. */
    ASSERT_TRUE(wait_until([&] { auto r = redis().cmd({ "KEYS", "rmutex_client:*" });
        return r && r->type == REDIS_REPLY_ARRAY && r->elements > 0; },
                           ms(5000)));
    /* b's hold: the next announcement, about a second from now.  The
     * pause must come before it goes out: counted from before the lock, a
     * round that went out before the pause (a loaded machine) shows, and
     * the test tries again with a new hold (the next round after that
     * would be a renewal, a third of the lease away). */
    uint64_t rounds = 0;
    bool paused_before_the_call = false;
    std::vector<std::unique_ptr<rmutex_t>> more;
    rmutex_t *next = &b;
    for (int attempt = 0; attempt < 5 && !paused_before_the_call; attempt++) {
        rounds = stats().renewal_rounds;
        ASSERT_RC(0, rmutex_lock(next));
        redis().cmd({ "CLIENT", "PAUSE", "20000", "WRITE" });
        paused_before_the_call = stats().renewal_rounds == rounds;
        if (!paused_before_the_call) {
            redis().cmd({ "CLIENT", "UNPAUSE" });
            more.push_back(std::make_unique<rmutex_t>());
            next = more.back().get();
            ASSERT_RC(0, rmutex_init(next, (lock_name() + "c" + std::to_string(attempt)).c_str(), nullptr));
        }
    }
    ASSERT_TRUE(paused_before_the_call) << "every announcement went out before the pause";
    const int holds = 2 + static_cast<int>(more.size()); /* a, b and each new one: all held */
    ASSERT_TRUE(wait_until([&] { return stats().renewal_rounds > rounds; }, scaled(ms(5000))))
        << "no watchdog call went out";
    std::this_thread::sleep_for(ms(100)); /* let it reach the paused server */
    server()->kill9();
    ASSERT_TRUE(server()->restart());
    auto back = Clock::now();
    EXPECT_TRUE(wait_until([&] { return g_lost.load() == holds; }, scaled(ms(1500))))
        << "lost-lock callbacks " << g_lost.load() << " of " << holds << " within 1.5 s of the server answering";
    std::cerr << "[restart] holds lost in the middle of a call reported "
              << std::chrono::duration_cast<ms>(Clock::now() - back).count() << " ms after\n";
    EXPECT_RC(EPERM, rmutex_unlock(&a));
    EXPECT_RC(EPERM, rmutex_unlock(&b));
    for (auto &c : more) {
        EXPECT_RC(EPERM, rmutex_unlock(c.get()));
        EXPECT_RC(0, rmutex_destroy(c.get()));
    }
    EXPECT_EQ(holds, g_lost.load());
    EXPECT_RC(0, rmutex_destroy(&a));
    EXPECT_RC(0, rmutex_destroy(&b));
    rmutex_set_lost_callback(nullptr, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Kinds, RestartWipe,
                         ::testing::Values(Kind{ "nonfair", {}, 0, 0, 0 },
                                           Kind{ "fair", { "--fair" }, 1, 0, 0 },
                                           Kind{ "robust", { "--robust" }, 0, 1, 0 },
                                           Kind{ "cached", { "--cache" }, 0, 0, 1 },
                                           Kind{ "fair_cached", { "--fair", "--cache" }, 1, 0, 1 }),
                         [](const ::testing::TestParamInfo<Kind> &i) { return std::string(i.param.name); });

} // namespace
