/* shim_sem_test.cc -- semaphores under the preload shim: sem_open names
 * that RMUTEX_PRELOAD lists ("/pattern") are distributed, everything else
 * stays glibc's.  shimsem is swapsem.c built with glibc's calls. */
#include "harness.h"
#include "shim_env.h"

#include <algorithm>
#include <fstream>
#include <sys/stat.h>

namespace {

using rmt::ms;

class ShimSem : public rmt::RedisTest {
  protected:
    ShimSem() : RedisTest(true) {}
    std::unique_ptr<rmt::Child> run(const std::string &config, std::vector<std::string> args)
    {
        args.insert(args.begin(), SHIMSEM_PROG);
        return std::make_unique<rmt::Child>(args, shim_env(config, url()));
    }
    static void finish(std::vector<std::unique_ptr<rmt::Child>> &ps)
    {
        for (auto &p : ps) {
            auto line = p->expect_line("done", rmt::scaled(ms(60000)));
            ASSERT_TRUE(line) << p->err();
            EXPECT_EQ("done failed=0", *line) << p->err();
            EXPECT_EQ(0, p->wait(ms(10000))) << p->err();
        }
    }
    /* The most holders inside at once in LOG, and how many entered. */
    static int most_inside(const std::string &log, int *enters)
    {
        std::ifstream f(log);
        int in = 0, most = 0;
        *enters = 0;
        for (std::string l; std::getline(f, l);) {
            if (l.rfind("enter", 0) == 0) most = std::max(most, ++in), ++*enters;
            else if (l.rfind("leave", 0) == 0) in--;
        }
        return most;
    }
    bool key_exists(const std::string &pattern)
    {
        rmt::Redis r("127.0.0.1", port());
        auto k = r.cmd({ "KEYS", pattern });
        return k && k->elements > 0;
    }
};

/* A listed name: an rsem shared through Redis (three processes, two
 * threads each, one permit), not /dev/shm. */
TEST_F(ShimSem, ASemaphoreOpenedByAListedNameIsDistributed)
{
    rmt::TempDir dir("rmutex-shimsem");
    std::string log = dir / "log";
    std::vector<std::unique_ptr<rmt::Child>> ps;
    for (int i = 0; i < 3; i++) ps.push_back(run("shimsem: /shimtest-jobs*", { "open", "/shimtest-jobs1", "1", log, "4" }));
    finish(ps);
    int enters;
    EXPECT_EQ(1, most_inside(log, &enters));
    EXPECT_EQ(24, enters);
    EXPECT_TRUE(key_exists("rmutex_sem:*shimtest-jobs1*"));
    struct stat st;
    EXPECT_NE(0, stat("/dev/shm/sem.shimtest-jobs1", &st)) << "glibc made it too";
}

/* A name the patterns do not match, and an unnamed semaphore: glibc's. */
TEST_F(ShimSem, UnlistedNamesAndUnnamedSemaphoresStayGlibcs)
{
    rmt::TempDir dir("rmutex-shimsem");
    std::vector<std::unique_ptr<rmt::Child>> ps;
    ps.push_back(run("shimsem: /shimtest-jobs*", { "open", "/shimtest-free", "1", dir / "log", "1" }));
    finish(ps);
    EXPECT_FALSE(key_exists("rmutex_sem:*shimtest-free*"));
    struct stat st;
    EXPECT_EQ(0, stat("/dev/shm/sem.shimtest-free", &st)) << "glibc's named semaphore";
    unlink("/dev/shm/sem.shimtest-free");
    auto t = run("shimsem: /shimtest-jobs*", { "trywait" });
    EXPECT_EQ("trywait rc=-1 errno=" + std::to_string(EAGAIN) + " value=0",
              t->expect_line("trywait", ms(10000)).value_or(""))
        << t->err();
}

/* sem_open's answers for a listed name, as POSIX's: ENOENT without
 * O_CREAT, EEXIST with O_EXCL. */
TEST_F(ShimSem, AListedNameAnswersEnoentAndEexistAsPosix)
{
    auto none = run("shimsem: /shimtest-*", { "openerr", "/shimtest-x", "none" });
    EXPECT_EQ("open errno=" + std::to_string(ENOENT), none->expect_line("open", ms(10000)).value_or(""))
        << none->err();
    rmt::TempDir dir("rmutex-shimsem");
    std::vector<std::unique_ptr<rmt::Child>> made;
    made.push_back(run("shimsem: /shimtest-*", { "open", "/shimtest-x", "1", dir / "log", "1" }));
    finish(made);
    auto excl = run("shimsem: /shimtest-*", { "openerr", "/shimtest-x", "excl" });
    EXPECT_EQ("open errno=" + std::to_string(EEXIST), excl->expect_line("open", ms(10000)).value_or(""))
        << excl->err();
}

/* A pattern with an option it cannot take is said, and left out. */
TEST_F(ShimSem, APatternWithALockOptionIsSaidAndLeftOut)
{
    auto p = run("shimsem: /shimtest-*;cache", { "trywait" });
    EXPECT_TRUE(p->expect_line("trywait", ms(10000)));
    EXPECT_NE(std::string::npos, p->err().find("fair and lease=MS only")) << p->err();
}

/* A pthread_once_t listed with ";once" runs its routine once for every
 * process; one not listed, once per process (glibc's). */
TEST_F(ShimSem, AListedOnceRunsOnceAcrossProcessesAnUnlistedOneOncePerProcess)
{
    rmt::TempDir dir("rmutex-shimsem");
    std::string log = dir / "log", once = "shimtest:once:" + std::to_string(getpid());
    std::vector<std::unique_ptr<rmt::Child>> ps;
    for (int i = 0; i < 3; i++) ps.push_back(run("shimsem: schema=" + once + ";once", { "once", log }));
    finish(ps);
    std::ifstream f(log);
    int ran = 0, local = 0;
    for (std::string l; std::getline(f, l);) ran += l.rfind("ran", 0) == 0, local += l.rfind("local", 0) == 0;
    EXPECT_EQ(1, ran) << "the listed once ran in more than one process, or none";
    EXPECT_EQ(3, local);
    EXPECT_TRUE(key_exists("rmutex_once:{" + once + "}"));
}

} // namespace
