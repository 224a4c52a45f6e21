/* misconfig_test.cc -- a configuration or permission error never lets a
 * ported program run unlocked (shim/policy.c).
 *
 * swapprog (built with the header swap) and shimprog (under
 * librmutex_preload.so) count in a file under a distributed mutex, two
 * threads per process, several processes, against a redis-server of the
 * test's own -- with a RMUTEX_URL that is garbage, one with a misspelt
 * option, a wrong password, or an ACL user with less than the
 * least-privilege rule (tests/acl_rule.h).  Neither program checks what
 * pthread_mutex_lock returns.  The count must stay exact: nobody gets in
 * while the name cannot be taken, each process says the problem in one
 * line, and a login or an ACL fixed on the server lets them finish without
 * a restart.  RMUTEX_ON_ERROR=abort ends them with the line; trylock says
 * EBUSY and timedlock ETIMEDOUT meanwhile.  Also: the header swap's
 * outage lines, and a condition wait whose mutex is refused on the way
 * back. */
#include "acl_rule.h"
#include "harness.h"
#include "shim_env.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>

using namespace rmt;

namespace {

/* A mutex or (Rw) a read-write lock, under the header swap or the shim. */
enum class Kind { Swap, Shim, SwapRw, ShimRw };
enum class Bad { Garbage, Typo, WrongPassword, LessThanTheRule };

const char *kind_name(Kind k)
{
    switch (k) {
    case Kind::Swap: return "Swap";
    case Kind::Shim: return "Shim";
    case Kind::SwapRw: return "SwapRwlock";
    default: return "ShimRwlock";
    }
}

bool swapped(Kind k) { return k == Kind::Swap || k == Kind::SwapRw; }

const char *bad_name(Bad b)
{
    switch (b) {
    case Bad::Garbage: return "GarbageUrl";
    case Bad::Typo: return "MisspeltOption";
    case Bad::WrongPassword: return "WrongPassword";
    default: return "AclUserWithLessThanTheRule";
    }
}

/* The lines of text that contain what. */
size_t count_lines(const std::string &text, const std::string &what)
{
    auto l = lines(text);
    return (size_t)std::count_if(l.begin(), l.end(),
                                 [&](const std::string &s) { return s.find(what) != std::string::npos; });
}

class Ported : public RedisTest {
  protected:
    Ported() : RedisTest(true, "", false) {}

    void SetUp() override
    {
        RedisTest::SetUp();
        ASSERT_FALSE(dir_.path.empty());
        std::ofstream(counter_) << "0\n";
    }
    void TearDown() override
    {
        procs_.clear();
        RedisTest::TearDown();
    }

    std::string user_url(const std::string &user, const std::string &password)
    {
        return "redis://" + user + ":" + password + "@" + host() + ":" + std::to_string(port());
    }
    void set_user(const std::vector<std::string> &words)
    {
        std::vector<std::string> cmd = { "ACL", "SETUSER" };
        cmd.insert(cmd.end(), words.begin(), words.end());
        ASSERT_EQ("OK", redis().cmd(cmd).str());
    }
    /* A user "ported" with the least-privilege rule less drop, password pw. */
    void make_user(const std::string &pw, const std::vector<std::string> &drop = {})
    {
        std::vector<std::string> words = { "ported", "reset", "on", ">" + pw };
        for (auto &w : acl_rule())
            if (std::find(drop.begin(), drop.end(), w) == drop.end()) words.push_back(w);
        set_user(words);
    }

    /* Program kind with args, RMUTEX_URL url, and env; the shim lists
     * shimprog's counter_lock under this test's name, and more. */
    Child *start(Kind kind, const std::vector<std::string> &args, const std::string &url,
                 std::map<std::string, std::string> env = {}, const std::string &more = "")
    {
        std::vector<std::string> argv{ swapped(kind) ? SWAP_PROG : SHIM_PROG };
        argv.insert(argv.end(), args.begin(), args.end());
        if (!swapped(kind))
            env = shim_env(kind == Kind::ShimRw
                               ? "shimprog: table_rw=" + lock_name("table") + ";rwlock" + more
                               : "shimprog: counter_lock=" + lock_name("counter") + more,
                           url, env);
        else
            env["RMUTEX_URL"] = url;
        procs_.push_back(std::make_unique<Child>(argv, env));
        EXPECT_TRUE(procs_.back()->started()) << argv[0];
        return procs_.back().get();
    }

