/* once_test.cc -- ronce against a real Redis: 16 callers in 4 processes
 * run the routine exactly once and all return after it finished; a runner
 * killed with kill -9 mid-routine is replaced within one lease, a
 * cancelled one at once; the fast path makes no round trip; ronce_reset
 * makes it run again; a recursive call is EDEADLK; the return codes. */
#include <chrono>
#include <cstring>

#include "barrier_util.h"
#include "../stack/small_stack.h"

namespace {

using namespace rmt;
using namespace rmt::barrier;

/* What the routines (void(void)) reach: set by each test before any call. */
struct Stage {
    std::string host, password, runs, finished;
    int port = 0;
    int work_ms = 0;
    std::atomic<int> pipe_fd{-1}; /* a byte written as the routine starts, if >= 0 */
    ronce_t *self = nullptr; /* the once the recursive routine calls again */
    std::atomic<int> inner{INT32_MIN};
};
Stage stage;

/* The routine: count the run in Redis, work a while, then mark it
 * finished -- the last thing it does. */
void routine()
{
    Redis r(stage.host, stage.port, stage.password);
    r.cmd({ "INCR", stage.runs });
    if (stage.pipe_fd >= 0) (void)!write(stage.pipe_fd, "r", 1);
    /* The routine's work (what callers must wait for), not a wait on a condition. */
    std::this_thread::sleep_for(std::chrono::milliseconds(stage.work_ms));
    r.cmd({ "SET", stage.finished, "1" });
}

/* A routine that never finishes by itself: it blocks in a cancellation
 * point (a condition wait: ThreadSanitizer follows a cancellation there,
 * not one in pause()). */
pthread_mutex_t stuck_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t stuck_cv = PTHREAD_COND_INITIALIZER;
void unlock_stuck(void *) { pthread_mutex_unlock(&stuck_mu); }
void stuck_routine()
{
    {
        Redis r(stage.host, stage.port, stage.password);
        r.cmd({ "INCR", stage.runs });
    }
    if (stage.pipe_fd >= 0) (void)!write(stage.pipe_fd, "s", 1);
    pthread_mutex_lock(&stuck_mu);
    pthread_cleanup_push(unlock_stuck, nullptr);
    for (;;) pthread_cond_wait(&stuck_cv, &stuck_mu);
    pthread_cleanup_pop(1);
}

void recursive_routine() { stage.inner = ronce(stage.self, routine); }

/* For a PTHREAD_STACK_MIN thread: no hiredis call (its read buffer alone
 * is 16 KiB of stack). */
std::atomic<int> small_runs{0};
void small_routine() { small_runs++; }

class Once : public Barrier {
  protected:
    void SetUp() override
    {
        Barrier::SetUp();
        name_ = lock_name();
        stage.host = host();
        stage.port = port();
        stage.password = password_;
        stage.runs = lock_name("runs");
        stage.finished = lock_name("finished");
        stage.work_ms = 0;
        stage.pipe_fd = -1;
        stage.inner = INT32_MIN;
    }
    long long runs()
    {
        std::string v = redis().cmd({ "GET", stage.runs }).str();
        return v.empty() ? 0 : std::stoll(v);
    }
    bool finished() { return redis().get(stage.finished).value_or("") == "1"; }
    std::string name_;
};

TEST_F(Once, BadInputIsEinvalAndResetOfWhatDidNotRunIsEnoent)
{
    ronce_t o = RONCE_INIT(name_.c_str());
    EXPECT_RC(EINVAL, ronce(nullptr, routine));
    EXPECT_RC(EINVAL, ronce(&o, nullptr));
    ronce_t unnamed = RONCE_INIT(nullptr);
    EXPECT_RC(EINVAL, ronce(&unnamed, routine));
    ronce_t braces = RONCE_INIT("a{b");
    EXPECT_RC(EINVAL, ronce(&braces, routine));
    EXPECT_RC(EINVAL, ronce_reset(nullptr));
    EXPECT_RC(EINVAL, ronce_reset(""));
    EXPECT_RC(ENOENT, ronce_reset(name_.c_str()));
    redis().cmd({ "HSET", "rmutex_once:{" + name_ + "}", "a", "b" });
    EXPECT_RC(EINVAL, ronce(&o, routine)) << "a key of another type";
    EXPECT_RC(EINVAL, ronce_reset(name_.c_str()));
    EXPECT_EQ(0, runs());
    redis().cmd({ "DEL", "rmutex_once:{" + name_ + "}" });
}

/* 4 processes x 4 threads at once. */
TEST_F(Once, SixteenCallersInFourProcessesRunTheRoutineOnceAndReturnAfterIt)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    stage.work_ms = 300;
    std::vector<std::unique_ptr<Forked>> procs;
    for (int p = 0; p < 4; p++)
        procs.push_back(std::make_unique<Forked>([&] {
            static ronce_t o = RONCE_INIT(name_.c_str());
            std::atomic<int> failed{0};
            std::vector<std::thread> ts;
            for (int t = 0; t < 4; t++)
                ts.emplace_back([&] {
                    Redis r(stage.host, stage.port, stage.password);
                    if (ronce(&o, routine)) failed = 20;
                    else if (r.get(stage.finished).value_or("") != "1") failed = 21;
                });
            for (auto &t : ts) t.join();
            return failed.load();
        }));
    for (auto &p : procs) EXPECT_EQ(0, p->wait(ms(10000))) << "20: failed; 21: returned early";
    EXPECT_EQ(1, runs()) << "the routine ran more than once, or not at all";
    EXPECT_EQ("done", redis().get("rmutex_once:{" + name_ + "}").value_or(""));
    EXPECT_FALSE(redis().exists("rmutex_once_run:{" + name_ + "}"));
}

