/* cond_util.h -- what the condition-variable tests share: the fixture (a
 * server with short waiter leases, 1 s, and a short poll, 500 ms, so that
 * the liveness bounds are quick), conditions that live as long as the
 * test, forked processes, and the rounds of the rebinding rule
 * (rebind_round). */
#ifndef RMUTEX_TEST_COND_UTIL_H
#define RMUTEX_TEST_COND_UTIL_H
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "harness.h"
#include "proxy.h"

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

    /* No waiter of the condition registered, within a moment: a waiter
     * handed its mutex by the signal (wait morphing) returns first and
     * leaves through the watchdog's next call (cond.c, finish()). */
    bool none_registered(const std::string &suffix = "c")
    {
        return wait_until([&] { return registered(suffix) == 0; }, ms(2000));
    }

    uint64_t cond_waits() { return stats().cond_waits - base_.cond_waits; }

  public: /* (for the tests' helpers too) */
    /* Processes subscribed to the condition's channel now (a wait joins it
     * before it registers, but the SUBSCRIBE may land later). */
    long long subscribers(const std::string &suffix = "c")
    {
        std::string ch = "rmutex_cond_channel:{" + cond_name(suffix) + "}";
        Reply r = redis().cmd({"PUBSUB", "NUMSUB", ch});
        return r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? r->element[1]->integer : -1;
    }

    /* n waiters registered, one process or more listening, and mname free
     * (the waits let go of it): a signal now hands it over. */
    bool ready_to_hand_over(const std::string &mname, long long n = 1, long long listening = 1)
    {
        return wait_until([&] { return registered() == n && subscribers() >= listening &&
                                       !redis().exists(mname); },
                          ms(5000));
    }

  protected:

    /* A connection to the test's server, for a thread or a forked child. */
    std::unique_ptr<Redis> connect() { return std::make_unique<Redis>(host(), port(), password_); }

    /* The rebinding rule's cast: a condition c, two mutexes, a stage (an
     * integer in Redis, at key). */
    struct Rebind {
        rmutex_t m1, m2;
        rcond_t *c = nullptr;
        std::string key;
    };
    void make_rebind(Rebind *rb)
    {
        init_mutex(&rb->m1, lock_name("m1"));
        init_mutex(&rb->m2, lock_name("m2"));
        rb->c = make_cond();
        rb->key = lock_name("stage");
    }
    void rebind_round(long long k, Rebind &rb, int others, const std::function<void()> &start_others,
                      const std::function<bool()> &others_done);

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

/* The integer at key (0 when there is none). */
inline long long read_int(Redis &r, const std::string &key)
{
    auto v = r.get(key);
    return v ? std::stoll(*v) : 0;
}

/* Lock m, wait on c until the integer at key (read under m) reaches
 * at_least, for at most 10 s (scaled), run then (still under m), unlock m:
 * the first failure, or 0. */
inline int wait_for_key(Redis &r, rcond_t *c, rmutex_t *m, const std::string &key,
                        long long at_least, const std::function<void()> &then = nullptr)
{
    struct timespec ts = abs_after(CLOCK_REALTIME, scaled(ms(10000)).count());
    int rc = rmutex_lock(m);
    if (rc) return rc;
    while (!rc && read_int(r, key) < at_least) rc = rcond_timedwait(c, m, &ts);
    if (!rc && then) then();
    int u = rmutex_unlock(m);
    return rc ? rc : u;
}

/* Unlocks m at the end of the scope if this thread still holds it: an
 * ASSERT that returns early leaves nobody stuck on m. */
class Unlocker {
  public:
    explicit Unlocker(rmutex_t *m) : m_(m) {}
    ~Unlocker()
    {
        unsigned n = 0;
        if (!rmutex_holdcount(m_, &n) && n) rmutex_unlock(m_);
    }
    Unlocker(const Unlocker &) = delete;
    Unlocker &operator=(const Unlocker &) = delete;

  private:
    rmutex_t *m_;
};

