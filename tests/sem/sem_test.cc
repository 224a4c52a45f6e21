/* sem_test.cc -- counting semaphores (rsem_*) against a real Redis: every
 * return code of the API, glibc's deadline rules, exclusion of N permits
 * across processes and threads, a kill -9'd holder's permits reaching a
 * waiter within one lease, a holder stopped past its lease (its posts
 * EPERM, nothing counted twice, the lost callback), CLIENT KILL storms with
 * exact accounting, fair order (a wait for 3 not passed by later waits for
 * 1), reclaim off, fork, a small stack, cancellation, and the deferred
 * post from a signal handler.  Other processes are fork()ed copies of this
 * program: they report through Redis keys. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "harness.h"
extern "C" {
}

namespace {

using namespace rmt;

class Sem : public RedisTest {
  protected:
    Sem() : RedisTest(false, "lease=1500&waiter_lease=1000") {}

    void init(rsem_t *s, const std::string &name, unsigned value, int fair = 0,
              unsigned long lease = 0, int reclaim = 1)
    {
        rsemattr_t a;
        ASSERT_RC(0, rsemattr_init(&a));
        ASSERT_RC(0, rsemattr_setfair(&a, fair));
        ASSERT_RC(0, rsemattr_setlease(&a, lease));
        ASSERT_RC(0, rsemattr_setreclaim(&a, reclaim));
        ASSERT_RC(0, rsem_init(s, name.c_str(), value, &a));
        ASSERT_RC(0, rsemattr_destroy(&a));
    }

    int value(rsem_t *s)
    {
        int v = -1;
        int r = rsem_getvalue(s, &v);
        return r ? -1000 - r : v;
    }

    /* A new connection (for a forked child). */
    std::unique_ptr<Redis> conn() { return std::make_unique<Redis>(host_, port_, password_); }

    /* Run fn in a fork()ed child, which exits with fn's result. */
    pid_t fork_run(const std::function<int()> &fn)
    {
        fflush(nullptr);
        pid_t pid = fork();
        if (pid == 0) _exit(fn());
        return pid;
    }

    bool key_is(const std::string &key, const std::string &v, ms bound = ms(5000))
    {
        return wait_until([&] { return redis().get(key) == v; }, bound);
    }

    long long queued(const std::string &name)
    {
        return redis().cmd({ "ZCARD", "rmutex_sem_queue:{" + name + "}" }).integer();
    }
};

