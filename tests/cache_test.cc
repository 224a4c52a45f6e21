/* cache_test.cc -- lock caching (rmutexattr_setcache), against a real
 * redis-server.
 *
 * A cached mutex keeps its Redis hold (field "<uuid>:0") between its
 * threads' holds; another process that finds it busy asks for it, and the
 * holder gives it back at its unlock (after the minimum hold time) or at
 * once when nobody is inside; an unused cache goes after the idle time.
 * What is asserted is behaviour -- who gets in, when not, what Redis holds
 * -- never speed (bench W11 measures that).  Leases are short (1 s for
 * the scenarios of both kinds, stretched by RMUTEX_TEST_TIME_SCALE; 2 s
 * for parking's) so that the crash tests end quickly; the idle time is
 * long (60 s) unless a test is about it, so that only a request can move
 * the lock.
 *
 * Every scenario that is not about one kind's own mechanism is written
 * once and runs for both kinds of mutex, as Kinds/Cache.<scenario>/nonfair
 * and .../fair (the other process, a rmutex_test_child, gets --fair too).
 * Parking (CachePark, CacheIdleParked) and Redisson's client (CacheIdle)
 * are the non-fair lock's alone and follow; the fair queue's order under a
 * cache is in fair/fair_cache_test.cc. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "cache_util.h"
#include "fair_util.h"
#include "harness.h"
#include "redisson_client.h"
#include "stack/small_stack.h"

namespace {

using namespace rmt;

/* The lease of both kinds' scenarios, ms (renewed every third of it). */
const int64_t kLease = scaled(ms(1000)).count();

/* Their settings: cache_park=0, since parking is CachePark's; the fair
 * lock's queued waiters renew every waiter_lease/3. */
std::string cache_options(int64_t lease = kLease)
{
    return "lease=" + std::to_string(lease) + "&waiter_lease=1000&cache_idle=60000&cache_park=0";
}

class CacheBase : public RedisTest {
  protected:
    explicit CacheBase(std::string opts = cache_options()) : RedisTest(false, std::move(opts)) {}
};

/* ---- both kinds ---------------------------------------------------------- */

class Cache : public CacheBase, public ::testing::WithParamInterface<bool> {
  protected:
    bool fair() const { return GetParam(); }

    /* A cached mutex of this kind. */
    void cached(rmutex_t *m, const std::string &name, int robust = RMUTEX_STALLED, int type = RMUTEX_NORMAL)
    {
        init_cached(m, name, fair(), robust, type);
    }

    /* An uncached mutex of this kind (asserts). */
    void plain(rmutex_t *m, const std::string &name, int type = RMUTEX_NORMAL, int robust = RMUTEX_STALLED)
    {
        rmutexattr_t a;
        rmutexattr_init(&a);
        rmutexattr_setfair(&a, fair());
        rmutexattr_settype(&a, type);
        rmutexattr_setrobust(&a, robust);
        int rc = rmutex_init(m, name.c_str(), &a);
        rmutexattr_destroy(&a);
        ASSERT_RC(0, rc);
    }

    /* rmutex_test_child's arguments: verb name flags..., and --fair for the
     * fair kind. */
    std::vector<std::string> child_args(const std::string &verb, const std::string &name,
                                        std::vector<std::string> flags = {})
    {
        std::vector<std::string> a{ verb, name };
        a.insert(a.end(), flags.begin(), flags.end());
        if (fair()) a.push_back("--fair");
        return a;
    }

    /* The Redis expiry of name on this host's steady clock (ms), or -1. */
    int64_t expiry_of(const std::string &name)
    {
        long long pttl = redis().pttl(name);
        if (pttl <= 0) return -1;
        return std::chrono::duration_cast<ms>(Clock::now().time_since_epoch()).count() + pttl;
    }
};

INSTANTIATE_TEST_SUITE_P(Kinds, Cache, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &i) { return i.param ? "fair" : "nonfair"; });

