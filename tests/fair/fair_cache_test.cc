/* fair_cache_test.cc -- lock caching of fair mutexes (rmutexattr_setcache
 * with rmutexattr_setfair), against a real redis-server.
 *
 * A cached fair mutex is held in Redis by the process ("<uuid>:0") and
 * queues there as one member at a time; its threads take turns locally.
 * FIFO across processes holds through the queue: a waiter of another
 * process that is queued asks for the lock at each of its tries, a grant
 * made with others queued behind starts asked, and an asked cache serves
 * no further local lock -- the lock goes to the waiter at the next unlock,
 * and the process's later locks queue behind it.  What is asserted is who
 * gets in and in which order, never speed (bench W11).  The idle time is
 * long (60 s) so that only a request can move a cached lock. */
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "fair_util.h"

namespace {

using namespace rmt;
using namespace fair;

class FairCache : public FairTest {
  protected:
    FairCache() : FairTest("lease=2000&waiter_lease=1000&cache_idle=60000") {}

    void init_cached(rmutex_t *m, const std::string &name, int robust = RMUTEX_STALLED)
    {
        rmutexattr_t a;
        rmutexattr_init(&a);
        rmutexattr_setfair(&a, 1);
        rmutexattr_setcache(&a, 1);
        rmutexattr_setrobust(&a, robust);
        ASSERT_RC(0, rmutex_init(m, name.c_str(), &a));
        rmutexattr_destroy(&a);
    }

    std::string process_field()
    {
        char owner[96];
        EXPECT_RC(0, rmutex_owner_id(owner, sizeof owner));
        std::string s = owner;
        return s.substr(0, s.rfind(':')) + ":0";
    }

    std::unique_ptr<FairChild> child(const std::string &name, std::vector<std::string> opts = {})
    {
        return threads_child(name, url(), opts);
    }

    std::string child_do(FairChild &c, const std::string &verb, int t = 0, ms bound = ms(10000))
    {
        EXPECT_TRUE(c.send(verb + " " + std::to_string(t)));
        auto line = c.expect_line(verb + " t=" + std::to_string(t) + " ", bound);
        EXPECT_TRUE(line) << "child thread " << t << " did not return from " << verb;
        return line ? *line : "";
    }

    /* Wait until this process has heard more than `before` requests. */
    bool wait_asked(uint64_t before)
    {
        return wait_until([&] { return stats().cache_requests > before; }, ms(5000));
    }
};

TEST_F(FairCache, RelockIsLocalAndTheProcessHoldsItWithNobodyQueued)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_cached(&m, name);
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
    EXPECT_FALSE(redis().exists(k.queue)) << "nobody queued";
    EXPECT_RC(0, rmutex_destroy(&m)) << "an unused cache is not a hold";
}

TEST_F(FairCache, AQueuedWaiterOfAnotherProcessGetsAnUnusedCacheAtOnce)
{
    std::string name = lock_name();
    rmutex_t m;
    init_cached(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_TRUE(redis().exists(name));
    auto c = child(name);
    auto t0 = Clock::now();
    std::string line = child_do(*c, "lock");
    EXPECT_EQ(0, rc_of(line));
    EXPECT_LT(elapsed_ms(t0), scaled(ms(5000)).count()) << "waited for the idle time, not a request";
    EXPECT_GE(stats().cache_requests, 1u);
    EXPECT_RC(EBUSY, rmutex_trylock(&m)) << "given back";
    EXPECT_EQ(0, rc_of(child_do(*c, "unlock")));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(FairCache, AWaiterQueuedWhileAThreadIsInsideComesBeforeTheProcesssLaterLocks)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_cached(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m)); /* cached */
    HolderThread first(&m);
    ASSERT_EQ(0, first.wait_locked(ms(5000)));
    uint64_t asked = stats().cache_requests;
    auto c = child(name);
    std::string waiter = enqueue(*c, k, "lock 0");
    ASSERT_FALSE(waiter.empty());
    ASSERT_TRUE(wait_asked(asked)) << "the queued waiter's request was not heard";
    /* A thread of the caching process comes after the request. */
    std::atomic<bool> later_in{false};
    Async later([&] {
        int rc = rmutex_lock(&m);
        later_in = true;
        if (!rc) rmutex_unlock(&m);
        return rc;
    });
    EXPECT_FALSE(c->read_line_unscaled(ms(300))) << "the waiter got in while a thread was inside";
    ASSERT_EQ(0, first.release());
    auto got = c->expect_line("lock t=0 ", ms(5000));
    ASSERT_TRUE(got) << "the queued waiter did not get the lock at the unlock";
    EXPECT_EQ(0, rc_of(*got));
    EXPECT_FALSE(later_in.load()) << "a later local lock was served from the cache first";
    /* It waits in the queue, as the process, behind the waiter. */
    ASSERT_TRUE(wait_until([&] {
        for (auto &e : read_queue(redis(), k).queue)
            if (e.member.rfind(process_field() + "|", 0) == 0) return true;
        return false;
    }, ms(5000))) << "the process's later lock is not queued in Redis";
    EXPECT_EQ(0, rc_of(child_do(*c, "unlock")));
    ASSERT_TRUE(later.wait(ms(5000)));
    EXPECT_RC(0, later.rc());
}

