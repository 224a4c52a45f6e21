/* fair_sustained_test.cc -- sustained contention: 8 threads contend without
 * pause for two minutes; every thread keeps acquiring and no gap without
 * any acquisition exceeds a coarse bound.
 * Redisson's RFairLock stalls entirely after about 35 s of this.
 *
 * 8 threads in 2 processes (4 each) lock, hold ~100 us, unlock, and lock
 * again at once, for RMUTEX_FAIR_SUSTAIN_MS (default 120000) ms.  Each hold
 * is recorded (CLOCK_MONOTONIC, system-wide, so the processes' records
 * merge) with its fencing token.  Asserted:
 *   - no error, no lost hold;
 *   - no gap without any acquisition longer than one waiter lease (1 s),
 *     start and end included;
 *   - no thread goes two waiter leases without acquiring ("every thread
 *     keeps acquiring"; with FIFO it waits for at most 7 others);
 *   - the holds never overlap and their tokens increase (exclusion holds
 *     throughout).
 * The fine figure (millisecond gaps, throughput) is the benchmark's.
 * Labelled "long": `ctest -LE long` skips it. */
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "fair_util.h"

namespace {

using namespace rmt;
using namespace fair;

class FairSustained : public FairTest {};

struct Hold {
    std::string who;
    long long acq, rel;
    unsigned long long fence;
};

TEST_F(FairSustained, EightThreadsContendingForTwoMinutesAllKeepAcquiring)
{
    long long duration = 120000;
    if (const char *e = getenv("RMUTEX_FAIR_SUSTAIN_MS"); e && *e)
        duration = atoll(e);
    constexpr int kProcs = 2, kThreads = 4;
    std::string name = lock_name();
    std::vector<std::string> files;
    std::vector<std::unique_ptr<FairChild>> kids;
    for (int p = 0; p < kProcs; p++) {
        files.push_back("/tmp/rmutex-fair-sustained-" + std::to_string(getpid()) + "-" + std::to_string(p));
        kids.push_back(std::make_unique<FairChild>(
            std::vector<std::string>{"contend", name, "--threads=" + std::to_string(kThreads), "--hold-us=100",
                                     "--duration-ms=" + std::to_string(duration), "--out=" + files.back()},
            url()));
        ASSERT_TRUE(kids.back()->expect_line("ready", ms(10000)));
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long start = static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
    for (auto &c : kids)
        ASSERT_TRUE(c->send("go"));
    long long total = 0;
    for (auto &c : kids) {
        auto line = c->expect_line("done", ms(duration + 30000));
        ASSERT_TRUE(line) << "a contender did not finish";
        fprintf(stderr, "[fair] %s\n", line->c_str());
        EXPECT_EQ(0, num_field(*line, "errors")) << *line;
        EXPECT_EQ(0, num_field(*line, "lost")) << *line;
        total += num_field(*line, "acquisitions");
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long end = static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;

    std::vector<Hold> holds;
    for (size_t p = 0; p < files.size(); p++) {
        std::ifstream in(files[p]);
        ASSERT_TRUE(in) << files[p];
        Hold h;
        int t;
        while (in >> t >> h.acq >> h.rel >> h.fence) {
            h.who = std::to_string(p) + ":" + std::to_string(t);
            holds.push_back(h);
        }
        unlink(files[p].c_str());
    }
    ASSERT_EQ(static_cast<size_t>(total), holds.size());
    std::sort(holds.begin(), holds.end(), [](const Hold &a, const Hold &b) { return a.acq < b.acq; });

    const long long bound = scaled(ms(kWaiterLease)).count() * 1000000LL;
    long long worst = holds.empty() ? end - start : holds.front().acq - start, worst_at = 0;
    long long overlaps = 0, fence_order = 0;
    std::map<std::string, long long> last, per_thread_worst, count;
    for (size_t i = 0; i < holds.size(); i++) {
        const Hold &h = holds[i];
        if (i > 0) {
            long long gap = h.acq - holds[i - 1].acq;
            if (gap > worst) {
                worst = gap;
                worst_at = holds[i - 1].acq - start;
            }
            if (h.acq < holds[i - 1].rel)
                overlaps++;
            if (h.fence <= holds[i - 1].fence)
                fence_order++;
        }
        long long since = h.acq - (last.count(h.who) ? last[h.who] : start);
        per_thread_worst[h.who] = std::max(per_thread_worst[h.who], since);
        last[h.who] = h.acq;
        count[h.who]++;
    }
    if (!holds.empty() && end - holds.back().acq > worst) {
        worst = end - holds.back().acq;
        worst_at = holds.back().acq - start;
    }
    for (auto &[who, t] : last)
        per_thread_worst[who] = std::max(per_thread_worst[who], end - t);

    fprintf(stderr, "[fair] %lld holds in %lld ms; longest gap without an acquisition %.1f ms (at %.1f s)\n",
            total, (end - start) / 1000000, worst / 1e6, worst_at / 1e9);
    for (auto &[who, n] : count)
        fprintf(stderr, "[fair]   thread %s: %lld holds, longest wait between its holds %.1f ms\n", who.c_str(), n,
                per_thread_worst[who] / 1e6);
    EXPECT_EQ(static_cast<size_t>(kProcs * kThreads), count.size()) << "a thread never acquired";
    EXPECT_LE(worst, bound) << "no acquisition for " << worst / 1000000 << " ms, from " << worst_at / 1000000
                            << " ms into the run";
    for (auto &[who, w] : per_thread_worst)
        EXPECT_LE(w, 2 * bound) << "thread " << who << " went " << w / 1000000 << " ms without the lock";
    EXPECT_EQ(0, overlaps) << "holds overlapped";
    EXPECT_EQ(0, fence_order) << "tokens did not increase with every new owner";
    for (auto &c : kids)
        c->send("exit");
}

} // namespace
