/* swap_sem_test.cc -- semaphores, barriers and once under <rmutex/pthread.h>:
 * swapsem (C, built with the swap header) in several processes against
 * one redis-server, each promise checked from the lines they log. */
#include <rmutex/pthread.h>

#include "harness.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace {

using rmt::ms;

class SwapSem : public rmt::RedisTest {
  protected:
    SwapSem() : RedisTest(true) {}
    std::unique_ptr<rmt::Child> run(std::vector<std::string> args,
                                    std::map<std::string, std::string> env = {})
    {
        args.insert(args.begin(), SWAPSEM_PROG);
        if (!env.count("RMUTEX_URL")) env["RMUTEX_URL"] = url();
        return std::make_unique<rmt::Child>(args, env);
    }
    /* Runs every child to its "done" line and exit 0. */
    void finish(std::vector<std::unique_ptr<rmt::Child>> &ps, ms within = ms(60000))
    {
        for (auto &p : ps) {
            auto line = p->expect_line("done", rmt::scaled(within));
            ASSERT_TRUE(line) << p->err();
            EXPECT_EQ("done failed=0", *line) << p->err();
            EXPECT_EQ(0, p->wait(ms(10000))) << p->err();
        }
    }
    static std::vector<std::string> lines_of(const std::string &path)
    {
        std::ifstream f(path);
        std::vector<std::string> out;
        for (std::string l; std::getline(f, l);) out.push_back(l);
        return out;
    }
    /* The most "enter" lines without their "leave" at any moment. */
    static int most_inside(const std::vector<std::string> &log, int *enters)
    {
        int in = 0, most = 0;
        *enters = 0;
        for (auto &l : log) {
            if (l.rfind("enter", 0) == 0) most = std::max(most, ++in), ++*enters;
            else if (l.rfind("leave", 0) == 0) in--;
        }
        return most;
    }
};

/* A sem_t in a static, sem_init(2) in every process: at most two holders
 * among three processes' six threads.  With glibc's (one semaphore per
 * process) up to six are inside at once. */
TEST_F(SwapSem, AStaticSemaphoreAdmitsItsValueAcrossProcesses)
{
    rmt::TempDir dir("rmutex-swapsem");
    std::string log = dir / "log";
    std::vector<std::unique_ptr<rmt::Child>> ps;
    for (int i = 0; i < 3; i++) ps.push_back(run({ "slots", log, "5" }));
    finish(ps);
    int enters;
    int most = most_inside(lines_of(log), &enters);
    EXPECT_EQ(30, enters);
    EXPECT_LE(most, 2) << "more holders than permits";
    EXPECT_EQ(2, most) << "two permits were never used at once";
    rmt::Redis r("127.0.0.1", port());
    auto keys = r.cmd({ "KEYS", "rmutex_sem:*swapsem:slots*" });
    EXPECT_TRUE(keys && keys->elements > 0) << "the semaphore is named by its symbol";
}

/* sem_open("/NAME", O_CREAT, ..., 1) in three processes is one semaphore;
 * a second open in a process is the same sem_t (checked in swapsem). */
TEST_F(SwapSem, SemOpenOfOneNameIsOneSemaphoreInEveryProcess)
{
    rmt::TempDir dir("rmutex-swapsem");
    std::string log = dir / "log";
    std::vector<std::unique_ptr<rmt::Child>> ps;
    for (int i = 0; i < 3; i++) ps.push_back(run({ "open", "/swaptest-jobs", "1", log, "4" }));
    finish(ps);
    int enters;
    EXPECT_EQ(1, most_inside(lines_of(log), &enters));
    EXPECT_EQ(24, enters);
}

/* sem_open's errors as POSIX's: no O_CREAT on a new name is ENOENT,
 * O_CREAT|O_EXCL on an existing one EEXIST; sem_unlink removes it. */
TEST_F(SwapSem, SemOpenAnswersEnoentAndEexistAndUnlinkRemoves)
{
    auto first = run({ "openerr", "/swaptest-x", "none" });
    EXPECT_EQ("open errno=" + std::to_string(ENOENT), first->expect_line("open", ms(10000)).value_or(""));
    rmt::TempDir dir("rmutex-swapsem");
    std::vector<std::unique_ptr<rmt::Child>> made;
    made.push_back(run({ "open", "/swaptest-x", "1", dir / "log", "1" }));
    finish(made);
    auto excl = run({ "openerr", "/swaptest-x", "excl" });
    EXPECT_EQ("open errno=" + std::to_string(EEXIST), excl->expect_line("open", ms(10000)).value_or(""));
    EXPECT_EQ(0, sem_unlink("/swaptest-x"));
    EXPECT_EQ(-1, sem_unlink("/swaptest-x"));
    EXPECT_EQ(ENOENT, errno);
    EXPECT_EQ(-1, sem_unlink("/a/b"));
    EXPECT_EQ(EINVAL, errno);
    auto gone = run({ "openerr", "/swaptest-x", "none" });
    EXPECT_EQ("open errno=" + std::to_string(ENOENT), gone->expect_line("open", ms(10000)).value_or(""));
}

