/* admin_test.cc -- rmutex_force_unlock, rmutex_shutdown, rmutex_configure
 * and the setters, rmutex_stats.
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
#include <cstddef>
#include <cstring>
#include <mutex>
#include <regex>
#include <set>

#include "api_util.h"
#include "harness.h"

namespace {

using namespace rmt;

/* ===================================================================== */
/* rmutex_force_unlock                                                     */
/* ===================================================================== */

class RmutexForceUnlock : public RedisTest {
  protected:
    /* poll=10000: a waiter that gets in quickly was woken by the release. */
    RmutexForceUnlock() : RedisTest(false, "poll=10000") {}
};

TEST_F(RmutexForceUnlock, ReleasesALockHeldByAnotherProcessWhoseUnlockThenIsEperm)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
    EXPECT_FALSE(redis().exists(name));
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_trylock(&m));
    auto mine = redis().hgetall(name);
    ASSERT_TRUE(child->write_line("unlock"));
    auto line = child->expect_line("unlocked", ms(5000));
    ASSERT_TRUE(line);
    EXPECT_EQ(std::to_string(EPERM), field(*line, "rc"));
    EXPECT_EQ(mine, redis().hgetall(name)) << "the old holder's unlock released our hold";
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexForceUnlock, WithAnOwnerIsACompareAndDeleteAndNamesTheHolder)
{
    std::string name = lock_name();
    char holder[128] = "x";
    EXPECT_RC(ENOENT, rmutex_force_unlock_owner(name.c_str(), nullptr, holder, sizeof holder));
    EXPECT_STREQ("", holder);
    EXPECT_RC(EINVAL, rmutex_force_unlock_owner("", nullptr, holder, sizeof holder));
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    auto fields = redis().hgetall(name);
    ASSERT_EQ(1u, fields.size());
    std::string theirs = fields.begin()->first;
    char mine[64];
    ASSERT_RC(0, rmutex_owner_id(mine, sizeof mine));
    EXPECT_NE(theirs, mine);
    EXPECT_RC(ERANGE, rmutex_owner_id(mine, 4));
    EXPECT_RC(EINVAL, rmutex_owner_id(nullptr, 64));
    EXPECT_RC(ESRCH, rmutex_force_unlock_owner(name.c_str(), mine, holder, sizeof holder));
    EXPECT_EQ(theirs, holder) << "the holder it left alone";
    EXPECT_TRUE(redis().exists(name));
    EXPECT_RC(0, rmutex_force_unlock_owner(name.c_str(), theirs.c_str(), holder, sizeof holder));
    EXPECT_EQ(theirs, holder);
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(ENOENT, rmutex_force_unlock_owner(name.c_str(), theirs.c_str(), nullptr, 0));
}

TEST_F(RmutexForceUnlock, InspectReadsALockWithoutTouchingIt)
{
    std::string name = lock_name();
    rmutex_lockinfo_t in;
    EXPECT_RC(EINVAL, rmutex_inspect(name.c_str(), nullptr, sizeof in));
    EXPECT_RC(EINVAL, rmutex_inspect("", &in, sizeof in));
    ASSERT_RC(0, rmutex_inspect(name.c_str(), &in, sizeof in));
    EXPECT_EQ(0, in.held);
    EXPECT_EQ(-1, in.ttl_ms);
    EXPECT_EQ(0u, in.fence);
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_inspect(name.c_str(), &in, sizeof in));
    EXPECT_EQ(0u, in.fence) << "a token is taken when the holder asks for one";
    uint64_t token = 0;
    ASSERT_RC(0, rmutex_fence(&m, &token));
    EXPECT_GT(token, 0u);
    ASSERT_RC(0, rmutex_inspect(name.c_str(), &in, sizeof in));
    char me[64];
    ASSERT_RC(0, rmutex_owner_id(me, sizeof me));
    EXPECT_EQ(1, in.held);
    EXPECT_EQ(1u, in.holders);
    EXPECT_STREQ(me, in.owner);
    EXPECT_GT(in.ttl_ms, 0);
    EXPECT_EQ(token, in.fence);
    EXPECT_GT(in.server_time_ms, 0);
    auto before = redis().hgetall(name);
    ASSERT_RC(0, rmutex_inspect(name.c_str(), &in, sizeof in));
    EXPECT_EQ(before, redis().hgetall(name));
    EXPECT_EQ(std::to_string(token), redis().get("redisson_lock_token:{" + name + "}").value_or(""))
        << "no token spent";
    EXPECT_RC(0, rmutex_unlock(&m));
    std::string other = lock_name("string");
    redis().cmd({ "SET", other, "x" });
    EXPECT_RC(EINVAL, rmutex_inspect(other.c_str(), &in, sizeof in)) << "a string under the name";
}

