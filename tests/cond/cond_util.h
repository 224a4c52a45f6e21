/* cond_util.h -- what the condition-variable tests share: the fixture (a
 * server with short waiter leases, 1 s, and a short poll, 500 ms, so that
 * the liveness bounds are quick), conditions that live as long as the
 * test, and forked processes. */
#ifndef RMUTEX_TEST_COND_UTIL_H
#define RMUTEX_TEST_COND_UTIL_H
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "harness.h"

namespace rmt {
namespace cond {

constexpr int kWaiterLeaseMs = 1000;
constexpr int kPollMs = 500;

class Cond : public RedisTest {
  protected:
    Cond() : RedisTest(false, "waiter_lease=1000&poll=500&lease=2000") {}

    void SetUp() override
    {
        RedisTest::SetUp();
        base_ = stats();
    }

    void TearDown() override
    {
        for (auto &c : conds_)
            rcond_destroy(&c);
        RedisTest::TearDown();
    }

    /* A condition that lives until the end of the test. */
    rcond_t *make_cond(const std::string &suffix = "c", const rcondattr_t *attr = nullptr)
    {
        conds_.emplace_back();
        rcond_t *c = &conds_.back();
        EXPECT_RC(0, rcond_init(c, cond_name(suffix).c_str(), attr));
        return c;
    }

    std::string cond_name(const std::string &suffix) { return lock_name("cond:" + suffix); }
    std::string wait_key(const std::string &suffix) { return "rmutex_cond_wait:{" + cond_name(suffix) + "}"; }

    /* Waiters of the condition registered in Redis now. */
    long long registered(const std::string &suffix = "c")
    {
        return redis().cmd({"ZCARD", wait_key(suffix)}).integer();
    }

    uint64_t cond_waits() { return stats().cond_waits - base_.cond_waits; }

    std::deque<rcond_t> conds_;
    rmutex_stats_t base_{};
};

/* Wait on c with m until pred (read under m) is true; returns the first
 * non-zero result or 0. */
inline int wait_for(rcond_t *c, rmutex_t *m, const std::function<bool()> &pred)
{
    int r = rmutex_lock(m);
    if (r) return r;
    while (!pred()) {
        r = rcond_wait(c, m);
        if (r) break;
    }
    int u = rmutex_unlock(m);
    return r ? r : u;
}

/* Lock m, wait on c once for at most timeout_ms, unlock: the wait's
 * result, or the first failure. */
inline int timed_wait_once(rcond_t *c, rmutex_t *m, int64_t timeout_ms)
{
    int r = rmutex_lock(m);
    if (r) return r;
    struct timespec ts = abs_after(CLOCK_REALTIME, timeout_ms);
    r = rcond_timedwait(c, m, &ts);
    int u = rmutex_unlock(m);
    return r ? r : u;
}

inline bool readable_within(int fd, ms bound)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, static_cast<int>(scaled(bound).count())) == 1;
}

/* A forked process running fn; its result is its exit status. */
class Forked {
  public:
    explicit Forked(const std::function<int()> &fn)
    {
        pid_ = fork();
        if (pid_ == 0) _exit(fn());
    }
    ~Forked()
    {
        if (pid_ > 0 && !reaped_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    pid_t pid() const { return pid_; }
    /* The exit code within scaled(bound), or -1. */
    int wait(ms bound)
    {
        int status = 0;
        bool done = wait_until([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, bound);
        if (!done) return -1;
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    void kill9()
    {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        reaped_ = true;
    }

  private:
    pid_t pid_ = -1;
    bool reaped_ = false;
};

struct Shared {
    rmutex_t m;
    int value = 0;
};

} // namespace cond
} // namespace rmt

#endif
