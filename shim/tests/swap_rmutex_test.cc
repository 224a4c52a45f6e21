/* swap_rmutex_test.cc -- swap_body.inc against <rmutex/pthread.h>, plus
 * what only the swapped build has: lock names and Redis keys, and
 * exclusion across processes. */
#include <rmutex/pthread.h>

#include "harness.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

/* Each test gets a redis-server of its own: the static mutexes' names are
 * fixed at compile time, so tests sharing a server would share locks. */
class SwapRmutex : public rmt::RedisTest {
  protected:
    SwapRmutex() : RedisTest(true) {}
};
#define SWAP_ACROSS_PROCESSES 1
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

/* A condition variable is distributed, named like the mutexes: a waiter in
 * a forked process is registered under "<prefix><file>:<line>" of its
 * definition, and a signal from this process wakes it. */
TEST_F(SwapRmutex, AConditionVariableIsNamedByItsDefinitionAndWakesAnotherProcess)
{
    std::string key = "rmutex_cond_wait:{swaptest:shim/tests/swap_body.inc:" +
                      std::to_string(g_pc_nonempty_line) + "}";
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        int r = pthread_mutex_lock(&g_pc_mu);
        struct timespec t = after(CLOCK_REALTIME, 10000);
        if (!r) r = pthread_cond_timedwait(&g_pc_nonempty, &g_pc_mu, &t); /* one wake-up */
        int u = pthread_mutex_unlock(&g_pc_mu);
        _exit(r ? 10 + r : u ? 2 : 0);
    }
    EXPECT_TRUE(rmt::wait_until([&] { return redis().cmd({"ZCARD", key}).integer() == 1; }, ms(5000)))
        << key;
    ASSERT_EQ(0, pthread_mutex_lock(&g_pc_mu));
    EXPECT_EQ(0, pthread_cond_signal(&g_pc_nonempty));
    ASSERT_EQ(0, pthread_mutex_unlock(&g_pc_mu));
    auto status = rmt::wait_exit(pid, ms(5000));
    ASSERT_TRUE(status) << "the waiting process was never woken";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "child: " << *status;
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
    pthread_rwlockattr_t ra;
    ASSERT_EQ(0, pthread_rwlockattr_init(&ra));
    EXPECT_EQ(ENOTSUP, pthread_rwlockattr_setpshared(&ra, PTHREAD_PROCESS_SHARED)) << "a rwlock's";
    int ps = -1;
    EXPECT_EQ(0, pthread_rwlockattr_getpshared(&ra, &ps));
    EXPECT_EQ(PTHREAD_PROCESS_PRIVATE, ps);
    pthread_rwlockattr_destroy(&ra);
}

/* swapprog (C, built with the swap header) in three processes; mode (see
 * swapprog.c) "small", "zero", "heap" or "".  Returns the final count. */
static long count_in_processes(const std::string &url, const std::string &mode, int procs = 3,
                               std::string *stderr_of_first = nullptr,
                               const std::map<std::string, std::string> &env = {},
                               std::vector<std::string> *done_lines = nullptr)
{
    rmt::TempDir dir("rmutex-swap-test");
    if (dir.path.empty()) return -1;
    std::string counter = dir / "counter";
    std::ofstream(counter) << "0\n";
    std::vector<std::unique_ptr<rmt::Child>> ps;
    for (int i = 0; i < procs; i++)
        ps.push_back(std::make_unique<rmt::Child>(
            mode.empty() ? std::vector<std::string>{ SWAP_PROG, counter, "20" }
                         : std::vector<std::string>{ SWAP_PROG, counter, "20", mode },
            [&] {
                auto e = env;
                e["RMUTEX_URL"] = url;
                return e;
            }()));
    for (auto &p : ps) {
        auto line = p->expect_line("done", ms(60000));
        EXPECT_TRUE(line) << p->err();
        if (line && done_lines) done_lines->push_back(*line);
        EXPECT_EQ(0, p->wait(ms(10000))) << "a stack overflow ends it with SIGSEGV";
    }
    if (stderr_of_first) *stderr_of_first = ps[0]->err();
    std::ifstream f(counter);
    long v = -1;
    f >> v;
    return v;
}

TEST_F(SwapRmutex, ExcludesAcrossProcesses) { EXPECT_EQ(60, count_in_processes(url(), "")); }