TEST_F(Sem, EveryReturnCodeOfTheApiTable)
{
    std::string name = lock_name();
    rsem_t s, t;
    rsemattr_t a;
    EXPECT_RC(EINVAL, rsemattr_init(nullptr));
    ASSERT_RC(0, rsemattr_init(&a));
    int v;
    unsigned long l;
    EXPECT_RC(0, rsemattr_getfair(&a, &v));
    EXPECT_EQ(0, v);
    EXPECT_RC(0, rsemattr_getreclaim(&a, &v));
    EXPECT_EQ(1, v) << "reclaim is the default";
    EXPECT_RC(0, rsemattr_getlease(&a, &l));
    EXPECT_EQ(0u, l);
    EXPECT_RC(EINVAL, rsemattr_setfair(&a, 2));
    EXPECT_RC(EINVAL, rsemattr_setreclaim(&a, -1));
    EXPECT_RC(EINVAL, rsemattr_setlease(&a, 1ul << 40));
    EXPECT_RC(EINVAL, rsemattr_getfair(&a, nullptr));
    EXPECT_RC(0, rsemattr_destroy(&a));
    EXPECT_RC(EINVAL, rsemattr_setfair(&a, 1)) << "a destroyed attribute object";
    EXPECT_RC(EINVAL, rsem_init(&s, name.c_str(), 1, &a)) << "attributes not initialized";

    EXPECT_RC(EINVAL, rsem_init(nullptr, name.c_str(), 1, nullptr));
    EXPECT_RC(EINVAL, rsem_init(&s, nullptr, 1, nullptr));
    EXPECT_RC(EINVAL, rsem_init(&s, "", 1, nullptr));
    EXPECT_RC(EINVAL, rsem_init(&s, "a{b", 1, nullptr)) << "braces that split the slot";
    EXPECT_RC(EINVAL, rsem_init(&s, name.c_str(), RSEM_VALUE_MAX + 1u, nullptr));
    EXPECT_RC(EINVAL, rsem_unlink(nullptr));
    EXPECT_RC(ENOENT, rsem_unlink(name.c_str())) << "nothing by that name yet";

    errno = 1234;
    ASSERT_RC(0, rsem_init(&s, name.c_str(), 2, nullptr));
    EXPECT_EQ(1234, errno) << "errno changed";
    EXPECT_RC(EINVAL, rsem_wait_n(&s, 0, CLOCK_REALTIME, nullptr));
    EXPECT_RC(EINVAL, rsem_wait_n(&s, RSEM_VALUE_MAX + 1u, CLOCK_REALTIME, nullptr));
    EXPECT_RC(EINVAL, rsem_post_n(&s, 0));
    EXPECT_RC(EINVAL, rsem_getvalue(&s, nullptr));
    EXPECT_RC(EINVAL, rsem_clockwait(&s, CLOCK_PROCESS_CPUTIME_ID, nullptr));
    struct timespec bad = { time(nullptr) + 10, 1000000000 };
    EXPECT_RC(EINVAL, rsem_clockwait(&s, CLOCK_PROCESS_CPUTIME_ID, &bad));
    EXPECT_EQ(2, value(&s)) << "the first user gives the initial value";
    /* glibc: a free permit is taken whatever the deadline says. */
    EXPECT_RC(0, rsem_timedwait(&s, &bad)) << "tv_nsec >= 1e9 with a free permit";
    struct timespec past = { 1, 0 };
    EXPECT_RC(0, rsem_timedwait(&s, &past)) << "a past deadline with a free permit";
    EXPECT_EQ(0, value(&s));
    EXPECT_RC(EINVAL, rsem_timedwait(&s, &bad)) << "tv_nsec >= 1e9 when it would block";
    EXPECT_RC(ETIMEDOUT, rsem_timedwait(&s, &past));
    EXPECT_RC(EBUSY, rsem_trywait(&s)) << "no permit free: as rmutex_trylock";
    struct timespec soon = abs_after(CLOCK_MONOTONIC, 200);
    auto t0 = Clock::now();
    EXPECT_RC(ETIMEDOUT, rsem_clockwait(&s, CLOCK_MONOTONIC, &soon));
    EXPECT_GE(elapsed_ms(t0), 150) << "timed out early";
    EXPECT_RC(ETIMEDOUT, rsem_wait_n(&s, 1, CLOCK_REALTIME, &past)) << "a past abstime is a try";

    ASSERT_RC(0, rsem_init(&t, name.c_str(), 99, nullptr));
    EXPECT_EQ(0, value(&t)) << "a second handle joins the name as it is";
    EXPECT_RC(0, rsem_post_n(&s, 3));
    EXPECT_EQ(3, value(&t));
    EXPECT_RC(0, rsem_post_n(&s, RSEM_VALUE_MAX - 3));
    EXPECT_RC(EOVERFLOW, rsem_post(&s));
    EXPECT_EQ(int(RSEM_VALUE_MAX), value(&s)) << "an overflowing post changed the value";

    /* EBUSY: destroy while a thread waits on the handle. */
    std::string other = lock_name("busy");
    rsem_t b;
    ASSERT_RC(0, rsem_init(&b, other.c_str(), 0, nullptr));
    Async waiter([&] { return rsem_wait(&b); });
    ASSERT_TRUE(wait_until([&] { return stats().waiting == 1; }, ms(3000)));
    EXPECT_RC(EBUSY, rsem_destroy(&b));
    EXPECT_RC(0, rsem_post(&b));
    ASSERT_TRUE(waiter.wait(ms(3000)));
    EXPECT_RC(0, waiter.rc());
    EXPECT_RC(0, rsem_post(&b)) << "(the permit the waiter took)";
    EXPECT_RC(0, rsem_destroy(&b));
    EXPECT_RC(EINVAL, rsem_post(&b)) << "a destroyed semaphore";
    EXPECT_RC(EINVAL, rsem_post(nullptr));
    rsem_t zero = {};
    EXPECT_RC(EINVAL, rsem_trywait(&zero)) << "never initialized";

    /* A static initializer. */
    static rsem_t st = RSEM_INITIALIZER("rmt:sem:static", 1);
    rsem_unlink("rmt:sem:static");
    EXPECT_RC(0, rsem_trywait(&st));
    EXPECT_RC(EBUSY, rsem_trywait(&st));
    EXPECT_RC(0, rsem_post(&st));

    /* A key of another type under the name. */
    std::string wrong = lock_name("wrong");
    redis().cmd({ "SET", "rmutex_sem:{" + wrong + "}", "x" });
    rsem_t w;
    ASSERT_RC(0, rsem_init(&w, wrong.c_str(), 1, nullptr));
    EXPECT_RC(EINVAL, rsem_trywait(&w));
    EXPECT_NE(nullptr, strstr(rmutex_detail(), "WRONGTYPE")) << rmutex_detail();
    EXPECT_RC(EINVAL, rsem_post(&w));
    EXPECT_RC(0, rsem_destroy(&w));

    EXPECT_RC(0, rsem_destroy(&s));
    EXPECT_RC(0, rsem_destroy(&t));
    EXPECT_RC(0, rsem_unlink(name.c_str()));
    EXPECT_FALSE(redis().exists("rmutex_sem:{" + name + "}"));
    EXPECT_RC(ENOENT, rsem_unlink(name.c_str()));
}