/* The registry's announcement is a script call, made by the watchdog.  On
 * a server that does not have the script cached (flushed, restarted, or
 * another server after rmutex_shutdown) the call is answered NOSCRIPT; it
 * must go again at once with the script's body.  It used to be dropped,
 * leaving the hold unannounced for a whole period (lease/3: 20 s here). */
static bool announced(const std::string &name)
{
    rmutex_lockinfo_t in;
    return wait_until_unscaled([&] {
        return rmutex_inspect(name.c_str(), &in, sizeof in) == 0 && in.holder_known;
    }, ms(5000));
}

static std::string with_long_lease(std::string url)
{
    return url + (url.find('?') == std::string::npos ? "?" : "&") + "lease=60000";
}

TEST_F(RmutexForceUnlock, AHoldIsAnnouncedAtOnceAfterTheServerForgotItsScripts)
{
    ASSERT_RC(0, rmutex_shutdown());
    ASSERT_RC(0, rmutex_configure(with_long_lease(url()).c_str()));
    std::string first = lock_name("first"), second = lock_name("second");
    rmutex_t a, b;
    init_mutex(&a, first);
    ASSERT_RC(0, rmutex_lock(&a));
    EXPECT_TRUE(announced(first));
    ASSERT_RC(0, rmutex_unlock(&a));
    redis().cmd({ "SCRIPT", "FLUSH" });
    init_mutex(&b, second);
    ASSERT_RC(0, rmutex_lock(&b));
    EXPECT_TRUE(announced(second)) << "the announcement answered NOSCRIPT was not sent again";
    ASSERT_RC(0, rmutex_unlock(&b));
}

TEST_F(RmutexForceUnlock, AHoldIsAnnouncedAtOnceOnAnotherServerAfterAShutdown)
{
    std::string name = lock_name();
    {
        rmutex_t m;
        ASSERT_RC(0, rmutex_init(&m, name.c_str(), nullptr));
        ASSERT_RC(0, rmutex_lock(&m));
        EXPECT_TRUE(announced(name));
        ASSERT_RC(0, rmutex_unlock(&m));
        ASSERT_RC(0, rmutex_destroy(&m));
    }
    ASSERT_RC(0, rmutex_shutdown());
    auto other = RedisServer::start();
    ASSERT_RC(0, rmutex_configure(with_long_lease(other->url()).c_str()));
    rmutex_t m;
    ASSERT_RC(0, rmutex_init(&m, name.c_str(), nullptr));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_TRUE(announced(name)) << "the first announcement to the new server was dropped";
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_RC(0, rmutex_destroy(&m));
    ASSERT_RC(0, rmutex_shutdown()); /* (before the server it uses stops) */
}

