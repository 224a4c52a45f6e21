/* barrier_test.cc -- barriers (rbarrier_*) against a real Redis: every
 * return code, 50 generations of 6 members in 3 processes with exactly one
 * serial member each and nobody through early, a member killed with
 * kill -9, stopped with SIGSTOP past its lease, or timing out breaks the
 * generation for the others (EOWNERDEAD within one lease) and the next
 * works, CLIENT KILL storms (nobody counted twice, no wake-up lost),
 * cancellation, fork, PTHREAD_STACK_MIN stacks. */
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <mutex>

#include "barrier_util.h"
#include "../stack/small_stack.h"

namespace {

using namespace rmt;
using namespace rmt::barrier;

TEST_F(Barrier, BadInputIsEinvalAndNothingIsLeftBehind)
{
    std::string name = lock_name();
    rbarrier_t b, live;
    ASSERT_RC(0, init(&live, lock_name("live"), 2)); /* a name the process knows */
    EXPECT_RC(EINVAL, rbarrier_init(nullptr, name.c_str(), 2, nullptr));
    EXPECT_RC(EINVAL, rbarrier_init(&b, name.c_str(), 0, nullptr)) << "count 0";
    EXPECT_RC(EINVAL, rbarrier_init(&b, nullptr, 2, nullptr));
    EXPECT_RC(EINVAL, rbarrier_init(&b, "", 2, nullptr));
    EXPECT_RC(EINVAL, rbarrier_init(&b, "a{b", 2, nullptr)) << "braces that split the slots";
    rbarrierattr_t a;
    memset(&a, 0, sizeof a);
    EXPECT_RC(EINVAL, rbarrier_init(&b, name.c_str(), 2, &a)) << "attributes not initialized";
    unsigned long lease = 7;
    EXPECT_RC(EINVAL, rbarrierattr_setlease(&a, 1000));
    EXPECT_RC(EINVAL, rbarrierattr_getlease(&a, &lease));
    ASSERT_RC(0, rbarrierattr_init(&a));
    EXPECT_RC(0, rbarrierattr_getlease(&a, &lease));
    EXPECT_EQ(0u, lease);
    EXPECT_RC(0, rbarrierattr_setlease(&a, 1200));
    EXPECT_RC(0, rbarrierattr_getlease(&a, &lease));
    EXPECT_EQ(1200u, lease);
    EXPECT_RC(EINVAL, rbarrierattr_getlease(&a, nullptr));
    EXPECT_RC(0, rbarrierattr_destroy(&a));
    EXPECT_RC(EINVAL, rbarrierattr_destroy(&a));
    EXPECT_FALSE(redis().exists(state_key(name))) << "a refused init wrote to Redis";

    rbarrier_t zero;
    memset(&zero, 0, sizeof zero);
    EXPECT_RC(EINVAL, rbarrier_wait(&zero)) << "never initialized";
    EXPECT_RC(EINVAL, rbarrier_wait(nullptr));
    EXPECT_RC(EINVAL, rbarrier_destroy(&zero));
    EXPECT_RC(EINVAL, rbarrier_destroy(nullptr));

    ASSERT_RC(0, init(&b, name, 2));
    struct timespec bad = abs_after(CLOCK_REALTIME, 1000);
    bad.tv_nsec = 1000000000;
    EXPECT_RC(EINVAL, rbarrier_clockwait(&b, CLOCK_REALTIME, &bad));
    EXPECT_RC(EINVAL, rbarrier_clockwait(&b, CLOCK_REALTIME, nullptr));
    struct timespec ok = abs_after(CLOCK_MONOTONIC, 100);
    EXPECT_RC(EINVAL, rbarrier_clockwait(&b, CLOCK_PROCESS_CPUTIME_ID, &ok));
    rbarrier_t other;
    EXPECT_RC(EINVAL, init(&other, name, 3)) << "another count for the same name here";
    EXPECT_RC(0, rbarrier_destroy(&b));
    EXPECT_RC(EINVAL, rbarrier_destroy(&b)) << "destroyed twice";
    EXPECT_RC(EINVAL, rbarrier_wait(&b)) << "a wait on a destroyed barrier";
    EXPECT_EQ(0, redis().cmd({ "ZCARD", parts_key(name) }).integer())
        << "destroy did not leave the participants";
    EXPECT_RC(0, rbarrier_destroy(&live));
}

TEST_F(Barrier, AnotherCountIsEinvalAtInitInAnotherProcessAndAtTheWait)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name();
    int go[2];
    ASSERT_EQ(0, pipe(go));
    Forked child([&] { /* forked first: it knows nothing of the name but Redis's answer */
        char c;
        if (read(go[0], &c, 1) != 1) return 9;
        rbarrier_t mine;
        return init(&mine, name, 3) == EINVAL ? 0 : 10;
    });
    rbarrier_t b;
    ASSERT_RC(0, init(&b, name, 2));
    ASSERT_EQ(1, write(go[1], "g", 1));
    EXPECT_EQ(0, child.wait(ms(5000))) << "a second process joined with another count";
    close(go[0]);
    close(go[1]);
    /* The stored count changed under it (another deployment's): the wait
     * says so rather than waiting for members that will never come. */
    redis().cmd({ "HSET", state_key(name), "count", "5" });
    struct timespec t = abs_after(CLOCK_REALTIME, 2000);
    EXPECT_RC(EINVAL, rbarrier_clockwait(&b, CLOCK_REALTIME, &t));
    EXPECT_RC(0, rbarrier_destroy(&b));
}