TEST_F(Sem, ThreePermitsNeverLetAFourthInAcrossProcessesAndThreads)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name(), inside = name + ":inside", over = name + ":over";
    rsem_t s;
    init(&s, name, 3);
    ASSERT_EQ(3, value(&s));
    const int rounds = 15;
    std::vector<pid_t> kids;
    for (int p = 0; p < 4; p++)
        kids.push_back(fork_run([&] {
            auto r = conn();
            std::vector<std::thread> ts;
            std::atomic<int> bad{ 0 };
            for (int t = 0; t < 3; t++)
                ts.emplace_back([&] {
                    for (int i = 0; i < rounds; i++) {
                        if (rsem_wait(&s)) { bad++; return; }
                        Redis c(host_, port_, password_);
                        if (c.cmd({ "INCR", inside }).integer() > 3) c.cmd({ "INCR", over });
                        c.cmd({ "DECR", inside });
                        if (rsem_post(&s)) { bad++; return; }
                    }
                });
            for (auto &t : ts) t.join();
            return bad.load() ? 1 : 0;
        }));
    for (pid_t k : kids) {
        auto st = wait_exit(k, ms(50000));
        ASSERT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "a child failed";
    }
    EXPECT_FALSE(redis().exists(over)) << "more than 3 were inside at once";
    EXPECT_EQ(3, value(&s)) << "the final value is not exact";
    EXPECT_EQ(0, redis().cmd({ "HLEN", "rmutex_sem_held:{" + name + "}" }).integer());
    EXPECT_RC(0, rsem_destroy(&s));
}

TEST_F(Sem, AKilledHoldersPermitsReachAWaiterInAnotherProcessWithinOneLease)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name(), flag = name + ":flag";
    rsem_t s;
    init(&s, name, 2);
    pid_t kid = fork_run([&] {
        int r = rsem_wait_n(&s, 2, CLOCK_REALTIME, nullptr);
        conn()->cmd({ "SET", flag, r ? "failed" : "held" });
        for (;;) pause();
        return 0;
    });
    ASSERT_TRUE(key_is(flag, "held"));
    EXPECT_EQ(0, value(&s));
    Async waiter([&] { return rsem_wait_n(&s, 2, CLOCK_REALTIME, nullptr); });
    EXPECT_FALSE(waiter.wait(ms(300))) << "got permits that were held";
    auto t0 = Clock::now();
    kill(kid, SIGKILL);
    wait_exit(kid, ms(3000));
    ASSERT_TRUE(waiter.wait(ms(1500 + 1000))) << "the dead holder's permits did not come back";
    auto took = std::chrono::duration_cast<ms>(waiter.finished_at() - t0).count();
    printf("permit reclaim after kill -9: %lld ms (lease 1500 ms)\n", (long long)took);
    EXPECT_RC(0, waiter.rc());
    EXPECT_LE(took, scaled(ms(1500 + 500)).count()) << "later than one lease";
    EXPECT_EQ(0, value(&s));
    EXPECT_RC(0, rsem_post_n(&s, 2));
    EXPECT_EQ(2, value(&s)) << "the value is not exact";
    EXPECT_RC(0, rsem_destroy(&s));
}

