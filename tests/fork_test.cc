/* fork_test.cc -- fork() without exec, and threads that end while holding.
 *
 * After fork() the child "starts clean": a new owner identity, none of the
 * parent's holds, the same rmutex_t objects usable without re-initializing,
 * and its own connections (the parent's keep working).  The child reports
 * through a pipe and ends with _exit(); it never runs GoogleTest code. */
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "harness.h"

namespace {

using namespace rmt;

/* What the forked child saw, written to the pipe as raw ints. */
struct ChildReport {
    int trylock_parents;   /* trylock of the mutex the parent holds */
    int unlock_parents;    /* unlock of it */
    int holdcount_rc;
    unsigned holdcount;    /* of it */
    int lock_other;        /* lock of another mutex */
    int acquisitions;      /* stats.acquisitions after that lock */
    int fence_rc;
};

bool read_all(int fd, void *p, size_t n)
{
    auto *c = static_cast<char *>(p);
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        c += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

bool readable_within(int fd, ms bound)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, static_cast<int>(scaled(bound).count())) == 1;
}

std::string uuid_of(const std::string &field) { return field.substr(0, field.rfind(':')); }

class Fork : public RedisTest {};

TEST_F(Fork, ChildHasANewIdentityAndNoneOfTheParentsHolds)
{
    std::string a = lock_name("parents"), b = lock_name("childs");
    rmutex_t ma, mb;
    init_mutex(&ma, a, RMUTEX_ERRORCHECK);
    init_mutex(&mb, b);
    ASSERT_RC(0, rmutex_lock(&ma));
    auto parent_hold = redis().hgetall(a);
    ASSERT_EQ(1u, parent_hold.size());
    auto cmd_ids = redis().client_ids("rmutex:cmd:" + std::to_string(getpid()));
    ASSERT_FALSE(cmd_ids.empty());
    uint64_t reconnects = stats().reconnects;

    int up[2], down[2];
    ASSERT_EQ(0, pipe(up));
    ASSERT_EQ(0, pipe(down));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        ChildReport r;
        memset(&r, 0, sizeof r);
        r.trylock_parents = rmutex_trylock(&ma);
        r.unlock_parents = rmutex_unlock(&ma);
        r.holdcount_rc = rmutex_holdcount(&ma, &r.holdcount);
        r.lock_other = rmutex_lock(&mb);
        rmutex_stats_t s;
        memset(&s, 0, sizeof s);
        rmutex_stats(&s, sizeof s);
        r.acquisitions = static_cast<int>(s.acquisitions);
        uint64_t t;
        r.fence_rc = rmutex_fence(&mb, &t);
        (void)!write(up[1], &r, sizeof r);
        char go;
        (void)!read(down[0], &go, 1);
        int u = rmutex_unlock(&mb);
        (void)!write(up[1], &u, sizeof u);
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    ChildReport r;
    bool got = readable_within(up[0], ms(10000)) && read_all(up[0], &r, sizeof r);
    if (!got) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        FAIL() << "no report from the forked child";
    }
    EXPECT_RC(EBUSY, r.trylock_parents) << "the child must not share the parent's hold";
    EXPECT_RC(EPERM, r.unlock_parents);
    EXPECT_RC(0, r.holdcount_rc);
    EXPECT_EQ(0u, r.holdcount);
    EXPECT_RC(0, r.lock_other) << "the child could not use a mutex without re-initializing";
    EXPECT_EQ(1, r.acquisitions) << "the child's counters start at fork()";
    EXPECT_RC(0, r.fence_rc);

    EXPECT_EQ(parent_hold, redis().hgetall(a)) << "the child's unlock touched the parent's hold";
    auto child_hold = redis().hgetall(b);
    ASSERT_EQ(1u, child_hold.size());
    EXPECT_NE(uuid_of(parent_hold.begin()->first), uuid_of(child_hold.begin()->first))
        << "the child kept the parent's owner identity";
    EXPECT_FALSE(redis().client_ids("rmutex:cmd:" + std::to_string(pid)).empty())
        << "the child has its own named connections";

    char go = 1;
    ASSERT_EQ(1, write(down[1], &go, 1));
    int child_unlock = -1;
    EXPECT_TRUE(readable_within(up[0], ms(5000)) && read_all(up[0], &child_unlock, sizeof child_unlock));
    EXPECT_RC(0, child_unlock);
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    close(up[0]);
    close(down[1]);

    /* The parent's hold and connections survived the child. */
    EXPECT_EQ(parent_hold, redis().hgetall(a));
    EXPECT_RC(EDEADLK, rmutex_lock(&ma)) << "the parent still owns it";
    EXPECT_RC(0, rmutex_unlock(&ma));
    EXPECT_FALSE(redis().exists(a));
    EXPECT_EQ(reconnects, stats().reconnects) << "the child broke a parent connection";
    auto still = redis().client_ids("rmutex:cmd:" + std::to_string(getpid()));
    for (auto id : cmd_ids)
        EXPECT_NE(still.end(), std::find(still.begin(), still.end(), id)) << "parent connection " << id << " closed";
}