TEST(CacheAttr, SetGetAndBadValues)
{
    rmutexattr_t a;
    int v = -1;
    ASSERT_RC(0, rmutexattr_init(&a));
    EXPECT_RC(0, rmutexattr_getcache(&a, &v));
    EXPECT_EQ(0, v) << "caching is opt-in";
    EXPECT_RC(0, rmutexattr_setcache(&a, 1));
    EXPECT_RC(0, rmutexattr_getcache(&a, &v));
    EXPECT_EQ(1, v);
    EXPECT_RC(EINVAL, rmutexattr_setcache(&a, 2));
    EXPECT_RC(EINVAL, rmutexattr_setcache(nullptr, 1));
    EXPECT_RC(EINVAL, rmutexattr_getcache(&a, nullptr));
    EXPECT_RC(0, rmutexattr_getcache(&a, &v));
    EXPECT_EQ(1, v) << "a refused value changed nothing";
    rmutexattr_t fixed;
    rmutexattr_init(&fixed);
    rmutexattr_setcache(&fixed, 1);
    rmutexattr_setlease(&fixed, 5000);
    rmutex_t m;
    EXPECT_RC(EINVAL, rmutex_init(&m, "rmt:cache:fixed", &fixed)) << "a cache needs a renewed lease";
    rmutexattr_t fair;
    rmutexattr_init(&fair);
    rmutexattr_setcache(&fair, 1);
    rmutexattr_setfair(&fair, 1);
    EXPECT_RC(0, rmutex_init(&m, "rmt:cache:fair", &fair)) << "fair mutexes can be cached";
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_P(Cache, RelockWithNobodyElseInterestedIsLocalAndTheHoldStaysInRedis)
{
    std::string name = lock_name();
    rmutex_t m;
    cached(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    auto held = redis().hgetall(name);
    ASSERT_EQ(1u, held.size());
    EXPECT_EQ(process_field(), held.begin()->first) << "the process, not the thread, holds it";
    rmutex_stats_t before = stats();
    for (int i = 0; i < 1000; i++) {
        ASSERT_RC(0, rmutex_lock(&m));
        ASSERT_RC(0, rmutex_unlock(&m));
    }
    rmutex_stats_t after = stats();
    EXPECT_LE(after.round_trips - before.round_trips, 5u) << "1000 pairs should need no round trip";
    EXPECT_GE(after.cache_hits - before.cache_hits, 1000u);
    if (fair()) {
        EXPECT_FALSE(redis().exists(fair::FairKeys(name).queue)) << "nobody queued";
    }
    /* Kept alive by the watchdog while unused: a renewal (every lease/3)
     * moves its expiry later. */
    int64_t expiry = expiry_of(name);
    ASSERT_GT(expiry, 0);
    EXPECT_TRUE(wait_until([&] { return expiry_of(name) > expiry + kLease / 10; }, ms(kLease)))
        << "the cached hold was not renewed";
    ASSERT_RC(0, rmutex_lock(&m));
    unsigned count = 9;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(1u, count);
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(EPERM, rmutex_unlock(&m)) << "an unlock without a hold is still EPERM";
    EXPECT_RC(0, rmutex_destroy(&m)) << "an unused cache is not a hold";
}

TEST_P(Cache, ThreadsOfTheProcessTakeTurnsThroughTheCacheAndExcludeEachOther)
{
    std::string name = lock_name();
    rmutex_t m;
    cached(&m, name);
    std::atomic<int> inside{0}, worst{0};
    long counter = 0;
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
        ts.emplace_back([&] {
            for (int i = 0; i < 2000; i++) {
                if (rmutex_lock(&m)) return;
                int now = ++inside;
                if (now > worst) worst = now;
                counter++;
                --inside;
                rmutex_unlock(&m);
            }
        });
    for (auto &t : ts) t.join();
    EXPECT_EQ(1, worst.load());
    EXPECT_EQ(8000, counter);
}

TEST_P(Cache, AnotherProcessThatAsksGetsAnUnusedCacheWithoutWaitingForTheIdleTime)
{
    std::string name = lock_name();
    rmutex_t m;
    cached(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_TRUE(redis().exists(name));
    auto t0 = Clock::now();
    Child c(child_args("hold", name), url()); /* fair: a queued waiter */
    auto line = c.expect_line("held", ms(5000));
    ASSERT_TRUE(line) << "the other process never got the cached lock";
    EXPECT_EQ("0", field(*line, "rc"));
    /* Asked once (or twice, if the first request came before the cache
     * listened): well within the 60 s idle time. */
    EXPECT_LT(elapsed_ms(t0), scaled(ms(5000)).count()) << "waited for the idle time, not a request";
    EXPECT_GE(stats().cache_requests, 1u);
    /* The cache is gone: this process must now wait for the child. */
    EXPECT_RC(EBUSY, rmutex_trylock(&m)) << "given back";
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_P(Cache, ATrylockOfAnotherProcessAsksForIt)
{
    std::string name = lock_name();
    rmutex_t m;
    cached(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    /* The cache hears requests once the server has its subscription; one
     * made before that is lost (cache.c: a waiter asks again at its next
     * poll, a trylock never does, and the cache goes after its idle time,
     * 60 s here).  Its first subscription dials a connection: under load a
     * child can ask before it is there. */
    ASSERT_TRUE(wait_until([&] { return redis().numsub("redisson_lock__channel:{" + name + "}") >= 1; },
                           ms(5000)))
        << "the cache never listened for requests";
    Child refused(child_args("trylock", name), url());
    auto line = refused.expect_line("trylock", ms(5000));
    ASSERT_TRUE(line);
    EXPECT_EQ(std::to_string(EBUSY), field(*line, "rc")) << "cached: held in Redis";
    /* The refused trylock asked; the keeper gives an unused cache back at
     * once, so a later trylock gets it (long before the idle time). */
    ASSERT_TRUE(wait_until([&] { return !redis().exists(name); }, ms(5000))) << "not given back";
    Child later(child_args("trylock", name), url());
    ASSERT_TRUE(later.expect_line("trylock rc=0", ms(5000)));
}

TEST_P(Cache, AHolderInsideKeepsTheLockUntilItsUnlockThenGivesItBack)
{
    std::string name = lock_name();
    rmutex_t m;
    cached(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    Child c(child_args("hold", name), url());
    /* Asked for it; it must not move while we are inside. */
    EXPECT_FALSE(c.read_line_unscaled(ms(800))) << "the other process got in while we held it";
    EXPECT_EQ(process_field(), redis().hgetall(name).begin()->first);
    auto t_unlock = Clock::now();
    ASSERT_RC(0, rmutex_unlock(&m));
    auto line = c.expect_line("held", ms(5000));
    ASSERT_TRUE(line);
    EXPECT_EQ("0", field(*line, "rc"));
    EXPECT_LT(elapsed_ms(t_unlock), scaled(ms(3000)).count());
    rmutex_stats_t s = stats();
    EXPECT_GE(s.cache_returns, 1u) << "given back at the unlock, by the thread inside";
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
}

TEST_P(Cache, FencingTokensGrowWithEveryNewOwnerAlsoThreadsOfTheCachingProcess)
{
    std::string name = lock_name();
    rmutex_t m;
    cached(&m, name);
    uint64_t last = 0;
    for (int i = 0; i < 100; i++) { /* more than one reserved range */
        uint64_t t = 0;
        std::thread th([&] {
            ASSERT_RC(0, rmutex_lock(&m));
            ASSERT_RC(0, rmutex_fence(&m, &t));
            uint64_t again = 0;
            EXPECT_RC(0, rmutex_fence(&m, &again));
            EXPECT_EQ(t, again) << "one hold, one token";
            ASSERT_RC(0, rmutex_unlock(&m));
        });
        th.join();
        EXPECT_GT(t, last) << "round " << i;
        last = t;
    }
    /* Another process next (fair: granted by hand-off): greater still. */
    Child c(child_args("hold", name), url());
    auto line = c.expect_line("held", ms(5000));
    ASSERT_TRUE(line);
    ASSERT_EQ("0", field(*line, "rc"));
    uint64_t theirs = std::stoull(field(*line, "fence"));
    EXPECT_GT(theirs, last);
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t t = 0;
    ASSERT_RC(0, rmutex_fence(&m, &t));
    EXPECT_GT(t, theirs);
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_P(Cache, ExclusionAcrossCachingProcessesWhileTheirPubSubConnectionsAreKilled)
{
    std::string name = lock_name(), key = lock_name("counter");
    redis().cmd({"SET", key, "0"});
    std::atomic<bool> stop{false};
    std::thread killer([&] {
        Redis admin(host(), port());
        while (!stop) {
            admin.cmd({"CLIENT", "KILL", "TYPE", "pubsub"});
            std::this_thread::sleep_for(ms(100));
        }
    });
    std::vector<std::unique_ptr<Child>> cs;
    for (int i = 0; i < 3; i++)
        cs.push_back(std::make_unique<Child>(
            child_args("counter", name, {host(), std::to_string(port()), key, "2", "150", "--cache"}), url()));
    for (auto &c : cs) {
        auto line = c->expect_line("done", ms(120000));
        ASSERT_TRUE(line) << "a caching process starved";
        EXPECT_EQ("0", field(*line, "errors"));
    }
    stop = true;
    killer.join();
    EXPECT_EQ("900", *redis().get(key)) << "increments were lost: two holders at once";
}

TEST_P(Cache, ACachingProcessKilledWithKill9LeavesTheLockForItsLeaseOnly)
{
    std::string name = lock_name();
    Child c(child_args("hold", name, {"--cache"}), url());
    ASSERT_TRUE(c.expect_line("held rc=0", ms(5000)));
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
    ASSERT_TRUE(redis().exists(name)) << "the child caches it after its unlock";
    c.kill(SIGKILL);
    c.wait(ms(5000));
    auto t_kill = Clock::now();
    long long pttl = redis().pttl(name);
    ASSERT_GT(pttl, 0);
    rmutex_t m;
    plain(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_GE(elapsed_ms(t_kill), pttl - 50) << "got in before the dead cache's lease ran out";
    EXPECT_LE(elapsed_ms(t_kill), pttl + scaled(ms(2500)).count());
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_P(Cache, ARobustCacheOfADeadProcessIsReportedAsEownerdead)
{
    std::string name = lock_name();
    Child c(child_args("hold", name, {"--cache", "--robust"}), url());
    ASSERT_TRUE(c.expect_line("held rc=0", ms(5000)));
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
    c.kill(SIGKILL);
    c.wait(ms(5000));
    rmutex_t m;
    plain(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    /* Documented: Redis does not hear of local unlocks, so a process that
     * dies caching a robust mutex is reported like one that died inside. */
    EXPECT_RC(EOWNERDEAD, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_consistent(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_P(Cache, ANormalExitAndShutdownGiveTheCacheBackAtOnce)
{
    std::string name = lock_name();
    Child c(child_args("hold", name, {"--cache"}), url());
    ASSERT_TRUE(c.expect_line("held rc=0", ms(5000)));
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
    c.write_line("exit");
    c.wait(ms(5000));
    EXPECT_FALSE(redis().exists(name)) << "exit left the cached hold for its lease";

    rmutex_t m;
    cached(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_TRUE(redis().exists(name));
    EXPECT_RC(0, rmutex_shutdown()) << "an unused cache does not keep the library busy";
    EXPECT_FALSE(redis().exists(name));
    ASSERT_RC(0, rmutex_lock(&m)) << "usable again after the shutdown";
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_P(Cache, ALostCacheIsEpermForTheThreadInsideAndTheNextLockGoesToRedis)
{
    std::string name = lock_name();
    rmutex_t m;
    cached(&m, name);
    static std::atomic<int> lost_calls;
    static std::atomic<rmutex_t *> lost_m;
    lost_calls = 0;
    rmutex_set_lost_callback([](rmutex_t *mm, const char *, void *) { lost_m = mm; ++lost_calls; },
                             nullptr);
    /* Lost while unused: nobody to tell; the next lock takes it again. */
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    uint64_t lost_before = stats().locks_lost;
    redis().cmd({"DEL", name});
    ASSERT_TRUE(wait_until([&] { return stats().locks_lost > lost_before; }, ms(kLease + 1000)))
        << "a renewal (every lease/3) finds it gone";
    EXPECT_EQ(0, lost_calls.load()) << "nobody was inside";
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_TRUE(redis().exists(name));
    /* Lost while inside: the callback names the handle, the unlock is EPERM. */
    redis().cmd({"DEL", name});
    ASSERT_TRUE(wait_until([&] { return lost_calls.load() > 0; }, ms(kLease + 1000)));
    EXPECT_EQ(&m, lost_m.load());
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    rmutex_set_lost_callback(nullptr, nullptr);
}

TEST_P(Cache, AThreadThatExitsInsideEndsTheCacheAndItsLeaseRunsOut)
{
    std::string name = lock_name();
    rmutex_t m;
    cached(&m, name, RMUTEX_ROBUST);
    std::thread([&] { ASSERT_RC(0, rmutex_lock(&m)); }).join();
    auto t_exit = Clock::now();
    long long pttl = redis().pttl(name);
    ASSERT_GT(pttl, 0);
    /* Another process, robust: gets it when the lease ran out, EOWNERDEAD. */
    Child c(child_args("hold", name, {"--robust", "--consistent"}), url());
    auto line = c.expect_line("held", ms(kLease + 3000));
    ASSERT_TRUE(line);
    EXPECT_EQ(std::to_string(EOWNERDEAD), field(*line, "rc"));
    EXPECT_GE(elapsed_ms(t_exit), pttl - 50);
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
}

TEST_P(Cache, AfterAThreadExitedInsideTheNextLocalLockWaitsOutTheLease)
{
    std::string name = lock_name();
    rmutex_t m;
    cached(&m, name, RMUTEX_ROBUST);
    std::thread([&] { ASSERT_RC(0, rmutex_lock(&m)); }).join();
    auto t_exit = Clock::now();
    long long pttl = redis().pttl(name);
    ASSERT_GT(pttl, 0);
    /* The process's next acquisition is not a takeover of its own field
     * (fair: it queues, and gets the lock when the abandoned hold lapses). */
    EXPECT_RC(EOWNERDEAD, rmutex_lock(&m));
    EXPECT_GE(elapsed_ms(t_exit), pttl - 50) << "got in before the abandoned cache's lease ran out";
    EXPECT_RC(0, rmutex_consistent(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_P(Cache, ACacheWhoseRenewalIsOverdueServesNoLocalLock)
{
    std::string name = lock_name();
    rmutex_t m;
    cached(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    /* Redis stalls: no renewal lands.  The last one was at most lease/3
     * before the stall; 0.7 lease into it less than half the lease is
     * known good, and the cache must not hand out the lock any more. */
    Redis admin(host(), port());
    ASSERT_FALSE(admin.cmd({"CLIENT", "PAUSE", std::to_string(kLease * 9 / 10), "ALL"}).is_error());
    std::this_thread::sleep_for(ms(kLease * 7 / 10)); // the stall itself
    uint64_t hits = stats().cache_hits;
    int rc = rmutex_trylock(&m); /* to Redis, which answers when the stall ends */
    EXPECT_EQ(hits, stats().cache_hits) << "served from a cache nobody could renew";
    if (rc == 0) {
        EXPECT_RC(0, rmutex_unlock(&m));
    }
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_P(Cache, AForkedChildCachesNothingOfItsParents)
{
    /* (Its child hung once under ASan at four tests at once: the
     * allocator's trouble harness.h describes.) */
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name();
    rmutex_t m;
    cached(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    struct timespec bound = abs_after(CLOCK_MONOTONIC, scaled(ms(5000)).count());
    pid_t pid = fork();
    if (pid == 0) {
        /* Not the parent's cache: trylock finds it busy (and asks); the
         * parent gives it back on request, long before the idle time. */
        int code = rmutex_trylock(&m) == EBUSY ? 0 : 10;
        if (!code) code = rmutex_clocklock(&m, CLOCK_MONOTONIC, &bound) == 0 ? 0 : 11;
        char owner[96];
        rmutex_owner_id(owner, sizeof owner);
        if (!code) code = write(fds[1], owner, strlen(owner)) > 0 ? 0 : 12;
        if (!code) code = rmutex_unlock(&m) == 0 ? 0 : 13;
        _exit(code);
    }
    close(fds[1]);
    auto status = wait_exit(pid, ms(10000));
    ASSERT_TRUE(status) << "the forked child never finished";
    EXPECT_TRUE(WIFEXITED(*status));
    EXPECT_EQ(0, WEXITSTATUS(*status));
    char buf[96] = {0};
    EXPECT_GT(read(fds[0], buf, sizeof buf - 1), 0);
    close(fds[0]);
    std::string child_owner = buf;
    EXPECT_NE(process_field().substr(0, 36), child_owner.substr(0, 36)) << "a new identity";
}

/* A process caching a lock, a thread inside, stopped (SIGSTOP) longer than
 * its lease while another process takes the lock; after SIGCONT the thread
 * unlocks at once -- before the watchdog may have looked.  The unlock must
 * say the hold was lost, and the holder must be told. */
TEST_P(Cache, AnUnlockAfterAStopPastTheLeaseIsEpermAndCallsBackNotZero)
{
    std::string name = lock_name();
    Child holder(child_args("hold", name, {"--cache"}), url());
    auto held = holder.expect_line("held", ms(5000));
    ASSERT_TRUE(held);
    ASSERT_EQ("0", field(*held, "rc")) << *held;
    holder.kill(SIGSTOP);
    rmutex_t m;
    plain(&m, name);
    auto t0 = Clock::now();
    ASSERT_RC(0, rmutex_lock(&m)) << "the stopped holder's lease did not run out";
    std::cerr << "[cache] took the lock of the stopped caching process after " << elapsed_ms(t0) << " ms\n";
    holder.kill(SIGCONT);
    ASSERT_TRUE(holder.write_line("unlock"));
    std::vector<std::string> said;
    while (auto l = holder.read_line(ms(3000))) {
        said.push_back(*l);
        bool unlocked = false, lost = false;
        for (auto &x : said) unlocked |= x.rfind("unlocked", 0) == 0, lost |= x.rfind("lost", 0) == 0;
        if (unlocked && lost) break;
    }
    std::string all;
    for (auto &x : said) all += x + "; ";
    EXPECT_NE(std::string::npos, all.find("unlocked rc=" + std::to_string(EPERM)))
        << "a lost cached hold was unlocked as released: " << all;
    EXPECT_NE(std::string::npos, all.find("lost " + name)) << "the holder was never told: " << all;
    EXPECT_TRUE(redis().hgetall(name).size() == 1) << "our hold is intact";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
}

/* ---- the non-fair lock's own: Redisson's client, and parking ------------- */

/* Parking's lease, ms. */
constexpr int kParkLease = 2000;

class CacheIdle : public CacheBase {
  protected:
    explicit CacheIdle(std::string opts = "lease=2000&cache_idle=300&cache_park=0")
        : CacheBase(std::move(opts)) {}

    /* A Redisson client (it never publishes a request) that finds the lock
     * cached here, unused -- parked or not -- gets it when the idle time
     * (300 ms) since the last unlock is up. */
    void redisson_gets_it_after_the_idle_time(bool parked);
};

class CacheIdleParked : public CacheIdle {
  protected:
    CacheIdleParked() : CacheIdle("lease=2000&cache_idle=300&cache_park=1") {}
};

class CachePark : public CacheBase {
  protected:
    CachePark() : CacheBase("lease=2000&cache_idle=60000&cache_park=1") {}

    /* The field's value in Redis: the acquisition, "p<acquisition>" parked. */
    std::string value_of(const std::string &name) { return redis().lock_value(name); }

    bool wait_parked(const std::string &name)
    {
        return wait_until([&] { return redis().parked(name); }, ms(5000));
    }

    /* Lock and unlock m (which caches name) once, then wait for the keeper
     * to park the cache: the acquisition it keeps, "" on failure.  (Read
     * while inside: once unlocked, it may be parked at any moment.) */
    std::string use_and_park(rmutex_t *m, const std::string &name)
    {
        if (rmutex_lock(m)) return "";
        std::string acq = value_of(name);
        if (rmutex_unlock(m)) return "";
        return wait_parked(name) ? acq : "";
    }
};

/* The non-fair cached mutex of the tests below. */
void cached_mutex(rmutex_t *m, const std::string &name, int type = RMUTEX_NORMAL)
{
    init_cached(m, name, false, RMUTEX_STALLED, type);
}

/* An uncached handle of a cached name locks through the process's cache.
 * (A fair one queues as its thread and asks for the lock instead, as
 * FairCache.AnUncachedFairHandleOfTheSameProcessAsksToo shows.) */
using NonfairCache = CacheBase;

TEST_F(NonfairCache, TwoHandlesOfOneNameShareTheCache)
{
    std::string name = lock_name();
    rmutex_t cached, plain;
    cached_mutex(&cached, name, RMUTEX_ERRORCHECK);
    init_mutex(&plain, name, RMUTEX_ERRORCHECK);
    ASSERT_RC(0, rmutex_lock(&cached));
    EXPECT_RC(EDEADLK, rmutex_lock(&plain)) << "one name, one hold";
    ASSERT_RC(0, rmutex_unlock(&cached));
    rmutex_stats_t before = stats();
    ASSERT_RC(0, rmutex_lock(&plain));
    EXPECT_EQ(before.round_trips, stats().round_trips) << "the plain handle used the process's cache";
    EXPECT_RC(0, rmutex_unlock(&plain));
}

void CacheIdle::redisson_gets_it_after_the_idle_time(bool parked)
{
    std::string name = lock_name();
    rmutex_t m;
    cached_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    RedissonClient rc(redis(), "5d1c6a52-0000-4000-8000-00000000beef", 7);
    EXPECT_GT(rc.acquire(name, 30000), 0) << "busy while we are inside";
    auto t_unlock = Clock::now();
    ASSERT_RC(0, rmutex_unlock(&m));
    if (parked) {
        ASSERT_TRUE(wait_until([&] { return redis().parked(name); }, ms(250))) << "not parked";
        EXPECT_GT(rc.acquire(name, 30000), 0) << "Redisson's script does not take a parked cache over";
    }
    /* Redisson waits for the "0" of a release; the release comes after the
     * idle time (300 ms). */
    Redis sub(host(), port());
    sub.cmd({"SUBSCRIBE", "redisson_lock__channel:{" + name + "}"});
    std::optional<std::pair<std::string, std::string>> msg;
    do msg = sub.next_message(scaled(ms(3000)));
    while (msg && msg->second != "0");
    ASSERT_TRUE(msg) << "no release was published";
    EXPECT_GE(elapsed_ms(t_unlock), 250) << "given back before the idle time";
    EXPECT_EQ(-1, rc.acquire(name, 30000)) << "Redisson's client gets it once released";
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    EXPECT_EQ(1, rc.unlock(name));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(CacheIdle, AnUnusedCacheIsGivenBackAfterTheIdleTimeForClientsThatDoNotAsk)
{
    redisson_gets_it_after_the_idle_time(false);
}

TEST_F(CacheIdleParked, AParkedCacheIsGivenBackAfterTheIdleTimeForClientsThatDoNotAsk)
{
    redisson_gets_it_after_the_idle_time(true);
}

TEST_F(CachePark, AParkedCacheIsTakenOverByAnotherProcessInOneCallWithoutAsking)
{
    std::string name = lock_name();
    rmutex_t m;
    cached_mutex(&m, name);
    ASSERT_NE("", use_and_park(&m, name)) << "an unused cache was not parked";
    /* (The keeper counts the park once park.lua has answered.) */
    EXPECT_TRUE(wait_until([] { return stats().cache_parks >= 1; }, ms(1000))) << "a park not counted";
    uint64_t asked = stats().cache_requests;
    Child c({"hold", name}, url());
    auto line = c.expect_line("held", ms(5000));
    ASSERT_TRUE(line);
    EXPECT_EQ("0", field(*line, "rc"));
    EXPECT_EQ(asked, stats().cache_requests) << "taken over, not asked for";
    EXPECT_NE(process_field(), redis().hgetall(name).begin()->first);
    /* This process's cache is gone: its next lock goes to Redis and waits;
     * finding its cache taken over costs it no extra round trip. */
    rmutex_stats_t before = stats();
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    EXPECT_EQ(before.round_trips + 1, stats().round_trips) << "the take-back is the acquire's";
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_EQ(process_field(), redis().hgetall(name).begin()->first);
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(CachePark, AParkedCacheIsTakenBackBeforeALocalLockAndIsNotTakenOverWhileInside)
{
    std::string name = lock_name();
    rmutex_t m;
    cached_mutex(&m, name);
    std::string acq = use_and_park(&m, name);
    ASSERT_NE("", acq);
    EXPECT_EQ("p" + acq, value_of(name));
    rmutex_stats_t before = stats();
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_EQ(acq, value_of(name)) << "not taken back";
    EXPECT_EQ(before.round_trips + 1, stats().round_trips) << "taking it back is one round trip";
    EXPECT_EQ(before.cache_hits + 1, stats().cache_hits);
    /* Inside: another process must not get it. */
    Child c({"hold", name}, url());
    EXPECT_FALSE(c.read_line_unscaled(ms(500))) << "taken over while a thread was inside";
    ASSERT_RC(0, rmutex_unlock(&m));
    auto line = c.expect_line("held", ms(5000));
    ASSERT_TRUE(line) << "asked for, it was given back at the unlock";
    EXPECT_EQ("0", field(*line, "rc"));
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
}

TEST_F(CachePark, AParkedCacheTakenOverIsNoLostLock)
{
    std::string name = lock_name();
    rmutex_t m, other;
    cached_mutex(&m, name);
    init_mutex(&other, lock_name("other"));
    ASSERT_NE("", use_and_park(&m, name));
    /* A hold the watchdog keeps renewing, so that its calls go on after it
     * has found the parked hold gone. */
    ASSERT_RC(0, rmutex_lock(&other));
    Child c({"hold", name}, url());
    ASSERT_TRUE(c.expect_line("held rc=0", ms(5000)));
    rmutex_stats_t before = stats();
    ASSERT_TRUE(wait_until([&] { return stats().renewal_calls >= before.renewal_calls + 2; },
                           ms(2 * kParkLease)))
        << "no renewal after the takeover";
    EXPECT_EQ(before.locks_lost, stats().locks_lost) << "letting a parked cache go is no lost lock";
    EXPECT_RC(0, rmutex_unlock(&other));
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
    /* Taken back and in use, a hold is a hold again: losing it counts. */
    ASSERT_NE("", use_and_park(&m, name));
    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t lost = stats().locks_lost;
    redis().cmd({"DEL", name});
    ASSERT_TRUE(wait_until([&] { return stats().locks_lost > lost; }, ms(2 * kParkLease)));
    EXPECT_RC(EPERM, rmutex_unlock(&m));
}

TEST_F(CachePark, ALocalLockAfterATakeOverIsOneRoundTripAndANewCache)
{
    std::string name = lock_name();
    rmutex_t m;
    cached_mutex(&m, name);
    std::string old = use_and_park(&m, name);
    ASSERT_NE("", old);
    /* Another process takes it over and gives it back: the lock is free,
     * and this process still has its parked cache, stale. */
    Child c({"hold", name, "--hold-ms=0"}, url());
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(5000)));
    ASSERT_TRUE(redis().hgetall(name).empty());
    rmutex_stats_t before = stats();
    ASSERT_RC(0, rmutex_lock(&m));
    rmutex_stats_t after = stats();
    EXPECT_EQ(before.round_trips + 1, after.round_trips) << "one acquire, no separate take-back";
    EXPECT_EQ(before.cache_starts + 1, after.cache_starts) << "the stale cache must not go on";
    EXPECT_EQ(before.cache_hits, after.cache_hits);
    auto held = redis().hgetall(name);
    ASSERT_EQ(1u, held.size());
    EXPECT_EQ(process_field(), held.begin()->first);
    EXPECT_NE(old, held.begin()->second) << "a new acquisition, not the taken-over one";
    ASSERT_RC(0, rmutex_unlock(&m));
    /* The new cache is a cache: relocking is local. */
    before = stats();
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_EQ(before.round_trips, stats().round_trips);
    EXPECT_RC(0, rmutex_unlock(&m));
}

/* The take-back and the new acquisition after a takeover run in the
 * caller's thread: they fit a PTHREAD_STACK_MIN stack and RMUTEX_STACK_NEED. */
struct StackJob {
    rmutex_t *m;
    int rc = -1;
    size_t used = 0;
};

static void *lock_unlock_measured(void *arg)
{
    auto *j = static_cast<StackJob *>(arg);
    j->used = small_stack_measure(
        [](void *a) {
            auto *jj = static_cast<StackJob *>(a);
            jj->rc = rmutex_lock(jj->m);
            if (!jj->rc) jj->rc = rmutex_unlock(jj->m);
        },
        j);
    return nullptr;
}

TEST_F(CachePark, TakingBackAndAcquiringAfterATakeOverFitASmallStack)
{
    std::string name = lock_name();
    rmutex_t m;
    cached_mutex(&m, name);
    ASSERT_NE("", use_and_park(&m, name));
    StackJob back{&m};
    ASSERT_EQ(0, small_stack_run(lock_unlock_measured, &back));
    EXPECT_RC(0, back.rc) << "the take-back";
    ASSERT_TRUE(wait_parked(name));
    Child c({"hold", name, "--hold-ms=0"}, url());
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(5000)));
    rmutex_stats_t before = stats();
    StackJob fresh{&m};
    ASSERT_EQ(0, small_stack_run(lock_unlock_measured, &fresh));
    EXPECT_RC(0, fresh.rc) << "the acquisition after a takeover";
    EXPECT_EQ(before.cache_starts + 1, stats().cache_starts);
    if (!SMALL_STACK_SANITIZED) {
        EXPECT_LE(back.used, size_t(RMUTEX_STACK_NEED));
        EXPECT_LE(fresh.used, size_t(RMUTEX_STACK_NEED));
    }
}

TEST_F(CachePark, ARobustCacheTakenBackIsOwnedAgainAndItsHoldersDeathIsReported)
{
    std::string name = lock_name(), mark = "rmutex_owner:{" + name + "}";
    Child c({"hold", name, "--cache", "--robust"}, url());
    ASSERT_TRUE(c.expect_line("held rc=0", ms(5000)));
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
    ASSERT_TRUE(wait_parked(name));
    EXPECT_FALSE(redis().exists(mark)) << "a parked robust cache has no owner";
    c.write_line("lock");
    ASSERT_TRUE(c.expect_line("held rc=0", ms(3000)));
    EXPECT_FALSE(redis().parked(name)) << "not taken back";
    EXPECT_TRUE(redis().exists(mark)) << "taken back without its owner mark";
    c.kill(SIGKILL);
    c.wait(ms(5000));
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    EXPECT_RC(EOWNERDEAD, rmutex_lock(&m)) << "died inside a taken-back cache";
    EXPECT_RC(0, rmutex_consistent(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(CachePark, ExclusionAcrossCachingProcessesThatParkAndTakeOverAllTheTime)
{
    std::string name = lock_name(), key = lock_name("counter");
    redis().cmd({"SET", key, "0"});
    std::vector<std::unique_ptr<Child>> cs;
    for (int i = 0; i < 3; i++)
        cs.push_back(std::make_unique<Child>(
            std::vector<std::string>{"counter", name, host(), std::to_string(port()), key, "2",
                                     "200", "--cache"},
            url()));
    for (auto &c : cs) {
        auto line = c->expect_line("done", ms(120000));
        ASSERT_TRUE(line) << "a caching process starved";
        EXPECT_EQ("0", field(*line, "errors"));
    }
    EXPECT_EQ("1200", *redis().get(key)) << "increments were lost: two holders at once";
}

TEST_F(CachePark, ARobustParkedCacheOfADeadProcessIsNotAnOwnerDeath)
{
    std::string name = lock_name();
    Child c({"hold", name, "--cache", "--robust"}, url());
    ASSERT_TRUE(c.expect_line("held rc=0", ms(5000)));
    c.write_line("unlock");
    ASSERT_TRUE(c.expect_line("unlocked rc=0", ms(3000)));
    ASSERT_TRUE(wait_parked(name));
    c.kill(SIGKILL);
    c.wait(ms(5000));
    /* Parked: nobody was inside.  Taken over at once, and not EOWNERDEAD. */
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    auto t0 = Clock::now();
    EXPECT_RC(0, rmutex_lock(&m));
    EXPECT_LT(elapsed_ms(t0), scaled(ms(1000)).count()) << "waited for the dead cache's lease";
    EXPECT_RC(0, rmutex_unlock(&m));
}

} // namespace
