/* indeterminate_test.cc -- requests whose reply is lost, against real Redis.
 *
 * rmutex talks to redis-server through rmt::Proxy, which can let Redis
 * execute a request and then close the connection instead of forwarding the
 * reply, or close it before the request reaches Redis.  The library must
 * find out what happened: an acquire that took effect is a success with
 * exactly one hold, an unlock that took effect is a success, and no retry
 * may ever release somebody else's later hold.
 *
 * The acquire is recognised as the EVAL/EVALSHA that names the lock and not
 * its release channel; the unlock as the EVAL/EVALSHA that names both
 * (the non-fair scripts: only the release publishes); a fair release
 * names both and the op "release".
 * A warm-up lock/unlock on another name runs
 * first, so that scripts are loaded and the dropped reply is a real result
 * (not NOSCRIPT). */
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <regex>

#include "harness.h"
#include "proxy.h"

namespace {

using namespace rmt;

/* Only a release names how long the not-recoverable mark lives
 * (RM_CALL_NOTREC_MS); an acquire names the channel too (to ask a caching
 * holder for the lock), so the channel no longer tells them apart. */
const char *kReleaseOnly = "86400000";

class Indeterminate : public RedisTest {
  protected:
    Indeterminate() : RedisTest(false, "", /*configure=*/false) {}

    void SetUp() override
    {
        RedisTest::SetUp();
        if (HasFatalFailure())
            return;
        proxy_ = std::make_unique<Proxy>(host(), port());
        ASSERT_RC(0, rmutex_configure(url_through(proxy_->port()).c_str()));
        rmutex_t warm;
        init_mutex(&warm, lock_name("warmup"));
        ASSERT_RC(0, rmutex_lock(&warm));
        ASSERT_RC(0, rmutex_unlock(&warm));
        ASSERT_RC(0, rmutex_destroy(&warm));
    }

    void TearDown() override
    {
        RedisTest::TearDown();
        proxy_.reset();
    }

    Proxy::Pred acquire_of(const std::string &name)
    {
        return [name](const Proxy::Args &a) {
            return Proxy::is_eval(a) && Proxy::mentions(a, name) && !Proxy::mentions(a, kReleaseOnly);
        };
    }
    Proxy::Pred unlock_of(const std::string &name)
    {
        return [name](const Proxy::Args &a) {
            return Proxy::is_eval(a) && Proxy::mentions(a, name) && Proxy::mentions(a, kReleaseOnly);
        };
    }

    void expect_one_hold_of_one(const std::string &name)
    {
        auto h = redis().hgetall(name);
        ASSERT_EQ(1u, h.size()) << "fields in the lock hash";
        /* The value names the acquisition (a number), never a count that a
         * retry could have raised: the client counts recursion. */
        EXPECT_TRUE(std::regex_match(h.begin()->second, std::regex("^[1-9][0-9]*$"))) << h.begin()->second;
    }

    std::unique_ptr<Proxy> proxy_;
};

TEST_F(Indeterminate, LockWhoseReplyIsLostStillSucceedsWithOneHold)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    proxy_->drop_reply_of_next(acquire_of(name));
    rmutex_stats_t s0 = stats();
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_EQ(1, proxy_->dropped_replies()) << "the fault was not injected";
    EXPECT_NE('-', proxy_->last_dropped_reply()[0]) << "the dropped reply was an error: " << proxy_->last_dropped_reply();
    expect_one_hold_of_one(name);
    EXPECT_GE(stats().indeterminate, s0.indeterminate + 1);
    unsigned count = 0;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(1u, count);
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name)) << "one unlock must free it";
}

TEST_F(Indeterminate, TrylockWhoseReplyIsLostStillSucceedsWithOneHold)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    proxy_->drop_reply_of_next(acquire_of(name));
    ASSERT_RC(0, rmutex_trylock(&m));
    ASSERT_EQ(1, proxy_->dropped_replies());
    expect_one_hold_of_one(name);
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
}

