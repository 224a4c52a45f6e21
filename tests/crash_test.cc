/* crash_test.cc -- a holder that dies (kill -9) and robust mutexes.
 *
 * The child and this process use lease=2000: a dead holder's lease runs out
 * within 2 s of its last renewal.  The next locker must get in after that and
 * not before; a robust one gets EOWNERDEAD. */
#include <signal.h>
#include <sys/wait.h>

#include "harness.h"

namespace {

using namespace rmt;

constexpr int kLease = 2000;

class Crash : public RedisTest {
  protected:
    Crash() : RedisTest(false, "lease=2000") {}

    /* Kill a child holding name; returns the PTTL read right after the kill
     * and when it was read. */
    std::pair<long long, Clock::time_point> kill_holder(Child &c, const std::string &name)
    {
        c.kill(SIGKILL);
        int status = c.wait(ms(5000));
        EXPECT_TRUE(WIFSIGNALED(status)) << "status " << status;
        auto t = Clock::now();
        long long pttl = redis().pttl(name);
        return {pttl, t};
    }

    std::string owner_key(const std::string &name) { return "rmutex_owner:{" + name + "}"; }
    std::string notrec_key(const std::string &name) { return "rmutex_notrecoverable:{" + name + "}"; }
};

TEST_F(Crash, NextLockerGetsInAfterTheKilledHoldersLeaseAndNotBefore)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    EXPECT_FALSE(redis().exists(owner_key(name))) << "a non-robust hold writes no owner mark";
    auto [pttl, t_kill] = kill_holder(*child, name);
    ASSERT_GT(pttl, 0) << "the lock vanished with its holder";
    ASSERT_LE(pttl, kLease);
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto waited = elapsed_ms(t_kill);
    EXPECT_GE(waited, pttl - 50) << "got in before the dead holder's lease ran out";
    EXPECT_LE(waited, pttl + scaled(ms(1000)).count()) << "got in long after the lease ran out";
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Crash, TrylockIsEbusyUntilTheLeaseRunsOut)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    auto [pttl, t_kill] = kill_holder(*child, name);
    ASSERT_GT(pttl, 300);
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    ASSERT_TRUE(wait_until([&] { return !redis().exists(name); }, ms(kLease + 1000)));
    EXPECT_GE(elapsed_ms(t_kill), pttl - 50);
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Crash, RobustLockerGetsEownerdeadThenConsistentMakesItWholeAgain)
{
    std::string name = lock_name();
    auto child = child_holding(name, url(), {"--robust"});
    ASSERT_TRUE(child);
    auto [pttl, t_kill] = kill_holder(*child, name);
    ASSERT_GT(pttl, 0);
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    ASSERT_RC(EOWNERDEAD, rmutex_lock(&m));
    EXPECT_GE(elapsed_ms(t_kill), pttl - 50);
    EXPECT_EQ(1u, redis().hgetall(name).size()) << "EOWNERDEAD means acquired";
    unsigned count = 0;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(1u, count);
    EXPECT_RC(0, rmutex_consistent(&m));
    EXPECT_RC(EINVAL, rmutex_consistent(&m)) << "no longer inconsistent";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(notrec_key(name)));
    EXPECT_RC(0, rmutex_lock(&m)) << "a clean unlock leaves nothing to report";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(owner_key(name))) << "a clean unlock deletes the owner record";
}

