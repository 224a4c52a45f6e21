/* deadlock_test.cc -- waiters in the holder registry (rmutex status), and
 * distributed deadlocks: found by `rmutex deadlocks`, broken with EDEADLK by
 * an ERRORCHECK mutex that asks for it (rmutexattr_setdeadlock_detect).
 *
 * Real processes (rmutex_test_child: "chain FIRST SECOND" holds FIRST, then
 * at "go" waits for SECOND) against the test's own redis-server, with a
 * 3 s lease: the registry's period is 1 s, the detection threshold
 * 2 x 100 ms + 1 s. */
#include "harness.h"

#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>
#include <regex>
#include <string>
#include <vector>

namespace {

using namespace rmt;

const std::string kCli = RMUTEX_CLI;

class Deadlocks : public RedisTest {
  public:
    Deadlocks() : RedisTest(true, "lease=3000") {}

    /* rmutex ARGS... to its end: its exit code (-1 if it did not end), its
     * stdout into *out. */
    int cli(const std::vector<std::string> &args, std::string *out = nullptr)
    {
        std::vector<std::string> argv{ kCli };
        argv.insert(argv.end(), args.begin(), args.end());
        return run_to_end(argv, { { "RMUTEX_URL", url() } }, out);
    }

    /* A child that holds first (and will wait for second at go()); its
     * URL's options: options (default: the test's). */
    std::unique_ptr<Child> chain(const std::string &first, const std::string &second,
                                 const std::vector<std::string> &opts = {},
                                 const std::string &options = "lease=3000")
    {
        std::vector<std::string> args{ "chain", first, second };
        args.insert(args.end(), opts.begin(), opts.end());
        auto c = std::make_unique<Child>(args, url_with(options));
        auto l = c->expect_line("first ", ms(10000));
        EXPECT_TRUE(l && field(*l, "rc") == "0") << (l ? *l : "no answer");
        return c;
    }