std::atomic<int> lost_calls{ 0 };
std::string lost_name;
void on_lost(rmutex_t *m, const char *name, void *)
{
    if (!m) lost_name = name;
    lost_calls++;
}

TEST_F(Sem, AHolderStoppedPastItsLeaseGetsEpermOnItsPostsAndNothingIsCountedTwice)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name(), flag = name + ":flag";
    rsem_t s;
    init(&s, name, 2);
    pid_t kid = fork_run([&] {
        lost_calls = 0;
        rmutex_set_lost_callback(on_lost, nullptr);
        auto r = conn();
        if (rsem_wait_n(&s, 2, CLOCK_REALTIME, nullptr)) return 1;
        r->cmd({ "SET", flag, "held" });
        while (r->get(flag) != std::string("post")) usleep(10000);
        int a = rsem_post(&s), b = rsem_post(&s), c = rsem_post(&s);
        wait_until([] { return lost_calls.load() > 0; }, ms(3000));
        r->cmd({ "SET", flag,
                 "rc " + err_name(a) + " " + err_name(b) + " " + err_name(c) + " lost " +
                     std::to_string(lost_calls.load()) + " " + lost_name });
        return 0;
    });
    ASSERT_TRUE(key_is(flag, "held"));
    kill(kid, SIGSTOP);
    auto t0 = Clock::now();
    ASSERT_RC(0, rsem_wait_n(&s, 2, CLOCK_REALTIME, nullptr)) << "the stopped holder's permits";
    EXPECT_LE(elapsed_ms(t0), scaled(ms(2500)).count());
    wait_until([&] { return elapsed_ms(t0) >= 3000; }, ms(4000)); /* stopped 3 s in all */
    kill(kid, SIGCONT);
    redis().cmd({ "SET", flag, "post" });
    ASSERT_TRUE(wait_until([&] { return redis().get(flag)->rfind("rc", 0) == 0; }, ms(8000)));
    std::string got = *redis().get(flag);
    EXPECT_EQ("rc " + err_name(EPERM) + " " + err_name(EPERM) + " " + err_name(0) + " lost 1 " + name,
              got) << "two posts give back the two lost permits, the third adds one";
    auto st = wait_exit(kid, ms(3000));
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
    EXPECT_EQ(1, value(&s)) << "the lost permits were counted twice, or not at all";
    EXPECT_RC(0, rsem_post_n(&s, 2));
    EXPECT_EQ(3, value(&s));
    EXPECT_RC(0, rsem_destroy(&s));
}

TEST_F(Sem, ClientKillStormDuringWaitPostLoopsLeavesTheValueExact)
{
    std::string name = lock_name();
    rsem_t s;
    init(&s, name, 2);
    std::atomic<bool> stop{ false };
    std::atomic<int> errors{ 0 }, pairs{ 0 };
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
        ts.emplace_back([&] {
            while (!stop) {
                int r = rsem_wait(&s);
                if (r) { errors++; continue; }
                while ((r = rsem_post(&s)) && r != EPERM) { errors++; }
                pairs++;
            }
        });
    auto t0 = Clock::now();
    while (elapsed_ms(t0) < 3000) {
        redis().cmd({ "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes" });
        redis().cmd({ "CLIENT", "KILL", "TYPE", "pubsub" });
        wait_until([] { return false; }, ms(100));
    }
    stop = true;
    for (auto &t : ts) t.join();
    printf("pairs %d, failed calls %d\n", pairs.load(), errors.load());
    EXPECT_GT(pairs.load(), 10);
    ASSERT_TRUE(wait_until([&] { return value(&s) == 2; }, ms(5000)))
        << "the value after the storm is " << value(&s) << ", not 2";
    EXPECT_EQ(0, redis().cmd({ "HLEN", "rmutex_sem_held:{" + name + "}" }).integer());
    EXPECT_RC(0, rsem_destroy(&s));
}