TEST_F(Crash, RobustTimedlockByAnErrorcheckHandleReportsEownerdeadToo)
{
    std::string name = lock_name();
    auto child = child_holding(name, url(), {"--robust"});
    ASSERT_TRUE(child);
    kill_holder(*child, name);
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_ERRORCHECK, RMUTEX_ROBUST);
    struct timespec dl = abs_after(CLOCK_REALTIME, scaled(ms(kLease + 2000)).count());
    ASSERT_RC(EOWNERDEAD, rmutex_timedlock(&m, &dl));
    EXPECT_RC(EDEADLK, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_consistent(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Crash, RobustTrylockAfterTheLeaseRanOutReportsEownerdead)
{
    std::string name = lock_name();
    auto child = child_holding(name, url(), {"--robust"});
    ASSERT_TRUE(child);
    kill_holder(*child, name);
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    ASSERT_TRUE(wait_until([&] { return !redis().exists(name); }, ms(kLease + 1000)));
    ASSERT_RC(EOWNERDEAD, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_consistent(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Crash, NonRobustLockerTakesOverSilently)
{
    std::string name = lock_name();
    auto child = child_holding(name, url(), {"--robust"});
    ASSERT_TRUE(child);
    kill_holder(*child, name);
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(EINVAL, rmutex_consistent(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Crash, UnlockWithoutConsistentMakesTheNameNotRecoverable)
{
    std::string name = lock_name();
    auto child = child_holding(name, url(), {"--robust"});
    ASSERT_TRUE(child);
    kill_holder(*child, name);
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    ASSERT_RC(EOWNERDEAD, rmutex_lock(&m));
    /* As glibc: the unlock itself succeeds; the mutex becomes unusable. */
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_TRUE(redis().exists(notrec_key(name)));
    EXPECT_FALSE(redis().exists(name)) << "the lock itself is released";
    EXPECT_RC(ENOTRECOVERABLE, rmutex_lock(&m));
    EXPECT_RC(ENOTRECOVERABLE, rmutex_trylock(&m));
    struct timespec dl = abs_after(CLOCK_REALTIME, 500);
    EXPECT_RC(ENOTRECOVERABLE, rmutex_timedlock(&m, &dl));
    unsigned count = 9;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(0u, count);

    /* Another robust handle, in another process, sees it too. */
    Child probe({"trylock", name, "--robust"}, url());
    auto line = probe.expect_line("trylock", ms(10000));
    ASSERT_TRUE(line);
    EXPECT_EQ(std::to_string(ENOTRECOVERABLE), field(*line, "rc"));

    /* A non-robust handle on the same name still locks. */
    rmutex_t plain;
    init_mutex(&plain, name);
    EXPECT_RC(0, rmutex_lock(&plain));
    EXPECT_RC(0, rmutex_unlock(&plain));

    /* The operator's call clears it. */
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
    EXPECT_FALSE(redis().exists(notrec_key(name)));
    EXPECT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Crash, RecursiveInconsistentHoldReleasedWithInnerLevelsIsEnotrecoverable)
{
    std::string name = lock_name();
    auto child = child_holding(name, url(), {"--robust"});
    ASSERT_TRUE(child);
    kill_holder(*child, name);
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_RECURSIVE, RMUTEX_ROBUST);
    ASSERT_RC(EOWNERDEAD, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(ENOTRECOVERABLE, rmutex_unlock(&m));
    unsigned count = 9;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(0u, count) << "all levels are dropped";
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(ENOTRECOVERABLE, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
}

TEST_F(Crash, ConsistentByAnotherThreadIsEperm)
{
    std::string name = lock_name();
    auto child = child_holding(name, url(), {"--robust"});
    ASSERT_TRUE(child);
    kill_holder(*child, name);
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    HolderThread holder(&m);
    ASSERT_RC(EOWNERDEAD, holder.wait_locked(ms(kLease + 3000)));
    EXPECT_RC(EPERM, rmutex_consistent(&m));
    /* The holder releases without consistent: not recoverable. */
    EXPECT_RC(0, holder.release());
    EXPECT_RC(ENOTRECOVERABLE, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
}

TEST_F(Crash, CleanUnlockByAHolderGivesTheNextRobustLockerZero)
{
    std::string name = lock_name();
    auto child = child_holding(name, url(), {"--robust"});
    ASSERT_TRUE(child);
    ASSERT_TRUE(child->write_line("unlock"));
    ASSERT_TRUE(child->expect_line("unlocked rc=0", ms(5000)));
    EXPECT_FALSE(redis().exists(owner_key(name)));
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    EXPECT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Crash, NormalExitReleasesHoldsPromptly)
{
    /* "the process's holds are released at normal exit": with a 30 s lease
     * the lock is free long before the lease, and nobody died. */
    std::string name = lock_name();
    auto child = child_holding(name, url_with("lease=30000"), {"--robust"});
    ASSERT_TRUE(child);
    ASSERT_GT(redis().pttl(name), 20000);
    auto t0 = Clock::now();
    ASSERT_TRUE(child->write_line("exit"));
    int status = child->wait(ms(5000));
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(0, WEXITSTATUS(status));
    EXPECT_TRUE(wait_until([&] { return !redis().exists(name); }, ms(1000)))
        << "still held " << elapsed_ms(t0) << " ms after a normal exit";
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    EXPECT_RC(0, rmutex_trylock(&m)) << "a clean exit is not an owner death";
    EXPECT_RC(0, rmutex_unlock(&m));
}

} // namespace