/* The holder registry, read back by rmutex_inspect: this very process. */
TEST_F(RmutexForceUnlock, InspectNamesTheHoldersProcessAndHowLongItHasHeld)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    rmutex_lockinfo_t in;
    ASSERT_TRUE(wait_until([&] {
        return rmutex_inspect(name.c_str(), &in, sizeof in) == 0 && in.holder_known && in.held_ms >= 0;
    }, ms(5000))) << "announced at the first hold";
    EXPECT_EQ((long)getpid(), in.holder_pid);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    EXPECT_STREQ(host, in.holder_host);
    char exe[512] = "";
    ASSERT_GT(readlink("/proc/self/exe", exe, sizeof exe - 1), 0);
    EXPECT_STREQ(std::string(exe).substr(0, sizeof in.holder_exe - 1).c_str(), in.holder_exe);
    EXPECT_STREQ(rmutex_version_string(), in.holder_lib);
    EXPECT_NE(nullptr, strstr(in.holder_cmd, "admin_test")) << in.holder_cmd;
    EXPECT_LT(in.held_ms, 5000 * time_scale());
    /* A second hold is announced within about a second, with its own age. */
    std::string name2 = lock_name("second");
    rmutex_t m2;
    init_mutex(&m2, name2);
    ASSERT_RC(0, rmutex_lock(&m2));
    rmutex_lockinfo_t in2;
    ASSERT_TRUE(wait_until([&] {
        return rmutex_inspect(name2.c_str(), &in2, sizeof in2) == 0 && in2.held_ms >= 0;
    }, ms(3000))) << "a new hold appears in the registry within about a second";
    ASSERT_RC(0, rmutex_inspect(name.c_str(), &in, sizeof in));
    EXPECT_GT(in.held_ms, in2.held_ms) << "the first hold is the older";
    /* A caller built against the older, shorter struct gets that much. */
    rmutex_lockinfo_t small;
    memset(&small, 0x5a, sizeof small);
    ASSERT_RC(0, rmutex_inspect(name.c_str(), &small, offsetof(rmutex_lockinfo_t, holder_known)));
    EXPECT_EQ(1, small.held);
    EXPECT_EQ(0x5a5a5a5a, small.holder_known) << "nothing past the size given is written";
    EXPECT_RC(0, rmutex_unlock(&m2));
    EXPECT_RC(0, rmutex_unlock(&m));
    rmutex_destroy(&m2);
    rmutex_destroy(&m);
}

static int collect(const char *name, const rmutex_lockinfo_t *in, void *arg)
{
    auto *seen = static_cast<std::vector<std::string> *>(arg);
    EXPECT_TRUE(in->held);
    seen->push_back(name);
    return 0;
}

TEST_F(RmutexForceUnlock, ListVisitsEveryHeldLockMatchingThePattern)
{
    std::string pre = lock_name("");
    std::vector<rmutex_t> ms_(3);
    const char *names[] = { "a", "b", "c" };
    for (int i = 0; i < 3; i++) {
        init_mutex(&ms_[i], pre + "job:" + names[i]);
        ASSERT_RC(0, rmutex_lock(&ms_[i]));
    }
    redis().cmd({ "HSET", pre + "job:plain", "f", "v" });
    std::vector<std::string> seen;
    ASSERT_RC(0, rmutex_list((pre + "job:*").c_str(), collect, &seen));
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ((std::vector<std::string>{ pre + "job:a", pre + "job:b", pre + "job:c" }), seen);
    /* fn's nonzero return stops the walk and is returned. */
    int calls = 0;
    EXPECT_EQ(42, rmutex_list((pre + "*").c_str(), [](const char *, const rmutex_lockinfo_t *, void *a) {
        ++*static_cast<int *>(a);
        return 42;
    }, &calls));
    EXPECT_EQ(1, calls);
    EXPECT_RC(EINVAL, rmutex_list("*", nullptr, nullptr));
    seen.clear();
    ASSERT_RC(0, rmutex_list((pre + "none:*").c_str(), collect, &seen));
    EXPECT_TRUE(seen.empty());
    for (auto &m : ms_) {
        EXPECT_RC(0, rmutex_unlock(&m));
        rmutex_destroy(&m);
    }
    seen.clear();
    ASSERT_RC(0, rmutex_list((pre + "job:*").c_str(), collect, &seen));
    EXPECT_TRUE(seen.empty()) << "free locks have no keys";
}

/* A read-write lock read by two processes, each described (its thread,
 * its lease, its process from the holder registry); a writer queued
 * behind them; then written (the writer's process named); then free.  Its
 * mutex fields say the same to a program built before the read-write
 * ones, and rmutex_list finds it. */