TEST_F(Sem, FairWaitersGoInArrivalOrderAndAWaitForThreeIsNotPassed)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name(), order = name + ":order";
    rsem_t s;
    init(&s, name, 0, 1);
    std::vector<pid_t> kids;
    for (int i = 0; i < 3; i++) {
        kids.push_back(fork_run([&, i] {
            if (rsem_wait(&s)) return 1;
            auto c = conn();
            c->cmd({ "RPUSH", order, std::to_string(i) });
            /* Given back once every kid is served (a permit left held would
             * come back by itself a lease after the _exit, into the middle
             * of what follows; one given back at once would let two kids
             * race for their turn). */
            if (!wait_until([&] { return c->cmd({ "EXISTS", order + ":go" }).integer() == 1; }, ms(10000)))
                return 3;
            return rsem_post(&s) ? 2 : 0;
        }));
        ASSERT_TRUE(wait_until([&] { return queued(name) == i + 1; }, ms(3000)));
    }
    for (int i = 0; i < 3; i++) {
        EXPECT_RC(0, rsem_post(&s));
        ASSERT_TRUE(wait_until([&] { return redis().cmd({ "LLEN", order }).integer() == i + 1; },
                               ms(3000)));
    }
    redis().cmd({ "SET", order + ":go", "1" });
    for (pid_t k : kids) {
        auto st = wait_exit(k, ms(3000));
        EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
    }
    ASSERT_EQ(3, value(&s));
    ASSERT_RC(0, rsem_wait_n(&s, 3, CLOCK_MONOTONIC, nullptr));
    auto got = redis().cmd({ "LRANGE", order, "0", "-1" });
    std::string seq;
    for (size_t i = 0; i < got->elements; i++) seq += got->element[i]->str;
    EXPECT_EQ("012", seq) << "not served in arrival order";

    /* A wait for 3 first, then waits for 1: posts of 1 go to the 3 first. */
    Async three([&] { return rsem_wait_n(&s, 3, CLOCK_REALTIME, nullptr); });
    ASSERT_TRUE(wait_until([&] { return queued(name) == 1; }, ms(3000)));
    Async one([&] { return rsem_wait(&s); });
    ASSERT_TRUE(wait_until([&] { return queued(name) == 2; }, ms(3000)));
    EXPECT_RC(0, rsem_post_n(&s, 2));
    EXPECT_FALSE(one.wait(ms(500))) << "a later wait for 1 passed the wait for 3";
    EXPECT_RC(0, rsem_post(&s));
    ASSERT_TRUE(three.wait(ms(3000)));
    EXPECT_RC(0, three.rc());
    EXPECT_FALSE(one.done());
    EXPECT_RC(0, rsem_post(&s));
    ASSERT_TRUE(one.wait(ms(3000)));
    EXPECT_EQ(0, value(&s));
    EXPECT_RC(0, rsem_post_n(&s, 7)) << "the permits this process holds";
    EXPECT_EQ(7, value(&s));
    EXPECT_RC(0, rsem_destroy(&s));
}

TEST_F(Sem, WithReclaimOffAKilledConsumersPermitNeverComesBack)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name(), flag = name + ":flag";
    rsem_t s, t;
    init(&s, name, 0, 0, 0, 0);
    init(&t, name, 0);
    pid_t consumer = fork_run([&] {
        int r = rsem_wait(&s);
        conn()->cmd({ "SET", flag, r ? "failed" : "took" });
        for (;;) pause();
        return 0;
    });
    pid_t producer = fork_run([&] { return rsem_post(&s); });
    auto st = wait_exit(producer, ms(3000));
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
    ASSERT_TRUE(key_is(flag, "took"));
    kill(consumer, SIGKILL);
    wait_exit(consumer, ms(3000));
    struct timespec dl = abs_after(CLOCK_REALTIME, 3200);
    EXPECT_RC(ETIMEDOUT, rsem_timedwait(&s, &dl)) << "a consumed permit came back";
    EXPECT_EQ(0, value(&t)) << "the second handle sees another value";
    EXPECT_RC(0, rsem_post(&t));
    EXPECT_EQ(1, value(&s));
    EXPECT_RC(0, rsem_destroy(&s));
    EXPECT_RC(0, rsem_destroy(&t));
}