TEST_F(Fork, ChildLockWaitsForTheParentsUnlock)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    int up[2];
    ASSERT_EQ(0, pipe(up));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(up[0]);
        int rc = rmutex_lock(&m);
        (void)!write(up[1], &rc, sizeof rc);
        int u = rmutex_unlock(&m);
        (void)!write(up[1], &u, sizeof u);
        _exit(0);
    }
    close(up[1]);
    EXPECT_FALSE(readable_within(up[0], ms(500))) << "the child got in while the parent held it";
    ASSERT_RC(0, rmutex_unlock(&m));
    int rc = -1, u = -1;
    bool got = readable_within(up[0], ms(5000)) && read_all(up[0], &rc, sizeof rc) && read_all(up[0], &u, sizeof u);
    if (!got)
        kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(up[0]);
    ASSERT_TRUE(got) << "the child never got the lock";
    EXPECT_RC(0, rc);
    EXPECT_RC(0, u);
    EXPECT_FALSE(redis().exists(name));
}

/* A new process locks -- its first connections, its watchdog's thread
 * starting to dial its own -- and forks 0-2 ms later (rmutex_test_child
 * forklock): the child's first connection must come up.  Over TLS (the
 * `tls:` run) the parent's threads are then inside OpenSSL, making its
 * first connections, whose locks a child does not get reset: without the
 * wait tls.c makes a fork do for those calls, about one child in 30 hung
 * here.  Fresh processes, since that first use is where OpenSSL holds its
 * locks longest. */
TEST_F(Fork, AProcessThatForksRightAfterItsFirstLockLeavesTheChildWorking)
{
    const int kRuns = 30;
    int hung = 0, failed = 0;
    for (int i = 0; i < kRuns; i++) {
        Child c({ "forklock", lock_name("f" + std::to_string(i)) }, url());
        auto line = c.expect_line("forklock", ms(15000));
        ASSERT_TRUE(line) << "run " << i << ": the process never said";
        std::string child = field(*line, "child");
        EXPECT_EQ("0", field(*line, "rc")) << *line;
        if (child == "hung")
            hung++;
        else if (child != "0")
            failed++, fprintf(stderr, "[fork] run %d: %s\n", i, line->c_str());
        c.wait(ms(5000));
    }
    EXPECT_EQ(0, hung) << "children that hung at their first connection";
    EXPECT_EQ(0, failed) << "children whose lock failed";
}

/* ---- threads that end while holding ------------------------------------- */

class ThreadExit : public RedisTest {
  protected:
    ThreadExit() : RedisTest(false, "lease=1000") {}
};

void *lock_and_exit(void *arg)
{
    static int rc;
    rc = rmutex_lock(static_cast<rmutex_t *>(arg));
    return &rc;
}

void *lock_and_wait_for_cancel(void *arg)
{
    auto *m = static_cast<rmutex_t *>(arg);
    static std::atomic<int> rc{-1};
    rc = rmutex_lock(m);
    for (;;) {
        pthread_testcancel();
        usleep(1000);
    }
    return nullptr;
}

TEST_F(ThreadExit, HoldOfAnExitedThreadStopsBeingRenewedAndARobustLockerGetsEownerdead)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    pthread_t t;
    ASSERT_EQ(0, pthread_create(&t, nullptr, lock_and_exit, &m));
    void *ret;
    ASSERT_EQ(0, pthread_join(t, &ret));
    ASSERT_RC(0, *static_cast<int *>(ret));
    auto t_exit = Clock::now();
    /* Not renewed any more: gone within the lease (+ one renewal period the
     * watchdog may already have started, + slack). */
    EXPECT_TRUE(wait_until([&] { return !redis().exists(name); }, ms(1000 + 1000 / 3 + 1000)))
        << "still held " << elapsed_ms(t_exit) << " ms after its thread exited";
    /* Such a hold is marked, not released, so that the next robust
     * locker learns that its owner died. */
    ASSERT_RC(EOWNERDEAD, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_consistent(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(0u, stats().held);
}

TEST_F(ThreadExit, NonRobustLockerGetsInAfterTheExitedThreadsLease)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    pthread_t t;
    ASSERT_EQ(0, pthread_create(&t, nullptr, lock_and_exit, &m));
    void *ret;
    ASSERT_EQ(0, pthread_join(t, &ret));
    ASSERT_RC(0, *static_cast<int *>(ret));
    struct timespec dl = abs_after(CLOCK_MONOTONIC, scaled(ms(1000 + 1000 / 3 + 1000)).count());
    EXPECT_RC(0, rmutex_clocklock(&m, CLOCK_MONOTONIC, &dl));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(ThreadExit, HoldOfACancelledThreadStopsBeingRenewed)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    pthread_t t;
    ASSERT_EQ(0, pthread_create(&t, nullptr, lock_and_wait_for_cancel, &m));
    ASSERT_TRUE(wait_until([&] { return redis().exists(name); }, ms(5000)));
    ASSERT_EQ(0, pthread_cancel(t));
    ASSERT_EQ(0, pthread_join(t, nullptr));
    auto t_exit = Clock::now();
    EXPECT_TRUE(wait_until([&] { return !redis().exists(name); }, ms(1000 + 1000 / 3 + 1000)))
        << "still held " << elapsed_ms(t_exit) << " ms after its thread was cancelled";
    int rc = rmutex_lock(&m);
    EXPECT_RC(EOWNERDEAD, rc);
    if (rc == EOWNERDEAD) {
        EXPECT_RC(0, rmutex_consistent(&m));
    }
    EXPECT_RC(0, rmutex_unlock(&m));
}

} // namespace