TEST_F(Barrier, AKeyOfAnotherTypeIsEinvalNotAHang)
{
    std::string name = lock_name();
    redis().cmd({ "SET", state_key(name), "not a barrier" });
    rbarrier_t b;
    EXPECT_RC(EINVAL, init(&b, name, 2));
    redis().cmd({ "DEL", state_key(name) });
}

TEST_F(Barrier, CountOneIsAlwaysSerialAndDestroyWhileWaitedIsEbusy)
{
    std::string name = lock_name();
    rbarrier_t one;
    ASSERT_RC(0, init(&one, name, 1));
    for (int i = 0; i < 3; i++) EXPECT_RC(RBARRIER_SERIAL_THREAD, rbarrier_wait(&one));
    EXPECT_RC(0, rbarrier_destroy(&one));

    rbarrier_t b;
    ASSERT_RC(0, init(&b, lock_name("two"), 2));
    Async waiter([&] { return rbarrier_wait(&b); });
    ASSERT_TRUE(arrived(lock_name("two"), 1));
    EXPECT_RC(EBUSY, rbarrier_destroy(&b));
    int mine = rbarrier_wait(&b);
    ASSERT_TRUE(waiter.wait(ms(3000)));
    EXPECT_TRUE(passed(mine) && passed(waiter.rc()));
    EXPECT_EQ(1, serials({ mine, waiter.rc() })) << "exactly one serial member";
    EXPECT_RC(0, rbarrier_destroy(&b));
}

/* 6 members: 3 processes of 2 threads, 50 generations.  Before each wait a
 * member counts its arrival in Redis; after it, the count of its
 * generation must be 6 (nobody through early) and a serial member counts
 * itself: exactly one per generation. */
TEST_F(Barrier, SixMembersInThreeProcessesFiftyGenerationsOneSerialEachNobodyEarly)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    constexpr int kProcs = 3, kThreads = 2, kRounds = 50;
    std::string name = lock_name();
    std::string prefix = lock_name("count:");
    std::vector<std::unique_ptr<Forked>> procs;
    for (int p = 0; p < kProcs; p++)
        procs.push_back(std::make_unique<Forked>([&] {
            rbarrier_t b;
            if (init(&b, name, kProcs * kThreads)) return 10;
            std::atomic<int> failed{0};
            std::vector<std::thread> ts;
            for (int t = 0; t < kThreads; t++)
                ts.emplace_back([&] {
                    auto r = connect();
                    for (int k = 0; k < kRounds && !failed; k++) {
                        std::string gen = prefix + std::to_string(k);
                        r->cmd({ "INCR", gen + ":arrived" });
                        struct timespec t = abs_after(CLOCK_MONOTONIC, scaled(ms(10000)).count());
                        int rc = rbarrier_clockwait(&b, CLOCK_MONOTONIC, &t);
                        if (!passed(rc)) {
                            failed = 20;
                            break;
                        }
                        if (r->cmd({ "GET", gen + ":arrived" }).str() != "6") failed = 21;
                        if (rc == RBARRIER_SERIAL_THREAD) r->cmd({ "INCR", gen + ":serial" });
                    }
                });
            for (auto &t : ts) t.join();
            if (failed) return failed.load();
            return rbarrier_destroy(&b) ? 11 : 0;
        }));
    for (auto &p : procs) EXPECT_EQ(0, p->wait(ms(40000))) << "20: a wait failed; 21: through early";
    for (int k = 0; k < kRounds; k++)
        EXPECT_EQ("1", redis().cmd({ "GET", prefix + std::to_string(k) + ":serial" }).str())
            << "generation " << k << " had not exactly one serial member";
}