/* The rebinding rule: a condition is free to bind to another mutex as soon
 * as its last waiter is unblocked (its ticket released by a signal or a
 * broadcast), not once every waiter has returned.  One round, k >= 1 (the
 * stage, read under m1, goes to 2k-1, then 2k):
 *   1. "first" waits on c with m1 until stage 2k-1 (the lowest ticket),
 *      then the `others` waiters that start_others() starts (in this
 *      process or in another) until 2k;
 *   2. a signal releases the first, which takes m1 back, sets stage 2k and
 *      lets go of m1; this thread takes m1 and keeps it, so the others,
 *      once released, cannot finish taking it back;
 *   3. the first locks m2, broadcasts (releasing the others) and at once
 *      waits on c with m2, before the others can have left their waits
 *      (which made it EINVAL before the fix, in every run): nobody is
 *      blocked on c any more, so the wait must be accepted;
 *   4. this thread wakes the first (under m2), lets go of m1, and
 *      others_done() waits for the others to return. */
inline void Cond::rebind_round(long long k, Rebind &rb, int others,
                               const std::function<void()> &start_others,
                               const std::function<bool()> &others_done)
{
    rmutex_t *m1 = &rb.m1, *m2 = &rb.m2;
    rcond_t *c = rb.c;
    const std::string &key = rb.key;
    std::atomic<int> step{0}; /* 1 the first let go of m1, 2 we hold m1, 3 it holds m2 */
    std::atomic<bool> woken{false};
    std::atomic<int> rebound{INT32_MIN};
    std::unique_ptr<Redis> own = connect();
    Async first([&] {
        int rc = wait_for_key(*own, c, m1, key, 2 * k - 1,
                              [&] { own->cmd({"SET", key, std::to_string(2 * k)}); });
        if (rc) return rc;
        step = 1;
        if (!wait_until([&] { return step == 2; }, ms(5000))) return ETIMEDOUT;
        if ((rc = rmutex_lock(m2))) return rc;
        step = 3;
        rc = rcond_broadcast(c);
        struct timespec ts = abs_after(CLOCK_REALTIME, scaled(ms(10000)).count());
        int w = 0;
        while (!rc && !w && !woken) w = rcond_timedwait(c, m2, &ts);
        rebound = w;
        int u = rmutex_unlock(m2);
        return rc ? rc : u;
    });
    ASSERT_TRUE(wait_until([&] { return registered() == 1; }, ms(5000))) << "round " << k;
    start_others();
    ASSERT_TRUE(wait_until([&] { return registered() == 1 + others; }, ms(5000)))
        << "round " << k;
    Unlocker hold1(m1), hold2(m2);
    ASSERT_RC(0, rmutex_lock(m1));
    redis().cmd({"SET", key, std::to_string(2 * k - 1)});
    ASSERT_RC(0, rcond_signal(c)); /* the lowest ticket: the first */
    ASSERT_RC(0, rmutex_unlock(m1));
    ASSERT_TRUE(wait_until([&] { return step == 1; }, ms(5000)))
        << "round " << k << ": " << err_name(first.rc());
    ASSERT_RC(0, rmutex_lock(m1));
    step = 2;
    ASSERT_TRUE(wait_until([&] { return step == 3 || first.done(); }, ms(5000))) << "round " << k;
    /* Ours once the first's wait let go of m2 (or failed). */
    ASSERT_RC(0, rmutex_lock(m2));
    woken = true;
    ASSERT_RC(0, rcond_signal(c));
    ASSERT_RC(0, rmutex_unlock(m2));
    ASSERT_TRUE(first.wait(ms(5000))) << "round " << k;
    EXPECT_RC(0, rebound.load()) << "round " << k
                                 << ": the wait with m2 was refused, though no waiter was blocked";
    EXPECT_RC(0, first.rc()) << "round " << k;
    ASSERT_RC(0, rmutex_unlock(m1));
    ASSERT_TRUE(others_done()) << "round " << k;
    EXPECT_TRUE(none_registered()) << "round " << k;
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

/* The library through a proxy that can hold back a waiter's leave. */
class CondProxied : public Cond {
  protected:
    void SetUp() override
    {
        Cond::SetUp();
        if (HasFatalFailure())
            return;
        proxy_ = std::make_unique<Proxy>(host(), port());
        ASSERT_RC(0, rmutex_configure(url_through(proxy_->port()).c_str()));
    }

    void TearDown() override
    {
        Cond::TearDown();
        proxy_.reset();
    }

    static bool is_leave(const Proxy::Args &a)
    {
        return Proxy::is_eval(a) && std::find(a.begin(), a.end(), "leave") != a.end();
    }

    std::unique_ptr<Proxy> proxy_;
};

struct Shared {
    rmutex_t m;
    int value = 0;
};

} // namespace cond
} // namespace rmt

#endif
