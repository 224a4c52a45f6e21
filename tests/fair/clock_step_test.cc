/* clock_step_test.cc -- a timed wait ignores wall-clock steps once begun.
 *
 * The header promises (a deliberate deviation from glibc, which follows
 * CLOCK_REALTIME through the wait): rmutex_timedlock() turns its absolute
 * CLOCK_REALTIME deadline into one CLOCK_MONOTONIC deadline at entry, never
 * returns ETIMEDOUT before it, and is neither shortened nor prolonged by a
 * step of the wall clock while it waits.  A child process waits on a lock
 * this process holds; while it waits, its wall clock jumps an hour forward
 * or back (skew_preload.c, RMUTEX_TEST_CLOCK_STEP_FILE).  Both the fair and
 * the non-fair lock are checked, since they wait through different code.
 *
 * The step is real for the child: its "clock" command shows the new time
 * before the wait ends, so a library that re-read CLOCK_REALTIME would see
 * it.  The child measures the call on CLOCK_MONOTONIC ("ms=").  Lives with
 * the fair tests for their multi-threaded child and the clock shim. */
#include <rmutex.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "fair_util.h"

namespace {

using namespace rmt;
using namespace fair;

class ClockStep : public FairTest {
  protected:
    void TearDown() override
    {
        if (!step_file_.empty())
            unlink(step_file_.c_str());
        FairTest::TearDown();
    }

    /* A child whose wall clock steps by step_s seconds once step() is called. */
    std::unique_ptr<FairChild> stepping_child(const std::string &name, bool fair, long step_s)
    {
        char tmpl[] = "/tmp/rmutex-clockstep-XXXXXX";
        int fd = mkstemp(tmpl);
        if (fd < 0)
            return nullptr;
        close(fd);
        unlink(tmpl); /* the name only: the step happens when it exists */
        step_file_ = tmpl;
        auto env = skew_env(0);
        env.push_back("RMUTEX_TEST_CLOCK_STEP_FILE=" + step_file_);
        env.push_back("RMUTEX_TEST_CLOCK_STEP_S=" + std::to_string(step_s));
        std::vector<std::string> opts;
        if (!fair)
            opts.push_back("--nonfair");
        return threads_child(name, url(), opts, env);
    }

    bool step()
    {
        FILE *f = fopen(step_file_.c_str(), "w");
        return f && fclose(f) == 0;
    }

    /* Wait until the child's thread is waiting on the lock in Redis: queued
     * (fair) or subscribed to the lock's channel (non-fair). */
    bool child_waits(const FairKeys &k, bool fair)
    {
        if (fair)
            return wait_queue_size(k, 1);
        return wait_until([&] { return redis().numsub(k.channel) >= 1; }, ms(5000));
    }

    /* This process holds name; the child starts a timedlock of wait_ms,
     * its clock steps by step_s during the wait; returns the child's line. */
    std::optional<std::string> timed_wait_across_a_step(bool fair, long step_s, int wait_ms)
    {
        std::string name = lock_name(fair ? "fair" : "nonfair");
        FairKeys k(name);
        rmutex_t m;
        if (fair) {
            init_fair(&m, name);
        } else {
            EXPECT_EQ(0, rmutex_init(&m, name.c_str(), nullptr)) << rmutex_detail();
        }
        EXPECT_EQ(0, rmutex_lock(&m)) << rmutex_detail();
        auto c = stepping_child(name, fair, step_s);
        if (!c) {
            ADD_FAILURE() << "the child did not start";
            return std::nullopt;
        }
        long long before = child_realtime(*c);
        EXPECT_TRUE(c->send("timedlock 0 " + std::to_string(wait_ms)));
        EXPECT_TRUE(child_waits(k, fair)) << "the child never waited on the lock";
        EXPECT_TRUE(step());
        long long after = child_realtime(*c);
        /* Precondition: the clock did step, while the wait was under way. */
        EXPECT_NEAR(static_cast<double>(before + step_s), static_cast<double>(after), 30.0)
            << "the clock shim did not step the child's clock";
        auto line = c->expect_line("timedlock t=0 ", ms(wait_ms + 5000));
        EXPECT_EQ(0, rmutex_unlock(&m));
        EXPECT_EQ(0, rmutex_destroy(&m));
        return line;
    }

    std::string step_file_;
};

/* A step forward by an hour would put the deadline in the past: the wait
 * still lasts its full length. */
TEST_F(ClockStep, AForwardStepDuringATimedWaitDoesNotEndItEarly)
{
    constexpr int kWait = 2000;
    for (bool fair : {false, true}) {
        SCOPED_TRACE(fair ? "fair" : "non-fair");
        auto line = timed_wait_across_a_step(fair, 3600, kWait);
        ASSERT_TRUE(line) << "the timed wait did not return";
        EXPECT_EQ(ETIMEDOUT, rc_of(*line)) << *line;
        /* (The child reads its clocks a few µs apart from the library's own
         * reading at entry: allow those, not the hour.) */
        EXPECT_GE(num_field(*line, "ms"), kWait - 20) << "ETIMEDOUT before the deadline set at entry: " << *line;
    }
}

/* A step back by an hour would put the deadline an hour away: the wait
 * still ends on time (within a coarse bound). */
TEST_F(ClockStep, ABackwardStepDuringATimedWaitDoesNotProlongIt)
{
    constexpr int kWait = 2000;
    for (bool fair : {false, true}) {
        SCOPED_TRACE(fair ? "fair" : "non-fair");
        auto line = timed_wait_across_a_step(fair, -3600, kWait);
        ASSERT_TRUE(line) << "the timed wait did not end within 5 s of its deadline";
        EXPECT_EQ(ETIMEDOUT, rc_of(*line)) << *line;
        EXPECT_GE(num_field(*line, "ms"), kWait - 20) << *line;
        EXPECT_LE(num_field(*line, "ms"), kWait + scaled(ms(2000)).count()) << *line;
    }
}

/* The same for a condition variable's timed wait (rcond_timedwait with
 * a CLOCK_REALTIME deadline): nobody signals, the clock steps an hour
 * forward or back while the child waits; the wait lasts its length. */
TEST_F(ClockStep, AConditionWaitIgnoresWallClockStepsEitherWay)
{
    constexpr int kWait = 2000;
    for (long step_s : {3600L, -3600L}) {
        SCOPED_TRACE(step_s);
        std::string name = lock_name(step_s > 0 ? "fwd" : "back");
        auto c = stepping_child(name, false, step_s);
        ASSERT_TRUE(c) << "the child did not start";
        ASSERT_TRUE(c->send("condwait 0 " + std::to_string(kWait)));
        std::string key = "rmutex_cond_wait:{" + name + ":cond}";
        ASSERT_TRUE(wait_until([&] { return redis().cmd({"ZCARD", key}).integer() == 1; }, ms(5000)))
            << "the child never waited on the condition";
        ASSERT_TRUE(step());
        auto line = c->expect_line("condwait t=0 ", ms(kWait + 5000));
        ASSERT_TRUE(line) << "the wait did not end within 5 s of its deadline";
        EXPECT_EQ(ETIMEDOUT, rc_of(*line)) << *line;
        EXPECT_GE(num_field(*line, "ms"), kWait - 20) << "ended before the deadline set at entry: " << *line;
        EXPECT_LE(num_field(*line, "ms"), kWait + scaled(ms(2000)).count()) << *line;
        unlink(step_file_.c_str());
    }
}

} // namespace