TEST_F(Sem, AForkedChildUsesItsParentsHandleAndHoldsNothingOfItsParents)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name(), held = "rmutex_sem_held:{" + name + "}";
    rsem_t s;
    init(&s, name, 2);
    ASSERT_RC(0, rsem_wait(&s));
    ASSERT_EQ(1, redis().cmd({ "HLEN", held }).integer());
    pid_t kid = fork_run([&] {
        if (rsem_wait(&s)) return 1;      /* value 1 -> 0, the child's */
        if (rsem_post(&s)) return 2;      /* gives back its own */
        if (rsem_post(&s)) return 3;      /* holds none: adds one */
        return 0;
    });
    auto st = wait_exit(kid, ms(5000));
    ASSERT_TRUE(st && WIFEXITED(*st)) << "the child hung";
    EXPECT_EQ(0, WEXITSTATUS(*st));
    EXPECT_EQ(2, value(&s));
    EXPECT_EQ(1, redis().cmd({ "HLEN", held }).integer()) << "the parent's count was touched";
    EXPECT_RC(0, rsem_post(&s));
    EXPECT_EQ(3, value(&s));
    EXPECT_EQ(0, redis().cmd({ "HLEN", held }).integer());
    EXPECT_RC(0, rsem_destroy(&s));
}

TEST_F(Sem, AThreadOnAMinimalStackWaitsAndPosts)
{
    std::string name = lock_name();
    rsem_t s;
    init(&s, name, 1);
    pthread_attr_t at;
    pthread_attr_init(&at);
    /* PTHREAD_STACK_MIN, or 64 KiB under a sanitizer (its frames are
     * larger: tests/stack/small_stack.h, whose measured runs are the
     * library's bound). */
    pthread_attr_setstacksize(&at, rmt_sanitized() ? 65536 : PTHREAD_STACK_MIN);
    pthread_t th;
    static rsem_t *sp;
    sp = &s;
    ASSERT_EQ(0, pthread_create(&th, &at, [](void *) -> void * {
        int r = rsem_wait(sp);
        if (!r) r = rsem_post_n(sp, 2);
        return (void *)(intptr_t)r;
    }, nullptr));
    void *rc;
    pthread_join(th, &rc);
    pthread_attr_destroy(&at);
    EXPECT_RC(0, (int)(intptr_t)rc);
    EXPECT_EQ(2, value(&s));
    EXPECT_RC(0, rsem_destroy(&s));
}

TEST_F(Sem, ACancelledWaiterLeavesNoQueueEntryBehind)
{
    RMT_SKIP_CANCEL_UNDER_ASAN();
    std::string name = lock_name();
    rsem_t s;
    init(&s, name, 0, 1);
    static rsem_t *sp;
    sp = &s;
    pthread_t th;
    ASSERT_EQ(0, pthread_create(&th, nullptr, [](void *) -> void * {
        rsem_wait(sp);
        return (void *)1;
    }, nullptr));
    ASSERT_TRUE(wait_until([&] { return queued(name) == 1; }, ms(3000)));
    pthread_cancel(th);
    void *rc;
    pthread_join(th, &rc);
    EXPECT_EQ(PTHREAD_CANCELED, rc) << "rsem_wait is no cancellation point";
    EXPECT_EQ(0, queued(name)) << "the cancelled waiter is still queued";
    EXPECT_RC(0, rsem_post(&s));
    EXPECT_RC(0, rsem_trywait(&s)) << "the permit went to the cancelled waiter";
    EXPECT_RC(0, rsem_post(&s));
    EXPECT_RC(0, rsem_destroy(&s)) << "the cancelled waiter still counts as a user";
}

