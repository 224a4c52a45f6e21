/* wipe_util.h -- the restart-without-data scenario of the reliability
 * tests, for a deployment of any shape (plain server, Cluster, Sentinel):
 * this process holds one mutex of each kind, other processes wait for
 * them, the server that holds them restarts empty, the waiters get in and
 * take their turn, and only then the holder unlocks.  Each of its unlocks
 * must be EPERM (never 0: the hold was wiped, not released) and the
 * lost-lock callback must have told it, once per hold, within about a
 * second of the server answering again. */
#ifndef RMUTEX_TEST_WIPE_UTIL_H
#define RMUTEX_TEST_WIPE_UTIL_H

#include "harness.h"

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <set>

namespace rmt {

struct WipeKind {
    const char *name;
    std::vector<std::string> child; /* the waiting child's flags */
    int fair, robust, cache;
};

inline const std::vector<WipeKind> &wipe_kinds()
{
    static const std::vector<WipeKind> k = { { "nonfair", {}, 0, 0, 0 },
                                             { "fair", { "--fair" }, 1, 0, 0 },
                                             { "robust", { "--robust" }, 0, 1, 0 },
                                             { "cached", { "--cache" }, 0, 0, 1 } };
    return k;
}

inline std::atomic<int> &wipe_lost_count()
{
    static std::atomic<int> n{0};
    return n;
}

/* prefix + kind are the lock names (one slot: give prefix a {tag}).
 * url: the children's RMUTEX_URL.  waiting(pid): that child has
 * subscribed (it waits).  wipe(): restart the server without its data;
 * when it answered again, or nothing. */
inline void expect_every_kind_lost_not_released(
    const std::string &prefix, const std::string &url, const std::function<bool(pid_t)> &waiting,
    const std::function<std::optional<Clock::time_point>()> &wipe)
{
    static std::atomic<int64_t> last_ms{0};
    static std::mutex seen_mu;
    static std::set<rmutex_t *> seen;
    wipe_lost_count() = 0;
    last_ms = 0;
    seen.clear();
    ASSERT_RC(0, rmutex_set_lost_callback([](rmutex_t *m, const char *, void *) {
        std::lock_guard<std::mutex> g(seen_mu);
        seen.insert(m);
        last_ms = std::chrono::duration_cast<ms>(Clock::now().time_since_epoch()).count();
        wipe_lost_count()++;
    }, nullptr));
    const auto &kinds = wipe_kinds();
    std::vector<rmutex_t> m(kinds.size());
    std::vector<std::unique_ptr<Child>> waiters;
    for (size_t i = 0; i < kinds.size(); i++) {
        rmutexattr_t a;
        rmutexattr_init(&a);
        rmutexattr_setfair(&a, kinds[i].fair);
        rmutexattr_setrobust(&a, kinds[i].robust ? RMUTEX_ROBUST : RMUTEX_STALLED);
        rmutexattr_setcache(&a, kinds[i].cache);
        std::string n = prefix + kinds[i].name;
        ASSERT_RC(0, rmutex_init(&m[i], n.c_str(), &a));
        rmutexattr_destroy(&a);
        ASSERT_RC(0, rmutex_lock(&m[i])) << n;
        std::vector<std::string> args{ "hold", n, "--hold-ms=200" };
        args.insert(args.end(), kinds[i].child.begin(), kinds[i].child.end());
        waiters.push_back(std::make_unique<Child>(args, url));
    }
    for (auto &w : waiters)
        ASSERT_TRUE(wait_until([&] { return waiting(w->pid()); }, ms(10000))) << "a waiter did not subscribe";
    for (auto &w : waiters) ASSERT_FALSE(w->poll_line()) << "a waiter got a lock that was held";
    auto back = wipe();
    ASSERT_TRUE(back) << "the server did not come back";
    for (size_t i = 0; i < waiters.size(); i++) {
        auto held = waiters[i]->expect_line("held", ms(10000));
        ASSERT_TRUE(held) << kinds[i].name << ": the waiter did not get the lock after the wipe";
        EXPECT_EQ("0", field(*held, "rc")) << *held;
        EXPECT_TRUE(waiters[i]->expect_line("unlocked rc=0", ms(5000))) << kinds[i].name;
    }
    {
        /* Told within about a second of the server answering again (the
         * watchdog asks every 250 ms until it answers): the waiters' turns
         * (200 ms, all at once) may end sooner, so wait for that, not more. */
        auto left = std::chrono::duration_cast<ms>(*back + scaled(ms(1500)) - Clock::now());
        wait_until_unscaled([&] { return wipe_lost_count().load() >= (int)kinds.size(); },
                            std::max(left, ms(0)));
        rmutex_stats_t st = stats();
        EXPECT_EQ((int)kinds.size(), wipe_lost_count().load())
            << "one callback per wiped hold, within 1.5 s (scaled) of the server answering again (locks_lost "
            << st.locks_lost << ", holds_checked "
            << st.holds_checked << ", renewal_calls " << st.renewal_calls << ", renewal_failures "
            << st.renewal_failures << ", reconnects " << st.reconnects << ")";
    }
    if (last_ms.load()) {
        int64_t told = last_ms.load() - std::chrono::duration_cast<ms>(back->time_since_epoch()).count();
        EXPECT_LE(told, scaled(ms(1500)).count()) << "the last loss was found " << told
                                                  << " ms after the server answered again";
        std::cerr << "[wipe] every hold reported lost " << told << " ms after the server was back\n";
    }
    for (size_t i = 0; i < kinds.size(); i++) {
        EXPECT_RC(EPERM, rmutex_unlock(&m[i])) << kinds[i].name << ": a wiped hold unlocked as released";
        std::lock_guard<std::mutex> g(seen_mu);
        EXPECT_EQ(1u, seen.count(&m[i])) << kinds[i].name << ": its holder was never told";
    }
    EXPECT_EQ((int)kinds.size(), wipe_lost_count().load()) << "a loss was reported twice";
    for (auto &w : waiters) w->wait(ms(5000));
    for (auto &x : m) EXPECT_RC(0, rmutex_destroy(&x));
    rmutex_set_lost_callback(nullptr, nullptr);
}

} // namespace rmt

#endif
