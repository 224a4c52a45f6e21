/* stack_test.cc -- every public call works on a PTHREAD_STACK_MIN stack and
 * uses no more of it than rmutex.h promises (RMUTEX_STACK_NEED), cold (the
 * process's first use) and warm, uncontended and waiting, for both lock
 * kinds, the robust paths and the read-write lock's calls.  The calls run
 * in rmutex_stack_child (tests/stack/), one process per kind, so that
 * "cold" is really cold. */
#include "harness.h"

#include <sys/wait.h>

using namespace rmt;

namespace {

struct Figures {
    std::map<std::string, long> bytes;
    std::map<std::string, std::string> call;
};

class SmallStack : public RedisTest, public ::testing::WithParamInterface<const char *> {};

TEST_P(SmallStack, EveryCallFitsColdWarmAndWaiting)
{
    Child c(RMUTEX_STACK_CHILD, { GetParam(), lock_name("stack") }, url());
    Figures f;
    for (;;) {
        auto line = c.read_line(ms(30000));
        ASSERT_TRUE(line) << "the child said nothing more (a stack overflow kills it)";
        auto w = words(*line);
        if (w.size() == 1 && w[0] == "ok") break;
        ASSERT_NE("fail", w[0]) << *line;
        ASSERT_GE(w.size(), 3u) << *line;
        f.bytes[w[0]] = std::stol(w[1]);
        f.call[w[0]] = line->substr(w[0].size() + w[1].size() + 2);
    }
    int st = c.wait(ms(10000));
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "wait status " << st;
    for (const char *phase : { "cold", "warm", "contended" }) {
        ASSERT_TRUE(f.bytes.count(phase)) << phase;
        RecordProperty(std::string(phase) + "_bytes", std::to_string(f.bytes[phase]));
        if (rmt_sanitized()) continue; /* redzones are not the library's */
        EXPECT_LE(f.bytes[phase], RMUTEX_STACK_NEED)
            << phase << ": " << f.call[phase] << " used " << f.bytes[phase] << " bytes";
    }
}

INSTANTIATE_TEST_SUITE_P(Kinds, SmallStack,
                         ::testing::Values("nonfair", "fair", "robust", "fair-robust", "rwlock",
                                           "rwlock-robust"),
                         [](const auto &info) {
                             std::string s = info.param;
                             for (auto &ch : s) if (ch == '-') ch = '_';
                             return s;
                         });

} // namespace
