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
 * long (60 s) so that only a request can move a cached lock.
 *
 * Here is what only the fair lock does, its queue's order; the scenarios
 * of both kinds (a request, kill -9, a thread's exit, exclusion, fencing,
 * ...) run for fair mutexes too in ../cache_test.cc (Kinds/Cache.<scenario>/fair). */
#include <unistd.h>

#include <atomic>

#include "cache_util.h"
#include "fair_util.h"

namespace {

using namespace rmt;
using namespace fair;

class FairCache : public FairTest {
  protected:
    FairCache() : FairTest("lease=2000&waiter_lease=1000&cache_idle=60000") {}

    void init_cached(rmutex_t *m, const std::string &name) { rmt::init_cached(m, name, true); }

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
    /* The last grant had nobody behind it: caching resumes.  (The later
     * lock queued as the process, and the lock stayed cached, or -- when
     * the first's contended grant came before it -- as its thread; then
     * the next lock caches it.) */
    ASSERT_RC(0, rmutex_lock(&m));
    auto held = redis().hgetall(name);
    ASSERT_EQ(1u, held.size());
    EXPECT_EQ(process_field(), held.begin()->first) << "caching did not resume";
    EXPECT_RC(0, rmutex_unlock(&m));
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

} // namespace
