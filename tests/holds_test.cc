/* holds_test.cc -- a name is one lock, and a hold belongs to one thread.
 *
 *   OneNameOneLock: two rmutex_t handles initialized with one name share
 *   one lock in this process.  A thread that holds the name through one
 *   handle and locks it through the other gets what that handle's type
 *   says for a relock (NORMAL deadlocks, ERRORCHECK EDEADLK, RECURSIVE
 *   counts across handles), and exclusion never breaks: while any level is
 *   held, Redis shows the name held and another process cannot take it.
 *
 *   HoldOwnership: a thread whose hold was lost, and then taken by another
 *   thread of the same process, neither ends that thread's hold when it
 *   unlocks (EPERM) nor when it exits. */
#include "harness.h"

#include <atomic>
#include <thread>

using namespace rmt;

namespace {

/* Lock-kind parameter: "nonfair" or "fair". */
class Named : public RedisTest, public ::testing::WithParamInterface<const char *> {
  protected:
    Named() : RedisTest(false, "lease=1500") {}
    bool fair() const { return std::string(GetParam()) == "fair"; }
    void init(rmutex_t *m, const std::string &name, int type)
    {
        rmutexattr_t a;
        ASSERT_EQ(0, rmutexattr_init(&a));
        ASSERT_EQ(0, rmutexattr_settype(&a, type));
        ASSERT_EQ(0, rmutexattr_setfair(&a, fair()));
        ASSERT_RC(0, rmutex_init(m, name.c_str(), &a));
        rmutexattr_destroy(&a);
    }
    /* Two handles on one name. */
    void init2(rmutex_t *a, rmutex_t *b, const std::string &name, int type)
    {
        init(a, name, type);
        init(b, name, type);
    }
    void destroy2(rmutex_t *a, rmutex_t *b)
    {
        EXPECT_RC(0, rmutex_destroy(a));
        EXPECT_RC(0, rmutex_destroy(b));
    }
    /* Another process tries the name: "EBUSY" or "0" (and it lets go). */
    std::string other_process_trylock(const std::string &name)
    {
        Child c({ "trylock", name }, url());
        auto l = c.expect_line("trylock", ms(10000));
        c.wait(ms(10000));
        if (!l) return "none";
        std::string rc = field(*l, "rc");
        return rc == std::to_string(EBUSY) ? "EBUSY" : rc;
    }
};

std::string name_of(const ::testing::TestParamInfo<const char *> &i) { return i.param; }

using OneNameOneLock = Named;

TEST_P(OneNameOneLock, NormalRelockThroughAnotherHandleDeadlocksAsGlibcDoes)
{
    std::string name = lock_name();
    rmutex_t a, b;
    init2(&a, &b, name, RMUTEX_NORMAL);
    ASSERT_RC(0, rmutex_lock(&a));
    EXPECT_RC(EBUSY, rmutex_trylock(&b));
    struct timespec t = abs_after(CLOCK_MONOTONIC, 300);
    EXPECT_RC(ETIMEDOUT, rmutex_clocklock(&b, CLOCK_MONOTONIC, &t));
    unsigned n = 9;
    EXPECT_EQ(0, rmutex_holdcount(&b, &n));
    EXPECT_EQ(1u, n) << "the hold through a is visible through b";
    EXPECT_TRUE(redis().exists(name));
    EXPECT_RC(0, rmutex_unlock(&a));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(0, rmutex_destroy(&a));
    EXPECT_RC(0, rmutex_destroy(&b));
}

TEST_P(OneNameOneLock, ErrorcheckRelockThroughAnotherHandleIsEdeadlk)
{
    std::string name = lock_name();
    rmutex_t a, b;
    init2(&a, &b, name, RMUTEX_ERRORCHECK);
    ASSERT_RC(0, rmutex_lock(&a));
    EXPECT_RC(EDEADLK, rmutex_lock(&b));
    EXPECT_RC(EBUSY, rmutex_trylock(&b));
    EXPECT_RC(0, rmutex_unlock(&b)) << "the name's hold is the thread's, through either handle";
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(EPERM, rmutex_unlock(&a));
    destroy2(&a, &b);
}

TEST_P(OneNameOneLock, RecursiveCountsAcrossHandlesAndExclusionHoldsUntilTheLastLevel)
{
    std::string name = lock_name();
    rmutex_t a, b;
    init2(&a, &b, name, RMUTEX_RECURSIVE);
    ASSERT_RC(0, rmutex_lock(&a));
    ASSERT_RC(0, rmutex_lock(&b));
    unsigned n = 0;
    EXPECT_EQ(0, rmutex_holdcount(&a, &n));
    EXPECT_EQ(2u, n);
    ASSERT_RC(0, rmutex_unlock(&a));
    EXPECT_TRUE(redis().exists(name)) << "one level is still held";
    EXPECT_EQ("EBUSY", other_process_trylock(name));
    EXPECT_EQ(0, rmutex_holdcount(&b, &n));
    EXPECT_EQ(1u, n);
    ASSERT_RC(0, rmutex_unlock(&b));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(EPERM, rmutex_unlock(&b));
    EXPECT_EQ("0", other_process_trylock(name));
    destroy2(&a, &b);
}

TEST_P(OneNameOneLock, TwoThreadsOnTwoHandlesExcludeEachOther)
{
    std::string name = lock_name();
    rmutex_t a, b;
    init2(&a, &b, name, RMUTEX_NORMAL);
    HolderThread h(&a);
    ASSERT_EQ(0, h.wait_locked(ms(5000)));
    std::atomic<bool> in{ false };
    Async w([&] {
        int r = rmutex_lock(&b);
        in = true;
        if (!r) r = rmutex_unlock(&b);
        return r;
    });
    EXPECT_FALSE(wait_until_unscaled([&] { return in.load(); }, ms(500)))
        << "the second thread got in through the other handle while the first held the name";
    EXPECT_RC(EBUSY, rmutex_trylock(&b));
    EXPECT_EQ(0, h.release());
    ASSERT_TRUE(w.wait(ms(10000)));
    EXPECT_RC(0, w.rc());
    destroy2(&a, &b);
}

TEST_P(OneNameOneLock, DestroyIsEbusyOnlyForTheHandleTheHoldWasTakenThrough)
{
    std::string name = lock_name();
    rmutex_t a, b;
    init2(&a, &b, name, RMUTEX_NORMAL);
    ASSERT_RC(0, rmutex_lock(&a));
    EXPECT_RC(EBUSY, rmutex_destroy(&a));
    EXPECT_RC(0, rmutex_destroy(&b));
    EXPECT_TRUE(redis().exists(name));
    EXPECT_RC(0, rmutex_unlock(&a));
    EXPECT_RC(0, rmutex_destroy(&a));
}

INSTANTIATE_TEST_SUITE_P(Kinds, OneNameOneLock, ::testing::Values("nonfair", "fair"), name_of);

/* ---- one thread's hold, ended once ---- */

/* T1 holds m until its hold is lost (force-unlocked) and T2 of the same
 * process, waiting on m, has taken it; T1 then unlocks (EPERM) or not, and
 * exits.  T2's hold must be untouched: counted, renewed past its lease,
 * released by its unlock at once for everybody. */
class HoldOwnership : public Named {
  protected:
    void run(bool t1_unlocks)
    {
        std::string name = lock_name();
        rmutex_t m;
        init(&m, name, RMUTEX_NORMAL);
        std::atomic<int> t1_unlock{ INT32_MIN };
        std::atomic<bool> t1_go{ false };
        std::thread t1([&] {
            if (rmutex_lock(&m)) return;
            t1_unlock = INT32_MAX; /* holding */
            while (!t1_go) std::this_thread::sleep_for(ms(5));
            if (t1_unlocks) t1_unlock = rmutex_unlock(&m);
        });
        ASSERT_TRUE(wait_until([&] { return t1_unlock.load() == INT32_MAX; }, ms(5000)));
        std::atomic<int> t2_rc{ INT32_MIN };
        std::atomic<bool> t2_go{ false };
        std::atomic<unsigned> t2_count{ 99 };
        std::atomic<int> t2_unlock{ INT32_MIN };
        std::thread t2([&] {
            t2_rc = rmutex_lock(&m);
            while (!t2_go) std::this_thread::sleep_for(ms(5));
            unsigned n = 0;
            rmutex_holdcount(&m, &n);
            t2_count = n;
            t2_unlock = rmutex_unlock(&m);
        });
        /* T1's hold is lost: Redis forgets it, and T2 takes the name -- at
         * once when fair (T2 waits in Redis), after T1 lets the process's
         * gate go when not (T2 waits behind T1 in this process). */
        ASSERT_RC(0, rmutex_force_unlock(name.c_str()));
        if (!fair()) t1_go = true;
        bool t2_in = wait_until([&] { return t2_rc.load() != INT32_MIN; }, ms(10000));
        t1_go = true;
        t1.join();
        if (!t2_in) t2_go = true, t2.join(); /* a T2 stuck for good ends in ctest's timeout */
        ASSERT_TRUE(t2_in) << "T2 never got the name";
        ASSERT_RC(0, t2_rc.load());
        if (t1_unlocks) {
            EXPECT_RC(EPERM, t1_unlock.load()) << "T1's hold was lost";
        }
        /* T1 has exited.  T2 still holds the name, renewed past a lease. */
        EXPECT_FALSE(wait_until_unscaled([&] { return !redis().exists(name); }, ms(2500)))
            << "T2's hold lapsed: T1's exit ended it";
        t2_go = true;
        t2.join();
        EXPECT_EQ(1u, t2_count.load());
        EXPECT_RC(0, t2_unlock.load()) << "T2's unlock must release the name in Redis";
        EXPECT_FALSE(redis().exists(name));
        EXPECT_EQ("0", other_process_trylock(name));
        EXPECT_RC(0, rmutex_destroy(&m));
    }
};

TEST_P(HoldOwnership, AThreadThatExitsAfterLosingItsHoldLeavesTheNextHolderAlone) { run(false); }

TEST_P(HoldOwnership, AnEpermUnlockThenExitLeavesTheNextHolderAlone) { run(true); }

INSTANTIATE_TEST_SUITE_P(Kinds, HoldOwnership, ::testing::Values("nonfair", "fair"), name_of);

} // namespace