TEST_F(SwapRmutex, WorksOnASmallStack) { EXPECT_EQ(60, count_in_processes(url(), "small")); }

/* RMUTEX_CACHE=1: every mutex of the program is cached (a static
 * initializer's too); exclusion holds across processes, relocks are served
 * by the cache, and a normal exit gives the cached hold back. */
TEST_F(SwapRmutex, RmutexCacheCachesEveryMutexAndStillExcludes)
{
    std::vector<std::string> done;
    EXPECT_EQ(60, count_in_processes(url(), "", 3, nullptr, { { "RMUTEX_CACHE", "1" } }, &done));
    long hits = 0;
    for (auto &l : done) hits += std::stol(rmt::field(l, "cache_hits"));
    EXPECT_GT(hits, 0) << "no lock was served by a cache";
    rmt::Reply keys = redis().cmd({ "KEYS", "*swapprog.c*" });
    EXPECT_EQ(0u, keys->elements) << "an exited process left its cached hold";
    /* Without it, nothing is cached. */
    done.clear();
    EXPECT_EQ(60, count_in_processes(url(), "", 3, nullptr, {}, &done));
    for (auto &l : done) EXPECT_EQ("0", rmt::field(l, "cache_hits"));
}

/* "static pthread_mutex_t m;" (all zeros: glibc's initializer) is named
 * after its symbol on first use and excludes across processes. */
TEST_F(SwapRmutex, AZeroFilledGlobalMutexIsNamedByItsSymbolAndExcludes)
{
    EXPECT_EQ(60, count_in_processes(url(), "zero"));
    std::string err;
    auto p = std::make_unique<rmt::Child>(std::vector<std::string>{ SWAP_PROG, "/dev/null", "1", "zero" },
                                           std::map<std::string, std::string>{ { "RMUTEX_URL", url() } });
    EXPECT_TRUE(p->expect_line("done", ms(30000)));
    EXPECT_EQ(0, p->wait(ms(10000)));
    EXPECT_EQ("", p->err()) << "a named zero-filled mutex says nothing";
}

} // namespace
/* Zero-filled, with C linkage so that its symbol is "g_zero": named
 * "<test program>:g_zero+<offset>". */
extern "C" {
pthread_mutex_t g_zero[3];
}
namespace {

TEST_F(SwapRmutex, AZeroFilledMutexInAnArrayIsNamedBySymbolAndOffset)
{
    std::string prog = std::filesystem::read_symlink("/proc/self/exe").filename();
    std::string name = prog + ":g_zero+" + std::to_string(sizeof(pthread_mutex_t));
    ASSERT_EQ(0, pthread_mutex_lock(&g_zero[1]));
    EXPECT_TRUE(redis().exists(name)) << name;
    ASSERT_EQ(0, pthread_mutex_unlock(&g_zero[1]));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_EQ(0, pthread_mutex_trylock(&g_zero[0]));
    EXPECT_TRUE(redis().exists(prog + ":g_zero"));
    EXPECT_EQ(0, pthread_mutex_unlock(&g_zero[0]));
    EXPECT_EQ(0, pthread_mutex_destroy(&g_zero[0]));
    EXPECT_EQ(0, pthread_mutex_destroy(&g_zero[2])) << "never used";
}

/* A zero-filled mutex in no symbol (the heap) works as a process-local
 * mutex, and the process says so once. */
TEST_F(SwapRmutex, AZeroFilledHeapMutexIsProcessLocalWithOneWarning)
{
    std::string err;
    EXPECT_EQ(20, count_in_processes(url(), "heap", 1, &err));
    EXPECT_NE(std::string::npos, err.find("process-local")) << err;
    EXPECT_EQ(1, std::count(err.begin(), err.end(), '\n')) << err;
}

/* ---- mutexes initialized at one call site share one name ---- */

/* n mutexes initialized by one pthread_mutex_init call site: one name. */
static std::string init_loop(pthread_mutex_t *mu, int n, int type)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, type);
    int line = 0;
    for (int i = 0; i < n; i++) {
        EXPECT_EQ(0, pthread_mutex_init(&mu[i], &a)); line = __LINE__;
    }
    pthread_mutexattr_destroy(&a);
    return "swaptest:shim/tests/swap_rmutex_test.cc:" + std::to_string(line);
}