/* A SIGALRM handler's sem_post wakes the main thread's sem_wait: the post
 * interrupts a call of the library, so it is handed to its thread. */
TEST_F(SwapSem, APostFromASignalHandlerWakesTheWaitingThread)
{
    auto p = run({ "handler" });
    EXPECT_EQ("woke rc=0", p->expect_line("woke", rmt::scaled(ms(10000))).value_or("")) << p->err();
    EXPECT_EQ(0, p->wait(ms(10000))) << p->err();
}

TEST_F(SwapSem, TrywaitOnAnEmptySemaphoreIsEagainAsGlibcs)
{
    auto p = run({ "trywait" });
    EXPECT_EQ("trywait rc=-1 errno=" + std::to_string(EAGAIN) + " value=0",
              p->expect_line("trywait", ms(10000)).value_or(""))
        << p->err();
}

/* A heap sem_t has no name every process agrees on: process-local, said
 * once. */
TEST_F(SwapSem, AHeapSemaphoreIsProcessLocalAndSaysSoOnce)
{
    rmt::TempDir dir("rmutex-swapsem");
    std::vector<std::unique_ptr<rmt::Child>> ps;
    ps.push_back(run({ "heap", dir / "log" }));
    finish(ps);
    std::string err = ps[0]->err();
    EXPECT_NE(std::string::npos, err.find("process-local")) << err;
    EXPECT_EQ(1, std::count(err.begin(), err.end(), '\n')) << err;
}

/* A bad RMUTEX_URL: sem_wait does not return as if it had a permit; the
 * problem is said in one line. */
TEST_F(SwapSem, ABadUrlMakesSemWaitWaitAndSayWhyNeverPass)
{
    rmt::TempDir dir("rmutex-swapsem");
    auto p = run({ "slots", dir / "log", "1" }, { { "RMUTEX_URL", url() + "?leese=1" } });
    EXPECT_TRUE(rmt::wait_until([&] { return p->err().find("leese") != std::string::npos; },
                                rmt::scaled(ms(10000))))
        << p->err();
    EXPECT_FALSE(p->expect_line("done", ms(1000))) << "it went on without the semaphore";
    EXPECT_TRUE(lines_of(dir / "log").empty());
}

/* Three processes of two threads meet at a static barrier of 6, ten
 * times: one serial thread per round.  With glibc's barriers (one per
 * process, two threads each) nobody passes the first round. */
TEST_F(SwapSem, AStaticBarrierMeetsEveryProcessWithOneSerialThreadPerRound)
{
    rmt::TempDir dir("rmutex-swapsem");
    std::string log = dir / "log";
    std::vector<std::unique_ptr<rmt::Child>> ps;
    for (int i = 0; i < 3; i++) ps.push_back(run({ "barrier", "6", "10", log }));
    finish(ps);
    std::multiset<std::string> serial;
    for (auto &l : lines_of(log)) serial.insert(l);
    EXPECT_EQ(10u, serial.size());
    for (int i = 0; i < 10; i++) EXPECT_EQ(1u, serial.count("serial " + std::to_string(i))) << i;
}

/* A named once runs its routine once for all processes; a plain one once
 * in each (a once-routine usually fills its own process's memory). */
TEST_F(SwapSem, ANamedOnceRunsOnceAcrossProcessesAPlainOneOncePerProcess)
{
    rmt::TempDir dir("rmutex-swapsem");
    std::string log = dir / "log";
    std::vector<std::unique_ptr<rmt::Child>> ps;
    for (int i = 0; i < 3; i++) ps.push_back(run({ "once", log }));
    finish(ps);
    int ran = 0, local = 0;
    for (auto &l : lines_of(log)) ran += l.rfind("ran", 0) == 0, local += l.rfind("local", 0) == 0;
    EXPECT_EQ(1, ran);
    EXPECT_EQ(3, local);
}

} // namespace