TEST_F(RmutexForceUnlock, InspectTellsAReadWriteLocksReadersWriterAndQueue)
{
    std::string name = lock_name();
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    Child r1({ "rw", name, "r" }, url()), r2({ "rw", name, "r" }, url());
    ASSERT_TRUE(r1.expect_line("held rc=0", ms(5000)));
    ASSERT_TRUE(r2.expect_line("held rc=0", ms(5000)));
    rmutex_lockinfo_t in;
    ASSERT_TRUE(wait_until([&] {
        return rmutex_inspect(name.c_str(), &in, sizeof in) == 0 && in.readers_shown == 2 &&
               in.reader[0].held_ms >= 0 && in.reader[1].held_ms >= 0;
    }, ms(5000))) << "both readers described, with their processes";
    EXPECT_EQ(RMUTEX_KIND_RWLOCK, in.kind);
    EXPECT_EQ(RMUTEX_RW_READ, in.mode);
    EXPECT_EQ(1, in.held);
    EXPECT_EQ(2u, in.readers);
    EXPECT_EQ(2u, in.holders) << "a reader is a holder";
    std::set<long> pids;
    for (unsigned i = 0; i < 2; i++) {
        const rmutex_readerinfo_t &rd = in.reader[i];
        SCOPED_TRACE(rd.owner);
        EXPECT_TRUE(std::regex_match(rd.owner, std::regex("[0-9a-f-]+:[0-9]+"))) << "an owner id";
        EXPECT_EQ(1u, rd.holds);
        EXPECT_GT(rd.ttl_ms, 0);
        EXPECT_LE(rd.ttl_ms, 30000);
        EXPECT_EQ(1, rd.holder_known);
        EXPECT_STREQ(host, rd.holder_host);
        EXPECT_NE(nullptr, strstr(rd.holder_cmd, (" rw " + name + " r").c_str())) << rd.holder_cmd;
        pids.insert(rd.holder_pid);
    }
    EXPECT_EQ((std::set<long>{ r1.pid(), r2.pid() }), pids);
    EXPECT_STREQ(in.reader[0].owner, in.owner) << "the first reader, for older programs";
    EXPECT_EQ(in.reader[0].holder_pid, in.holder_pid);
    EXPECT_GT(in.ttl_ms, 0);
    EXPECT_EQ(0u, in.queue_len);
    EXPECT_EQ(0, in.cached);

    Child w({ "rw", name, "w" }, url());
    ASSERT_TRUE(wait_until([&] {
        return rmutex_inspect(name.c_str(), &in, sizeof in) == 0 && in.queue_len == 1;
    }, ms(5000))) << "the writer queued";
    EXPECT_EQ(1u, in.queued_writers);
    EXPECT_EQ(0u, in.queued_readers);
    ASSERT_EQ(1u, in.queue_shown);
    EXPECT_EQ('w', in.queue_mode[0]);
    EXPECT_TRUE(std::regex_match(in.queue[0], std::regex("[0-9a-f-]+:[0-9]+\\|[0-9]+")))
        << "<owner>|<acquisition>, as a fair waiter: " << in.queue[0];
    EXPECT_GT(in.queue_alive_ms[0], 0);
    EXPECT_GE(in.subscribers, 1u) << "the writer listens on the lock's channel";
    std::vector<std::string> seen;
    ASSERT_RC(0, rmutex_list(name.c_str(), collect, &seen));
    EXPECT_EQ(std::vector<std::string>{ name }, seen) << "listed";

    r1.write_line("unlock");
    r2.write_line("unlock");
    auto held = w.expect_line("held rc=0 fence=", ms(5000));
    ASSERT_TRUE(held);
    std::smatch mt;
    ASSERT_TRUE(std::regex_search(*held, mt, std::regex("fence=([0-9]+)")));
    ASSERT_TRUE(wait_until([&] {
        return rmutex_inspect(name.c_str(), &in, sizeof in) == 0 && in.mode == RMUTEX_RW_WRITE &&
               in.held_ms >= 0;
    }, ms(5000))) << "written, the writer's process described";
    EXPECT_EQ(1, in.held);
    EXPECT_EQ(1u, in.holders);
    EXPECT_EQ(0u, in.readers);
    EXPECT_EQ(0u, in.readers_shown);
    EXPECT_EQ(0u, in.queue_len);
    EXPECT_TRUE(std::regex_match(in.owner, std::regex("[0-9a-f-]+:[0-9]+"))) << in.owner;
    EXPECT_EQ((long)w.pid(), in.holder_pid);
    EXPECT_EQ(std::stoull(mt[1]), in.fence) << "the writer's token";
    EXPECT_GT(in.ttl_ms, 0);

    w.write_line("unlock");
    ASSERT_TRUE(w.expect_line("unlocked rc=0", ms(5000)));
    ASSERT_RC(0, rmutex_inspect(name.c_str(), &in, sizeof in));
    EXPECT_EQ(0, in.held);
    EXPECT_EQ(RMUTEX_RW_FREE, in.mode);
    EXPECT_EQ(-1, in.ttl_ms);
    EXPECT_EQ(0u, in.readers);
    seen.clear();
    ASSERT_RC(0, rmutex_list(name.c_str(), collect, &seen));
    EXPECT_TRUE(seen.empty()) << "free: not listed";
}