TEST_F(SwapRmutex, LoopInitializedMutexesNestInAnyOrderAndHoldTheNameUntilTheLast)
{
    pthread_mutex_t mu[3];
    std::string name = init_loop(mu, 3, PTHREAD_MUTEX_NORMAL);
    ASSERT_EQ(0, pthread_mutex_lock(&mu[0]));
    ASSERT_EQ(0, pthread_mutex_lock(&mu[2]));
    ASSERT_EQ(0, pthread_mutex_trylock(&mu[1]));
    EXPECT_TRUE(redis().exists(name));
    EXPECT_EQ(0, pthread_mutex_unlock(&mu[0]));
    EXPECT_EQ(0, pthread_mutex_unlock(&mu[1]));
    EXPECT_TRUE(redis().exists(name)) << "mu[2] is still held";
    EXPECT_EQ(0, pthread_mutex_unlock(&mu[2]));
    EXPECT_FALSE(redis().exists(name));
    for (auto &m : mu) EXPECT_EQ(0, pthread_mutex_destroy(&m));
}

TEST_F(SwapRmutex, LoopInitializedErrorcheckMutexesAnswerARelockOfTheSameOneOnly)
{
    pthread_mutex_t mu[2];
    init_loop(mu, 2, PTHREAD_MUTEX_ERRORCHECK);
    ASSERT_EQ(0, pthread_mutex_lock(&mu[0]));
    EXPECT_EQ(EDEADLK, pthread_mutex_lock(&mu[0]));
    EXPECT_EQ(0, pthread_mutex_lock(&mu[1]));
    EXPECT_EQ(0, pthread_mutex_unlock(&mu[1]));
    if (!kTsan) { /* TSan calls it misuse */
        EXPECT_EQ(EPERM, pthread_mutex_unlock(&mu[1]));
    }
    EXPECT_EQ(0, pthread_mutex_unlock(&mu[0]));
    for (auto &m : mu) EXPECT_EQ(0, pthread_mutex_destroy(&m));
}

/* T1 holds mu[0]; T2 wants mu[1] (one name: it waits); T1 then takes mu[1]
 * too.  Taking the name before the mutex means T2 holds nothing while it
 * waits, so T1 gets mu[1] at once -- no deadlock the plain program would
 * not have -- and T2 gets in once T1 has let both go. */
TEST_F(SwapRmutex, LoopInitializedMutexesSerializeThreadsWithoutAddingDeadlocks)
{
    pthread_mutex_t mu[2];
    init_loop(mu, 2, PTHREAD_MUTEX_NORMAL);
    ASSERT_EQ(0, pthread_mutex_lock(&mu[0]));
    std::atomic<int> t2{ INT32_MIN };
    std::thread t([&] {
        int r = pthread_mutex_lock(&mu[1]);
        t2 = r;
        if (!r) pthread_mutex_unlock(&mu[1]);
    });
    EXPECT_FALSE(rmt::wait_until_unscaled([&] { return t2.load() != INT32_MIN; }, ms(500)))
        << "T2 took mu[1] while T1 held mu[0]: they share a name";
    struct timespec at = after(CLOCK_REALTIME, 5000);
    EXPECT_EQ(0, pthread_mutex_timedlock(&mu[1], &at)) << "T1 must not deadlock on T2";
    EXPECT_EQ(0, pthread_mutex_unlock(&mu[1]));
    EXPECT_EQ(0, pthread_mutex_unlock(&mu[0]));
    EXPECT_TRUE(rmt::wait_until([&] { return t2.load() != INT32_MIN; }, ms(10000)));
    t.join();
    EXPECT_EQ(0, t2.load());
    for (auto &m : mu) EXPECT_EQ(0, pthread_mutex_destroy(&m));
}

} // namespace

/* ---- objects in a symbol, initialized in a loop: one lock each ---- */

/* Initialized by pthread_*_init, not zero-filled: still named by their
 * symbol and offset, not by the one call site of the loop.  C linkage:
 * the symbols are "g_loop" and "g_loop_rw". */