/* Members in a forked process that arrive and then are killed (kill -9):
 * the member waiting here gets EOWNERDEAD within one participant lease,
 * without anybody else calling; the next generation, with a new process,
 * fills. */
TEST_F(Barrier, AParticipantKilledWhileOthersWaitBreaksTheGenerationWithinOneLease)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name();
    rbarrier_t b;
    ASSERT_RC(0, init(&b, name, 3));
    Forked victim([&] { return member_once(name, 3); });
    Async survivor([&] { return rbarrier_wait(&b); });
    ASSERT_TRUE(arrived(name, 2));
    victim.kill9();
    auto killed = Clock::now();
    ASSERT_TRUE(survivor.wait(ms(kLeaseMs + 2000))) << "the survivor still waits";
    auto took = std::chrono::duration_cast<ms>(survivor.finished_at() - killed).count();
    EXPECT_RC(EOWNERDEAD, survivor.rc());
    EXPECT_LE(took, scaled(ms(kLeaseMs + 300)).count()) << "the death was seen late";
    RecordProperty("death_seen_ms", static_cast<int>(took));
    std::printf("[ figure ] kill -9 -> EOWNERDEAD in %lld ms (lease %d ms)\n",
                static_cast<long long>(took), kLeaseMs);

    /* The next generation: two threads here and a new process. */
    Forked newcomer([&] { return member_once(name, 3); });
    Async other([&] { return rbarrier_wait(&b); });
    int mine = rbarrier_wait(&b);
    ASSERT_TRUE(other.wait(ms(5000)));
    int nc = newcomer.wait(ms(5000));
    EXPECT_TRUE(passed(mine) && passed(other.rc()) && (nc == 0 || nc == 1))
        << mine << " " << other.rc() << " " << nc;
    EXPECT_EQ(1, serials({ mine, other.rc() }) + nc);
    EXPECT_RC(0, rbarrier_destroy(&b));
}

TEST_F(Barrier, ATimedWaitThatGivesUpBreaksTheGenerationForTheOthers)
{
    std::string name = lock_name();
    rbarrier_t b;
    ASSERT_RC(0, init(&b, name, 3));
    Async patient([&] { return rbarrier_wait(&b); });
    ASSERT_TRUE(arrived(name, 1));
    struct timespec t = abs_after(CLOCK_MONOTONIC, 300);
    auto start = Clock::now();
    EXPECT_RC(ETIMEDOUT, rbarrier_clockwait(&b, CLOCK_MONOTONIC, &t));
    EXPECT_GE(elapsed_ms(start), 250);
    ASSERT_TRUE(patient.wait(ms(1000))) << "the others were not told at once";
    EXPECT_RC(EOWNERDEAD, patient.rc());
    EXPECT_LT(std::chrono::duration_cast<ms>(patient.finished_at() - start).count(),
              scaled(ms(1000)).count());

    /* The next generation fills. */
    Async a([&] { return rbarrier_wait(&b); });
    Async c([&] { return rbarrier_wait(&b); });
    struct timespec t2 = abs_after(CLOCK_REALTIME, 5000);
    int mine = rbarrier_clockwait(&b, CLOCK_REALTIME, &t2);
    ASSERT_TRUE(a.wait(ms(3000)) && c.wait(ms(3000)));
    EXPECT_TRUE(passed(mine) && passed(a.rc()) && passed(c.rc()));
    EXPECT_EQ(1, serials({ mine, a.rc(), c.rc() }));
    EXPECT_RC(0, rbarrier_destroy(&b));
}