TEST_F(Indeterminate, RecursiveLockWhoseReplyIsLostCountsOnce)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_RECURSIVE);
    proxy_->drop_reply_of_next(acquire_of(name));
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_EQ(1, proxy_->dropped_replies());
    ASSERT_RC(0, rmutex_lock(&m));
    expect_one_hold_of_one(name);
    unsigned count = 0;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(2u, count);
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_TRUE(redis().exists(name));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
}

TEST_F(Indeterminate, LostAcquireReplyWhileAnotherProcessGotInIsNotAHold)
{
    /* The acquire reached Redis but failed (held elsewhere); its reply is
     * lost.  The resolution must say "not ours": trylock is EBUSY, never 0. */
    std::string name = lock_name();
    auto child = child_holding(name, base_url());
    ASSERT_TRUE(child);
    auto theirs = redis().hgetall(name);
    rmutex_t m;
    init_mutex(&m, name);
    proxy_->drop_reply_of_next(acquire_of(name));
    int rc = rmutex_trylock(&m);
    ASSERT_EQ(1, proxy_->dropped_replies());
    /* EAGAIN would also be honest ("could not find out"); 0 would be a lie. */
    EXPECT_TRUE(rc == EBUSY || rc == EAGAIN) << err_name(rc);
    EXPECT_EQ(theirs, redis().hgetall(name));
    unsigned count = 9;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(0u, count);
}

/* A cached mutex whose cache the keeper parks 1 ms after its last use. */
class IndeterminateParked : public Indeterminate {
  protected:
    IndeterminateParked() { options_ = "cache_park=1&cache_idle=60000"; }

    /* Only an acquire names the not-recoverable key and no release's mark
     * lifetime (park.lua and the watchdog's renewals name neither). */
    Proxy::Pred acquire_only(const std::string &name)
    {
        return [name](const Proxy::Args &a) {
            return Proxy::is_eval(a) && Proxy::mentions(a, "rmutex_notrecoverable:{" + name + "}") &&
                   !Proxy::mentions(a, kReleaseOnly);
        };
    }
};

TEST_F(IndeterminateParked, ATakeBackWhoseReplyIsLostGoesOnWithTheSameCache)
{
    std::string name = lock_name();
    rmutex_t m;
    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_setcache(&a, 1);
    ASSERT_RC(0, rmutex_init(&m, name.c_str(), &a));
    rmutexattr_destroy(&a);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    std::string acq = redis().lock_value(name);
    ASSERT_TRUE(wait_until([&] { return redis().lock_value(name) == "p" + acq; }, ms(5000))) << "not parked";
    proxy_->drop_reply_of_next(acquire_only(name));
    rmutex_stats_t s0 = stats();
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_EQ(1, proxy_->dropped_replies()) << "the fault was not injected";
    EXPECT_EQ(acq, redis().lock_value(name)) << "asked again, the take-back must find its own hold";
    EXPECT_EQ(s0.cache_hits + 1, stats().cache_hits) << "served from the cache it had";
    EXPECT_EQ(s0.cache_starts, stats().cache_starts);
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(acq, redis().lock_value(name)) << "still cached";
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(Indeterminate, UnlockWhoseReplyIsLostSucceedsAndNoRetryReleasesALaterHold)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    /* Between Redis executing the unlock and the library learning about it,
     * another owner takes the lock (straight to Redis, not through the
     * proxy).  Any retry of the unlock must leave that hold alone. */
    const std::string other = "99999999-8888-7777-6666-555555555555:42";
    Redis direct(host(), port(), password_);
    std::atomic<bool> taken{false};
    proxy_->drop_reply_of_next(unlock_of(name), [&] {
        if (!direct.exists(name)) {
            direct.cmd({"HSET", name, other, "1"});
            direct.cmd({"PEXPIRE", name, "30000"});
            taken = true;
        }
    });
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_EQ(1, proxy_->dropped_replies()) << "the fault was not injected";
    ASSERT_TRUE(taken) << "the unlock had not released the lock when its reply was dropped";
    auto theirs = redis().hgetall(name);
    ASSERT_EQ(1u, theirs.size());
    EXPECT_EQ(1u, theirs.count(other)) << "a retried unlock released the later hold";
    /* Background retries, if any, run until the lease would have run out at
     * the latest; watch for a second. */
    EXPECT_FALSE(wait_until_unscaled([&] { return !redis().hgetall(name).count(other); }, ms(1000)))
        << "the later hold was released after the unlock returned";
    EXPECT_GT(redis().pttl(name), 25000) << "the later hold's lease was changed";
    EXPECT_RC(EPERM, rmutex_unlock(&m)) << "nothing of ours is left to unlock";
}