TEST_F(FairCache, AGrantWithOthersQueuedBehindIsGivenBackAtTheFirstUnlock)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_cached(&m, name);
    auto holder = child(name);
    ASSERT_EQ(0, rc_of(child_do(*holder, "lock")));
    /* This process queues first, another process after it. */
    Async first([&] {
        int rc = rmutex_lock(&m);
        if (!rc) rc = rmutex_unlock(&m);
        return rc;
    });
    ASSERT_TRUE(wait_queue_size(k, 1));
    auto behind = child(name);
    ASSERT_FALSE(enqueue(*behind, k, "lock 0").empty());
    std::atomic<bool> later_in{false};
    Async later([&] {
        int rc = rmutex_lock(&m);
        later_in = true;
        if (!rc) rmutex_unlock(&m);
        return rc;
    });
    EXPECT_EQ(0, rc_of(child_do(*holder, "unlock")));
    ASSERT_TRUE(first.wait(ms(5000)));
    EXPECT_RC(0, first.rc());
    /* The grant said others were queued: the first unlock passes it on,
     * though no request message has come (the waiter behind asked while
     * another process held it). */
    auto got = behind->expect_line("lock t=0 ", ms(5000));
    ASSERT_TRUE(got);
    EXPECT_EQ(0, rc_of(*got));
    EXPECT_FALSE(later_in.load()) << "the process's later lock jumped the queue";
    EXPECT_EQ(0, rc_of(child_do(*behind, "unlock")));
    ASSERT_TRUE(later.wait(ms(5000)));
    EXPECT_RC(0, later.rc());
    /* The last grant had nobody behind it: cached again. */
    EXPECT_EQ(process_field(), redis().hgetall(name).begin()->first);
}

TEST_F(FairCache, WhileContendedItsThreadsQueueThemselvesAndCachingResumesWhenNobodyIsBehind)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_cached(&m, name);
    char me[96];
    ASSERT_RC(0, rmutex_owner_id(me, sizeof me));
    auto holder = child(name);
    ASSERT_EQ(0, rc_of(child_do(*holder, "lock")));
    Async first([&] {
        int rc = rmutex_lock(&m);
        if (!rc) rc = rmutex_unlock(&m);
        return rc;
    });
    ASSERT_TRUE(wait_queue_size(k, 1));
    auto behind = child(name);
    ASSERT_FALSE(enqueue(*behind, k, "lock 0").empty());
    EXPECT_EQ(0, rc_of(child_do(*holder, "unlock")));
    ASSERT_TRUE(first.wait(ms(5000)));
    ASSERT_TRUE(behind->expect_line("lock t=0 rc=0", ms(5000)));
    /* Granted with a waiter behind it: contended.  This thread's lock now
     * queues as the thread, not as the process. */
    HolderThread again(&m);
    std::string uuid = std::string(me).substr(0, std::string(me).rfind(':') + 1);
    ASSERT_TRUE(wait_until([&] {
        for (auto &e : read_queue(redis(), k).queue) {
            std::string o = owner_of(e.member);
            if (o.rfind(uuid, 0) == 0 && o != process_field()) return true;
        }
        return false;
    }, ms(5000))) << "not queued as the thread";
    EXPECT_EQ(0, rc_of(child_do(*behind, "unlock")));
    ASSERT_EQ(0, again.wait_locked(ms(5000)));
    EXPECT_RC(0, again.release());
    EXPECT_FALSE(redis().exists(name));
    /* That grant had nobody behind it: caching resumes. */
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_EQ(process_field(), redis().hgetall(name).begin()->first) << "caching did not resume";
    ASSERT_RC(0, rmutex_unlock(&m));
    EXPECT_TRUE(redis().exists(name)) << "kept after the unlock";
}