/* A mutex says it is one: the read-write fields are empty. */
TEST_F(RmutexForceUnlock, InspectOfAMutexLeavesTheReadWriteFieldsEmpty)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    rmutex_lockinfo_t in;
    memset(&in, 0x5a, sizeof in);
    ASSERT_RC(0, rmutex_inspect(name.c_str(), &in, sizeof in));
    EXPECT_EQ(1, in.held);
    EXPECT_EQ(RMUTEX_KIND_MUTEX, in.kind);
    EXPECT_EQ(RMUTEX_RW_FREE, in.mode);
    EXPECT_EQ(0u, in.readers);
    EXPECT_EQ(0u, in.readers_shown);
    EXPECT_EQ(0, in.queue_mode[0]);
    EXPECT_RC(0, rmutex_unlock(&m));
    rmutex_destroy(&m);
}

TEST_F(RmutexForceUnlock, WakesWaiters)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    Async waiter([&] {
        int rc = rmutex_lock(&m);
        return rc == 0 ? rmutex_unlock(&m) : rc;
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting >= 1 && stats().channels >= 1; }, ms(5000)));
    auto t0 = Clock::now();
    ASSERT_RC(0, rmutex_force_unlock(name.c_str()));
    ASSERT_TRUE(waiter.wait(ms(2000))) << "not woken by the forced release";
    EXPECT_RC(0, waiter.rc());
    EXPECT_LT(std::chrono::duration_cast<ms>(waiter.finished_at() - t0).count(), scaled(ms(2000)).count());
}

TEST_F(RmutexForceUnlock, OfAFreeLockIsZeroAndBadNamesAreEinval)
{
    std::string name = lock_name();
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
    EXPECT_RC(EINVAL, rmutex_force_unlock(nullptr));
    EXPECT_RC(EINVAL, rmutex_force_unlock(""));
    EXPECT_RC(EINVAL, rmutex_force_unlock("a{b"));
    std::string huge(RMUTEX_NAME_MAX + 1, 'f');
    EXPECT_RC(EINVAL, rmutex_force_unlock(huge.c_str()));
}

TEST_F(RmutexForceUnlock, KeepsTheFencingCounter)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    uint64_t before = 0, after = 0;
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_fence(&m, &before));
    ASSERT_RC(0, rmutex_force_unlock(name.c_str()));
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_fence(&m, &after));
    EXPECT_LT(before, after);
    EXPECT_RC(0, rmutex_unlock(&m));
}

/* ===================================================================== */
/* rmutex_shutdown                                                         */
/* ===================================================================== */

class RmutexShutdown : public RedisTest {};

