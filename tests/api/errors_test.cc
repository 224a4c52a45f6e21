/* errors_test.cc -- errno left alone, rmutex_detail, an unreachable server,
 * and the errors a server answers (READONLY, OOM, NOPERM, too few replicas).
 *
 * Every return code of every rmutex_* call, as rmutex.h specifies them,
 * against a real redis-server.  "Held elsewhere" means held by
 * rmutex_test_child (another process) unless a test says "another thread".
 * Where the header is silent, the assumption is written next to the
 * assertion that depends on it. */
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <regex>

#include "api_util.h"
#include "harness.h"

namespace {

using namespace rmt;

/* ===================================================================== */
/* errno and rmutex_detail                                                 */
/* ===================================================================== */

class RmutexErrno : public RedisTest {};

TEST_F(RmutexErrno, IsLeftAsItWasByEveryCallAlsoWhenTheyFail)
{
    const int sentinel = 31337;
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    auto check = [&](int rc, const char *call) {
        EXPECT_EQ(sentinel, errno) << call << " returned " << err_name(rc);
        errno = sentinel;
    };
    rmutex_t m, mine, rec;
    unsigned count;
    uint64_t token;
    rmutex_stats_t s;
    struct timespec past = {0, 0}, soon = abs_after(CLOCK_REALTIME, 50), bad = soon;
    bad.tv_nsec = 2000000000;
    errno = sentinel;
    check(rmutex_init(&m, nullptr, nullptr), "init(NULL name)");
    check(rmutex_init(&m, "a{b", nullptr), "init(bad braces)");
    check(rmutex_init(&m, name.c_str(), nullptr), "init");
    check(rmutex_trylock(&m), "trylock (EBUSY)");
    check(rmutex_timedlock(&m, &past), "timedlock (past)");
    check(rmutex_timedlock(&m, &soon), "timedlock (ETIMEDOUT)");
    check(rmutex_timedlock(&m, &bad), "timedlock (EINVAL)");
    check(rmutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, &soon), "clocklock (bad clock)");
    check(rmutex_unlock(&m), "unlock (EPERM)");
    check(rmutex_consistent(&m), "consistent (EINVAL)");
    check(rmutex_fence(&m, &token), "fence (EPERM)");
    check(rmutex_holdcount(&m, &count), "holdcount");
    check(rmutex_holdcount(nullptr, &count), "holdcount(NULL)");
    check(rmutex_destroy(&m), "destroy");
    check(rmutex_init(&mine, lock_name("mine").c_str(), nullptr), "init mine");
    check(rmutex_lock(&mine), "lock");
    check(rmutex_fence(&mine, &token), "fence");
    check(rmutex_destroy(&mine), "destroy (EBUSY)");
    check(rmutex_unlock(&mine), "unlock");
    check(rmutex_unlock(&mine), "unlock again (EPERM)");
    rmutexattr_t a;
    check(rmutexattr_init(&a), "attr init");
    check(rmutexattr_settype(&a, RMUTEX_ERRORCHECK), "settype");
    check(rmutex_init(&rec, lock_name("ec").c_str(), &a), "init errorcheck");
    check(rmutex_lock(&rec), "lock errorcheck");
    check(rmutex_lock(&rec), "relock (EDEADLK)");
    check(rmutex_trylock(&rec), "trylock by owner (EBUSY)");
    check(rmutex_unlock(&rec), "unlock errorcheck");
    check(rmutexattr_destroy(&a), "attr destroy");
    check(rmutex_force_unlock(lock_name("free").c_str()), "force_unlock");
    check(rmutex_force_unlock(""), "force_unlock(\"\")");
    check(rmutex_stats(&s, sizeof s), "stats");
    check(rmutex_stats(nullptr, sizeof s), "stats(NULL)");
    check(rmutex_configure(url().c_str()), "configure (EBUSY)");
    check(rmutex_set_pool_size(0), "set_pool_size(0)");
    check(rmutex_set_default_lease(1), "set_default_lease(1)");
    check(rmutex_set_lost_callback(nullptr, nullptr), "set_lost_callback");
    (void)rmutex_detail();
    check(0, "detail");
    (void)rmutex_version();
    (void)rmutex_version_string();
    check(0, "version");
    check(rmutex_shutdown(), "shutdown");
    check(rmutex_configure("garbage"), "configure (EINVAL)");
}

