/* swap_rmutex_test.cc -- swap_body.inc against <rmutex/pthread.h>, plus
 * what only the swapped build has: lock names and Redis keys, and
 * exclusion across processes. */
#include <rmutex/pthread.h>

#include "harness.h"
#include "proc.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

/* Each test gets a redis-server of its own: the static mutexes' names are
 * fixed at compile time, so tests sharing a server would share locks. */
class SwapRmutex : public rmt::RedisTest {
  protected:
    SwapRmutex() : RedisTest(true) {}
};
#define SWAP_FIXTURE SwapRmutex
#include "swap_body.inc"

namespace {

using rmt::ms;

TEST_F(SwapRmutex, DefaultNameIsPrefixFileAndLineRelativeToTheSourceTree)
{
    std::string file = __FILE__;
    EXPECT_EQ("shim/tests/swap_rmutex_test.cc", file) << "-fmacro-prefix-map is not applied";
    std::string name = std::string("swaptest:shim/tests/swap_body.inc:") + std::to_string(g_count_line);
    ASSERT_EQ(0, pthread_mutex_lock(&g_count));
    EXPECT_TRUE(redis().exists(name)) << name;
    ASSERT_EQ(0, pthread_mutex_unlock(&g_count));
    EXPECT_FALSE(redis().exists(name));

    pthread_mutex_t m;
    ASSERT_EQ(0, pthread_mutex_init(&m, NULL)); const int init_line = __LINE__;
    ASSERT_EQ(0, pthread_mutex_lock(&m));
    EXPECT_TRUE(redis().exists("swaptest:shim/tests/swap_rmutex_test.cc:" + std::to_string(init_line)));
    ASSERT_EQ(0, pthread_mutex_unlock(&m));
    EXPECT_EQ(0, pthread_mutex_destroy(&m));
}

pthread_mutex_t g_named = RMUTEX_PTHREAD_MUTEX_INITIALIZER_NAMED("swaptest:orders");

TEST_F(SwapRmutex, ExplicitNamesOverrideTheCallSite)
{
    ASSERT_EQ(0, pthread_mutex_lock(&g_named));
    EXPECT_TRUE(redis().exists("swaptest:orders"));
    ASSERT_EQ(0, pthread_mutex_unlock(&g_named));

    pthread_mutexattr_t a;
    pthread_mutex_t m;
    ASSERT_EQ(0, pthread_mutexattr_init(&a));
    ASSERT_EQ(0, rmutex_pthread_mutexattr_setname(&a, "swaptest:account:42"));
    ASSERT_EQ(0, pthread_mutex_init(&m, &a));
    pthread_mutexattr_destroy(&a);
    ASSERT_EQ(0, pthread_mutex_lock(&m));
    EXPECT_TRUE(redis().exists("swaptest:account:42"));
    ASSERT_EQ(0, pthread_mutex_unlock(&m));
    EXPECT_EQ(0, pthread_mutex_destroy(&m));
}

TEST_F(SwapRmutex, ProcessSharedIsRefused)
{
    pthread_mutexattr_t a;
    ASSERT_EQ(0, pthread_mutexattr_init(&a));
    EXPECT_EQ(ENOTSUP, pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED));
    EXPECT_EQ(0, pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_PRIVATE));
    pthread_mutexattr_destroy(&a);
}

/* swapprog (C, built with the swap header) in three processes; with
 * "small", on a thread with a PTHREAD_STACK_MIN stack. */
static void count_in_three_processes(const std::string &url, bool small)
{
    char dir[] = "/tmp/rmutex-swap-test.XXXXXX";
    ASSERT_TRUE(mkdtemp(dir));
    std::string counter = std::string(dir) + "/counter";
    std::ofstream(counter) << "0\n";
    std::vector<std::unique_ptr<shimt::Proc>> ps;
    for (int i = 0; i < 3; i++)
        ps.push_back(std::make_unique<shimt::Proc>(
            small ? std::vector<std::string>{ SWAP_PROG, counter, "20", "small" }
                  : std::vector<std::string>{ SWAP_PROG, counter, "20" },
            std::map<std::string, std::string>{ { "RMUTEX_URL", url } }));
    for (auto &p : ps) {
        EXPECT_TRUE(p->expect("done", ms(60000))) << p->err();
        EXPECT_EQ(0, p->wait(ms(10000))) << "a stack overflow ends it with SIGSEGV";
    }
    std::ifstream f(counter);
    std::string v;
    f >> v;
    EXPECT_EQ("60", v);
    std::filesystem::remove_all(dir);
}

TEST_F(SwapRmutex, ExcludesAcrossProcesses) { count_in_three_processes(url(), false); }

TEST_F(SwapRmutex, WorksOnASmallStack) { count_in_three_processes(url(), true); }

} // namespace