rsem_t *alarm_sem;
void on_alarm(int) { rsem_post_signal(alarm_sem); }

TEST_F(Sem, APostFromASignalHandlerWakesAWaiterAndAPostBeforeExitIsNotLost)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS();
    std::string name = lock_name();
    rsem_t s;
    init(&s, name, 0);
    alarm_sem = &s;
    struct sigaction sa = {}, old;
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, &old);
    Async waiter([&] { return rsem_wait(&s); });
    EXPECT_FALSE(waiter.wait(ms(200)));
    alarm(1);
    ASSERT_TRUE(waiter.wait(ms(3000))) << "the deferred post did not wake the waiter";
    EXPECT_RC(0, waiter.rc());
    sigaction(SIGALRM, &old, nullptr);
    EXPECT_EQ(0, value(&s));
    EXPECT_RC(0, rsem_post(&s)) << "(the permit the waiter took)";
    EXPECT_EQ(1, value(&s));

    pid_t kid = fork_run([&] {
        rsem_post_signal(&s);
        rsem_post_signal(&s);
        exit(0); /* at once: the exit hook must make the posts */
        return 0;
    });
    auto st = wait_exit(kid, ms(5000));
    EXPECT_TRUE(st && WIFEXITED(*st));
    EXPECT_EQ(3, value(&s)) << "posts pending at exit were lost";
    EXPECT_RC(0, rsem_destroy(&s));
}

/* rsem_open, sem_open's call: O_CREAT makes a new name with its value and
 * joins an existing one as it is; O_CREAT|O_EXCL is EEXIST on an existing
 * one; without O_CREAT a missing name is ENOENT -- and a failed open
 * leaves the handle uninitialized. */
TEST_F(Sem, OpenCreatesJoinsAndAnswersEexistAndEnoentAsSemOpen)
{
    std::string name = lock_name();
    rsem_t a, b, c;
    EXPECT_RC(ENOENT, rsem_open(&a, name.c_str(), 0, nullptr, 0));
    EXPECT_RC(EINVAL, rsem_trywait(&a)) << "a failed open left a handle";
    EXPECT_FALSE(redis().exists("rmutex_sem:{" + name + "}")) << "a plain open made the name";
    EXPECT_RC(EINVAL, rsem_open(&a, name.c_str(), 2, nullptr, RSEM_EXCL)) << "EXCL without CREATE";
    EXPECT_RC(EINVAL, rsem_open(&a, name.c_str(), 2, nullptr, 8));
    ASSERT_RC(0, rsem_open(&a, name.c_str(), 2, nullptr, RSEM_CREATE | RSEM_EXCL));
    EXPECT_EQ(2, value(&a));
    EXPECT_RC(EEXIST, rsem_open(&b, name.c_str(), 5, nullptr, RSEM_CREATE | RSEM_EXCL));
    ASSERT_RC(0, rsem_open(&b, name.c_str(), 5, nullptr, RSEM_CREATE));
    EXPECT_EQ(2, value(&b)) << "an existing name keeps its value";
    ASSERT_RC(0, rsem_open(&c, name.c_str(), 0, nullptr, 0));
    EXPECT_RC(0, rsem_trywait(&c));
    EXPECT_EQ(1, value(&a));
    EXPECT_RC(0, rsem_post(&c));
    for (rsem_t *s : { &a, &b, &c }) EXPECT_RC(0, rsem_destroy(s));
    redis().cmd({ "SET", "rmutex_sem:{" + name + "x}", "wrong" });
    EXPECT_RC(EINVAL, rsem_open(&a, (name + "x").c_str(), 1, nullptr, RSEM_CREATE)) << rmutex_detail();
}

/* rsem_hold_deadline: a process that holds permits sees its lease's end,
 * renewed by the watchdog; one that holds none, EPERM. */