TEST_F(Barrier, AMemberStoppedPastItsLeaseBreaksTheGeneration)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name();
    rbarrier_t b;
    ASSERT_RC(0, init(&b, name, 3));
    Forked stopped([&] { return member_once(name, 3); });
    Async here([&] { return rbarrier_wait(&b); });
    ASSERT_TRUE(arrived(name, 2));
    kill(stopped.pid(), SIGSTOP);
    auto start = Clock::now();
    ASSERT_TRUE(here.wait(ms(kLeaseMs + 2000)));
    EXPECT_RC(EOWNERDEAD, here.rc());
    EXPECT_LE(elapsed_ms(start), scaled(ms(kLeaseMs + 300)).count());
    kill(stopped.pid(), SIGCONT);
    EXPECT_EQ(2, stopped.wait(ms(5000))) << "the stopped member did not learn that its "
                                            "generation was broken";
    EXPECT_RC(0, rbarrier_destroy(&b));
}

/* 4 threads, 40 generations, while another thread kills every client
 * connection (commands and pub/sub) every few ms: each wait passes, exactly
 * one serial member per generation, and nobody passes before the other
 * three arrived -- an arrival counted twice would let one through early. */
TEST_F(Barrier, ClientKillStormCountsNobodyTwiceAndLosesNoWakeUp)
{
    constexpr int kThreads = 4, kRounds = 40;
    std::string name = lock_name();
    rbarrier_t b;
    ASSERT_RC(0, init(&b, name, kThreads));
    std::atomic<int> arrived[kRounds] = {}, serial[kRounds] = {};
    std::atomic<int> early{0}, failed{0};
    std::atomic<bool> stop{false};
    std::atomic<int> kills{0};
    std::mutex why_mu;
    std::string why; /* the first failed wait's detail */
    std::thread killer([&] {
        auto r = connect();
        while (!stop) {
            r->cmd({ "CLIENT", "KILL", "TYPE", kills % 2 ? "pubsub" : "normal", "SKIPME", "yes" });
            kills++;
            std::this_thread::sleep_for(std::chrono::milliseconds(3)); /* the storm's pace */
        }
    });
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; t++)
        ts.emplace_back([&] {
            for (int k = 0; k < kRounds && !failed; k++) {
                arrived[k]++;
                struct timespec t = abs_after(CLOCK_MONOTONIC, scaled(ms(10000)).count());
                int rc = rbarrier_clockwait(&b, CLOCK_MONOTONIC, &t);
                if (!passed(rc)) {
                    std::lock_guard<std::mutex> g(why_mu);
                    if (!failed) why = std::string(rmutex_detail()) + " (generation " +
                                       std::to_string(k) + ")";
                    failed = rc;
                    return;
                }
                if (arrived[k] != kThreads) early++;
                if (rc == RBARRIER_SERIAL_THREAD) serial[k]++;
            }
        });
    for (auto &t : ts) t.join();
    stop = true;
    killer.join();
    EXPECT_RC(0, failed.load()) << why;
    EXPECT_EQ(0, early.load()) << "a member passed before the others arrived";
    for (int k = 0; k < kRounds; k++) EXPECT_EQ(1, serial[k].load()) << "generation " << k;
    EXPECT_GE(kills.load(), 10) << "the storm was too short to test anything";
    EXPECT_RC(0, rbarrier_destroy(&b));
}

static void *cancellable_wait(void *arg)
{
    rbarrier_wait(static_cast<rbarrier_t *>(arg));
    return nullptr;
}

TEST_F(Barrier, ACancelledWaiterWithdrawsAndBreaksItsGeneration)
{
    RMT_SKIP_CANCEL_UNDER_ASAN();
    std::string name = lock_name();
    rbarrier_t b;
    ASSERT_RC(0, init(&b, name, 3));
    pthread_t t;
    ASSERT_EQ(0, pthread_create(&t, nullptr, cancellable_wait, &b));
    Async other([&] { return rbarrier_wait(&b); });
    ASSERT_TRUE(arrived(name, 2));
    pthread_cancel(t);
    void *res = nullptr;
    pthread_join(t, &res);
    EXPECT_EQ(PTHREAD_CANCELED, res);
    ASSERT_TRUE(other.wait(ms(1000))) << "the cancelled member's generation stayed open";
    EXPECT_RC(EOWNERDEAD, other.rc());
    EXPECT_RC(0, rbarrier_destroy(&b)) << "the cancelled waiter still counts as a user";
}