    /* `rmutex deadlocks ARGS` until it exits 1 (a deadlock), within bound:
     * its output, or "" (and the last exit code in *code). */
    std::string deadlock_found(const std::vector<std::string> &extra, ms bound, int *code = nullptr)
    {
        std::vector<std::string> args{ "deadlocks" };
        args.insert(args.end(), extra.begin(), extra.end());
        std::string out;
        int rc = -1;
        bool found = wait_until([&] { return (rc = cli(args, &out)) == 1; }, bound);
        if (code) *code = rc;
        return found ? out : "";
    }
};

std::string pid_of(Child &c) { return std::to_string(c.pid()); }

/* leaver exits (letting go of its first lock): waiter, which waited for
 * it, gets it. */
void exit_and_hand_over(Child &leaver, Child &waiter)
{
    leaver.write_line("exit");
    leaver.wait(ms(5000));
    auto l = waiter.expect_line("second ", ms(10000));
    ASSERT_TRUE(l) << "the waiter never got the lock";
    EXPECT_EQ("0", field(*l, "rc")) << *l;
}

/* ---- rmutex deadlocks ---------------------------------------------------- */

TEST_F(Deadlocks, TwoProcessDeadlockIsFoundWithBothMembersInTextAndJson)
{
    std::string l1 = lock_name("l1"), l2 = lock_name("l2");
    auto a = chain(l1, l2), b = chain(l2, l1);
    int code = -1;
    ASSERT_EQ(0, cli({ "deadlocks" })) << "no wait yet, no deadlock";
    a->write_line("go");
    b->write_line("go");
    std::string text = deadlock_found({}, ms(10000), &code);
    ASSERT_FALSE(text.empty()) << "rmutex deadlocks never exited 1 (last " << code << ")";
    EXPECT_NE(text.find("2 threads"), std::string::npos) << text;
    EXPECT_NE(text.find("pid " + pid_of(*a) + " on "), std::string::npos) << text;
    EXPECT_NE(text.find("pid " + pid_of(*b) + " on "), std::string::npos) << text;
    EXPECT_NE(text.find("holds " + l1 + ", waits for " + l2), std::string::npos) << text;
    EXPECT_NE(text.find("holds " + l2 + ", waits for " + l1), std::string::npos) << text;

    std::string json = deadlock_found({ "--json" }, ms(10000), &code);
    ASSERT_FALSE(json.empty()) << "rmutex deadlocks --json never exited 1 (last " << code << ")";
    auto ls = lines(json);
    ASSERT_EQ(1u, ls.size()) << json;
    EXPECT_NE(ls[0].find("\"threads\":2"), std::string::npos) << json;
    EXPECT_NE(ls[0].find("\"pid\":" + pid_of(*a) + ","), std::string::npos) << json;
    EXPECT_NE(ls[0].find("\"pid\":" + pid_of(*b) + ","), std::string::npos) << json;
    EXPECT_NE(ls[0].find("\"holds\":\"" + l1 + "\",\"waits_for\":\"" + l2 + "\""), std::string::npos)
        << json;
    EXPECT_NE(ls[0].find("\"holds\":\"" + l2 + "\",\"waits_for\":\"" + l1 + "\""), std::string::npos)
        << json;
    /* Neither broke it: no detection asked for. */
    EXPECT_FALSE(a->poll_line() || b->poll_line());
}

TEST_F(Deadlocks, ThreeProcessCycleIsFoundAndAChainOfWaitsIsNot)
{
    std::string l1 = lock_name("l1"), l2 = lock_name("l2"), l3 = lock_name("l3");
    auto a = chain(l1, l2), b = chain(l2, l3), c = chain(l3, l1);
    a->write_line("go");
    b->write_line("go");
    ASSERT_TRUE(wait_until([&] {
        std::string out;
        return cli({ "status", "--json", l3 }, &out) == 0 && out.find("\"waiters\":[{") != std::string::npos;
    }, ms(5000))) << "b's wait for l3 is never listed";
    EXPECT_EQ(0, cli({ "deadlocks" })) << "a chain of waits is not a cycle";
    c->write_line("go");
    int code = -1;
    std::string text = deadlock_found({}, ms(10000), &code);
    ASSERT_FALSE(text.empty()) << "rmutex deadlocks never exited 1 (last " << code << ")";
    EXPECT_NE(text.find("3 threads"), std::string::npos) << text;
    for (auto *p : { a.get(), b.get(), c.get() })
        EXPECT_NE(text.find("pid " + pid_of(*p) + " on "), std::string::npos) << text;
    EXPECT_NE(text.find("holds " + l3 + ", waits for " + l1), std::string::npos) << text;
}

TEST_F(Deadlocks, DetectingErrorcheckMutexGivesUpWithEdeadlkAndTheOtherWaitsOn)
{
    std::string l1 = lock_name("l1"), l2 = lock_name("l2");
    auto a = chain(l1, l2, { "--type=2", "--detect" }), b = chain(l2, l1, { "--type=2" });
    a->write_line("go");
    b->write_line("go");
    /* Threshold 1.2 s, a look a second after: within a few seconds. */
    auto l = a->expect_line("second ", ms(10000));
    ASSERT_TRUE(l) << "the detecting process never gave up its wait";
    EXPECT_EQ(std::to_string(EDEADLK), field(*l, "rc")) << *l;
    EXPECT_NE(l->find("cycle"), std::string::npos) << *l;
    /* b does not detect: it waits on (for l1, still a's). */
    EXPECT_FALSE(b->poll_line(ms(500)));
    exit_and_hand_over(*a, *b);
}

/* The setting does for every ERRORCHECK mutex what the attribute does for
 * one (the header swap's mutexes have no such attribute). */
TEST_F(Deadlocks, DeadlockDetectSettingMakesEveryErrorcheckMutexDetect)
{
    std::string l1 = lock_name("l1"), l2 = lock_name("l2");
    auto a = chain(l1, l2, { "--type=2" }, "lease=3000&deadlock_detect=1"),
         b = chain(l2, l1, { "--type=0" }, "lease=3000&deadlock_detect=1");
    a->write_line("go");
    b->write_line("go");
    auto l = a->expect_line("second ", ms(10000));
    ASSERT_TRUE(l) << "the ERRORCHECK mutex never gave up its wait";
    EXPECT_EQ(std::to_string(EDEADLK), field(*l, "rc")) << *l;
    EXPECT_FALSE(b->poll_line(ms(500))) << "a NORMAL mutex gave up";
    exit_and_hand_over(*a, *b);
}

TEST_F(Deadlocks, OfTwoDetectingMembersOnlyOneGivesUp)
{
    std::string l1 = lock_name("l1"), l2 = lock_name("l2");
    auto a = chain(l1, l2, { "--type=2", "--detect" }), b = chain(l2, l1, { "--type=2", "--detect" });
    a->write_line("go");
    b->write_line("go");
    std::optional<std::string> first;
    Child *gave_up = nullptr, *other = nullptr;
    ASSERT_TRUE(wait_until([&] {
        if ((first = a->poll_line())) gave_up = a.get(), other = b.get();
        else if ((first = b->poll_line())) gave_up = b.get(), other = a.get();
        return first.has_value();
    }, ms(10000))) << "neither detecting process gave up";
    EXPECT_EQ(std::to_string(EDEADLK), field(*first, "rc")) << *first;
    /* The other looks again within a second or two and finds the cycle
     * gone (the one that gave up waits no more): it keeps waiting. */
    EXPECT_FALSE(wait_until_unscaled([&] { return other->poll_line().has_value(); }, ms(2500)))
        << "the second member gave up too";
    exit_and_hand_over(*gave_up, *other);
}

TEST_F(Deadlocks, BusyFairQueueIsNeverReportedAsADeadlock)
{
    std::string name = lock_name("busy");
    std::vector<std::unique_ptr<Child>> procs;
    for (int i = 0; i < 4; i++) {
        procs.push_back(std::make_unique<Child>(
            std::vector<std::string>{ "churn", name, "2", "10000", "20", "--fair" }, url()));
        ASSERT_TRUE(procs.back()->expect_line("ready", ms(5000)));
    }
    int runs = 0, seen_waiters = 0;
    size_t done = 0;
    auto deadline = std::chrono::steady_clock::now() + scaled(ms(30000));
    while (done < procs.size() && std::chrono::steady_clock::now() < deadline) {
        std::string out;
        int rc = cli({ "deadlocks", "--json" }, &out);
        ASSERT_EQ(0, rc) << "a false deadlock under a busy fair queue:\n" << out;
        runs++;
        if (cli({ "status", "--json", name }, &out) == 0 && out.find("\"waiters\":[{") != std::string::npos)
            seen_waiters++;
        for (auto &p : procs)
            while (auto l = p->poll_line())
                if (l->rfind("done", 0) == 0) done++;
    }
    ASSERT_EQ(procs.size(), done) << "the churning processes did not finish";
    for (auto &p : procs) {
        auto l = p->log().back();
        EXPECT_EQ("0", field(l, "errors")) << l;
    }
    EXPECT_GE(runs, 3);
    EXPECT_GE(seen_waiters, 1) << "no wait was ever announced: the test saw no queue";
}

/* ---- waiters in rmutex status -------------------------------------------- */

TEST_F(Deadlocks, StatusListsFairWaitersInQueueOrderWithTheirProcesses)
{
    std::string name = lock_name("q");
    rmutex_t m;
    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_setfair(&a, 1);
    ASSERT_EQ(0, rmutex_init(&m, name.c_str(), &a));
    ASSERT_EQ(0, rmutex_lock(&m));
    std::vector<std::unique_ptr<Child>> w;
    for (unsigned k = 1; k <= 3; k++) {
        w.push_back(std::make_unique<Child>(std::vector<std::string>{ "hold", name, "--fair" }, url()));
        ASSERT_TRUE(wait_until([&] {
            rmutex_lockinfo_t in;
            return rmutex_inspect(name.c_str(), &in, sizeof in) == 0 && in.queue_len == k;
        }, ms(5000))) << "waiter " << k << " never queued";
    }
    std::string out;
    ASSERT_TRUE(wait_until([&] {
        return cli({ "status", "--json", name }, &out) == 0 &&
               std::regex_search(out, std::regex("\"waiters\":\\[(\\{[^}]*\\},?){3}\\]"));
    }, ms(5000))) << "three waiters never listed: " << out;
    size_t p0 = out.find("\"pid\":" + pid_of(*w[0]) + ","), p1 = out.find("\"pid\":" + pid_of(*w[1]) + ","),
           p2 = out.find("\"pid\":" + pid_of(*w[2]) + ",");
    ASSERT_NE(std::string::npos, p0) << out;
    ASSERT_NE(std::string::npos, p1) << out;
    ASSERT_NE(std::string::npos, p2) << out;
    EXPECT_LT(p0, p1) << out;
    EXPECT_LT(p1, p2) << out;
    EXPECT_NE(out.find("\"kind\":\"fair\""), std::string::npos) << out;

    ASSERT_EQ(0, cli({ "status", name }, &out));
    EXPECT_NE(out.find("waiters  3 announced (in queue order)"), std::string::npos) << out;
    EXPECT_NE(out.find("1. "), std::string::npos) << out;
    EXPECT_LT(out.find("pid " + pid_of(*w[0]) + " on "), out.find("pid " + pid_of(*w[1]) + " on ")) << out;
    ASSERT_EQ(0, cli({ "list", name }, &out));
    EXPECT_NE(out.find("3 waiting"), std::string::npos) << out;

    ASSERT_EQ(0, rmutex_unlock(&m));
    for (auto &c : w) {
        auto l = c->expect_line("held ", ms(10000));
        ASSERT_TRUE(l);
        c->write_line("unlock");
        ASSERT_TRUE(c->expect_line("unlocked", ms(5000)));
    }
    /* Every wait ended: none listed within a period. */
    EXPECT_TRUE(wait_until([&] {
        return cli({ "status", "--json", name }, &out) != 4 && out.find("\"waiters\":[]") != std::string::npos;
    }, ms(3000))) << out;
    rmutex_destroy(&m);
}

/* ---- the cost: none for a wait shorter than the delay ----------------------- */

TEST_F(Deadlocks, WaitShorterThanTheDelayCostsNoCallALongerOneThatTimesOutOne)
{
    std::string name = lock_name("short");
    auto holder = child_holding(name, url());
    ASSERT_TRUE(holder);
    rmutex_t m;
    init_mutex(&m, name);
    auto timed = [&](long ms_) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += ms_ * 1000000;
        t.tv_sec += t.tv_nsec / 1000000000;
        t.tv_nsec %= 1000000000;
        return rmutex_timedlock(&m, &t);
    };
    /* This process's earlier activity (earlier tests, when the program
     * runs whole) is published at the next period, once: let it be, so
     * that every call counted below is the waits'. */
    ASSERT_TRUE(wait_until([] {
        uint64_t a = stats().announcements;
        return !wait_until_unscaled([&] { return stats().announcements != a; }, ms(1200));
    }, ms(10000)));
    rmutex_stats_t before = stats();
    ASSERT_RC(ETIMEDOUT, timed(40));
    /* Past when a 100 ms wait would have been announced: nothing sent. */
    EXPECT_FALSE(wait_until_unscaled([&] { return stats().announcements != before.announcements; },
                                     ms(400)))
        << "a 40 ms wait made a registry call";
    EXPECT_EQ(before.waits_announced, stats().waits_announced);