TEST_F(Indeterminate, UnlockWhoseReplyIsLostLeavesTheLockFree)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    proxy_->drop_reply_of_next(unlock_of(name));
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_EQ(1, proxy_->dropped_replies());
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(0, rmutex_trylock(&m));
    expect_one_hold_of_one(name);
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Indeterminate, LockRequestDroppedBeforeRedisIsRetried)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    proxy_->drop_next_request(acquire_of(name));
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_EQ(1, proxy_->dropped_requests()) << "the fault was not injected";
    expect_one_hold_of_one(name);
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
}

/* Every request closed under it: the lock call asks again with a backoff,
 * not in a tight loop of connections, and times out with nothing held. */
TEST_F(Indeterminate, TimedlockWhoseEveryRequestIsDroppedBacksOffAndTimesOut)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    proxy_->drop_requests(acquire_of(name));
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 1;
    EXPECT_RC(ETIMEDOUT, rmutex_timedlock(&m, &dl));
    int tries = proxy_->dropped_requests();
    proxy_->disarm();
    EXPECT_GE(tries, 2) << "the fault was not injected";
    /* 10 ms doubling to 1 s: about 8 in a second; a tight loop makes thousands. */
    EXPECT_LE(tries, 40) << "asked " << tries << " times in a second";
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(Indeterminate, TrylockRequestDroppedBeforeRedisLeavesNoPhantomHold)
{
    /* The header allows EAGAIN when Redis could not be reached; after a
     * reconnect the library can also retry and succeed.  Either way the
     * result and Redis must agree. */
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    proxy_->drop_next_request(acquire_of(name));
    int rc = rmutex_trylock(&m);
    ASSERT_EQ(1, proxy_->dropped_requests());
    if (rc == 0) {
        expect_one_hold_of_one(name);
        EXPECT_RC(0, rmutex_unlock(&m));
    } else {
        EXPECT_RC(EAGAIN, rc);
        EXPECT_FALSE(redis().exists(name)) << "a hold nobody owns";
    }
    EXPECT_FALSE(redis().exists(name));
}

TEST_F(Indeterminate, UnlockRequestDroppedBeforeRedisIsRetried)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    proxy_->drop_next_request(unlock_of(name));
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_EQ(1, proxy_->dropped_requests());
    /* Retried now or in the background "until the lease would have run
     * out": either way the lock is released well before that. */
    EXPECT_TRUE(wait_until([&] { return !redis().exists(name); }, ms(3000)));
}

TEST_F(Indeterminate, EveryConnectionKilledMidWaitStillEndsInOneHold)
{
    std::string name = lock_name();
    auto child = child_holding(name, base_url(), {"--hold-ms=500"});
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    Async waiter([&] {
        int rc = rmutex_lock(&m);
        return rc;
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting == 1; }, ms(5000)));
    proxy_->close_all();
    ASSERT_TRUE(waiter.wait(ms(5000)));
    EXPECT_RC(0, waiter.rc());
    expect_one_hold_of_one(name);
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
}

/* A connection reset before its first byte is what a TLS port does to a
 * plain-text client -- and what a CLIENT KILL can do too.  The library
 * names a TLS port (EACCES) only when every look resets so: three resets
 * in a row are an outage, retried; a proxy that resets everything is the
 * TLS port it looks like.  (Under a storm of CLIENT KILL, a dial and one
 * second look were once both reset, and a barrier wait failed EACCES.) */