TEST(RmutexErrnoUnreachable, IsLeftAsItWasWhenRedisCannotBeReached)
{
    std::string url = "redis://127.0.0.1:" + std::to_string(free_port());
    ASSERT_RC(0, rmutex_configure(url.c_str()));
    rmutex_t m;
    ASSERT_RC(0, rmutex_init(&m, "rmt:errno:unreachable", nullptr));
    errno = 777;
    EXPECT_RC(EAGAIN, rmutex_trylock(&m));
    EXPECT_EQ(777, errno);
    struct timespec dl = abs_after(CLOCK_REALTIME, 100);
    EXPECT_RC(ETIMEDOUT, rmutex_timedlock(&m, &dl));
    EXPECT_EQ(777, errno);
}

class RmutexDetail : public RedisTest {
  protected:
    RmutexDetail() : RedisTest(true, "", false) {}
};

TEST_F(RmutexDetail, SaysWhyAfterAFailure)
{
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    std::string name = lock_name();
    ASSERT_EQ("OK", redis().cmd({"SET", name, "x"}).str());
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(EINVAL, rmutex_trylock(&m));
    ASSERT_NE(nullptr, rmutex_detail());
    EXPECT_STRNE("", rmutex_detail());
}

TEST_F(RmutexDetail, IsThreadLocal)
{
    ASSERT_RC(EINVAL, rmutex_configure("garbage"));
    std::string mine = rmutex_detail();
    ASSERT_NE("", mine);
    std::string theirs = "unset";
    std::thread([&] { theirs = rmutex_detail(); }).join();
    EXPECT_EQ("", theirs) << "another thread sees this thread's detail";
    EXPECT_EQ(mine, rmutex_detail());
}

TEST_F(RmutexDetail, NeverContainsThePassword)
{
    const std::string pw = "Sup3rS3cretPw";
    auto srv = RedisServer::start({"--requirepass", pw});
    ASSERT_TRUE(srv);
    std::string hp = srv->host() + ":" + std::to_string(srv->port());
    auto no_pw = [&](const char *what) {
        std::string d = rmutex_detail();
        EXPECT_EQ(std::string::npos, d.find(pw)) << what << ": " << d;
        EXPECT_EQ(std::string::npos, d.find("S3cret")) << what << ": " << d;
    };

    /* Rejected URLs that carry the password. */
    EXPECT_RC(EINVAL, rmutex_configure(("redis://:" + pw + "@" + hp + "?bogus=1").c_str()));
    no_pw("unknown option");
    EXPECT_RC(EINVAL, rmutex_configure(("redis://:" + pw + "@" + srv->host() + ":notaport").c_str()));
    no_pw("bad port");
    EXPECT_RC(EINVAL, rmutex_configure(("redis://:" + pw + "@" + hp + "?sni=a").c_str()));
    no_pw("a TLS option without TLS");
    EXPECT_RC(EINVAL, rmutex_configure(("rediss://:" + pw + "@" + hp + "?cacert=/no/such.crt").c_str()));
    no_pw("a TLS file that cannot be read");

    /* The right password, then a failure of a lock call. */
    ASSERT_RC(0, rmutex_configure(("redis://:" + pw + "@" + hp).c_str()));
    std::string name = lock_name();
    Redis raw(srv->host(), srv->port(), pw);
    ASSERT_EQ("OK", raw.cmd({"SET", name, "not a lock"}).str());
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(EINVAL, rmutex_trylock(&m));
    EXPECT_STRNE("", rmutex_detail());
    no_pw("string key");
    ASSERT_RC(0, rmutex_shutdown());

    /* A wrong password: Redis refuses the credentials. */
    const std::string wrong = "Wr0ngS3cretPw";
    ASSERT_RC(0, rmutex_configure(("redis://:" + wrong + "@" + hp).c_str()));
    rmutex_t m2;
    init_mutex(&m2, lock_name("other"));
    EXPECT_RC(EACCES, rmutex_trylock(&m2));
    std::string d = rmutex_detail();
    EXPECT_NE("", d);
    EXPECT_EQ(std::string::npos, d.find(wrong)) << d;
    EXPECT_EQ(std::string::npos, d.find("S3cret")) << d;
    struct timespec dl = abs_after(CLOCK_REALTIME, 300);
    int rc = rmutex_timedlock(&m2, &dl);
    /* The header lists EACCES among lock's codes; a timed wait might also
     * keep retrying until its deadline. */
    EXPECT_TRUE(rc == EACCES || rc == ETIMEDOUT) << err_name(rc);
    d = rmutex_detail();
    EXPECT_EQ(std::string::npos, d.find(wrong)) << d;
}