    /* A wait longer than the delay that times out: one call lists it
     * (with its deadline), none takes it out -- readers see the deadline
     * pass (by the server's clock: the write that listed it may have put
     * it a few ms late) -- and no reader shows it once it has ended. */
    before = stats();
    ASSERT_RC(ETIMEDOUT, timed(600));
    EXPECT_EQ(before.waits_announced + 1, stats().waits_announced);
    EXPECT_EQ(before.announcements + 1, stats().announcements);
    size_t shown = 0;
    EXPECT_TRUE(wait_until([&] {
        shown = 0;
        EXPECT_RC(0, rmutex_waits(name.c_str(), [](const rmutex_waitinfo_t *, void *n) {
            ++*static_cast<size_t *>(n);
            return 0;
        }, &shown));
        return shown == 0;
    }, ms(200))) << "a wait that timed out is still shown";
    /* A period (1 s) and a half: no call to take it out. */
    EXPECT_FALSE(wait_until_unscaled([&] { return stats().announcements > before.announcements + 1; },
                                     ms(1500)))
        << "more than one call for one long wait that timed out";
    rmutex_destroy(&m);
    holder->write_line("unlock");
}

std::atomic<bool> once_running{ false }, once_release{ false };

void slow_routine()
{
    once_running = true;
    wait_until([] { return once_release.load(); }, ms(20000));
}