class ResetsAtDial : public Indeterminate {
  protected:
    void SetUp() override { RedisTest::SetUp(); } /* configured by the test */
};

TEST_F(ResetsAtDial, ThreeResetsInARowAreAnOutageRetriedNotATlsPort)
{
    proxy_ = std::make_unique<Proxy>(host(), port());
    proxy_->reset_connections(3);
    ASSERT_RC(0, rmutex_configure(url_through(proxy_->port()).c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    struct timespec t = abs_after(CLOCK_REALTIME, scaled(ms(5000)).count());
    EXPECT_RC(0, rmutex_timedlock(&m, &t));
    EXPECT_EQ(3, proxy_->resets());
    EXPECT_TRUE(redis().exists(name));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(ResetsAtDial, AServerThatResetsEveryPlainConnectionIsNamedATlsPort)
{
    proxy_ = std::make_unique<Proxy>(host(), port());
    proxy_->reset_connections(1000000);
    int rc = rmutex_configure(url_through(proxy_->port()).c_str());
    std::string detail = rmutex_detail();
    if (!rc) { /* configure dials nobody: the first call does */
        std::string name = lock_name();
        rmutex_t m;
        init_mutex(&m, name);
        struct timespec t = abs_after(CLOCK_REALTIME, scaled(ms(5000)).count());
        rc = rmutex_timedlock(&m, &t);
        detail = rmutex_detail();
        rmutex_destroy(&m);
    }
    EXPECT_RC(EACCES, rc);
    EXPECT_NE(std::string::npos, detail.find("TLS port")) << detail;
    EXPECT_GE(proxy_->resets(), 4);
}

/* A refused login, then dials that get no answer at all (a stalled or
 * overloaded server): the refusal stands through the next two such dials --
 * a ported program is not told "unreachable", then "answers again", about a
 * server that only ever refused it -- and the third in a row is an outage,
 * said as one (pool.c, KEEP_REFUSAL).  Each call meanwhile answers at once
 * with the refusal, unless it is the one that dials. */
TEST_F(ResetsAtDial, ARefusalStandsThroughTwoUnansweredDialsAndTheThirdIsAnOutage)
{
    ASSERT_EQ("OK", redis().cmd({ "ACL", "SETUSER", "later", "reset", "on", ">Not-Its-Pw-1", "~*", "&*",
                                  "+@all" }).str());
    proxy_ = std::make_unique<Proxy>(host(), port());
    const long kTimeoutMs = 300;
    std::string url = "redis://later:Pw-later@127.0.0.1:" + std::to_string(proxy_->port()) +
                      "?connect_timeout=" + std::to_string(kTimeoutMs) +
                      "&command_timeout=" + std::to_string(kTimeoutMs);
    ASSERT_RC(0, rmutex_configure(url.c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(EACCES, rmutex_trylock(&m));
    std::string refusal = rmutex_detail();
    ASSERT_NE(std::string::npos, refusal.find("refused the login")) << refusal;

    proxy_->stall_requests([](const Proxy::Args &) { return true; }); /* nothing answered from now */
    int rc = EACCES, dials_refused = 0, calls = 0;
    std::string detail;
    for (auto until = Clock::now() + scaled(ms(20000)); rc == EACCES && Clock::now() < until; calls++) {
        auto t0 = Clock::now();
        rc = rmutex_trylock(&m);
        detail = rmutex_detail();
        if (rc != EACCES)
            break;
        EXPECT_EQ(refusal, detail) << "call " << calls;
        if (elapsed_ms(t0) >= kTimeoutMs * 2 / 3) /* it dialled, and waited for the answer */
            dials_refused++;
        else
            std::this_thread::sleep_for(ms(5)); /* (the backoff between dials: 10 ms doubling) */
    }
    EXPECT_EQ(2, dials_refused) << "unanswered dials that still said the refusal";
    EXPECT_RC(EAGAIN, rc) << "the third unanswered dial in a row: " << detail;
    EXPECT_EQ(std::string::npos, detail.find("refused")) << detail;
    EXPECT_FALSE(redis().exists(name));

    /* The server answers again, the login fixed: in. */
    proxy_->disarm();
    ASSERT_EQ("OK", redis().cmd({ "ACL", "SETUSER", "later", ">Pw-later" }).str());
    EXPECT_TRUE(wait_until([&] { return rmutex_trylock(&m) == 0; }, ms(5000))) << rmutex_detail();
    EXPECT_TRUE(redis().exists(name));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
}

/* An unlock that cannot reach Redis is handed to the watchdog, which sends
 * it again until the lease would have run out.  Meanwhile the thread may
 * lock again, and Redis (which never saw the release) answers with a new
 * hold over the thread's own field -- as after a failover that lost a
 * release.  The old release, arriving late, must leave the new hold alone:
 * it names the acquisition it ends. */
class DeferredRelease : public Indeterminate, public ::testing::WithParamInterface<bool> {
  protected:
    DeferredRelease() { options_ = "command_timeout=300"; }

    /* The release only: the non-fair one names how long a not-recoverable
     * mark lives; every fair call names the channel, and the release says
     * "release". */
    static Proxy::Pred release_of(const std::string &name, bool fair)
    {
        std::string channel = std::string("redisson_lock__channel:") + "{" + name + "}";
        return [channel, fair](const Proxy::Args &a) {
            return Proxy::is_eval(a) && Proxy::mentions(a, channel) &&
                   Proxy::mentions(a, fair ? "release" : kReleaseOnly);
        };
    }
};

TEST_P(DeferredRelease, ALateReleaseOfTheLastHoldLeavesTheNextHoldAlone)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_TSAN();
    std::string name = lock_name();
    rmutex_t m, other;
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_setfair(&a, GetParam()));
    ASSERT_RC(0, rmutex_init(&m, name.c_str(), &a));
    ASSERT_RC(0, rmutex_init(&other, name.c_str(), &a));
    rmutexattr_destroy(&a);
    static std::atomic<int> lost{0};
    lost = 0;
    ASSERT_RC(0, rmutex_set_lost_callback([](rmutex_t *, const char *, void *) { lost++; }, nullptr));
    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t first = 0, second = 0;
    ASSERT_RC(0, rmutex_fence(&m, &first));
    proxy_->drop_requests(release_of(name, GetParam()));
    ASSERT_RC(0, rmutex_unlock(&m)) << "an unlock Redis cannot hear is deferred, not failed";
    ASSERT_GE(proxy_->dropped_requests(), 1) << "the fault was not injected";
    ASSERT_TRUE(redis().exists(name)) << "the release reached Redis";
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_fence(&m, &second));
    EXPECT_GT(second, first) << "the same token for two holds";
    int sent = proxy_->count(release_of(name, GetParam()));
    proxy_->disarm();
    /* The watchdog's next try of the old release now reaches Redis. */
    ASSERT_TRUE(wait_until([&] { return proxy_->count(release_of(name, GetParam())) > sent; }, ms(5000)))
        << "the deferred release was never sent again";
    EXPECT_FALSE(wait_until_unscaled([&] { return !redis().exists(name); }, ms(1000)))
        << "the late release freed the thread's next hold";
    /* Another process finds it held; the hold is renewed, not lost. */
    pid_t child = fork();
    if (child == 0) _exit(rmutex_trylock(&other));
    int st = 0;
    ASSERT_EQ(child, waitpid(child, &st, 0));
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_RC(EBUSY, WEXITSTATUS(st)) << "another process got in while this one holds";
    EXPECT_EQ(0, lost.load());
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
    rmutex_set_lost_callback(nullptr, nullptr);
    EXPECT_RC(0, rmutex_destroy(&m));
    EXPECT_RC(0, rmutex_destroy(&other));
}

INSTANTIATE_TEST_SUITE_P(Kinds, DeferredRelease, ::testing::Bool(), [](const ::testing::TestParamInfo<bool> &i) {
    return std::string(i.param ? "Fair" : "NonFair");
});

class IndeterminateRenewal : public Indeterminate {
  protected:
    IndeterminateRenewal() { options_ = "lease=1000"; }
};

TEST_F(IndeterminateRenewal, LostRenewalReplyDoesNotLoseTheLock)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    static std::atomic<int> lost{0};
    ASSERT_RC(0, rmutex_set_lost_callback([](rmutex_t *, const char *, void *) { lost++; }, nullptr));
    ASSERT_RC(0, rmutex_lock(&m));
    /* While we hold it, the only script naming the lock is a renewal. */
    proxy_->drop_reply_of_next(acquire_of(name));
    ASSERT_TRUE(wait_until([&] { return proxy_->dropped_replies() == 1; }, ms(2000)));
    auto t0 = Clock::now();
    while (elapsed_ms(t0) < 2000) {
        ASSERT_GT(redis().pttl(name), 0) << "the lease ran out after a lost renewal reply";
        std::this_thread::sleep_for(ms(20));
    }
    EXPECT_EQ(0, lost.load());
    EXPECT_EQ(0u, stats().locks_lost);
    EXPECT_RC(0, rmutex_unlock(&m));
}

} // namespace