    /* The counting command of kind: two threads, iters each (a read-write
     * lock: two writers that count, two readers; rwcount.h). */
    std::vector<std::string> count_args(Kind kind, int iters)
    {
        switch (kind) {
        case Kind::Swap: return { counter_, std::to_string(iters), "two" };
        case Kind::Shim: return { "count", counter_, std::to_string(iters), "2", "global" };
        case Kind::SwapRw: return { "rw", counter_, std::to_string(iters) };
        default: return { "rwcount", counter_, std::to_string(iters) };
        }
    }
    /* One trylock (trywrlock), one timedlock (timedrdlock) of ms. */
    std::vector<std::string> try_args(Kind kind)
    {
        switch (kind) {
        case Kind::Swap: return { "try" };
        case Kind::Shim: return { "try", "global" };
        case Kind::SwapRw: return { "rwtry" };
        default: return { "rwtry" };
        }
    }
    std::vector<std::string> timed_args(Kind kind, int ms)
    {
        switch (kind) {
        case Kind::Swap: return { "timed", std::to_string(ms) };
        case Kind::Shim: return { "timed", "global", std::to_string(ms) };
        default: return { "rwtimed", std::to_string(ms) };
        }
    }

    std::string counter() { return read_file(counter_); }

    TempDir dir_{ "rmutex-misconfig-test" };
    std::string counter_ = dir_ / "counter";
    std::vector<std::unique_ptr<Child>> procs_;
};

/* ---- each kind of program, each kind of error ---- */

class Misconfigured : public Ported, public ::testing::WithParamInterface<std::tuple<Kind, Bad>> {
  protected:
    Kind kind() const { return std::get<0>(GetParam()); }
    Bad bad() const { return std::get<1>(GetParam()); }