TEST_F(RmutexShutdown, IsEbusyWithAHoldOutstandingAndChangesNothing)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto held = redis().hgetall(name);
    EXPECT_RC(EBUSY, rmutex_shutdown());
    EXPECT_RC(EBUSY, rmutex_configure(url().c_str())) << "the library is still in use";
    EXPECT_EQ(held, redis().hgetall(name));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_RC(0, rmutex_shutdown());
}

TEST_F(RmutexShutdown, IsEbusyWhileAThreadWaits)
{
    std::string name = lock_name();
    auto child = child_holding(name, url());
    ASSERT_TRUE(child);
    rmutex_t m;
    init_mutex(&m, name);
    Async waiter([&] {
        int rc = rmutex_lock(&m);
        return rc == 0 ? rmutex_unlock(&m) : rc;
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting >= 1; }, ms(5000)));
    EXPECT_RC(EBUSY, rmutex_shutdown());
    ASSERT_TRUE(child->write_line("unlock"));
    ASSERT_TRUE(waiter.wait(ms(5000)));
    EXPECT_RC(0, waiter.rc());
    EXPECT_RC(0, rmutex_shutdown());
}

TEST_F(RmutexShutdown, ClosesConnectionsAndTheLibraryWorksAgainAfterwards)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    std::string me = std::to_string(getpid());
    ASSERT_FALSE(redis().client_ids("rmutex:cmd:" + me).empty()) << "pool connections are named rmutex:cmd:<pid>";
    ASSERT_RC(0, rmutex_shutdown());
    EXPECT_TRUE(wait_until(
        [&] {
            for (auto &c : redis().client_list())
                if (c["name"].rfind("rmutex:", 0) == 0 && c["name"].size() > me.size() &&
                    c["name"].compare(c["name"].size() - me.size(), me.size(), me) == 0)
                    return false;
            return true;
        },
        ms(2000)))
        << "connections left open after rmutex_shutdown()";
    ASSERT_RC(0, rmutex_shutdown()) << "a second shutdown is harmless";
    /* configure may be called again, then the same mutex works. */
    ASSERT_RC(0, rmutex_configure(url_with("pool=2").c_str()));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_TRUE(redis().exists(name));
    EXPECT_RC(0, rmutex_unlock(&m));
}

/* ===================================================================== */
/* rmutex_configure and the process-wide settings                          */
/* ===================================================================== */

class RmutexConfigure : public RedisTest {
  protected:
    RmutexConfigure() : RedisTest(false, "", /*configure=*/false) {}
};

TEST_F(RmutexConfigure, RejectsMalformedUrls)
{
    std::string hp = host() + ":" + std::to_string(port());
    for (const std::string &bad : std::vector<std::string>{std::string(""), std::string("garbage"), std::string("redis//") + hp,
                            std::string("http://") + hp, std::string("redis://"), std::string("redis://:"),
                            "redis://" + host() + ":99999", "redis://" + host() + ":-1",
                            "redis://" + host() + ":abc", "redis://" + host() + ":6379x",
                            "redis://" + hp + "/notadb", "redis://" + hp + "/-3", "redis://[::1",
                            std::string("unix://"), "redis://" + hp + "?lease", "redis://" + hp + "?lease=abc",
                            "redis://" + hp + "?lease=-5", "redis://" + hp + "?pool=0",
                            "redis://" + hp + "?pool=100000", "redis://" + hp + "?poll=x",
                            "redis://" + hp + "?replicas=autox", "redis://" + hp + "?replicas=Auto",
                            "redis://" + hp + "?min_replicas=auto", "redis://" + hp + "?min_replicas=1001",
                            "redis://" + hp + "?cache_idle=0", "redis://" + hp + "?cache_min_hold=x",
                            "redis://" + hp + "?cache_idle=3600001", "redis://" + hp + "?cache_park=-1",
                            "redis://" + hp + "?cache_park=3600001"}) {
        EXPECT_RC(EINVAL, rmutex_configure(bad.c_str())) << "URL \"" << bad << "\"";
        EXPECT_STRNE("", rmutex_detail()) << "URL \"" << bad << "\"";
    }
    /* None of them counted as a use: a good URL is still accepted. */
    ASSERT_RC(0, rmutex_configure(url().c_str()));
}