namespace {

class ReleaseUndone : public RedisTest, public ::testing::WithParamInterface<bool> {};

/* A failover can lose a release that Redis answered: the promoted replica
 * still has the thread's field in the lock hash.  The thread's next
 * acquisition is a new hold with a new fencing token, not a "retry" of the
 * old one answered with the old token. */
TEST_P(ReleaseUndone, ANewAcquisitionOverItsOwnStaleFieldGetsANewToken)
{
    std::string name = lock_name();
    std::string owner = "rmutex_owner:{" + name + "}";
    rmutex_t m;
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_setfair(&a, GetParam()));
    ASSERT_RC(0, rmutex_init(&m, name.c_str(), &a));
    rmutexattr_destroy(&a);
    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t first = 0, second = 0;
    ASSERT_RC(0, rmutex_fence(&m, &first));
    /* What the replica had before the release: the hold and its mark (a
     * non-robust, uncontended hold has none). */
    std::string lock_dump = redis().cmd({"DUMP", name}).str();
    std::string mark_dump = redis().cmd({"DUMP", owner}).str();
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_FALSE(redis().exists(name));
    ASSERT_EQ("OK", redis().cmd({"RESTORE", name, "30000", lock_dump, "REPLACE"}).str());
    if (!mark_dump.empty()) {
        ASSERT_EQ("OK", redis().cmd({"RESTORE", owner, "60000", mark_dump, "REPLACE"}).str());
    }
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_fence(&m, &second));
    EXPECT_GT(second, first) << "the same token twice for two holds";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(0, rmutex_destroy(&m));
}