    /* The URL that is wrong in this test's way (making the user it names). */
    std::string bad_url()
    {
        switch (bad()) {
        case Bad::Garbage: return "garbage";
        case Bad::Typo: return url_with("leese=1");
        case Bad::WrongPassword: make_user("Not-The-Password-1"); return user_url("ported", "Right-Password-1");
        default: make_user("Ported-Pw-1", { "+evalsha", "+eval" }); return user_url("ported", "Ported-Pw-1");
        }
    }
    /* What the line must name. */
    std::string names() const
    {
        switch (bad()) {
        case Bad::Garbage: return "URL must start with";
        case Bad::Typo: return "'leese'";
        case Bad::WrongPassword: return "refused the login";
        default: return "'evalsha' command";
        }
    }
    /* Fix it on the server, if that can be done: true when done. */
    bool heal()
    {
        if (bad() == Bad::WrongPassword) set_user({ "ported", ">Right-Password-1" });
        else if (bad() == Bad::LessThanTheRule) set_user({ "ported", "+evalsha", "+eval" });
        else return false;
        return true;
    }
};

TEST_P(Misconfigured, ACounterAcrossThreadsAndProcessesStaysExactAndEachSaysItOnce)
{
    const int procs = 2, iters = 10;
    std::string url = bad_url();
    for (int i = 0; i < procs; i++) start(kind(), count_args(kind(), iters), url);
    for (auto &p : procs_)
        ASSERT_TRUE(wait_until([&] { return p->err().find("cannot use Redis") != std::string::npos; },
                               ms(10000)))
            << "nothing said: " << p->err();
    /* Every thread of every process waits: none went on without the lock. */
    EXPECT_FALSE(wait_until_unscaled(
        [&] {
            if (counter() != "0\n") return true;
            for (auto &p : procs_)
                if (p->poll_line()) return true;
            return false;
        },
        ms(1500)))
        << "a thread went on without the lock: counter " << counter();
    bool healed = heal();
    for (auto &p : procs_) {
        if (healed) {
            EXPECT_TRUE(p->expect_line("done", ms(30000))) << "not healed: " << p->err();
            EXPECT_EQ(0, p->wait(ms(10000)));
        } else {
            p->kill(SIGKILL);
            p->wait(ms(10000));
        }
        auto err = lines(p->err());
        ASSERT_EQ(1u, err.size()) << p->err();
        EXPECT_NE(std::string::npos, err[0].find(names())) << err[0];
        EXPECT_EQ(std::string::npos, err[0].find("unreachable")) << err[0];
        EXPECT_NE(std::string::npos, err[0].find("RMUTEX_ON_ERROR=abort")) << err[0];
        bool rw = kind() == Kind::SwapRw || kind() == Kind::ShimRw;
        EXPECT_NE(std::string::npos, err[0].find(rw ? "; distributed read-write locks wait, asking again"
                                                    : "; distributed mutexes wait, asking again"))
            << "the line names what waits: " << err[0];
    }
    EXPECT_EQ(std::to_string(healed ? procs * 2 * iters : 0) + "\n", counter());
}

TEST_P(Misconfigured, RmutexOnErrorAbortEndsTheProgramWithTheLine)
{
    Child *p = start(kind(), count_args(kind(), 10), bad_url(), { { "RMUTEX_ON_ERROR", "abort" } });
    int st = p->wait(ms(20000));
    ASSERT_TRUE(WIFSIGNALED(st)) << "status " << st << ": " << p->err();
    EXPECT_EQ(SIGABRT, WTERMSIG(st));
    auto err = lines(p->err());
    ASSERT_EQ(1u, err.size()) << p->err();
    EXPECT_NE(std::string::npos, err[0].find(names())) << err[0];
    EXPECT_NE(std::string::npos, err[0].find("RMUTEX_ON_ERROR=abort: ending the program")) << err[0];
    EXPECT_EQ("0\n", counter());
}

TEST_P(Misconfigured, TrylockIsEbusyAndTimedlockTimesOut)
{
    std::string url = bad_url();
    Child *t = start(kind(), try_args(kind()), url);
    EXPECT_TRUE(t->expect_line(kind() == Kind::Shim ? "rc=16" : "try rc=16", ms(10000))) << t->log().size() << t->err();
    auto t0 = Clock::now();
    Child *tl = start(kind(), timed_args(kind(), 300), url);
    EXPECT_TRUE(tl->expect_line(kind() == Kind::Shim ? "rc=110" : "timed rc=110", ms(10000))) << tl->err();
    EXPECT_GE(elapsed_ms(t0), 300);
    for (Child *p : { t, tl }) {
        EXPECT_EQ(0, p->wait(ms(10000)));
        EXPECT_EQ(1u, count_lines(p->err(), names())) << p->err();
    }
}

auto misconfigured_name = [](const auto &i) {
    return std::string(kind_name(std::get<0>(i.param))) + bad_name(std::get<1>(i.param));
};

/* Read-write locks: the errors a server can fix, and one it cannot. */
INSTANTIATE_TEST_SUITE_P(Rwlock, Misconfigured,
                         ::testing::Combine(::testing::Values(Kind::SwapRw, Kind::ShimRw),
                                            ::testing::Values(Bad::Garbage, Bad::WrongPassword,
                                                              Bad::LessThanTheRule)),
                         misconfigured_name);

INSTANTIATE_TEST_SUITE_P(Each, Misconfigured,
                         ::testing::Combine(::testing::Values(Kind::Swap, Kind::Shim),
                                            ::testing::Values(Bad::Garbage, Bad::Typo,
                                                              Bad::WrongPassword, Bad::LessThanTheRule)),
                         misconfigured_name);

/* ---- the shim: at start; a condition wait refused on its way back ---- */

/* The shim reads RMUTEX_URL in its constructor: a bad one is said before
 * the program's first lock of a listed mutex (here: none at all). */
TEST_F(Ported, ShimSaysABadUrlAtStartBeforeAnyLock)
{
    Child *p = start(Kind::Shim, { "hold", "plain" }, url_with("leese=1"));
    ASSERT_TRUE(p->expect_line("locked rc=0", ms(10000))) << p->err();
    EXPECT_EQ(1u, count_lines(p->err(), "'leese'")) << p->err();
    p->write_line("go");
    EXPECT_TRUE(p->expect_line("unlocked rc=0", ms(10000)));
}

/* A waiter's user loses EVALSHA while it waits on a listed condition: when
 * signalled it cannot take the name back.  The wait does not return
 * without it: one line, and it returns once the ACL is fixed. */
TEST_F(Ported, ShimConditionWaitRefusedOnItsWayBackWaitsForTheNameAndHeals)
{
    make_user("Ported-Pw-1");
    std::string name = lock_name("counter"), cond = ", cond=" + lock_name("cond") + ";cond";
    Child *waiter = start(Kind::Shim, { "cwait", "global" }, user_url("ported", "Ported-Pw-1"), {}, cond);
    ASSERT_TRUE(waiter->expect_line("waiting", ms(10000))) << waiter->err();
    ASSERT_TRUE(wait_until([&] { return !redis().exists(name); }, ms(5000))) << "the wait kept the name";
    set_user({ "ported", "-evalsha", "-eval" });
    Child *signaller = start(Kind::Shim, { "csignal", "global", "one" }, url(), {}, cond);
    EXPECT_TRUE(signaller->expect_line("signalled rc=0", ms(10000))) << signaller->err();
    ASSERT_TRUE(wait_until([&] { return count_lines(waiter->err(), "'evalsha' command") == 1; }, ms(10000)))
        << waiter->err();
    EXPECT_FALSE(waiter->read_line_unscaled(ms(1000))) << "the wait returned without the name";
    set_user({ "ported", "+evalsha", "+eval" });
    ASSERT_TRUE(waiter->expect_line("woke rc=0", ms(10000))) << waiter->err();
    EXPECT_TRUE(waiter->expect_line("unlocked rc=0", ms(10000)));
    EXPECT_EQ(1u, lines(waiter->err()).size()) << waiter->err();
}

/* ---- the header swap's outage lines ---- */

/* One line when Redis is found unreachable and one when it answers again
 * -- none in a process run with RMUTEX_OUTAGE_LINES=0 -- and no count
 * while it is down. */
TEST_F(Ported, SwapSaysWhenRedisIsUnreachableAndWhenItIsBackUnlessSilenced)
{
    server()->stop();
    Child *p = start(Kind::Swap, count_args(Kind::Swap, 5), url());
    Child *quiet = start(Kind::Swap, count_args(Kind::Swap, 5), url(), { { "RMUTEX_OUTAGE_LINES", "0" } });
    ASSERT_TRUE(wait_until([&] { return count_lines(p->err(), "unreachable") == 1; }, ms(10000)))
        << p->err();
    EXPECT_EQ("0\n", counter());
    ASSERT_TRUE(server()->restart());
    for (Child *c : { p, quiet }) {
        ASSERT_TRUE(c->expect_line("done", ms(30000))) << c->err();
        EXPECT_EQ(0, c->wait(ms(10000)));
    }
    auto err = lines(p->err());
    ASSERT_EQ(2u, err.size()) << p->err();
    EXPECT_NE(std::string::npos, err[0].find("rmutex pthread[swapprog ")) << err[0];
    EXPECT_NE(std::string::npos, err[0].find("; distributed mutexes wait until it answers again")) << err[0];
    EXPECT_NE(std::string::npos, err[1].find("Redis answers again: distributed mutexes no longer wait"))
        << err[1];
    EXPECT_EQ("", quiet->err());
    EXPECT_EQ("20\n", counter());
}

} // namespace