extern "C" {
pthread_mutex_t g_loop[5];
pthread_rwlock_t g_loop_rw[3];
}
namespace {

std::string element_name(const char *symbol, size_t offset)
{
    std::string prog = std::filesystem::read_symlink("/proc/self/exe").filename();
    return prog + ":" + symbol + (offset ? "+" + std::to_string(offset) : "");
}

/* The program this fixes: a thread holds m[1..4] and expects another thread
 * to take m[0].  With one name per call site, the other thread waited for
 * as long as the first held any of them. */
TEST_F(SwapRmutex, AStaticArrayOfMutexesInitializedInALoopIsOneLockPerElement)
{
    for (auto &m : g_loop) ASSERT_EQ(0, pthread_mutex_init(&m, NULL));
    for (int i = 1; i < 5; i++) ASSERT_EQ(0, pthread_mutex_lock(&g_loop[i]));
    for (int i = 1; i < 5; i++)
        EXPECT_TRUE(redis().exists(element_name("g_loop", i * sizeof(pthread_mutex_t))))
            << element_name("g_loop", i * sizeof(pthread_mutex_t));
    std::atomic<int> other{ INT32_MIN };
    std::thread t([&] {
        struct timespec at = after(CLOCK_REALTIME, 2000);
        int r = pthread_mutex_timedlock(&g_loop[0], &at);
        if (!r) {
            other = redis().exists(element_name("g_loop", 0)) ? 0 : -1;
            pthread_mutex_unlock(&g_loop[0]);
        } else {
            other = r;
        }
    });
    t.join();
    EXPECT_EQ(0, other.load()) << "m[0] was not free while m[1..4] were held (-1: not in Redis as g_loop)";
    for (int i = 1; i < 5; i++) EXPECT_EQ(0, pthread_mutex_unlock(&g_loop[i]));
    for (auto &m : g_loop) EXPECT_EQ(0, pthread_mutex_destroy(&m));
}

TEST_F(SwapRmutex, AStaticArrayOfRwlocksInitializedInALoopIsOneLockPerElement)
{
    for (auto &l : g_loop_rw) ASSERT_EQ(0, pthread_rwlock_init(&l, NULL));
    ASSERT_EQ(0, pthread_rwlock_wrlock(&g_loop_rw[2]));
    EXPECT_EQ("write", redis().cmd({ "HGET", element_name("g_loop_rw", 2 * sizeof(pthread_rwlock_t)), "mode" }).str());
    std::atomic<int> other{ INT32_MIN };
    std::thread t([&] { other = pthread_rwlock_trywrlock(&g_loop_rw[1]); if (!other) pthread_rwlock_unlock(&g_loop_rw[1]); });
    t.join();
    EXPECT_EQ(0, other.load()) << "rw[1] was not free while rw[2] was written";
    EXPECT_EQ(0, pthread_rwlock_unlock(&g_loop_rw[2]));
    for (auto &l : g_loop_rw) EXPECT_EQ(0, pthread_rwlock_destroy(&l));
}

/* ---- spinlocks: distributed non-fair mutexes ---- */

} // namespace
extern "C" {
pthread_spinlock_t g_spin; /* named "<test program>:g_spin" */
}
namespace {

TEST_F(SwapRmutex, ASpinlockIsADistributedMutexNamedByItsSymbol)
{
    ASSERT_EQ(0, pthread_spin_init(&g_spin, PTHREAD_PROCESS_PRIVATE));
    ASSERT_EQ(0, pthread_spin_lock(&g_spin));
    EXPECT_TRUE(redis().exists(element_name("g_spin", 0))) << "not in Redis under its symbol";
    std::atomic<int> other{ INT32_MIN };
    std::thread t([&] { other = pthread_spin_trylock(&g_spin); });
    t.join();
    EXPECT_EQ(EBUSY, other.load()) << "another thread's trylock";
    if (!kTsan) { /* TSan calls it misuse */
        std::thread u([&] { other = pthread_spin_unlock(&g_spin); });
        u.join();
        EXPECT_EQ(EPERM, other.load()) << "another thread's unlock (glibc's would free it)";
    }
    EXPECT_EQ(0, pthread_spin_unlock(&g_spin));
    EXPECT_FALSE(redis().exists(element_name("g_spin", 0)));
    EXPECT_EQ(0, pthread_spin_trylock(&g_spin));
    EXPECT_EQ(0, pthread_spin_unlock(&g_spin));
    EXPECT_EQ(0, pthread_spin_destroy(&g_spin));
}

TEST_F(SwapRmutex, ASpinlockOnTheStackIsNamedByItsCallSiteAndSharingIsRefused)
{
    pthread_spinlock_t s;
    EXPECT_EQ(ENOTSUP, pthread_spin_init(&s, PTHREAD_PROCESS_SHARED)) << "shared through Redis already";
    EXPECT_EQ(EINVAL, pthread_spin_init(&s, 12345));
    EXPECT_EQ(EINVAL, rmutex_pthread_spin_init(nullptr, PTHREAD_PROCESS_PRIVATE, "x"));
    ASSERT_EQ(0, pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE)); const int init_line = __LINE__;
    ASSERT_EQ(0, pthread_spin_lock(&s));
    EXPECT_TRUE(redis().exists("swaptest:shim/tests/swap_rmutex_test.cc:" + std::to_string(init_line)));
    EXPECT_EQ(0, pthread_spin_unlock(&s));
    EXPECT_EQ(0, pthread_spin_destroy(&s));
}

