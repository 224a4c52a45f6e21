/* exclusion_test.cc -- mutual exclusion across processes and threads.
 *
 * 4 child processes x 2 threads x 1000 iterations each do a non-atomic
 * GET -> sched_yield() -> SET of a Redis counter under one rmutex.  With the
 * lock every increment survives and some acquisitions had to wait; the
 * control run, the same loop without the lock, must lose updates (otherwise
 * this test could not see a broken lock). */
#include <numeric>

#include "harness.h"

namespace {

using namespace rmt;

constexpr int kProcesses = 4;
constexpr int kThreads = 2;
constexpr int kIterations = 1000;

struct RunResult {
    long long counter = -1;
    long errors = 0;
    long contended = 0;
    long acquisitions = 0;
    bool all_done = true;
};

class Exclusion : public RedisTest {
  protected:
    RunResult run(bool with_lock)
    {
        RunResult res;
        std::string name = lock_name(with_lock ? "locked" : "control");
        std::string key = name + ":counter";
        redis().cmd({"DEL", key});
        std::vector<std::unique_ptr<Child>> kids;
        for (int p = 0; p < kProcesses; p++) {
            std::vector<std::string> args = {"counter",       name, host(), std::to_string(port()), key,
                                             std::to_string(kThreads), std::to_string(kIterations)};
            if (!password_.empty())
                args.push_back("--password=" + password_);
            if (!with_lock)
                args.push_back("--nolock");
            kids.push_back(std::make_unique<Child>(args, url()));
        }
        for (auto &k : kids) {
            auto line = k->expect_line("done", ms(120000));
            if (!line) {
                res.all_done = false;
                continue;
            }
            res.errors += std::stol(field(*line, "errors"));
            res.contended += std::stol(field(*line, "contended"));
            res.acquisitions += std::stol(field(*line, "acquisitions"));
        }
        auto v = redis().get(key);
        res.counter = v ? std::stoll(*v) : -1;
        return res;
    }
};

TEST_F(Exclusion, FourProcessesTimesTwoThreadsNeverLoseAnUpdate)
{
    RunResult r = run(true);
    ASSERT_TRUE(r.all_done) << "a child did not finish";
    EXPECT_EQ(0, r.errors);
    EXPECT_EQ(kProcesses * kThreads * kIterations, r.counter);
    EXPECT_GT(r.contended, 0) << "no acquisition ever had to wait: the test did not contend";
    /* A child's local threads may hand the lock over without Redis, so
     * acquisitions granted by Redis can be fewer than lock calls, never more. */
    EXPECT_GT(r.acquisitions, 0);
    EXPECT_LE(r.acquisitions, kProcesses * kThreads * kIterations);
    EXPECT_FALSE(redis().exists(lock_name("locked"))) << "the lock was left held";
}

TEST_F(Exclusion, ControlRunWithoutTheLockLosesUpdates)
{
    RunResult r = run(false);
    ASSERT_TRUE(r.all_done) << "a child did not finish";
    EXPECT_EQ(0, r.errors);
    EXPECT_GT(r.counter, 0);
    EXPECT_LT(r.counter, kProcesses * kThreads * kIterations)
        << "without the lock no update was lost, so the locked run proves nothing";
}

} // namespace