/* A timed lock that runs out while another process holds the lock says
 * so -- not what its last, hopeless, round trip met ("waiting for Redis's
 * reply: timed out"). */
TEST_F(RmutexDetail, ATimedlockThatTimesOutOnALockHeldElsewhereSaysItIsHeld)
{
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    std::string name = lock_name();
    auto holder = child_holding(name, url());
    ASSERT_TRUE(holder);
    rmutex_t m;
    init_mutex(&m, name);
    for (int i = 0; i < 2; i++) {
        struct timespec dl = abs_after(CLOCK_REALTIME, 300);
        EXPECT_RC(ETIMEDOUT, rmutex_timedlock(&m, &dl));
        std::string d = rmutex_detail();
        EXPECT_NE(std::string::npos, d.find(name + " is held by another")) << d;
    }
    holder->write_line("unlock");
    rmutex_destroy(&m);
}

TEST_F(RmutexDetail, AclUserAndPasswordAuthenticate)
{
    ASSERT_EQ("OK", redis().cmd({"ACL", "SETUSER", "rmtuser", "on", ">UserPw123", "~*", "&*", "+@all"}).str());
    ASSERT_RC(0, rmutex_configure(("redis://rmtuser:UserPw123@" + host() + ":" + std::to_string(port())).c_str()));
    rmutex_t m;
    init_mutex(&m, lock_name());
    ASSERT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    bool seen = false;
    for (auto &c : redis().client_list())
        if (c["user"] == "rmtuser")
            seen = true;
    EXPECT_TRUE(seen) << "no connection authenticated as rmtuser";
}

/* ===================================================================== */
/* Redis unreachable                                                       */
/* ===================================================================== */

class RmutexUnreachable : public ::testing::Test {
  protected:
    void SetUp() override
    {
        port_ = free_port();
        url_ = "redis://127.0.0.1:" + std::to_string(port_);
        ASSERT_RC(0, rmutex_configure(url_.c_str()));
        ASSERT_RC(0, rmutex_init(&m_, "rmt:unreachable", nullptr));
    }
    int port_ = 0;
    std::string url_;
    rmutex_t m_;
};

TEST_F(RmutexUnreachable, TrylockIsEagainWithADetail)
{
    auto t0 = Clock::now();
    EXPECT_RC(EAGAIN, rmutex_trylock(&m_));
    EXPECT_STRNE("", rmutex_detail());
    EXPECT_LT(elapsed_ms(t0), scaled(ms(3000)).count()) << "trylock must not wait long";
}

TEST_F(RmutexUnreachable, TimedlockIsEtimedoutNearItsDeadline)
{
    struct timespec dl = abs_after(CLOCK_REALTIME, 500);
    auto t0 = Clock::now();
    EXPECT_RC(ETIMEDOUT, rmutex_timedlock(&m_, &dl));
    EXPECT_TRUE(reached(CLOCK_REALTIME, dl));
    EXPECT_LE(elapsed_ms(t0), 500 + scaled(ms(1000)).count());
    EXPECT_STRNE("", rmutex_detail());
    struct timespec mono = abs_after(CLOCK_MONOTONIC, 300);
    EXPECT_RC(ETIMEDOUT, rmutex_clocklock(&m_, CLOCK_MONOTONIC, &mono));
    EXPECT_TRUE(reached(CLOCK_MONOTONIC, mono));
}