/* glibc's trylock of a spinlock its caller holds is EBUSY (its lock would
 * spin forever: the swap's waits forever, the local mutex being NORMAL). */
TEST_F(SwapRmutex, ASpinlockTrylockByItsHolderIsEbusyAsGlibcs)
{
    pthread_spinlock_t s;
    ASSERT_EQ(0, pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE));
    ASSERT_EQ(0, pthread_spin_lock(&s));
    EXPECT_EQ(EBUSY, pthread_spin_trylock(&s));
    EXPECT_EQ(0, pthread_spin_unlock(&s));
    EXPECT_EQ(0, pthread_spin_destroy(&s));
}

TEST_F(SwapRmutex, ASpinlockExcludesAcrossProcesses) { EXPECT_EQ(60, count_in_processes(url(), "spin")); }

} // namespace

/* ---- read-write locks ---- */

extern "C" {
pthread_rwlock_t g_zero_rw; /* zero-filled: named "<test program>:g_zero_rw" */
}
namespace {

pthread_rwlock_t g_rw = PTHREAD_RWLOCK_INITIALIZER; const int g_rw_line = __LINE__;

std::string rw_mode(rmt::Redis &r, const std::string &name) { return r.cmd({ "HGET", name, "mode" }).str(); }

TEST_F(SwapRmutex, ARwlockIsNamedByItsDefinitionAndReadsAndWritesInRedis)
{
    std::string name = "swaptest:shim/tests/swap_rmutex_test.cc:" + std::to_string(g_rw_line);
    ASSERT_EQ(0, pthread_rwlock_rdlock(&g_rw));
    EXPECT_EQ("read", rw_mode(redis(), name)) << name;
    ASSERT_EQ(0, pthread_rwlock_unlock(&g_rw));
    ASSERT_EQ(0, pthread_rwlock_wrlock(&g_rw));
    EXPECT_EQ("write", rw_mode(redis(), name));
    ASSERT_EQ(0, pthread_rwlock_unlock(&g_rw));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_EQ(EPERM, pthread_rwlock_unlock(&g_rw)) << "nothing held: rrwlock's EPERM";
}

TEST_F(SwapRmutex, AZeroFilledRwlockIsNamedByItsSymbol)
{
    std::string prog = std::filesystem::read_symlink("/proc/self/exe").filename();
    ASSERT_EQ(0, pthread_rwlock_rdlock(&g_zero_rw));
    EXPECT_EQ("read", rw_mode(redis(), prog + ":g_zero_rw"));
    ASSERT_EQ(0, pthread_rwlock_unlock(&g_zero_rw));
    EXPECT_EQ(0, pthread_rwlock_destroy(&g_zero_rw));
}

/* glibc hangs (a timedwrlock times out); the swap says EDEADLK at once. */
TEST_F(SwapRmutex, ARwlockWriteByItsReaderIsEdeadlkNotATimeout)
{
    pthread_rwlock_t l;
    ASSERT_EQ(0, pthread_rwlock_init(&l, NULL));
    ASSERT_EQ(0, pthread_rwlock_rdlock(&l));
    struct timespec t = after(CLOCK_REALTIME, 300);
    EXPECT_EQ(EDEADLK, pthread_rwlock_timedwrlock(&l, &t));
    EXPECT_EQ(EBUSY, pthread_rwlock_trywrlock(&l));
    EXPECT_EQ(0, pthread_rwlock_unlock(&l));
    EXPECT_EQ(0, pthread_rwlock_destroy(&l));
}

/* The kind set with pthread_rwlockattr_setkind_np is the rrwlock's: a
 * writer queued in Redis holds back a new reader (PREFER_WRITER_
 * NONRECURSIVE), or does not (glibc's default, PREFER_READER). */
TEST_F(SwapRmutex, ARwlockKindFromSetkindNpDecidesWhetherAQueuedWriterHoldsReadersBack)
{
    for (int kind : { PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP, PTHREAD_RWLOCK_PREFER_READER_NP }) {
        SCOPED_TRACE(kind);
        std::string name = "swaptest:kind" + std::to_string(kind);
        pthread_rwlockattr_t a;
        pthread_rwlock_t l;
        ASSERT_EQ(0, pthread_rwlockattr_init(&a));
        ASSERT_EQ(0, pthread_rwlockattr_setkind_np(&a, kind));
        int got = -1;
        EXPECT_EQ(0, pthread_rwlockattr_getkind_np(&a, &got));
        EXPECT_EQ(kind, got);
        ASSERT_EQ(0, rmutex_pthread_rwlockattr_setname(&a, name.c_str()));
        ASSERT_EQ(0, pthread_rwlock_init(&l, &a));
        pthread_rwlockattr_destroy(&a);
        ASSERT_EQ(0, pthread_rwlock_rdlock(&l));
        std::atomic<int> w{ INT32_MIN };
        std::thread writer([&] {
            int r = pthread_rwlock_wrlock(&l);
            w = r;
            if (!r) pthread_rwlock_unlock(&l);
        });
        ASSERT_TRUE(rmt::wait_until([&] { return redis().cmd({ "ZCARD", "rmutex_rw_writers:{" + name + "}" }).integer() == 1; },
                                    ms(5000)))
            << "the writer never queued";
        int reader = INT32_MIN;
        std::thread([&] {
            reader = pthread_rwlock_tryrdlock(&l);
            if (!reader) pthread_rwlock_unlock(&l);
        }).join();
        EXPECT_EQ(kind == PTHREAD_RWLOCK_PREFER_READER_NP ? 0 : EBUSY, reader);
        EXPECT_EQ(0, pthread_rwlock_unlock(&l));
        EXPECT_TRUE(rmt::wait_until([&] { return w.load() != INT32_MIN; }, ms(5000)));
        writer.join();
        EXPECT_EQ(0, w.load());
        EXPECT_EQ(0, pthread_rwlock_destroy(&l));
    }
}

/* swapprog rw in three processes: 2 writers and 2 readers each, on table_rw
 * (PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP) or zero_rw
 * (zero-filled, named by its symbol). */
void rw_in_processes(const std::string &url, const std::string &mode)
{
    char dir[] = "/tmp/rmutex-swap-test.XXXXXX";
    ASSERT_TRUE(mkdtemp(dir));
    std::string counter = std::string(dir) + "/counter";
    std::ofstream(counter) << "0\n";
    std::vector<std::unique_ptr<rmt::Child>> ps;
    for (int i = 0; i < 3; i++) {
        std::vector<std::string> argv{ SWAP_PROG, "rw", counter, "10" };
        if (!mode.empty()) argv.push_back(mode);
        ps.push_back(std::make_unique<rmt::Child>(argv, std::map<std::string, std::string>{ { "RMUTEX_URL", url } }));
    }
    int most = 0;
    for (auto &p : ps) {
        auto line = p->expect_line("done", ms(60000));
        ASSERT_TRUE(line) << p->err();
        EXPECT_EQ("0", rmt::field(*line, "violations")) << "a reader met a writer, or a writer anybody";
        most = std::max(most, std::stoi(rmt::field(*line, "max_readers")));
        EXPECT_EQ(0, p->wait(ms(10000)));
    }
    EXPECT_GE(most, 2) << "readers never shared the lock";
    std::ifstream f(counter);
    long v = -1;
    f >> v;
    EXPECT_EQ(60, v) << "a write was lost";
    std::filesystem::remove_all(dir);
}

TEST_F(SwapRmutex, RwlockReadersAndWritersInThreeProcessesNeverMeetAndLoseNoWrite)
{
    rw_in_processes(url(), "");
}

TEST_F(SwapRmutex, AZeroFilledRwlockExcludesAcrossProcesses) { rw_in_processes(url(), "zero"); }

} // namespace