INSTANTIATE_TEST_SUITE_P(Kinds, ReleaseUndone, ::testing::Bool(), [](const ::testing::TestParamInfo<bool> &i) {
    return std::string(i.param ? "Fair" : "NonFair");
});


/* ---- a lost release reply, then a restart -------------------------------- */

class IndeterminateRestart : public Indeterminate {
  protected:
    IndeterminateRestart() { own_server_ = true; }
};

TEST_F(IndeterminateRestart, AnUnlockWhoseReplyIsLostAndWhoseServerThenRestartsIsEpermNotAGuessedZero)
{
    /* The one case nothing can decide: the release ran (or not) and its
     * reply was lost, and the server restarted before the retry -- which
     * finds the hold gone either way.  The answer is the safe one, lost,
     * and it is counted. */
    static std::atomic<int> lost{0};
    lost = 0;
    ASSERT_RC(0, rmutex_set_lost_callback([](rmutex_t *, const char *, void *) { lost++; }, nullptr));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t unconfirmed = stats().releases_unconfirmed;
    proxy_->drop_reply_of_next(unlock_of(name), [&] {
        server()->stop();
        server()->restart();
    });
    EXPECT_RC(EPERM, rmutex_unlock(&m)) << "a release that cannot be confirmed was answered released";
    ASSERT_EQ(1, proxy_->dropped_replies()) << "the fault was not injected";
    EXPECT_EQ(unconfirmed + 1, stats().releases_unconfirmed);
    EXPECT_EQ(1, lost.load()) << "the holder is told at its unlock";
    EXPECT_NE(nullptr, strstr(rmutex_detail(), name.c_str())) << rmutex_detail();
    EXPECT_RC(0, rmutex_lock(&m)) << "usable again";
    EXPECT_RC(0, rmutex_unlock(&m));
    rmutex_set_lost_callback(nullptr, nullptr);
}