TEST_F(RmutexUnreachable, LockKeepsWaitingAndSucceedsOnceAServerAppears)
{
    Async locker([&] { return rmutex_lock(&m_); });
    /* A negative check: it must not come back while nothing listens. */
    EXPECT_FALSE(wait_until_unscaled([&] { return locker.done(); }, ms(1500)))
        << "rmutex_lock returned " << err_name(locker.rc()) << " while Redis was unreachable";
    auto srv = RedisServer::start({}, port_);
    ASSERT_TRUE(srv);
    ASSERT_TRUE(locker.wait(ms(10000))) << "rmutex_lock did not notice the server";
    EXPECT_RC(0, locker.rc());
    Redis raw(srv->host(), srv->port());
    EXPECT_EQ("hash", raw.type("rmt:unreachable"));
    /* The hold belongs to the locker thread, which has ended; force it free
     * so the test leaves nothing behind. */
    EXPECT_RC(0, rmutex_force_unlock("rmt:unreachable"));
}

struct OutageLog {
    std::mutex mu;
    std::vector<int> calls; /* the down argument of each call, in order */
    std::string first_detail;
};

static void on_outage(int down, const char *detail, void *arg)
{
    auto *log = static_cast<OutageLog *>(arg);
    std::lock_guard<std::mutex> g(log->mu);
    if (log->calls.empty()) log->first_detail = detail ? detail : "(null)";
    log->calls.push_back(down);
}

TEST_F(RmutexUnreachable, OutageCallbackSaysDownOnceThenUpOnce)
{
    OutageLog log;
    ASSERT_RC(0, rmutex_set_outage_callback(on_outage, &log));
    auto calls = [&] { std::lock_guard<std::mutex> g(log.mu); return log.calls; };
    EXPECT_RC(EAGAIN, rmutex_trylock(&m_));
    Async locker([&] { return rmutex_lock(&m_); });
    /* The lock keeps dialling; the callback must not repeat itself. */
    EXPECT_FALSE(wait_until_unscaled([&] { return calls().size() > 1; }, ms(1500)));
    ASSERT_EQ(std::vector<int>{1}, calls()) << "one call, down = 1";
    EXPECT_NE(std::string::npos, log.first_detail.find("127.0.0.1")) << log.first_detail;
    auto srv = RedisServer::start({}, port_);
    ASSERT_TRUE(srv);
    ASSERT_TRUE(locker.wait(ms(10000)));
    EXPECT_RC(0, locker.rc());
    ASSERT_TRUE(wait_until([&] { return calls().size() >= 2; }, ms(3000)));
    EXPECT_EQ((std::vector<int>{1, 0}), calls()) << "then one call, down = 0";
    EXPECT_RC(0, rmutex_force_unlock("rmt:unreachable"));
    EXPECT_RC(0, rmutex_set_outage_callback(nullptr, nullptr));
}

/* ===================================================================== */
/* Refusals by the server: replica, OOM, missing replicas                  */
/* ===================================================================== */

class RmutexServerRefuses : public RedisTest {
  protected:
    RmutexServerRefuses() : RedisTest(/*own_server=*/true, "", /*configure=*/false) {}
};

TEST_F(RmutexServerRefuses, AReadOnlyReplicaIsErofs)
{
    auto replica = RedisServer::start({"--replicaof", host(), std::to_string(port())});
    ASSERT_TRUE(replica);
    ASSERT_RC(0, rmutex_configure(replica->url().c_str()));
    rmutex_t m;
    init_mutex(&m, lock_name());
    EXPECT_RC(EROFS, rmutex_trylock(&m));
    EXPECT_STRNE("", rmutex_detail());
    EXPECT_RC(EROFS, rmutex_lock(&m));
    struct timespec dl = abs_after(CLOCK_REALTIME, 2000);
    EXPECT_RC(EROFS, rmutex_timedlock(&m, &dl));
    EXPECT_FALSE(redis().exists(lock_name()));
}