/* The child arrives last in both generations (so it never waits: its
 * arrival alone made it a participant), then destroys the handle it got
 * from its parent: it must leave, and only itself. */
TEST_F(Barrier, AForkedChildWaitsOnItsParentsHandleAndLeavesAtItsDestroy)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name();
    rbarrier_t b;
    ASSERT_RC(0, init(&b, name, 2));
    int go[2];
    ASSERT_EQ(0, pipe(go));
    Forked child([&] {
        int rc[2];
        for (int &r : rc) {
            char c;
            if (read(go[0], &c, 1) != 1) return 9;
            r = rbarrier_wait(&b);
        }
        if (!passed(rc[0]) || !passed(rc[1])) return 20;
        return rbarrier_destroy(&b) ? 21 : serials({ rc[0] }) + 2 * serials({ rc[1] });
    });
    int rc[2];
    for (int k = 0; k < 2; k++) {
        Async here([&] { return rbarrier_wait(&b); });
        ASSERT_TRUE(arrived(name, 2 * k + 1));
        ASSERT_EQ(1, write(go[1], "g", 1));
        ASSERT_TRUE(here.wait(ms(5000)));
        rc[k] = here.rc();
    }
    EXPECT_EQ(3, child.wait(ms(5000))) << "the child, last to arrive, was not serial twice";
    EXPECT_RC(0, rc[0]);
    EXPECT_RC(0, rc[1]);
    EXPECT_EQ(1, redis().cmd({ "ZCARD", parts_key(name) }).integer())
        << "the child did not leave at its destroy, or the parent went with it";
    EXPECT_RC(0, rbarrier_destroy(&b));
    close(go[0]);
    close(go[1]);
}

/* rmutex_shutdown frees the watchdog's entries: a barrier still
 * initialized must not keep its participant entry's pointer (its next
 * wait or its destroy would use freed memory), and after a new
 * rmutex_configure its lease is renewed again. */
TEST_F(Barrier, ShutdownWithABarrierInitializedLeavesItUsable)
{
    std::string name = lock_name();
    rbarrier_t b;
    ASSERT_RC(0, init(&b, name, 2));
    ASSERT_RC(0, rmutex_shutdown());
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    Async other([&] { return rbarrier_wait(&b); });
    int mine = rbarrier_wait(&b);
    ASSERT_TRUE(other.wait(ms(3000)));
    EXPECT_EQ(1, serials({ mine, other.rc() }));
    auto score = [&] {
        auto r = redis().cmd({ "ZRANGE", parts_key(name), "0", "0", "WITHSCORES" });
        return r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? std::stoll(r->element[1]->str)
                                                                     : -1LL;
    };
    long long first = score();
    ASSERT_GT(first, 0);
    EXPECT_TRUE(wait_until([&] { return score() > first; }, ms(kLeaseMs)))
        << "the participant lease is not renewed after the shutdown";
    EXPECT_RC(0, rbarrier_destroy(&b));
    EXPECT_EQ(0, redis().cmd({ "ZCARD", parts_key(name) }).integer());
}

struct SmallJob {
    rbarrier_t *b;
    int rc[3];
};

static void *small_waits(void *arg)
{
    auto *j = static_cast<SmallJob *>(arg);
    for (int i = 0; i < 3; i++) j->rc[i] = rbarrier_wait(j->b);
    return nullptr;
}

TEST_F(Barrier, WaitsWorkOnPthreadStackMinThreads)
{
    std::string name = lock_name();
    rbarrier_t b;
    ASSERT_RC(0, init(&b, name, 2));
    SmallJob x{ &b, {} }, y{ &b, {} };
    std::thread tx([&] { small_stack_run(small_waits, &x); });
    std::thread ty([&] { small_stack_run(small_waits, &y); });
    tx.join();
    ty.join();
    for (int i = 0; i < 3; i++) {
        EXPECT_TRUE(passed(x.rc[i]) && passed(y.rc[i])) << x.rc[i] << " " << y.rc[i];
        EXPECT_EQ(1, serials({ x.rc[i], y.rc[i] }));
    }
    EXPECT_RC(0, rbarrier_destroy(&b));
}

} // namespace