/* A read unlock whose release waits on the server past its command
 * timeout, while the process's other readers keep the read lease renewed:
 * the read was good when the thread let go and still is, so the unlock is
 * 0, not EPERM.  (W13 saw 32 false EPERMs of 10 000 threads unlocking at
 * once: the known-good time was taken before the wait.) */
class BusyReadUnlock : public Indeterminate {
  protected:
    BusyReadUnlock() { options_ = "lease=1500&command_timeout=2500"; }
};

TEST_F(BusyReadUnlock, AReadUnlockWaitingPastItsLeaseWhileAnotherThreadStillReadsIsNotALoss)
{
    std::string name = lock_name();
    rrwlock_t l;
    ASSERT_RC(0, rrwlock_init(&l, name.c_str(), nullptr));
    std::atomic<int> in{ 0 }, stop{ 0 };
    Async other([&] {
        int r = rrwlock_rdlock(&l);
        if (r) return r;
        in = 1;
        while (!stop) std::this_thread::sleep_for(ms(10));
        return rrwlock_unlock(&l);
    });
    ASSERT_TRUE(wait_until([&] { return in.load() == 1; }, ms(5000)));
    ASSERT_RC(0, rrwlock_rdlock(&l));
    uint64_t lost = stats().locks_lost;
    /* The thread's rdunlock only: the watchdog's connection (its renewals,
     * and the deferred release it takes over) is spared. */
    proxy_->stall_requests([](const Proxy::Args &a) { return Proxy::is_eval(a) && Proxy::mentions(a, "rdunlock"); },
                           "rmutex:wd:");
    auto t0 = Clock::now();
    int rc = rrwlock_unlock(&l);
    int64_t waited = std::chrono::duration_cast<ms>(Clock::now() - t0).count();
    EXPECT_GE(waited, 2000) << "the release was not held up: this test tested nothing";
    EXPECT_RC(0, rc) << "a read the other reader's renewals kept good, after " << waited << " ms";
    EXPECT_EQ(lost, stats().locks_lost) << "reported lost";
    proxy_->disarm();
    /* The deferred release lands; the other reader still reads, then goes. */
    auto reading_threads = [&] {
        auto keys = redis().cmd({ "KEYS", "rmutex_rw_holds:{" + name + "}:*" });
        if (!keys || keys->type != REDIS_REPLY_ARRAY || keys->elements != 1) return -1LL;
        return redis().cmd({ "HLEN", keys->element[0]->str }).integer();
    };
    ASSERT_TRUE(wait_until([&] { return reading_threads() == 1; }, ms(5000)))
        << "the deferred read release never landed: " << reading_threads();
    stop = 1;
    ASSERT_TRUE(other.wait(ms(5000)));
    EXPECT_RC(0, other.rc());
    ASSERT_RC(0, rrwlock_wrlock(&l)) << "a writer after both readers";
    EXPECT_RC(0, rrwlock_unlock(&l));
    EXPECT_RC(0, rrwlock_destroy(&l));
}

} // namespace