void never_routine() { ADD_FAILURE() << "the routine ran twice"; }

TEST_F(Deadlocks, SemaphoreBarrierAndOnceWaitsAreListedByStatus)
{
    std::string sname = lock_name("sem"), bname = lock_name("barrier"), oname = lock_name("once");
    rsem_t s;
    ASSERT_RC(0, rsem_init(&s, sname.c_str(), 0, nullptr));
    rbarrier_t b;
    ASSERT_RC(0, rbarrier_init(&b, bname.c_str(), 2, nullptr));
    ronce_t first = RONCE_INIT(oname.c_str()), second = RONCE_INIT(oname.c_str());
    std::thread sem_waiter([&] { EXPECT_RC(0, rsem_wait(&s)); });
    std::thread barrier_waiter([&] {
        int r = rbarrier_wait(&b);
        EXPECT_TRUE(r == 0 || r == RBARRIER_SERIAL_THREAD) << r;
    });
    std::thread runner([&] { EXPECT_RC(0, ronce(&first, slow_routine)); });
    ASSERT_TRUE(wait_until([] { return once_running.load(); }, ms(5000)));
    std::thread once_waiter([&] { EXPECT_RC(0, ronce(&second, never_routine)); });
    /* Each wait, once it has lasted announce_wait, in its name's status. */
    for (const auto &expect : std::map<std::string, std::string>{
             { sname, "for permits" }, { bname, "at the barrier" }, { oname, "while another runs it" } }) {
        std::string out;
        EXPECT_TRUE(wait_until([&] {
            cli({ "status", expect.first }, &out);
            return out.find(expect.second) != std::string::npos &&
                   out.find("pid " + std::to_string(getpid())) != std::string::npos;
        }, ms(5000))) << expect.first << ":\n" << out;
    }
    std::string json;
    cli({ "status", "--json", sname }, &json);
    EXPECT_NE(std::string::npos, json.find("\"kind\":\"sem\"")) << json;
    ASSERT_RC(0, rsem_post(&s));
    int r = rbarrier_wait(&b);
    EXPECT_TRUE(r == 0 || r == RBARRIER_SERIAL_THREAD) << r;
    once_release = true;
    sem_waiter.join();
    barrier_waiter.join();
    runner.join();
    once_waiter.join();
    /* Ended with what they waited for: gone from status. */
    std::string out;
    EXPECT_TRUE(wait_until([&] {
        cli({ "status", sname }, &out);
        return out.find("for permits") == std::string::npos;
    }, ms(3000))) << out;
    rsem_destroy(&s);
    rbarrier_destroy(&b);
}