TEST_F(Once, ARunnerKilledMidRoutineIsReplacedWithinOneLease)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    int up[2];
    ASSERT_EQ(0, pipe(up));
    stage.pipe_fd = up[1];
    Forked runner([&] {
        ronce_t o = RONCE_INIT(name_.c_str());
        ronce(&o, stuck_routine);
        return 10;
    });
    stage.pipe_fd = -1;
    ASSERT_TRUE(readable_within(up[0], ms(5000))) << "the runner did not start";
    ronce_t o = RONCE_INIT(name_.c_str());
    Async waiter([&] { return ronce(&o, routine); });
    ASSERT_FALSE(waiter.wait(ms(300))) << "a caller returned while the routine ran elsewhere";
    runner.kill9();
    auto killed = Clock::now();
    ASSERT_TRUE(waiter.wait(ms(kLeaseMs + 2000)));
    EXPECT_RC(0, waiter.rc());
    auto took = std::chrono::duration_cast<ms>(waiter.finished_at() - killed).count();
    EXPECT_LE(took, scaled(ms(kLeaseMs + 300)).count()) << "the dead runner was replaced late";
    std::printf("[ figure ] once: kill -9 of the runner -> routine done elsewhere in %lld ms "
                "(lease %d ms)\n", static_cast<long long>(took), kLeaseMs);
    EXPECT_EQ(2, runs()) << "the killed run and the one that replaced it";
    EXPECT_TRUE(finished());
    close(up[0]);
    close(up[1]);
}

static void *run_stuck(void *arg)
{
    ronce(static_cast<ronce_t *>(arg), stuck_routine);
    return nullptr;
}