TEST_F(RmutexServerRefuses, OutOfMemoryIsEnomemAndPassesWhenMemoryIsBack)
{
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    rmutex_t m;
    init_mutex(&m, lock_name());
    ASSERT_RC(0, rmutex_trylock(&m)); /* connections and scripts are in place */
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_EQ("OK", redis().cmd({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).str());
    ASSERT_EQ("OK", redis().cmd({"CONFIG", "SET", "maxmemory", "1"}).str());
    EXPECT_RC(ENOMEM, rmutex_trylock(&m));
    EXPECT_STRNE("", rmutex_detail());
    EXPECT_RC(ENOMEM, rmutex_lock(&m));
    EXPECT_FALSE(redis().exists(lock_name()));
    ASSERT_EQ("OK", redis().cmd({"CONFIG", "SET", "maxmemory", "0"}).str());
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexServerRefuses, AUserWithoutScriptPermissionIsEacces)
{
    ASSERT_EQ("OK", redis().cmd({"ACL", "SETUSER", "noscripts", "on", ">NoScriptPw1", "~*", "&*", "+@all",
                                 "-@scripting"}).str());
    ASSERT_RC(0, rmutex_configure(("redis://noscripts:NoScriptPw1@" + host() + ":" + std::to_string(port())).c_str()));
    rmutex_t m;
    init_mutex(&m, lock_name());
    EXPECT_RC(EACCES, rmutex_trylock(&m));
    std::string d = rmutex_detail();
    EXPECT_NE("", d);
    EXPECT_EQ(std::string::npos, d.find("NoScriptPw1")) << d;
    EXPECT_RC(EACCES, rmutex_lock(&m));
    EXPECT_FALSE(redis().exists(lock_name()));
}

TEST_F(RmutexServerRefuses, TooFewReplicasIsEnoreplicasAndTheHoldIsGivenBack)
{
    /* The server has no replica at all; WAIT 1 can only time out. */
    ASSERT_RC(0, rmutex_configure(url_with("replicas=1&wait_timeout=100").c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_trylock(&m));
    EXPECT_STRNE("", rmutex_detail());
    EXPECT_FALSE(redis().exists(name)) << "the unacknowledged hold was not given back";
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_lock(&m));
    EXPECT_FALSE(redis().exists(name));
    unsigned count = 9;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(0u, count);
    EXPECT_RC(EPERM, rmutex_unlock(&m));
}

TEST_F(RmutexServerRefuses, WaitReplicasSetAtRunTimeAppliesToo)
{
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    ASSERT_RC(0, rmutex_set_wait_replicas(1, 100));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_trylock(&m));
    EXPECT_FALSE(redis().exists(name));
    ASSERT_RC(0, rmutex_set_wait_replicas(0, 0));
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexServerRefuses, WaitForAReplicaThatExistsSucceeds)
{
    /* Redis 7 waits 5 s before a diskless full sync by default. */
    ASSERT_EQ("OK", redis().cmd({"CONFIG", "SET", "repl-diskless-sync-delay", "0"}).str());
    auto replica = RedisServer::start({"--replicaof", host(), std::to_string(port())});
    ASSERT_TRUE(replica);
    ASSERT_TRUE(wait_until(
        [&] { return redis().cmd({"INFO", "replication"}).str().find("state=online") != std::string::npos; },
        ms(10000)))
        << "the replica did not connect";
    ASSERT_RC(0, rmutex_configure(url_with("replicas=1&wait_timeout=2000").c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_trylock(&m));
    Redis r(replica->host(), replica->port());
    EXPECT_EQ("hash", r.type(name)) << "acknowledged means the replica has it";
    EXPECT_RC(0, rmutex_unlock(&m));
}

/* Replica acknowledgement for every lock kind, and the WAIT that outlasts
 * the command timeout (found with replicas=1&wait_timeout=5000&pool=1 and
 * no replica: the WAIT reply stayed pending on a pooled connection, the
 * give-back read it as its own answer, and the lock stayed in Redis). */
class RmutexReplicaAck : public RmutexServerRefuses,
                         public ::testing::WithParamInterface<bool> {
  protected:
    void TearDown() override
    {
        rmutex_set_wait_replicas(0, 0);
        rmutex_set_min_replicas(0);
        RmutexServerRefuses::TearDown();
    }
    void init(rmutex_t *m, const std::string &name)
    {
        rmutexattr_t a;
        ASSERT_EQ(0, rmutexattr_init(&a));
        ASSERT_EQ(0, rmutexattr_setfair(&a, GetParam()));
        ASSERT_RC(0, rmutex_init(m, name.c_str(), &a));
        rmutexattr_destroy(&a);
    }
    std::string owner_key(const std::string &name) { return "rmutex_owner:{" + name + "}"; }
};

TEST_P(RmutexReplicaAck, AWaitLongerThanTheCommandTimeoutReallyGivesTheHoldBack)
{
    ASSERT_RC(0, rmutex_configure(
                     url_with("replicas=1&wait_timeout=1200&command_timeout=300&pool=1").c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init(&m, name);
    auto t0 = Clock::now();
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_trylock(&m));
    EXPECT_GE(elapsed_ms(t0), 1100) << "WAIT's reply is read for its whole timeout";
    EXPECT_NE(std::string::npos, std::string(rmutex_detail()).find("given back")) << rmutex_detail();
    EXPECT_FALSE(redis().exists(name)) << "the unacknowledged hold is still in Redis";
    EXPECT_FALSE(redis().exists(owner_key(name)));
    /* The one pooled connection is not left with a pending reply. */
    ASSERT_RC(0, rmutex_set_wait_replicas(0, 0));
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_EQ("hash", redis().type(name));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_P(RmutexReplicaAck, TooFewReplicasIsEnoreplicasForEveryAcquiringCall)
{
    ASSERT_RC(0, rmutex_configure(url_with("replicas=1&wait_timeout=100").c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init(&m, name);
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_trylock(&m));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_lock(&m));
    EXPECT_FALSE(redis().exists(name));
    struct timespec dl = abs_after(CLOCK_REALTIME, 2000);
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_timedlock(&m, &dl));
    EXPECT_FALSE(redis().exists(name));
    unsigned count = 9;
    EXPECT_RC(0, rmutex_holdcount(&m, &count));
    EXPECT_EQ(0u, count);
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    EXPECT_GE(stats().replica_shortfalls, 3u);
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_P(RmutexReplicaAck, AutoWithoutAFloorWaitsForNoneOnAPlainServer)
{
    /* A plain redis:// server has no known replicas: auto waits for none. */
    ASSERT_RC(0, rmutex_configure(url_with("replicas=auto&wait_timeout=100").c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init(&m, name);
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(0u, stats().replica_shortfalls);
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_P(RmutexReplicaAck, TheFloorRefusesAPrimaryWithoutReplicas)
{
    /* A primary restarted stale reports no replicas: the floor, not its
     * own count, decides.  Set by URL, then by the setter. */
    ASSERT_RC(0, rmutex_configure(url_with("replicas=auto&min_replicas=1&wait_timeout=100").c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init(&m, name);
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_trylock(&m));
    EXPECT_FALSE(redis().exists(name));
    ASSERT_RC(0, rmutex_set_min_replicas(0));
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    ASSERT_RC(0, rmutex_set_min_replicas(1));
    EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_trylock(&m));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_P(RmutexReplicaAck, AReplicaThatAcknowledgesLetsEveryKindIn)
{
    ASSERT_EQ("OK", redis().cmd({"CONFIG", "SET", "repl-diskless-sync-delay", "0"}).str());
    auto replica = RedisServer::start({"--replicaof", host(), std::to_string(port())});
    ASSERT_TRUE(replica);
    ASSERT_TRUE(wait_until(
        [&] { return redis().cmd({"INFO", "replication"}).str().find("state=online") != std::string::npos; },
        ms(10000)));
    ASSERT_RC(0, rmutex_configure(url_with("replicas=1&min_replicas=1&wait_timeout=2000").c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    Redis r(replica->host(), replica->port());
    EXPECT_EQ("hash", r.type(name)) << "acknowledged means the replica has it";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(0u, stats().replica_shortfalls);
    EXPECT_RC(0, rmutex_destroy(&m));
}

INSTANTIATE_TEST_SUITE_P(Kinds, RmutexReplicaAck, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &i) {
                             return std::string(i.param ? "Fair" : "NonFair");
                         });

} // namespace
