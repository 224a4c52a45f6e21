/* fair_crowd_test.cc -- a deep queue is served in order: 1 001 threads in
 * four processes lock and unlock one fair mutex without pause, and every
 * one of them has acquired within 10 s of the start.  Strict FIFO among
 * live waiters puts the last first acquisition about 1 001 hand-offs after
 * the start: one or two seconds here.
 *
 * A thread of such a crowd was once seen still waiting after 20 s.  Two
 * defects compounded: every queued waiter asked Redis again every half
 * waiter lease, so a deep queue's own looks (1 000 waiters: thousands of
 * round trips and woken threads a second) crowded out its hand-offs and
 * delayed the watchdogs' renewals; and a live waiter whose renewal came
 * too late was purged as dead and queued again at the tail, behind
 * everyone, to wait as long again.  The waiter lease here is the shortest
 * allowed, 100 ms, so that the scheduling delays of 1 001 threads on this
 * machine's cores weigh against it as a loaded machine's weigh against the
 * default 3 s: the defects show without outside load, and the test stays
 * short.  (fair_order_test has the exact case of a waiter taken for dead
 * that keeps its place.)
 *
 * Each thread locks twice, so the queue stays about 1 000 deep until the
 * last first acquisition; each process says when all its threads have
 * acquired once.  The wait-by-wait figure against FIFO's bound is W4's
 * (BENCHMARKS.md).  Labelled "long": 1 001 threads are too heavy for the
 * sanitizer stages. */
#include "fair_util.h"

namespace {

using namespace rmt;
using namespace fair;

class FairCrowd : public FairTest {};

TEST_F(FairCrowd, NoneOfAThousandAndOneThreadsInFourProcessesWaitsTenSecondsForItsFirstHold)
{
    constexpr int kProcs = 4, kThreads = 1001;
    const ms bound = scaled(ms(10000));
    std::string name = lock_name(), u = url_with("lease=2000&waiter_lease=100");
    std::vector<std::unique_ptr<FairChild>> kids;
    for (int p = 0; p < kProcs; p++) {
        int n = kThreads / kProcs + (p < kThreads % kProcs ? 1 : 0);
        kids.push_back(std::make_unique<FairChild>(
            std::vector<std::string>{"contend", name, "--threads=" + std::to_string(n), "--iters=2"}, u));
        ASSERT_TRUE(kids.back()->expect_line("ready", ms(20000)));
    }
    auto t0 = Clock::now();
    for (auto &c : kids)
        ASSERT_TRUE(c->send("go"));
    for (size_t p = 0; p < kids.size(); p++) {
        std::optional<std::string> line;
        while ((line = kids[p]->read_line_unscaled(std::max(ms(0), bound - ms(elapsed_ms(t0))))) &&
               line->rfind("acquired-all", 0) != 0)
            fprintf(stderr, "[child %zu] %s\n", p, line->c_str());
        ASSERT_TRUE(line) << "a thread of process " << p << " had not acquired " << bound.count()
                          << " ms after the start";
        fprintf(stderr, "[fair] process %zu: all its threads acquired within %lld ms\n", p, num_field(*line, "ms"));
        EXPECT_LE(num_field(*line, "ms"), bound.count());
    }
    for (auto &c : kids) {
        auto done = c->expect_line("done", ms(20000));
        ASSERT_TRUE(done) << "a contender did not finish";
        fprintf(stderr, "[fair] %s\n", done->c_str());
        EXPECT_EQ(0, num_field(*done, "errors")) << *done;
        EXPECT_EQ(0, num_field(*done, "lost")) << *done;
        c->send("exit");
    }
}

} // namespace