TEST_F(Sem, HoldDeadlineIsTheProcesssPermitLeaseWhileItHoldsOne)
{
    std::string name = lock_name();
    rsem_t s;
    init(&s, name, 2);
    struct timespec d;
    EXPECT_RC(EPERM, rsem_hold_deadline(&s, &d)) << "nothing held";
    EXPECT_RC(EINVAL, rsem_hold_deadline(&s, nullptr));
    ASSERT_RC(0, rsem_wait(&s));
    ASSERT_RC(0, rsem_hold_deadline(&s, &d));
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double left = double(d.tv_sec - now.tv_sec) + double(d.tv_nsec - now.tv_nsec) / 1e9;
    EXPECT_GT(left, 0.5);
    EXPECT_LE(left, 1.6) << "more than the 1.5 s lease ahead";
    struct timespec first = d;
    EXPECT_TRUE(wait_until([&] {
        return rsem_hold_deadline(&s, &d) == 0 && (d.tv_sec > first.tv_sec + 1 ||
                                                   (d.tv_sec > first.tv_sec && d.tv_nsec >= first.tv_nsec));
    }, ms(4000))) << "the watchdog did not move the lease on";
    ASSERT_RC(0, rsem_post(&s));
    EXPECT_RC(EPERM, rsem_hold_deadline(&s, &d)) << "all given back";
    EXPECT_RC(0, rsem_destroy(&s));
}

/* Each wait and post leaves a grant key (for a retry after a lost reply);
 * a thread's next call deletes the one whose outcome it learnt, so 500
 * pairs leave about one key, not a minute's thousand. */
TEST_F(Sem, ABusySemaphoreLeavesAboutOneGrantKeyPerThreadNotOnePerCall)
{
    std::string name = lock_name();
    rsem_t s;
    init(&s, name, 1);
    for (int i = 0; i < 500; i++) {
        ASSERT_RC(0, rsem_wait(&s));
        ASSERT_RC(0, rsem_post(&s));
    }
    auto keys = redis().cmd({ "KEYS", "rmutex_sem_grant:{" + name + "}:*" });
    ASSERT_TRUE(keys);
    EXPECT_LE(keys->elements, 2u) << "grant keys pile up";
    EXPECT_EQ(1, value(&s));
    EXPECT_RC(0, rsem_destroy(&s));
}

/* rsem_inspect: the value, the processes holding permits with their
 * permits and lease, nothing taken; an absent name does not exist. */
TEST_F(Sem, InspectShowsTheValueAndEachProcesssPermitsWithoutTakingAny)
{
    std::string name = lock_name();
    rsem_info_t si;
    EXPECT_RC(EINVAL, rsem_inspect(name.c_str(), nullptr, sizeof si));
    ASSERT_RC(0, rsem_inspect(name.c_str(), &si, sizeof si));
    EXPECT_EQ(0, si.exists);
    rsem_t s;
    init(&s, name, 3);
    ASSERT_RC(0, rsem_wait_n(&s, 2, CLOCK_MONOTONIC, nullptr));
    ASSERT_RC(0, rsem_inspect(name.c_str(), &si, sizeof si));
    EXPECT_EQ(1, si.exists);
    EXPECT_EQ(1, si.value);
    EXPECT_EQ(1u, si.processes);
    ASSERT_EQ(1u, si.shown);
    EXPECT_EQ(2u, si.holder[0].holds);
    EXPECT_GT(si.holder[0].ttl_ms, 0);
    EXPECT_LE(si.holder[0].ttl_ms, 1500);
    // The holder's process comes from the registry, written by the
    // watchdog's announcement just after the wait: wait for it, then check.
    EXPECT_TRUE(wait_until([&] {
        return rsem_inspect(name.c_str(), &si, sizeof si) == 0 && si.shown == 1 && si.holder[0].holder_known;
    }, ms(3000))) << "the registry never named the holding process";
    EXPECT_EQ(getpid(), si.holder[0].holder_pid);
    EXPECT_EQ(2u, si.holder[0].holds) << "inspect took nothing";
    EXPECT_EQ(1, value(&s)) << "inspect took nothing";
    ASSERT_RC(0, rsem_post_n(&s, 2));
    ASSERT_RC(0, rsem_inspect(name.c_str(), &si, sizeof si));
    EXPECT_EQ(3, si.value);
    EXPECT_EQ(0u, si.processes);
    EXPECT_RC(0, rsem_destroy(&s));
}

} // namespace