TEST_F(RmutexConfigure, AcceptsTheCacheOptions)
{
    ASSERT_RC(0, rmutex_configure((base_url() + "?cache_min_hold=0&cache_idle=1&cache_park=0").c_str()));
    ASSERT_RC(0, rmutex_configure((base_url() + "?cache_park=3600000").c_str()));
    ASSERT_RC(0, rmutex_configure(url().c_str()));
}

TEST_F(RmutexConfigure, RejectsUnknownOptions)
{
    EXPECT_RC(EINVAL, rmutex_configure((base_url() + "?bogus=1").c_str()));
    EXPECT_RC(EINVAL, rmutex_configure((base_url() + "?lease=1000&nosuch=2").c_str()));
    ASSERT_RC(0, rmutex_configure(url().c_str()));
}

TEST_F(RmutexConfigure, TakesTlsAndRefusesTlsOptionsWithoutIt)
{
    EXPECT_RC(0, rmutex_configure(("rediss://" + host() + ":" + std::to_string(port())).c_str()))
        << rmutex_detail();
    EXPECT_RC(EINVAL, rmutex_configure((base_url() + "?sni=redis.example").c_str()));
    EXPECT_TRUE(contains_ci(rmutex_detail(), "tls")) << "detail: " << rmutex_detail();
    ASSERT_RC(0, rmutex_configure(url().c_str()));
}

TEST_F(RmutexConfigure, RejectsAHostThatDoesNotResolve)
{
    int rc = rmutex_configure("redis://no-such-host.invalid:6379");
    /* EINVAL for a name that does not exist; EAGAIN is the documented code
     * when the resolver fails temporarily (no DNS in a sandbox). */
    EXPECT_TRUE(rc == EINVAL || rc == EAGAIN) << err_name(rc);
    EXPECT_STRNE("", rmutex_detail());
}

TEST_F(RmutexConfigure, IsEbusyAfterFirstUseUntilShutdown)
{
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    rmutex_t m;
    init_mutex(&m, lock_name());
    ASSERT_RC(0, rmutex_trylock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(EBUSY, rmutex_configure(url().c_str()));
    EXPECT_RC(EBUSY, rmutex_configure(url_with("lease=1000").c_str()));
    ASSERT_RC(0, rmutex_shutdown());
    EXPECT_RC(0, rmutex_configure(url_with("lease=1000").c_str()));
    ASSERT_RC(0, rmutex_lock(&m));
    long long pttl = redis().pttl(lock_name());
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1000) << "the new configuration's lease applies";
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexConfigure, AcceptsEveryDocumentedFormAndOption)
{
    if (!server())
        GTEST_SKIP() << "needs the harness's own server (unix socket)";
    std::string hp = host() + ":" + std::to_string(port());
    std::vector<std::string> good = {
        "redis://" + hp,
        "redis://" + hp + "/0",
        "redis://" + hp + "/3?pool=2&lease=1000&poll=500&idle=500&command_timeout=1000&connect_timeout=500",
        "redis://localhost:" + std::to_string(port()),
        "redis://" + hp + "?replicas=0&wait_timeout=100",
        "redis://" + hp + "?replicas=auto&min_replicas=0&wait_timeout=100",
        "unix://" + server()->unix_socket(),
        "unix://" + server()->unix_socket() + "?db=2&pool=1",
    };
    std::string name = lock_name();
    for (auto &u : good) {
        SCOPED_TRACE(u);
        ASSERT_RC(0, rmutex_configure(u.c_str()));
        rmutex_t m;
        init_mutex(&m, name);
        ASSERT_RC(0, rmutex_trylock(&m));
        ASSERT_RC(0, rmutex_unlock(&m));
        ASSERT_RC(0, rmutex_destroy(&m));
        ASSERT_RC(0, rmutex_shutdown());
    }
}