TEST_F(FairCache, ATrylockOfAnotherProcessAsksForIt)
{
    std::string name = lock_name();
    rmutex_t m;
    init_cached(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    auto c = child(name);
    EXPECT_EQ(EBUSY, rc_of(child_do(*c, "trylock"))) << "cached: held in Redis";
    /* The refused trylock asked; the keeper gives an unused fair cache back
     * at once, so a later trylock gets it (long before the idle time). */
    ASSERT_TRUE(wait_until([&] {
        int rc = rc_of(child_do(*c, "trylock"));
        return rc == 0;
    }, ms(5000)));
    EXPECT_EQ(0, rc_of(child_do(*c, "unlock")));
}

TEST_F(FairCache, ACachingProcessKilledWithKill9LeavesTheLockForItsLeaseOnly)
{
    std::string name = lock_name();
    auto c = child(name, {"--cache"});
    ASSERT_EQ(0, rc_of(child_do(*c, "lock")));
    ASSERT_EQ(0, rc_of(child_do(*c, "unlock")));
    ASSERT_TRUE(redis().exists(name)) << "the child caches it after its unlock";
    c->kill(SIGKILL);
    c->wait(ms(5000));
    auto t_kill = Clock::now();
    long long pttl = redis().pttl(name);
    ASSERT_GT(pttl, 0);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_GE(elapsed_ms(t_kill), pttl - 50) << "got in before the dead cache's lease ran out";
    EXPECT_LE(elapsed_ms(t_kill), pttl + scaled(ms(2500)).count());
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(FairCache, AfterAThreadExitedInsideTheNextLocalLockWaitsOutTheLease)
{
    std::string name = lock_name();
    rmutex_t m;
    init_cached(&m, name, RMUTEX_ROBUST);
    std::thread([&] { ASSERT_RC(0, rmutex_lock(&m)); }).join();
    auto t_exit = Clock::now();
    long long pttl = redis().pttl(name);
    ASSERT_GT(pttl, 0);
    /* The process's next acquisition does not take over its own field:
     * it queues, and gets the lock when the abandoned hold lapses. */
    EXPECT_RC(EOWNERDEAD, rmutex_lock(&m));
    EXPECT_GE(elapsed_ms(t_exit), pttl - 50) << "got in before the abandoned cache's lease ran out";
    EXPECT_RC(0, rmutex_consistent(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(FairCache, FencingTokensGrowWithEveryNewOwner)
{
    std::string name = lock_name();
    rmutex_t m;
    init_cached(&m, name);
    uint64_t last = 0;
    for (int i = 0; i < 70; i++) { /* more than one reserved range */
        uint64_t t = 0;
        std::thread th([&] {
            ASSERT_RC(0, rmutex_lock(&m));
            ASSERT_RC(0, rmutex_fence(&m, &t));
            ASSERT_RC(0, rmutex_unlock(&m));
        });
        th.join();
        EXPECT_GT(t, last) << "round " << i;
        last = t;
    }
    auto c = child(name);
    std::string line = child_do(*c, "lock");
    ASSERT_EQ(0, rc_of(line));
    uint64_t theirs = std::stoull(field(line, "fence"));
    EXPECT_GT(theirs, last) << "another process's hold (granted by hand-off)";
    EXPECT_EQ(0, rc_of(child_do(*c, "unlock")));
    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t t = 0;
    ASSERT_RC(0, rmutex_fence(&m, &t));
    EXPECT_GT(t, theirs);
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(FairCache, AnUncachedFairHandleOfTheSameProcessAsksToo)
{
    std::string name = lock_name();
    rmutex_t cached, fair_m;
    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_setcache(&a, 1); /* non-fair, cached */
    ASSERT_RC(0, rmutex_init(&cached, name.c_str(), &a));
    rmutexattr_destroy(&a);
    init_fair(&fair_m, name);
    ASSERT_RC(0, rmutex_lock(&cached));
    ASSERT_RC(0, rmutex_unlock(&cached));
    ASSERT_TRUE(redis().exists(name));
    auto t0 = Clock::now();
    Async waiter([&] {
        int rc = rmutex_lock(&fair_m);
        if (!rc) rc = rmutex_unlock(&fair_m);
        return rc;
    });
    ASSERT_TRUE(waiter.wait(ms(5000))) << "a fair waiter waited for the idle time";
    EXPECT_RC(0, waiter.rc());
    EXPECT_LT(elapsed_ms(t0), scaled(ms(5000)).count());
}

TEST_F(FairCache, ExclusionAcrossCachingProcessesWhileTheirPubSubConnectionsAreKilled)
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
            std::vector<std::string>{"counter", name, host(), std::to_string(port()), key, "2",
                                     "100", "--cache", "--fair"},
            url()));
    for (auto &c : cs) {
        auto line = c->expect_line("done", ms(120000));
        ASSERT_TRUE(line) << "a caching process starved";
        EXPECT_EQ("0", field(*line, "errors"));
    }
    stop = true;
    killer.join();
    EXPECT_EQ("600", *redis().get(key)) << "increments were lost: two holders at once";
}

} // namespace