TEST_F(Once, ACancelledRunnerGivesItsTurnUpAtOnce)
{
    RMT_SKIP_CANCEL_UNDER_ASAN();
    int up[2];
    ASSERT_EQ(0, pipe(up));
    stage.pipe_fd = up[1];
    ronce_t o = RONCE_INIT(name_.c_str());
    pthread_t t;
    ASSERT_EQ(0, pthread_create(&t, nullptr, run_stuck, &o));
    ASSERT_TRUE(readable_within(up[0], ms(5000)));
    stage.pipe_fd = -1;
    ronce_t o2 = RONCE_INIT(name_.c_str());
    Async waiter([&] { return ronce(&o2, routine); });
    ASSERT_FALSE(waiter.wait(ms(200)));
    auto start = Clock::now();
    pthread_cancel(t);
    void *res = nullptr;
    pthread_join(t, &res);
    EXPECT_EQ(PTHREAD_CANCELED, res);
    ASSERT_TRUE(waiter.wait(ms(1000))) << "the cancelled runner's turn was not given up";
    EXPECT_RC(0, waiter.rc());
    EXPECT_LT(std::chrono::duration_cast<ms>(waiter.finished_at() - start).count(),
              scaled(ms(kLeaseMs / 2)).count()) << "waited for the lease, not the message";
    EXPECT_EQ(2, runs());
    EXPECT_TRUE(finished());
    close(up[0]);
    close(up[1]);
}

TEST_F(Once, TheFastPathMakesNoRoundTripAndResetMakesItRunAgain)
{
    ronce_t o = RONCE_INIT(name_.c_str());
    ASSERT_RC(0, ronce(&o, routine));
    EXPECT_EQ(1, runs());
    auto before = stats().round_trips;
    for (int i = 0; i < 10000; i++) ASSERT_RC(0, ronce(&o, routine));
    EXPECT_EQ(before, stats().round_trips) << "a call on a once seen done asked Redis";
    ronce_t fresh = RONCE_INIT(name_.c_str()); /* not seen done here: asks, once */
    EXPECT_RC(0, ronce(&fresh, routine));
    EXPECT_EQ(1, runs());

    EXPECT_RC(0, ronce_reset(name_.c_str()));
    EXPECT_RC(ENOENT, ronce_reset(name_.c_str()));
    ronce_t again = RONCE_INIT(name_.c_str());
    EXPECT_RC(0, ronce(&again, routine));
    EXPECT_EQ(2, runs()) << "reset did not make it run again";
    EXPECT_RC(0, ronce(&o, routine)) << "seen done here before the reset: no round trip";
    EXPECT_EQ(2, runs());
}

TEST_F(Once, ACallFromInsideItsOwnRoutineIsEdeadlk)
{
    ronce_t o = RONCE_INIT(name_.c_str());
    stage.self = &o;
    Async call([&] { return ronce(&o, recursive_routine); });
    ASSERT_TRUE(call.wait(ms(1000))) << "the recursive call deadlocked";
    EXPECT_RC(0, call.rc());
    EXPECT_RC(EDEADLK, stage.inner.load());
    std::string other_name = lock_name("other"), outer_name = lock_name("outer");
    ronce_t other = RONCE_INIT(other_name.c_str());
    stage.self = &other; /* another name from inside: runs */
    ronce_t outer = RONCE_INIT(outer_name.c_str());
    EXPECT_RC(0, ronce(&outer, recursive_routine));
    EXPECT_RC(0, stage.inner.load());
}

static void *small_once(void *arg)
{
    *static_cast<int *>(arg) = ronce_reset(stage.runs.c_str()) == ENOENT ? 0 : -1;
    return nullptr;
}

TEST_F(Once, RonceWorksOnAPthreadStackMinThread)
{
    struct Job {
        ronce_t *o;
        int rc;
    };
    ronce_t o = RONCE_INIT(name_.c_str());
    Job j{ &o, INT32_MIN };
    small_stack_run([](void *arg) -> void * {
        auto *jj = static_cast<Job *>(arg);
        jj->rc = ronce(jj->o, small_routine);
        return nullptr;
    }, &j);
    EXPECT_RC(0, j.rc);
    EXPECT_EQ(1, small_runs.load());
    EXPECT_EQ("done", redis().get("rmutex_once:{" + name_ + "}").value_or(""));
    int reset = 1;
    small_stack_run(small_once, &reset);
    EXPECT_EQ(0, reset);
}

} // namespace