/* A wait is a record on the waiting thread's stack, linked into the
 * registry; a semaphore wait is a cancellation point.  A cancelled waiter
 * must take its record out as it unwinds: left in, the watchdog reads a
 * dead thread's stack at its next announcement (a crash under TSan, a
 * phantom waiter in status otherwise). */
TEST_F(Deadlocks, ACancelledSemaphoreWaiterLeavesStatusAndTheRegistryLivesOn)
{
    RMT_SKIP_CANCEL_UNDER_ASAN();
    std::string sname = lock_name("sem-cancel");
    static rsem_t s;
    ASSERT_RC(0, rsem_init(&s, sname.c_str(), 0, nullptr));
    pthread_t th;
    ASSERT_EQ(0, pthread_create(&th, nullptr, [](void *) -> void * {
        rsem_wait(&s);
        return nullptr;
    }, nullptr));
    std::string out;
    ASSERT_TRUE(wait_until([&] {
        cli({ "status", sname }, &out);
        return out.find("for permits") != std::string::npos;
    }, ms(5000))) << out;
    ASSERT_EQ(0, pthread_cancel(th));
    void *rc = nullptr;
    ASSERT_EQ(0, pthread_join(th, &rc));
    EXPECT_EQ(PTHREAD_CANCELED, rc);
    /* Another thread reuses the freed stack meanwhile (glibc's cache). */
    std::thread([] {
        volatile char scribble[64 * 1024];
        for (size_t i = 0; i < sizeof scribble; i++) scribble[i] = (char)0xa5;
    }).join();
    EXPECT_TRUE(wait_until([&] {
        cli({ "status", sname }, &out);
        return out.find("for permits") == std::string::npos;
    }, ms(4000))) << "the cancelled waiter is still announced:\n" << out;
    /* The registry still announces this process's holds afterwards. */
    std::string held = lock_name("after-cancel");
    rmutex_t m;
    ASSERT_RC(0, rmutex_init(&m, held.c_str(), nullptr));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_TRUE(wait_until([&] {
        cli({ "status", held }, &out);
        return out.find("pid " + std::to_string(getpid())) != std::string::npos;
    }, ms(5000))) << out;
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
    EXPECT_RC(0, rsem_destroy(&s));
}

} // namespace
