/* shim_test.cc -- librmutex_preload.so under real, unmodified programs.
 *
 * shimprog (shimprog.c) is a plain pthread program linked to nothing of
 * rmutex; these tests run it in several processes with LD_PRELOAD set to
 * the shim, against a redis-server of their own, and look at its output,
 * its stderr and the lock keys in Redis.  Waits are on conditions with
 * scaled bounds (RMUTEX_TEST_TIME_SCALE). */
#include "harness.h"
#include "shim_env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

using namespace rmt;
using rmt::lines;
using Proc = rmt::Child;
using rmt::shell;

namespace {

const std::string kPreload = SHIM_PRELOAD;
const std::string kProg = SHIM_PROG;

/* Copy kProg to path (keeping its symbols), executable. */
bool copy_prog(const std::string &path)
{
    std::error_code ec;
    std::filesystem::copy_file(kProg, path, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return false;
    return chmod(path.c_str(), 0755) == 0;
}

class Shim : public RedisTest {
  protected:
    /* Own server (some tests stop it); the test process itself uses rmutex
     * only where it says so. */
    Shim() : RedisTest(true, "lease=1000", false) {}

    /* Run prog (default shimprog) with args under the shim and config. */
    std::unique_ptr<Proc> run(const std::vector<std::string> &args, const std::string &config,
                              const std::string &prog = kProg, const std::string &url_override = "")
    {
        std::vector<std::string> argv{prog};
        argv.insert(argv.end(), args.begin(), args.end());
        auto p = std::make_unique<Proc>(argv, shim_env(config, url_override.empty() ? url() : url_override));
        EXPECT_TRUE(p->started()) << argv[0];
        return p;
    }

    bool held(const std::string &name) { return redis().exists(name); }

    /* Lock names unique to the test. */
    std::string n(const std::string &s = "m") { return lock_name(s); }

    /* procs shimprogs of threads threads each add iters to a file's counter
     * under the listed counter_lock (extra: more words for "count"). */
    void count_under_shim(int procs, int threads, int iters, const std::vector<std::string> &extra,
                          const std::string &options = "")
    {
        TempDir dir;
        std::string counter = dir / "counter";
        std::ofstream(counter) << "0\n";
        std::vector<std::string> args = { "count", counter, std::to_string(iters),
                                          std::to_string(threads), "global" };
        args.insert(args.end(), extra.begin(), extra.end());
        std::vector<std::unique_ptr<Proc>> ps;
        for (int i = 0; i < procs; i++)
            ps.push_back(run(args, "shimprog: counter_lock=" + n("counter") + options));
        for (auto &p : ps) {
            EXPECT_TRUE(p->expect_line("done", ms(60000))) << p->err();
            EXPECT_EQ(0, p->wait(ms(10000))) << "a stack overflow ends it with SIGSEGV";
            EXPECT_EQ("", p->err());
        }
        EXPECT_EQ(std::to_string(procs * threads * iters) + "\n", read_file(counter));
        EXPECT_FALSE(held(n("counter")));
    }
};

/* ---- the library file ---- */

TEST(ShimLibrary, ExportsOnlyTheInterposedNames)
{
    std::set<std::string> want{
        "pthread_mutex_init", "pthread_mutex_destroy", "pthread_mutex_lock",
        "pthread_mutex_trylock", "pthread_mutex_timedlock", "pthread_mutex_clocklock",
        "pthread_mutex_unlock", "pthread_mutex_consistent", "pthread_cond_wait",
        "pthread_cond_timedwait", "pthread_cond_clockwait", "pthread_cond_init",
        "pthread_cond_destroy", "pthread_cond_signal", "pthread_cond_broadcast",
        "pthread_rwlock_init", "pthread_rwlock_destroy", "pthread_rwlock_rdlock",
        "pthread_rwlock_tryrdlock", "pthread_rwlock_timedrdlock", "pthread_rwlock_clockrdlock",
        "pthread_rwlock_wrlock", "pthread_rwlock_trywrlock", "pthread_rwlock_timedwrlock",
        "pthread_rwlock_clockwrlock", "pthread_rwlock_unlock",
        "pthread_once", "sem_open", "sem_close", "sem_unlink", "sem_wait", "sem_trywait", "sem_timedwait",
        "sem_clockwait", "sem_post", "sem_getvalue",
    };
    std::set<std::string> got;
    for (const auto &[name, type] : exported_symbols(kPreload)) got.insert(name);
    EXPECT_EQ(want, got);
}

TEST(ShimLibrary, NeedsOnlyLibcAndLibuuid)
{
    if (rmt_sanitized()) GTEST_SKIP() << "a sanitizer build links its runtime into the shim";
    int st = 0;
    std::string out = shell("readelf -d '" + kPreload + "'", &st);
    ASSERT_EQ(0, st) << out;
    std::set<std::string> needed;
    for (const auto &l : lines(out)) {
        auto b = l.find("(NEEDED)");
        if (b == std::string::npos) continue;
        auto o = l.find('['), c = l.find(']');
        needed.insert(l.substr(o + 1, c - o - 1));
    }
    EXPECT_EQ((std::set<std::string>{ "libc.so.6", "libuuid.so.1" }), needed) << out;
}

TEST(ShimProgram, BindsTrylockTimedlockClocklockToGlibc234)
{
    int st = 0;
    std::string out = shell("objdump -T '" + kProg + "'", &st);
    ASSERT_EQ(0, st) << out;
    for (const char *fn : { "pthread_mutex_trylock", "pthread_mutex_timedlock", "pthread_mutex_clocklock" }) {
        bool found = false;
        for (const auto &l : lines(out)) {
            auto w = words(l);
            if (!w.empty() && w.back() == fn) {
                found = true;
                EXPECT_NE(std::string::npos, l.find("GLIBC_2.34")) << l;
            }
        }
        EXPECT_TRUE(found) << fn << " not referenced:\n" << out;
    }
}

/* ---- mutual exclusion ---- */

TEST_F(Shim, ListedMutexExcludesAcrossProcesses) { count_under_shim(4, 2, 20, {}); }

/* Three processes of 2 writers (counting in a file) and 2 readers each on
 * the listed table_rw: no reader meets a writer, no writer anybody, no
 * write is lost, readers share. */
TEST_F(Shim, ListedRwlockReadersAndWritersInThreeProcessesNeverMeetAndLoseNoWrite)
{
    TempDir dir;
    std::string counter = dir / "counter";
    std::ofstream(counter) << "0\n";
    std::vector<std::unique_ptr<Proc>> ps;
    for (int i = 0; i < 3; i++)
        ps.push_back(run({ "rwcount", counter, "10" }, "shimprog: table_rw=" + n("table") + ";rwlock"));
    int most = 0;
    for (auto &p : ps) {
        auto line = p->expect_line("done", ms(60000));
        ASSERT_TRUE(line) << p->err();
        EXPECT_EQ("0", field(*line, "violations")) << "a reader met a writer, or a writer anybody";
        most = std::max(most, std::stoi(field(*line, "max_readers")));
        EXPECT_EQ(0, p->wait(ms(10000)));
        EXPECT_EQ("", p->err());
    }
    EXPECT_GE(most, 2) << "readers never shared the lock";
    EXPECT_EQ("60\n", read_file(counter)) << "a write was lost";
    EXPECT_FALSE(held(n("table")));
}

/* A listed rwlock's trywrlock is EBUSY while another process reads the
 * name, and takes it once that reader has gone. */
TEST_F(Shim, ListedRwlockTrywrlockIsBusyWhileAnotherProcessReads)
{
    std::string cfg = "shimprog: table_rw=" + n("table") + ";rwlock";
    auto reader = run({ "rwtimed", "3000" }, cfg); /* reads, then unlocks at once */
    EXPECT_TRUE(reader->expect_line("timed rc=0", ms(10000))) << reader->err();
    /* A read held here, through the library, on the same name. */
    rrwlock_t l;
    ASSERT_EQ(0, rrwlock_init(&l, n("table").c_str(), nullptr));
    ASSERT_EQ(0, rrwlock_rdlock(&l));
    auto writer = run({ "rwtry" }, cfg);
    EXPECT_TRUE(writer->expect_line("try rc=16", ms(10000))) << "a writer got in beside a reader: " << writer->err();
    EXPECT_EQ(0, rrwlock_unlock(&l));
    auto again = run({ "rwtry" }, cfg);
    EXPECT_TRUE(again->expect_line("try rc=0", ms(10000))) << again->err();
    EXPECT_EQ(0, rrwlock_destroy(&l));
}

/* The same on threads with a PTHREAD_STACK_MIN stack, on which the shim's
 * set-up and rmutex's first connection run too. */
TEST_F(Shim, ListedMutexWorksOnSmallStackThreads) { count_under_shim(2, 3, 10, { "small" }); }

/* ";cache": the processes cache the lock between their threads' holds,
 * hand it over on request, and give it back when they exit (the count
 * ends with the lock free). */
TEST_F(Shim, CachedEntryExcludesAcrossProcessesAndIsGivenBackAtExit)
{
    count_under_shim(3, 2, 40, {}, ";cache");
}

/* A holder in one process; trylock, timedlock and clocklock (all bound to
 * @GLIBC_2.34 in shimprog) in another see it. */
TEST_F(Shim, TrylockTimedlockAndClocklockSeeOtherProcesses)
{
    std::string cfg = "shimprog: counter_lock=" + n();
    auto holder = run({ "hold", "global" }, cfg);
    ASSERT_TRUE(holder->expect_line("locked rc=0", ms(10000)));
    EXPECT_TRUE(held(n()));
    auto t = run({ "try", "global" }, cfg);
    EXPECT_TRUE(t->expect_line("rc=16", ms(10000))) << t->err(); /* EBUSY */
    auto tl = run({ "timed", "global", "300" }, cfg);
    EXPECT_TRUE(tl->expect_line("rc=110", ms(10000))) << tl->err(); /* ETIMEDOUT */
    auto cl = run({ "clock", "global", "300" }, cfg);
    EXPECT_TRUE(cl->expect_line("rc=110", ms(10000))) << cl->err();
    holder->write_line("go");
    EXPECT_TRUE(holder->expect_line("unlocked rc=0", ms(10000)));
    EXPECT_TRUE(wait_until([&] { return !held(n()); }, ms(5000)));
    auto again = run({ "try", "global" }, cfg);
    EXPECT_TRUE(again->expect_line("rc=0", ms(10000))) << again->err();
    auto tl2 = run({ "timed", "global", "5000" }, cfg);
    EXPECT_TRUE(tl2->expect_line("rc=0", ms(10000))) << tl2->err();
    for (auto *p : { holder.get(), t.get(), tl.get(), cl.get(), again.get(), tl2.get() })
        EXPECT_EQ("", p->err());
}

/* Every way of finding a mutex: .symtab of the executable (a file-local
 * static), the dynamic symbol table (an exported library global, copied
 * into the executable), a library's .symtab (object:symbol), and a mutex
 * set up by pthread_mutex_init rather than a static initializer. */
TEST_F(Shim, FindsStaticLibraryAndDynamicallyInitializedMutexes)
{
    struct Case {
        const char *mutex, *entry;
    } cases[] = {
        { "static", "s_lock" },
        { "lib", "lib_lock" },
        { "lib", "libshimlib.so:lib_lock" },
        { "libstatic", "libshimlib.so:lib_static_lock" },
        { "dyn", "dyn_lock" },
    };
    int i = 0;
    for (const auto &c : cases) {
        SCOPED_TRACE(c.entry);
        std::string name = n(std::to_string(i++));
        std::string cfg = std::string("shimprog: ") + c.entry + "=" + name;
        auto holder = run({ "hold", c.mutex }, cfg);
        ASSERT_TRUE(holder->expect_line("locked rc=0", ms(10000))) << holder->err();
        EXPECT_TRUE(held(name));
        auto t = run({ "try", c.mutex }, cfg);
        EXPECT_TRUE(t->expect_line("rc=16", ms(10000))) << t->err();
        holder->write_line("go");
        EXPECT_TRUE(holder->expect_line("unlocked rc=0", ms(10000)));
        EXPECT_TRUE(wait_until([&] { return !held(name); }, ms(5000)));
        EXPECT_EQ("", holder->err());
        EXPECT_EQ("", t->err());
    }
}

/* ---- unlisted mutexes and unlisted programs ---- */

TEST_F(Shim, UnlistedMutexesKeepGlibcBehaviourAndNeverTouchRedis)
{
    /* Redis is not even reachable: nothing may wait for it. */
    std::string dead = "redis://127.0.0.1:" + std::to_string(free_port());
    auto p = run({ "plain" }, "shimprog: counter_lock=" + n(), kProg, dead);
    EXPECT_TRUE(p->expect_line("plain lock=0 relock=35 unlock=0 unlock2=1", ms(10000))) << p->err();
    EXPECT_EQ(0, p->wait(ms(10000)));
    EXPECT_EQ("", p->err());

    /* Two processes hold the same unlisted mutex at once: it is local. */
    std::string cfg = "shimprog: counter_lock=" + n();
    auto a = run({ "hold", "plain" }, cfg), b = run({ "hold", "plain" }, cfg);
    EXPECT_TRUE(a->expect_line("locked rc=0", ms(10000)));
    EXPECT_TRUE(b->expect_line("locked rc=0", ms(10000)));
    a->write_line("go");
    b->write_line("go");
    EXPECT_TRUE(a->expect_line("unlocked rc=0", ms(10000)));
    EXPECT_TRUE(b->expect_line("unlocked rc=0", ms(10000)));
    EXPECT_EQ(0, redis().cmd({ "DBSIZE" }).integer());
}

TEST_F(Shim, ProgramsTheConfigurationDoesNotNameAreInertAndSilent)
{
    std::string dead = "redis://127.0.0.1:" + std::to_string(free_port());
    /* Errors in another program's section are not ours to report. */
    std::string cfg = "otherprog: counter_lock=" + n() + ", bad entry;bogus | also*: ";
    auto a = run({ "hold", "global" }, cfg, kProg, dead), b = run({ "hold", "global" }, cfg, kProg, dead);
    EXPECT_TRUE(a->expect_line("locked rc=0", ms(10000))) << a->err();
    EXPECT_TRUE(b->expect_line("locked rc=0", ms(10000))) << b->err();
    a->write_line("go");
    b->write_line("go");
    EXPECT_TRUE(a->expect_line("unlocked rc=0", ms(10000)));
    EXPECT_TRUE(b->expect_line("unlocked rc=0", ms(10000)));
    EXPECT_EQ("", a->err());
    EXPECT_EQ("", b->err());
}

/* A shimmed program execs children: one whose name the configuration does
 * not list (the shim is inert there: its mutex of the same symbol is
 * local), and one it does (distributed: it sees the parent's hold). */
TEST_F(Shim, ExecedChildrenFollowTheConfiguration)
{
    TempDir dir;
    std::string other = dir / "otherprog";
    ASSERT_TRUE(copy_prog(other));
    std::string cfg = "shimprog: counter_lock=" + n();

    auto p = run({ "exec", "global", other, "try", "global" }, cfg);
    ASSERT_TRUE(p->expect_line("locked rc=0", ms(10000))) << p->err();
    EXPECT_TRUE(p->expect_line("rc=0", ms(10000))) << p->err(); /* the inert child got its own mutex */
    EXPECT_TRUE(p->expect_line("child exit=0", ms(10000)));
    EXPECT_TRUE(p->expect_line("unlocked rc=0", ms(10000)));
    EXPECT_EQ("", p->err());

    auto q = run({ "exec", "global", kProg, "try", "global" }, cfg);
    ASSERT_TRUE(q->expect_line("locked rc=0", ms(10000))) << q->err();
    EXPECT_TRUE(q->expect_line("rc=16", ms(10000))) << q->err(); /* the listed child is excluded */
    EXPECT_TRUE(q->expect_line("child exit=0", ms(10000)));
    EXPECT_TRUE(q->expect_line("unlocked rc=0", ms(10000)));
    EXPECT_EQ("", q->err());
}

/* ---- static initializers and types ---- */

TEST_F(Shim, RecursiveStaticInitializerCountsLocallyAndHoldsRedisUntilTheLastUnlock)
{
    auto p = run({ "rec" }, "shimprog: rec_lock=" + n());
    ASSERT_TRUE(p->expect_line("depth2 rc=0,0", ms(10000))) << p->err();
    EXPECT_TRUE(held(n()));
    p->write_line("go");
    ASSERT_TRUE(p->expect_line("depth1 rc=0", ms(10000)));
    EXPECT_TRUE(held(n()));
    p->write_line("go");
    ASSERT_TRUE(p->expect_line("free rc=0", ms(10000)));
    EXPECT_FALSE(held(n()));
    EXPECT_EQ("", p->err());
}

TEST_F(Shim, ErrorcheckMutexKeepsGlibcCodes)
{
    auto p = run({ "err" }, "shimprog: err_lock=" + n());
    /* EDEADLK, EBUSY, then EPERM for the second unlock. */
    EXPECT_TRUE(p->expect_line("err lock=0 relock=35 trylock=16 unlock=0 unlock2=1", ms(10000))) << p->err();
    EXPECT_EQ(0, p->wait(ms(10000)));
    EXPECT_EQ("", p->err());
    EXPECT_FALSE(held(n()));
}

/* ---- condition variables ---- */

TEST_F(Shim, ConditionVariableProducerConsumerOnADistributedMutex)
{
    std::string cfg = "shimprog: counter_lock=" + n();
    auto p = run({ "cond", "global" }, cfg);
    ASSERT_TRUE(p->expect_line("waiting", ms(10000))) << p->err();
    /* The consumer gave the Redis hold up for its wait... */
    EXPECT_TRUE(wait_until([&] { return !held(n()); }, ms(5000)));
    auto other = run({ "try", "global" }, cfg);
    EXPECT_TRUE(other->expect_line("rc=0", ms(10000))) << other->err();
    /* ...and has it again when it wakes up. */
    p->write_line("go");
    EXPECT_TRUE(p->expect_line("got 42", ms(10000)));
    EXPECT_TRUE(p->expect_line("done", ms(10000)));
    EXPECT_EQ("", p->err());
    EXPECT_FALSE(held(n()));
}

TEST_F(Shim, TimedConditionWaitsReturnWithTheRedisHoldRetaken)
{
    auto p = run({ "condtimed", "global", "200" }, "shimprog: counter_lock=" + n());
    ASSERT_TRUE(p->expect_line("timedwait rc=110 clockwait rc=110", ms(10000))) << p->err();
    EXPECT_TRUE(held(n()));
    p->write_line("go");
    EXPECT_TRUE(p->expect_line("unlocked rc=0", ms(10000)));
    EXPECT_FALSE(held(n()));
    EXPECT_EQ("", p->err());
}

/* Cancelled in pthread_cond_wait: the program's cleanup handler runs with
 * the mutex held -- locally (glibc) and in Redis (the shim's handler) --
 * and its unlock frees both. */
TEST_F(Shim, CancellationInAConditionWaitRestoresTheRedisHold)
{
    std::string cfg = "shimprog: counter_lock=" + n();
    auto p = run({ "cancel", "global" }, cfg);
    ASSERT_TRUE(p->expect_line("waiting", ms(10000))) << p->err();
    ASSERT_TRUE(wait_until([&] { return !held(n()); }, ms(5000)));
    p->write_line("cancel");
    ASSERT_TRUE(p->expect_line("cleanup", ms(10000)));
    EXPECT_TRUE(held(n())) << "the cleanup handler runs without the Redis hold";
    auto other = run({ "try", "global" }, cfg);
    EXPECT_TRUE(other->expect_line("rc=16", ms(10000))) << other->err();
    p->write_line("go");
    EXPECT_TRUE(p->expect_line("cleanup-unlocked rc=0", ms(10000)));
    EXPECT_TRUE(p->expect_line("joined canceled=1", ms(10000)));
    EXPECT_TRUE(p->expect_line("relocked rc=0", ms(10000)));
    EXPECT_TRUE(held(n()));
    p->write_line("go");
    EXPECT_TRUE(p->expect_line("unlocked rc=0", ms(10000)));
    EXPECT_FALSE(held(n()));
    EXPECT_EQ("", p->err());
}

/* A listed condition variable (";cond") is shared across processes: a
 * waiter in one process is registered in Redis under the listed name and
 * woken by a signal from another. */
TEST_F(Shim, AListedConditionVariableWakesAWaiterInAnotherProcess)
{
    std::string cond = n("cond");
    std::string cfg = "shimprog: counter_lock=" + n() + ", cond=" + cond + ";cond";
    for (std::string how : { "one", "all" }) {
        auto waiter = run({ "cwait", "global" }, cfg);
        ASSERT_TRUE(waiter->expect_line("waiting", ms(10000))) << waiter->err();
        ASSERT_TRUE(wait_until(
            [&] { return redis().cmd({ "ZCARD", "rmutex_cond_wait:{" + cond + "}" }).integer() == 1; },
            ms(5000)))
            << "the waiter is not registered under the listed name";
        /* It registers before it lets go of the mutex (POSIX's order). */
        EXPECT_TRUE(wait_until([&] { return !held(n()); }, ms(5000))) << "the waiter kept the mutex's name";
        auto t0 = Clock::now();
        auto signaller = run({ "csignal", "global", how }, cfg);
        EXPECT_TRUE(signaller->expect_line("signalled rc=0", ms(10000))) << signaller->err();
        EXPECT_TRUE(waiter->expect_line("woke rc=0", ms(5000))) << how;
        EXPECT_LT(elapsed_ms(t0), scaled(ms(3000)).count()) << "woken by the timeout, not the signal";
        EXPECT_TRUE(waiter->expect_line("unlocked rc=0", ms(5000)));
        EXPECT_EQ("", waiter->err());
        EXPECT_EQ("", signaller->err());
    }
    EXPECT_FALSE(held(n()));
}

TEST_F(Shim, AListedConditionWithAnUnlistedMutexIsEinvalWithOneLine)
{
    auto p = run({ "cwait", "plain" }, "shimprog: counter_lock=" + n() + ", cond=" + n("cond") + ";cond");
    ASSERT_TRUE(p->expect_line("woke rc=22", ms(10000))) << p->err();
    EXPECT_TRUE(p->expect_line("unlocked rc=0", ms(5000)));
    auto err = lines(p->err());
    ASSERT_EQ(1u, err.size()) << p->err();
    EXPECT_NE(std::string::npos, err[0].find("not listed")) << err[0];
}

TEST_F(Shim, AnUnlistedConditionStaysOnGlibc)
{
    /* cond not listed: the wait is glibc's on a listed mutex (as before),
     * and nothing of a condition appears in Redis. */
    auto p = run({ "condtimed", "global", "100" }, "shimprog: counter_lock=" + n());
    ASSERT_TRUE(p->expect_line("timedwait rc=110 clockwait rc=110", ms(10000))) << p->err();
    p->write_line("go");
    EXPECT_TRUE(p->expect_line("unlocked rc=0", ms(10000)));
    auto keys = redis().cmd({ "KEYS", "rmutex_cond*" });
    EXPECT_EQ(0u, keys->elements);
}

/* ---- configuration problems ---- */

TEST_F(Shim, MissingSymbolGetsOneLineAndTheOthersStillWork)
{
    auto p = run({ "hold", "global" }, "shimprog: no_such_lock, counter_lock=" + n());
    ASSERT_TRUE(p->expect_line("locked rc=0", ms(10000))) << p->err();
    EXPECT_TRUE(held(n()));
    p->write_line("go");
    EXPECT_TRUE(p->expect_line("unlocked rc=0", ms(10000)));
    auto err = lines(p->err());
    ASSERT_EQ(1u, err.size()) << p->err();
    EXPECT_NE(std::string::npos, err[0].find("'no_such_lock' not found")) << err[0];
}

TEST_F(Shim, StrippedExecutableSaysWhyItsStaticIsNotFound)
{
    TempDir dir;
    std::string stripped = dir / "shimprog";
    ASSERT_TRUE(copy_prog(stripped));
    int st = 0;
    shell("strip '" + stripped + "'", &st);
    ASSERT_EQ(0, st);
    auto p = run({ "try", "static" }, "shimprog: s_lock=" + n(), stripped);
    EXPECT_TRUE(p->expect_line("rc=0", ms(10000)));
    EXPECT_EQ(0, p->wait(ms(10000)));
    auto err = lines(p->err());
    ASSERT_EQ(1u, err.size()) << p->err();
    EXPECT_NE(std::string::npos, err[0].find("'s_lock' not found")) << err[0];
    EXPECT_NE(std::string::npos, err[0].find("stripped")) << err[0];
}

TEST_F(Shim, MalformedEntriesAreReportedAndLeftOut)
{
    auto p = run({ "hold", "static" },
                 "shimprog: counter_lock;bogus, 9lives, s_lock=" + n() + ";lease=0x10, s_lock=" + n());
    ASSERT_TRUE(p->expect_line("locked rc=0", ms(10000))) << p->err();
    EXPECT_TRUE(held(n()));
    p->write_line("go");
    EXPECT_TRUE(p->expect_line("unlocked rc=0", ms(10000)));
    auto err = lines(p->err());
    ASSERT_EQ(3u, err.size()) << p->err();
    EXPECT_NE(std::string::npos, err[0].find("unknown option 'bogus'")) << err[0];
    EXPECT_NE(std::string::npos, err[1].find("'9lives' is not a symbol name")) << err[1];
    EXPECT_NE(std::string::npos, err[2].find("lease must be")) << err[2];
}

/* ---- Redis down ---- */

TEST_F(Shim, RedisDownAtStartMakesListedMutexesWaitWithOneLineAndOneWhenBack)
{
    server()->stop();
    auto p = run({ "hold", "global" }, "shimprog: counter_lock=" + n());
    /* One line about the outage, and no lock. */
    EXPECT_TRUE(wait_until([&] { return !p->err().empty(); }, ms(10000)));
    EXPECT_FALSE(p->read_line(ms(1500)));
    auto err = lines(p->err());
    ASSERT_EQ(1u, err.size()) << p->err();
    EXPECT_NE(std::string::npos, err[0].find("unreachable")) << err[0];
    /* Back: the lock goes through, and one line says Redis is back. */
    ASSERT_TRUE(server()->restart());
    ASSERT_TRUE(p->expect_line("locked rc=0", ms(20000))) << p->err();
    Redis again(host(), port());
    EXPECT_TRUE(again.exists(n()));
    p->write_line("go");
    EXPECT_TRUE(p->expect_line("unlocked rc=0", ms(10000)));
    err = lines(p->err());
    ASSERT_EQ(2u, err.size()) << p->err();
    EXPECT_NE(std::string::npos, err[1].find("Redis answers again")) << err[1];
}

/* ---- fair and robust entries ---- */

TEST_F(Shim, FairEntryMakesAFairDistributedLock)
{
    TempDir dir;
    std::string counter = dir / "counter";
    std::ofstream(counter) << "0\n";
    std::vector<std::unique_ptr<Proc>> ps;
    for (int i = 0; i < 3; i++)
        ps.push_back(run({ "count", counter, "10", "2", "global" }, "shimprog: counter_lock=" + n() + ";fair"));
    for (auto &p : ps) {
        EXPECT_TRUE(p->expect_line("done", ms(60000))) << p->err();
        EXPECT_TRUE(lines(p->err()).empty()) << p->err();
    }
    EXPECT_EQ("60\n", read_file(counter));
}

TEST_F(Shim, RobustEntryOnARobustMutexReportsADeadOwner)
{
    std::string cfg = "shimprog: robust_lock=" + n() + ";robust";
    auto dying = run({ "robust", "robust", "die" }, cfg);
    ASSERT_TRUE(dying->expect_line("locked rc=0", ms(10000))) << dying->err();
    dying->write_line("die");
    EXPECT_EQ(0, dying->wait(ms(10000)));
    /* The lease (1 s here) runs out; the next owner learns of the death. */
    auto next = run({ "robust", "robust", "x" }, cfg);
    EXPECT_TRUE(next->expect_line("locked rc=130 consistent=0 unlock=0", ms(15000))) << next->err();
    EXPECT_EQ("", next->err());
    EXPECT_EQ("", dying->err());
}

TEST_F(Shim, RobustEntryOnAPlainMutexIsReportedAndStillExcludes)
{
    std::string cfg = "shimprog: counter_lock=" + n() + ";robust";
    auto p = run({ "hold", "global" }, cfg);
    ASSERT_TRUE(p->expect_line("locked rc=0", ms(10000))) << p->err();
    EXPECT_TRUE(held(n()));
    p->write_line("go");
    EXPECT_TRUE(p->expect_line("unlocked rc=0", ms(10000)));
    auto err = lines(p->err());
    ASSERT_EQ(1u, err.size()) << p->err();
    EXPECT_NE(std::string::npos, err[0].find("robust ignored")) << err[0];
}

} // namespace