TEST_F(RmutexConfigure, SelectsTheDatabaseFromTheUrl)
{
    if (!server())
        GTEST_SKIP() << "writes to database 5 of the harness's own server";
    ASSERT_RC(0, rmutex_configure((base_url() + "/5").c_str()));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_FALSE(redis().exists(name)) << "locked in database 0";
    Redis db5(host(), port());
    ASSERT_EQ("OK", db5.cmd({"SELECT", "5"}).str());
    EXPECT_EQ("hash", db5.type(name));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexConfigure, NullMeansTheRmutexUrlEnvironmentVariable)
{
    setenv("RMUTEX_URL", url_with("lease=1200").c_str(), 1);
    ASSERT_RC(0, rmutex_configure(nullptr));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    long long pttl = redis().pttl(name);
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1200);
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexConfigure, WithoutAnyCallUsesRmutexUrl)
{
    setenv("RMUTEX_URL", url_with("lease=1300").c_str(), 1);
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    long long pttl = redis().pttl(name);
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1300);
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(RmutexConfigure, SettersCheckTheirRanges)
{
    EXPECT_RC(EINVAL, rmutex_set_pool_size(0));
    EXPECT_RC(EINVAL, rmutex_set_pool_size(1025));
    EXPECT_RC(0, rmutex_set_pool_size(1));
    EXPECT_RC(0, rmutex_set_pool_size(1024));
    EXPECT_RC(0, rmutex_set_pool_size(4));
    EXPECT_RC(EINVAL, rmutex_set_default_lease(0));
    EXPECT_RC(EINVAL, rmutex_set_default_lease(99));
    EXPECT_RC(EINVAL, rmutex_set_default_lease(2147483648UL));
    EXPECT_RC(0, rmutex_set_default_lease(2147483647UL));
    EXPECT_RC(0, rmutex_set_default_lease(100));
    EXPECT_RC(0, rmutex_set_wait_replicas(0, 0));
    EXPECT_RC(EINVAL, rmutex_set_wait_replicas(1001, 100));
    EXPECT_RC(EINVAL, rmutex_set_wait_replicas(RMUTEX_WAIT_AUTO, 0));
    EXPECT_RC(0, rmutex_set_wait_replicas(RMUTEX_WAIT_AUTO, 100));
    EXPECT_RC(0, rmutex_set_wait_replicas(0, 0));
    EXPECT_RC(EINVAL, rmutex_set_min_replicas(1001));
    EXPECT_RC(0, rmutex_set_min_replicas(0));
    EXPECT_RC(0, rmutex_set_lost_callback(nullptr, nullptr));
}

TEST_F(RmutexConfigure, DefaultLeaseAppliesToLaterHolds)
{
    ASSERT_RC(0, rmutex_configure(url().c_str()));
    ASSERT_RC(0, rmutex_set_default_lease(1100));
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    long long pttl = redis().pttl(name);
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1100);
    EXPECT_RC(0, rmutex_unlock(&m));
}

/* ===================================================================== */
/* rmutex_stats                                                            */
/* ===================================================================== */

class RmutexStats : public RedisTest {};

TEST_F(RmutexStats, RejectsNullAndWritesOnlyTheGivenSize)
{
    EXPECT_RC(EINVAL, rmutex_stats(nullptr, sizeof(rmutex_stats_t)));
    unsigned char buf[sizeof(rmutex_stats_t) + 16];
    memset(buf, 0xAB, sizeof buf);
    EXPECT_RC(0, rmutex_stats(reinterpret_cast<rmutex_stats_t *>(buf), 8));
    for (size_t i = 8; i < sizeof buf; i++)
        ASSERT_EQ(0xAB, buf[i]) << "byte " << i << " written past the given size";
}

TEST_F(RmutexStats, CountsAcquisitionsAndGauges)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    rmutex_stats_t s0 = stats();
    ASSERT_RC(0, rmutex_lock(&m));
    rmutex_stats_t s1 = stats();
    EXPECT_EQ(s0.acquisitions + 1, s1.acquisitions);
    EXPECT_EQ(1u, s1.held);
    EXPECT_GE(s1.connections, 1u);
    EXPECT_GT(s1.round_trips, s0.round_trips);
    ASSERT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(0u, stats().held);
}

} // namespace
