/* cluster_test.cc -- rmutex on a real Redis Cluster (3 primaries on
 * loopback, started once for the whole program: ctest runs this binary as
 * one test).
 *
 * Routing by slot, MOVED and ASK followed, a slot migration held open
 * while threads lock names in it, sharded pub/sub (SPUBLISH/SSUBSCRIBE)
 * and the resubscription after the server takes a channel away, renewals
 * that follow their slot, fork, and the cluster URLs. */
#include "cluster_util.h"
#include "harness.h"
#include "program_env.h"
#include "wipe_util.h"
#include "redisson_client.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <sys/wait.h>
#include <set>
#include <thread>
#include <unistd.h>

using namespace rmt;

namespace {

Cluster *cluster;

::testing::Environment *const env = ::testing::AddGlobalTestEnvironment(
    new ProgramServers<Cluster>(&cluster, [](Cluster &s) { return s.start(3); }, "a cluster of 3 primaries"));

class ClusterTest : public ::testing::Test {
  protected:
    void SetUp() override
    {
        ASSERT_TRUE(cluster && !cluster->nodes.empty());
        /* The poll named each time: a URL sets only the options it names,
         * and settings outlive rmutex_shutdown (ClusterPubSub's 20 s poll
         * would otherwise stay for every test after it). */
        ASSERT_RC(0, rmutex_configure(cluster->url("poll=2000&" + options()).c_str()));
    }
    void TearDown() override
    {
        EXPECT_RC(0, rmutex_shutdown());
    }
    virtual std::string options() const { return "lease=1500&command_timeout=1000"; }
    /* Start again on the URL with options opts instead. */
    void reconfigure(const std::string &opts)
    {
        ASSERT_RC(0, rmutex_shutdown());
        ASSERT_RC(0, rmutex_configure(cluster->url(opts).c_str()));
    }

    std::string name(const std::string &suffix) { return test_lock_name(suffix); }
};

/* ---- configuration ---------------------------------------------------------- */

TEST(ClusterUrl, MalformedClusterAndSentinelUrlsAreEinvalWithADetail)
{
    for (const std::string &bad :
         {std::string("redis-cluster://"), std::string("redis-cluster://127.0.0.1:1,"),
          std::string("redis-cluster://127.0.0.1:1,,127.0.0.1:2"), std::string("redis-cluster://127.0.0.1:0"),
          std::string("redis-cluster://127.0.0.1:1/3"), std::string("redis-cluster://127.0.0.1:1?db=2"),
          std::string("redis-cluster://127.0.0.1:1?sentinel_user=a&sentinel_password=b"),
          std::string("redis-cluster://127.0.0.1:1?refresh=5"), std::string("redis-cluster://u:@[::1"),
          std::string("redis-sentinel://127.0.0.1:26379"), std::string("redis-sentinel://127.0.0.1:26379/"),
          std::string("redis-sentinel://127.0.0.1:26379/a/b"),
          std::string("redis-sentinel://127.0.0.1:26379/m?sentinel_user=u"),
          std::string("redis://127.0.0.1:1,127.0.0.1:2")}) {
        EXPECT_RC(EINVAL, rmutex_configure(bad.c_str())) << bad;
        EXPECT_STRNE("", rmutex_detail()) << bad;
    }
    std::string many = "redis-cluster://127.0.0.1:1";
    for (int i = 2; i <= 17; i++) many += ",127.0.0.1:" + std::to_string(i);
    EXPECT_RC(EINVAL, rmutex_configure(many.c_str()));
}

TEST(ClusterUrl, SeedsThatAreDownAreSkipped)
{
    /* The first two seeds listen nowhere. */
    std::string u = "redis-cluster://127.0.0.1:" + std::to_string(free_port()) + ",127.0.0.1:" +
                    std::to_string(free_port()) + "," + cluster->url().substr(16);
    ASSERT_RC(0, rmutex_configure(u.c_str()));
    rmutex_t m;
    init_mutex(&m, "rmt:seeds:" + std::to_string(getpid()));
    EXPECT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
    EXPECT_RC(0, rmutex_shutdown());
}

TEST(ClusterUrl, AMapWithNoSlotsIsNotBelievedWithoutASecondNode)
{
    /* A cluster-enabled node that belongs to no cluster answers CLUSTER
     * SLOTS with nothing -- as a failing node has been seen to answer with
     * only itself.  Asked first, it must not empty the map. */
    auto lonely = RedisServer::start({"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"});
    ASSERT_TRUE(lonely);
    std::string lone = "127.0.0.1:" + std::to_string(lonely->port());
    ASSERT_RC(0, rmutex_configure(("redis-cluster://" + lone + "," + cluster->url().substr(16)).c_str()));
    rmutex_t m;
    init_mutex(&m, "rmt:lonely:" + std::to_string(getpid()));
    EXPECT_RC(0, rmutex_trylock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
    ASSERT_RC(0, rmutex_shutdown());
    /* Alone, it is never believed: the call fails, saying why. */
    ASSERT_RC(0, rmutex_configure(("redis-cluster://" + lone).c_str()));
    init_mutex(&m, "rmt:lonely2:" + std::to_string(getpid()));
    EXPECT_RC(EAGAIN, rmutex_trylock(&m));
    EXPECT_NE(std::string::npos, std::string(rmutex_detail()).find("second opinion")) << rmutex_detail();
    EXPECT_RC(0, rmutex_destroy(&m));
    EXPECT_RC(0, rmutex_shutdown());
}

TEST(ClusterUrl, ARefusedLoginIsEaccesOnEveryCallNotUnreachable)
{
    /* The nodes have no password: AUTH with one is refused by every node.
     * A configuration error, not an outage: every call says so at once,
     * lock too (it would wait for ever for a map that cannot come). */
    std::string u = "redis-cluster://:not-the-password@" + cluster->url().substr(16);
    ASSERT_RC(0, rmutex_configure(u.c_str()));
    rmutex_t m;
    init_mutex(&m, "rmt:refused:" + std::to_string(getpid()));
    for (int i = 0; i < 3; i++) {
        EXPECT_RC(EACCES, rmutex_trylock(&m));
        EXPECT_NE(std::string::npos, std::string(rmutex_detail()).find("refused")) << rmutex_detail();
    }
    struct timespec dl = abs_after(CLOCK_REALTIME, 3000);
    auto t0 = Clock::now();
    EXPECT_RC(EACCES, rmutex_timedlock(&m, &dl));
    EXPECT_RC(EACCES, rmutex_lock(&m));
    EXPECT_LT(elapsed_ms(t0), scaled(ms(2500)).count()) << "the refusal was waited on";
    EXPECT_RC(0, rmutex_destroy(&m));
    EXPECT_RC(0, rmutex_shutdown());
}

TEST(ClusterUrl, NoSeedReachableIsAClearErrorWithinTheDeadline)
{
    std::string u = "redis-cluster://127.0.0.1:" + std::to_string(free_port()) + "?connect_timeout=200";
    ASSERT_RC(0, rmutex_configure(u.c_str()));
    rmutex_t m;
    init_mutex(&m, "rmt:noseed");
    auto t0 = Clock::now();
    EXPECT_RC(EAGAIN, rmutex_trylock(&m));
    EXPECT_NE(std::string::npos, std::string(rmutex_detail()).find("cluster map")) << rmutex_detail();
    struct timespec dl = abs_after(CLOCK_REALTIME, 1500);
    EXPECT_RC(ETIMEDOUT, rmutex_timedlock(&m, &dl));
    EXPECT_LT(elapsed_ms(t0), scaled(ms(6000)).count());
    EXPECT_RC(0, rmutex_destroy(&m));
    EXPECT_RC(0, rmutex_shutdown());
}

/* ---- routing ---------------------------------------------------------------- */

TEST_F(ClusterTest, ManyNamesSpreadOverThePrimariesWithNoRedirectAfterWarmUp)
{
    const int N = 120;
    std::vector<rmutex_t> m(N);
    std::vector<int> per(3, 0);
    for (int i = 0; i < N; i++) init_mutex(&m[i], name(std::to_string(i)));
    for (int i = 0; i < N; i++) { /* warm-up: the map, connections, scripts */
        ASSERT_RC(0, rmutex_lock(&m[i]));
        ASSERT_RC(0, rmutex_unlock(&m[i]));
    }
    rmutex_stats_t before = stats();
    for (int i = 0; i < N; i++) {
        std::string n = name(std::to_string(i));
        ASSERT_RC(0, rmutex_lock(&m[i]));
        int owner = cluster->owner(cluster->slot(n));
        ASSERT_GE(owner, 0);
        EXPECT_TRUE(cluster->client(owner).exists(n)) << n << " is on the slot's owner";
        per[owner]++;
        ASSERT_RC(0, rmutex_unlock(&m[i]));
    }
    rmutex_stats_t after = stats();
    EXPECT_EQ(0u, after.redirects_moved - before.redirects_moved);
    EXPECT_EQ(0u, after.redirects_ask - before.redirects_ask);
    for (int k = 0; k < 3; k++) EXPECT_GT(per[k], N / 6) << "node " << k;
    for (auto &x : m) EXPECT_RC(0, rmutex_destroy(&x));
}

/* rmutex_list SCANs every primary; rmutex_inspect finds the holder's
 * registry entry on whichever primary serves it (not, in general, the
 * lock's). */
TEST_F(ClusterTest, ListFindsLocksOnEveryPrimaryAndInspectFindsTheirHolder)
{
    const int N = 30;
    std::vector<rmutex_t> m(N);
    std::string pre = name("list:");
    std::set<int> owners;
    for (int i = 0; i < N; i++) {
        init_mutex(&m[i], pre + std::to_string(i));
        ASSERT_RC(0, rmutex_lock(&m[i]));
        owners.insert(cluster->owner(cluster->slot(pre + std::to_string(i))));
    }
    ASSERT_EQ(3u, owners.size()) << "the names spread over every primary";
    std::set<std::string> seen;
    ASSERT_RC(0, rmutex_list((pre + "*").c_str(), [](const char *n, const rmutex_lockinfo_t *, void *a) {
        static_cast<std::set<std::string> *>(a)->insert(n);
        return 0;
    }, &seen));
    EXPECT_EQ((size_t)N, seen.size());
    rmutex_lockinfo_t in;
    ASSERT_TRUE(wait_until([&] {
        return rmutex_inspect((pre + "0").c_str(), &in, sizeof in) == 0 && in.holder_known;
    }, ms(5000)));
    EXPECT_EQ((long)getpid(), in.holder_pid);
    for (auto &x : m) {
        EXPECT_RC(0, rmutex_unlock(&x));
        EXPECT_RC(0, rmutex_destroy(&x));
    }
}

/* A read-write lock in a cluster: inspect.lua reads its readers' keys in
 * the lock's slot, on its primary; list finds it there. */
TEST_F(ClusterTest, InspectAndListTellAReadWriteLockOnItsPrimary)
{
    std::string n = name("rw");
    rrwlock_t l;
    ASSERT_RC(0, rrwlock_init(&l, n.c_str(), nullptr));
    ASSERT_RC(0, rrwlock_rdlock(&l));
    rmutex_lockinfo_t in;
    ASSERT_TRUE(wait_until([&] {
        return rmutex_inspect(n.c_str(), &in, sizeof in) == 0 && in.readers_shown == 1 &&
               in.reader[0].holder_known;
    }, ms(5000)));
    EXPECT_EQ(RMUTEX_KIND_RWLOCK, in.kind);
    EXPECT_EQ(RMUTEX_RW_READ, in.mode);
    EXPECT_EQ(1u, in.readers);
    EXPECT_EQ(1u, in.reader[0].holds);
    EXPECT_EQ((long)getpid(), in.reader[0].holder_pid);
    int found = 0;
    ASSERT_RC(0, rmutex_list(n.c_str(), [](const char *, const rmutex_lockinfo_t *i, void *a) {
        *static_cast<int *>(a) += i->kind == RMUTEX_KIND_RWLOCK;
        return 0;
    }, &found));
    EXPECT_EQ(1, found);
    EXPECT_RC(0, rrwlock_unlock(&l));
    EXPECT_RC(0, rrwlock_destroy(&l));
}

/* ---- renewals ---------------------------------------------------------------- */

class ClusterRenewals : public ClusterTest {
  protected:
    /* Renewed every 1000 ms; a renewal gets 1000 ms to answer. */
    std::string options() const override { return "lease=3000&command_timeout=1000"; }
};

TEST_F(ClusterRenewals, AStalledPrimaryDelaysNoOtherPrimarysRenewals)
{
    std::string a = name("stalled"), b;
    int na = cluster->owner(cluster->slot(a));
    for (int k = 0; b.empty(); k++) {
        std::string c = name("healthy" + std::to_string(k));
        if (cluster->owner(cluster->slot(c)) != na) b = c;
    }
    int nb = cluster->owner(cluster->slot(b));
    rmutex_t ma, mb;
    init_mutex(&ma, a);
    init_mutex(&mb, b);
    /* The stalled one taken last: a single watchdog thread would come to
     * it first in each round and wait its whole budget before the other. */
    ASSERT_RC(0, rmutex_lock(&mb));
    ASSERT_RC(0, rmutex_lock(&ma));
    rmutex_stats_t before = stats();
    /* Node a answers nothing for 2.2 s (shorter than the lease). */
    ASSERT_EQ("OK", cluster->client(na).cmd({"CLIENT", "PAUSE", "2200", "ALL"}).str());
    long long least = 3000;
    auto t0 = Clock::now();
    while (elapsed_ms(t0) < 2600) {
        least = std::min(least, cluster->client(nb).pttl(b));
        std::this_thread::sleep_for(ms(20));
    }
    std::cerr << "[cluster] healthy primary's hold: PTTL never below " << least
              << " ms while another primary stalled\n";
    /* Renewed on time: never less than a lease minus one period and a
     * margin; a watchdog waiting for the stalled node would let it sink
     * by a renewal's whole budget more. */
    EXPECT_GT(least, 3000 - 1000 - scaled(ms(400)).count());
    EXPECT_EQ(0u, stats().locks_lost - before.locks_lost);
    EXPECT_RC(0, rmutex_unlock(&ma));
    EXPECT_RC(0, rmutex_unlock(&mb));
    EXPECT_RC(0, rmutex_destroy(&ma));
    EXPECT_RC(0, rmutex_destroy(&mb));
}

/* ---- slots that move ---------------------------------------------------------- */

/* Condition variables in a cluster, and wait morphing there: a signal
 * takes the waiter's free mutex for it only when the mutex's key is in the
 * condition's slot (the signal's script writes it on that node); else the
 * waiter takes it back itself, as before.  Either way it wakes holding it,
 * and no call meets CROSSSLOT. */
TEST_F(ClusterTest, AConditionHandsItsFreeMutexOverOnlyWhenTheyShareASlot)
{
    std::string a = name("cm-a"), b = name("cm-b");
    for (int i = 0; cluster->slot(a) == cluster->slot(b); i++) b = name("cm-b" + std::to_string(i));
    struct Case {
        std::string c, m;
        bool same;
    } cases[] = { { "{" + a + "}:c", "{" + a + "}:m", true }, { "{" + a + "}:c2", "{" + b + "}:m", false } };
    for (const Case &k : cases) {
        rcond_t c;
        rmutex_t m;
        ASSERT_RC(0, rcond_init(&c, k.c.c_str(), nullptr));
        init_mutex(&m, k.m);
        int cowner = cluster->owner(cluster->slot(k.c)), mowner = cluster->owner(cluster->slot(k.m));
        std::string waiting = "rmutex_cond_wait:" + k.c, channel = "rmutex_cond_channel:" + k.c;
        for (int round = 0; round < 2; round++) { /* the first loads the scripts */
            std::atomic<uint64_t> trips{0};
            Async waiter([&] {
                int r = rmutex_lock(&m);
                if (r) return 100 + r;
                uint64_t before = stats().round_trips;
                r = rcond_wait(&c, &m);
                trips = stats().round_trips - before;
                int u = rmutex_unlock(&m);
                return r ? 200 + r : u;
            });
            /* Registered, listening, and the mutex let go of: a signal now
             * finds it free. */
            ASSERT_TRUE(wait_until([&] {
                Reply subs = cluster->client(cowner).cmd({ "PUBSUB", "SHARDNUMSUB", channel });
                return cluster->client(cowner).cmd({ "ZCOUNT", waiting, "1", "+inf" }).integer() == 1 &&
                       subs && subs->elements == 2 && subs->element[1]->integer >= 1 &&
                       !cluster->client(mowner).exists(k.m);
            }, ms(5000))) << k.c;
            ASSERT_RC(0, rcond_signal(&c));
            ASSERT_TRUE(waiter.wait(ms(5000))) << k.c;
            EXPECT_RC(0, waiter.rc()) << k.c;
            if (round == 1 && k.same) {
                EXPECT_EQ(3u, trips.load()) << "register, release, signal: the mutex was not handed over";
            } else if (round == 1) {
                EXPECT_GE(trips.load(), 4u) << "handed over, though the mutex is in another slot";
            }
        }
        EXPECT_RC(0, rcond_destroy(&c));
        EXPECT_RC(0, rmutex_destroy(&m));
    }
}

/* A fair release or a signal to a thread of its own process is handed to
 * that thread by the calling thread (fair.c and cond.c, hand_over), through
 * the multiplexer of the node that serves the name's slot: for a name on
 * each of the three primaries, the calling thread does it at least once in
 * twenty rounds (the server's copy may come first in any one round), and
 * every round hands over correctly. */
TEST_F(ClusterTest, AReleaseOrASignalWakesAThreadOfItsOwnProcessOnEveryPrimary)
{
    for (int node = 0; node < 3; node++) {
        std::string n;
        for (int i = 0; cluster->owner(cluster->slot(n = name("here" + std::to_string(node) + "-" +
                                                               std::to_string(i)))) != node;
             i++) {}
        SCOPED_TRACE("primary " + std::to_string(node) + ", " + n);
        rmutexattr_t fa;
        rmutexattr_init(&fa);
        rmutexattr_setfair(&fa, 1);
        rmutex_t fm, cm;
        std::string fname = "{" + n + "}:f", cname = "{" + n + "}:c";
        ASSERT_RC(0, rmutex_init(&fm, fname.c_str(), &fa));
        init_mutex(&cm, "{" + n + "}:m");
        rcond_t c;
        ASSERT_RC(0, rcond_init(&c, cname.c_str(), nullptr));
        std::string queue = "rmutex_fair_queue:" + fname, waiting = "rmutex_cond_wait:" + cname;
        uint64_t fair = 0, signals = 0;
        for (int round = 0; round < 20 && !(fair && signals); round++) {
            ASSERT_RC(0, rmutex_lock(&fm));
            Async locker([&] {
                int r = rmutex_lock(&fm);
                return r ? r : rmutex_unlock(&fm);
            });
            ASSERT_TRUE(wait_until([&] { return cluster->client(node).cmd({ "ZCARD", queue }).integer() == 1; },
                                   ms(5000)));
            uint64_t f0 = stats().fair_handoffs_local;
            ASSERT_RC(0, rmutex_unlock(&fm));
            ASSERT_TRUE(locker.wait(ms(5000)));
            ASSERT_RC(0, locker.rc());
            fair += stats().fair_handoffs_local - f0;

            Async waiter([&] {
                int r = rmutex_lock(&cm);
                if (r) return 100 + r;
                r = rcond_wait(&c, &cm);
                int u = rmutex_unlock(&cm);
                return r ? 200 + r : u;
            });
            ASSERT_TRUE(wait_until([&] {
                return cluster->client(node).cmd({ "ZCOUNT", waiting, "1", "+inf" }).integer() == 1;
            }, ms(5000)));
            uint64_t s0 = stats().cond_signals_local;
            ASSERT_RC(0, rcond_signal(&c));
            ASSERT_TRUE(waiter.wait(ms(5000)));
            ASSERT_RC(0, waiter.rc());
            signals += stats().cond_signals_local - s0;
        }
        EXPECT_GE(fair, 1u) << "no fair release handed over from the releasing thread";
        EXPECT_GE(signals, 1u) << "no signal handed over from the signalling thread";
        ASSERT_TRUE(wait_until([&] { return rcond_destroy(&c) == 0; }, ms(3000)));
        EXPECT_RC(0, rmutex_destroy(&cm));
        EXPECT_RC(0, rmutex_destroy(&fm));
        rmutexattr_destroy(&fa);
    }
}

TEST_F(ClusterTest, AHeldLockSurvivesTheMoveOfItsSlotAndItsWaiterIsWokenAfterTheRelease)
{
    std::string n = name("moved");
    int slot = cluster->slot(n), from = cluster->owner(slot), to = (from + 1) % 3;
    rmutex_t held, waiting;
    init_mutex(&held, n);
    init_mutex(&waiting, n);
    HolderThread holder(&held);
    ASSERT_EQ(0, holder.wait_locked(ms(3000)));
    std::atomic<bool> got{false};
    Async waiter([&] {
        int r = rmutex_lock(&waiting);
        got = true;
        return r ? r : rmutex_unlock(&waiting);
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting > 0; }, ms(3000)));
    rmutex_stats_t before = stats();
    ASSERT_TRUE(cluster->move_slot(slot, to));
    /* Two leases after the move: the hold is renewed at the new owner. */
    ASSERT_TRUE(wait_until([&] { return cluster->client(to).pttl(n) > 0; }, ms(3000)));
    std::this_thread::sleep_for(ms(3200)); /* a span to survive, not a wait for a condition */
    EXPECT_GT(cluster->client(to).pttl(n), 0) << "the hold lapsed: renewals did not follow the slot";
    EXPECT_FALSE(got.load());
    EXPECT_EQ(0u, stats().locks_lost - before.locks_lost);
    auto t0 = Clock::now();
    EXPECT_EQ(0, holder.release());
    ASSERT_TRUE(waiter.wait(ms(3000)));
    EXPECT_EQ(0, waiter.rc());
    EXPECT_LT(elapsed_ms(t0), scaled(ms(1500)).count());
    EXPECT_GT(stats().redirects_moved, before.redirects_moved);
    EXPECT_RC(0, rmutex_destroy(&held));
    EXPECT_RC(0, rmutex_destroy(&waiting));
}

/* Migrate slot from -> to, the slot held open 2 s while the caller's
 * threads make done grow.  200 ms in, fresh_tries() tries a name with no
 * key on the source yet: it is sent on with ASK, and the target, IMPORTING,
 * answers the multi-key call TRYAGAIN until the end of the migration -- the
 * try forms say EAGAIN, and take nothing.  Then the keys move, the slot is
 * the target's, and the threads must make progress.  The stats as they
 * were before the migration. */
rmutex_stats_t migrate_held_open(int slot, int from, int to, const std::atomic<int> &done,
                                 const std::function<void()> &fresh_tries)
{
    rmutex_stats_t before = stats();
    EXPECT_TRUE(cluster->begin_migration(slot, from, to));
    std::this_thread::sleep_for(ms(200));
    fresh_tries();
    EXPECT_GT(stats().redirects_ask, before.redirects_ask) << "ASK was not followed";
    std::this_thread::sleep_for(ms(1800)); /* the migration is held open 2 s in all */
    EXPECT_TRUE(cluster->migrate_keys(slot, from, to));
    EXPECT_TRUE(cluster->finish_migration(slot, from, to));
    int after_move = done;
    EXPECT_TRUE(wait_until([&] { return done > after_move + 20; }, ms(5000))) << "no progress after the move";
    return before;
}

TEST_F(ClusterTest, CallsWaitOutAMigrationHeldOpenAndNeverOverlap)
{
    /* Three names in one slot (one {tag}): one the threads take turns on,
     * one held through the whole migration, one never used before. */
    std::string tag = "{" + name("migrating") + "}";
    std::string n = tag + ":turns", held_name = tag + ":held", fresh_name = tag + ":fresh";
    int slot = cluster->slot(n), from = cluster->owner(slot), to = (from + 2) % 3;
    rmutex_t held, fresh;
    init_mutex(&held, held_name);
    init_mutex(&fresh, fresh_name);
    HolderThread holder(&held);
    ASSERT_EQ(0, holder.wait_locked(ms(3000)));
    const int T = 4;
    std::vector<rmutex_t> m(T);
    for (auto &x : m) init_mutex(&x, n);
    ASSERT_RC(0, rmutex_lock(&m[0])); /* keys of the slot exist: mixed-key calls get TRYAGAIN */
    ASSERT_RC(0, rmutex_unlock(&m[0]));
    std::atomic<int> inside{0}, overlaps{0}, done{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> th;
    for (int t = 0; t < T; t++)
        th.emplace_back([&, t] {
            while (!stop) {
                if (rmutex_lock(&m[t])) continue;
                if (inside.fetch_add(1)) overlaps++;
                std::this_thread::sleep_for(ms(2));
                inside.fetch_sub(1);
                rmutex_unlock(&m[t]);
                done++;
            }
        });
    ASSERT_TRUE(wait_until([&] { return done > 20; }, ms(5000)));
    rmutex_stats_t before =
        migrate_held_open(slot, from, to, done, [&] { EXPECT_RC(EAGAIN, rmutex_trylock(&fresh)); });
    stop = true;
    for (auto &x : th) x.join();
    EXPECT_EQ(0, overlaps.load());
    rmutex_stats_t after = stats();
    std::cerr << "[cluster] migration: " << after.cluster_retries - before.cluster_retries << " retries, "
              << after.redirects_moved - before.redirects_moved << " MOVED, "
              << after.redirects_ask - before.redirects_ask << " ASK\n";
    EXPECT_EQ(0u, after.locks_lost - before.locks_lost);
    /* The hold taken before the migration was renewed through it and
     * after it, at the new owner, and is still this thread's. */
    EXPECT_GT(cluster->client(to).pttl(held_name), 0);
    EXPECT_EQ(0, holder.release());
    EXPECT_FALSE(cluster->client(to).exists(held_name));
    EXPECT_RC(0, rmutex_trylock(&fresh));
    EXPECT_RC(0, rmutex_unlock(&fresh));
    for (auto &x : m) EXPECT_RC(0, rmutex_destroy(&x));
    EXPECT_RC(0, rmutex_destroy(&held));
    EXPECT_RC(0, rmutex_destroy(&fresh));
}

/* A migration an operator runs by hand: every key moved at once, then the
 * slot left open (IMPORTING/MIGRATING) for 2.5 s before SETSLOT NODE --
 * longer than what is left of a 3 s lease at the renewal that meets it.
 * The renewals must follow the keys (ASK, then MOVED); the waiters must
 * get the locks once their holder lets go. */
class ClusterMigration : public ClusterTest {
  protected:
    std::string options() const override { return "lease=3000&command_timeout=1000"; }
};

TEST_F(ClusterMigration, HoldsOfEveryKindOutliveASlotLeftOpenLongerThanTheirLeaseAllows)
{
    static std::atomic<int> lost{0};
    lost = 0;
    ASSERT_RC(0, rmutex_set_lost_callback([](rmutex_t *, const char *, void *) { lost++; }, nullptr));
    std::string tag = "{" + name("open-slot") + "}";
    struct Kind {
        std::string name;
        std::vector<std::string> child;
        int fair, cache;
        rmutex_t m;
    };
    std::vector<Kind> kinds = { { tag + ":nonfair", {}, 0, 0, {} },
                                { tag + ":fair", { "--fair" }, 1, 0, {} },
                                { tag + ":cached", { "--cache" }, 0, 1, {} } };
    for (auto &k : kinds) {
        rmutexattr_t a;
        rmutexattr_init(&a);
        rmutexattr_setfair(&a, k.fair);
        rmutexattr_setcache(&a, k.cache);
        ASSERT_RC(0, rmutex_init(&k.m, k.name.c_str(), &a));
        rmutexattr_destroy(&a);
    }
    int slot = cluster->slot(tag);
    std::string child_url = cluster->url(options());
    const int rounds = time_scale() > 1 ? 5 : 20;
    int64_t worst_ms = 0;
    for (int round = 0; round < rounds; round++) {
        SCOPED_TRACE("round " + std::to_string(round));
        int from = cluster->owner(slot), to = (from + 1) % 3;
        for (auto &k : kinds) ASSERT_RC(0, rmutex_lock(&k.m));
        std::vector<std::unique_ptr<Child>> waiters;
        for (auto &k : kinds) {
            std::vector<std::string> args{ "hold", k.name, "--hold-ms=1" };
            args.insert(args.end(), k.child.begin(), k.child.end());
            waiters.push_back(std::make_unique<Child>(args, child_url));
        }
        for (auto &w : waiters)
            ASSERT_TRUE(wait_until([&] {
                return !cluster->client(from).client_ids("rmutex:sub:" + std::to_string(w->pid())).empty();
            }, ms(5000))) << "a waiter did not subscribe";
        uint64_t lost_before = stats().locks_lost;
        ASSERT_TRUE(cluster->begin_migration(slot, from, to));
        ASSERT_TRUE(cluster->migrate_keys(slot, from, to));
        std::this_thread::sleep_for(ms(2500)); /* the slot held open: a span to survive */
        ASSERT_TRUE(cluster->finish_migration(slot, from, to));
        EXPECT_EQ(0, lost.load()) << "a hold was lost while its slot migrated";
        EXPECT_EQ(lost_before, stats().locks_lost);
        for (auto &w : waiters) EXPECT_FALSE(w->poll_line()) << "a waiter got a lock that was held";
        auto t0 = Clock::now();
        for (auto &k : kinds) EXPECT_RC(0, rmutex_unlock(&k.m)) << k.name;
        for (size_t i = 0; i < waiters.size(); i++) {
            auto held = waiters[i]->expect_line("held", ms(1000));
            EXPECT_TRUE(held) << kinds[i].name << ": no waiter got it within 1 s of the unlock";
            if (held) {
                EXPECT_EQ("0", field(*held, "rc")) << *held;
            }
            worst_ms = std::max(worst_ms, elapsed_ms(t0));
        }
        for (auto &w : waiters) w->wait(ms(5000));
        if (HasFailure()) break;
    }
    std::cerr << "[cluster] " << rounds << " migrations with the slot open 2.5 s: the slowest waiter "
              << worst_ms << " ms after the unlock\n";
    for (auto &k : kinds) EXPECT_RC(0, rmutex_destroy(&k.m));
    rmutex_set_lost_callback(nullptr, nullptr);
}

TEST_F(ClusterTest, AHoldWipedByAPrimaryRestartedWithoutDataIsLostNotReleased)
{
    /* No replicas: the primary comes back on its nodes.conf, owning its
     * slots, with no keys. */
    /* A lease longer than the restarted primary's CLUSTERDOWN (about 2 s):
     * the holds must be found wiped by a renewal, not lost to their lease
     * running out -- and how soon is counted from when it serves again. */
    const std::string opts = "lease=5000&command_timeout=1000";
    reconfigure(opts);
    std::string prefix = "{" + name("wiped") + "}:";
    int slot = cluster->slot(prefix), at = cluster->owner(slot);
    ASSERT_GE(at, 0);
    expect_every_kind_lost_not_released(
        prefix, cluster->url(opts),
        [&](pid_t pid) { return !cluster->client(at).client_ids("rmutex:sub:" + std::to_string(pid)).empty(); },
        [&]() -> std::optional<Clock::time_point> {
            cluster->nodes[at]->stop();
            cluster->clients.resize(cluster->nodes.size());
            cluster->clients[at].reset();
            std::this_thread::sleep_for(ms(500)); /* the outage injected */
            if (!cluster->nodes[at]->restart()) return std::nullopt;
            if (!wait_until([&] { return cluster->stable(); }, ms(30000))) return std::nullopt;
            return Clock::now(); /* serving again */
        });
}

/* ---- sharded pub/sub ------------------------------------------------------------ */

class ClusterPubSub : public ClusterTest {
  protected:
    /* No polling to hide a lost wake-up behind. */
    std::string options() const override { return "lease=3000&poll=20000"; }

    /* The lock is held by another process (threads of one process queue
     * on a local gate, not on pub/sub); a thread of ours waits for it. */
    void hold_elsewhere(const std::string &n, bool fair)
    {
        uint64_t subscribed = stats().subscribes; /* (the counters span the program's tests) */
        holder = child_holding(n, cluster->url("lease=3000"), fair ? std::vector<std::string>{"--fair"}
                                                                  : std::vector<std::string>{});
        ASSERT_TRUE(holder);
        rmutexattr_t attr;
        ASSERT_EQ(0, rmutexattr_init(&attr));
        ASSERT_EQ(0, rmutexattr_setfair(&attr, fair));
        ASSERT_RC(0, rmutex_init(&m, n.c_str(), &attr));
        rmutexattr_destroy(&attr);
        waiter = std::make_unique<Async>([this] {
            int r = rmutex_lock(&m);
            return r ? r : rmutex_unlock(&m);
        });
        ASSERT_TRUE(wait_until(
            [&] { return stats().waiting > 0 && stats().subscribes > subscribed; }, ms(3000)));
    }
    /* The holder unlocks; the waiter gets the lock within 500 ms. */
    void release_and_expect_wake()
    {
        auto t0 = Clock::now();
        ASSERT_TRUE(holder->write_line("unlock"));
        ASSERT_TRUE(holder->expect_line("unlocked rc=0", ms(2000)));
        ASSERT_TRUE(waiter->wait(ms(2000)));
        EXPECT_EQ(0, waiter->rc());
        EXPECT_LT(elapsed_ms(t0), scaled(ms(500)).count()) << "woken by the release, not by a poll";
        waiter.reset();
        EXPECT_RC(0, rmutex_destroy(&m));
    }
    long long shard_subscribers(int node, const std::string &channel)
    {
        Reply r = cluster->client(node).cmd({"PUBSUB", "SHARDNUMSUB", channel});
        return r && r->elements == 2 ? r->element[1]->integer : -1;
    }

    std::unique_ptr<Child> holder;
    std::unique_ptr<Async> waiter;
    rmutex_t m;
};

TEST_F(ClusterPubSub, AReleaseWakesAWaiterThroughShardedPubSub)
{
    std::string n = name("wake");
    hold_elsewhere(n, false);
    int owner = cluster->owner(cluster->slot(n));
    EXPECT_EQ(1, shard_subscribers(owner, "redisson_lock__channel:{" + n + "}"))
        << "SSUBSCRIBEd at the slot's owner";
    Reply plain = cluster->client(owner).cmd({"PUBSUB", "NUMSUB", "redisson_lock__channel:{" + n + "}"});
    EXPECT_EQ(0, plain->element[1]->integer) << "not with a classic SUBSCRIBE";
    release_and_expect_wake();
    EXPECT_GT(stats().wakeups_pubsub, 0u);
}

/* A cached lock on a cluster: the cache listens for requests with
 * SSUBSCRIBE at the slot's owner, an asker's acquire SPUBLISHes there, and
 * the lock moves to the asker long before the idle time (10 s here). */
TEST_F(ClusterPubSub, ACachedLockIsAskedForAndGivenBackThroughShardedPubSub)
{
    ASSERT_RC(0, rmutex_shutdown());
    ASSERT_RC(0, rmutex_configure(cluster->url("lease=3000&poll=20000&cache_idle=10000").c_str()));
    std::string n = name("cached");
    rmutexattr_t attr;
    ASSERT_EQ(0, rmutexattr_init(&attr));
    ASSERT_EQ(0, rmutexattr_setcache(&attr, 1));
    ASSERT_RC(0, rmutex_init(&m, n.c_str(), &attr));
    rmutexattr_destroy(&attr);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    int owner = cluster->owner(cluster->slot(n));
    ASSERT_TRUE(wait_until([&] { return shard_subscribers(owner, "redisson_lock__channel:{" + n + "}") == 1; },
                           ms(3000)))
        << "the cache listens at the slot's owner";
    rmutex_stats_t before = stats();
    for (int i = 0; i < 100; i++) {
        ASSERT_RC(0, rmutex_lock(&m));
        ASSERT_RC(0, rmutex_unlock(&m));
    }
    EXPECT_LE(stats().round_trips - before.round_trips, 3u) << "relocks are served by the cache";
    auto t0 = Clock::now();
    auto other = child_holding(n, cluster->url("lease=3000&poll=20000"));
    ASSERT_TRUE(other) << "the other process never got the cached lock";
    EXPECT_LT(elapsed_ms(t0), scaled(ms(3000)).count()) << "given on request, not after the idle time";
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    ASSERT_TRUE(other->write_line("unlock"));
    ASSERT_TRUE(other->expect_line("unlocked rc=0", ms(2000)));
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(ClusterPubSub, WaitersResubscribeAtTheNewOwnerAfterTheServerTakesTheirChannel)
{
    std::string n = name("resub");
    std::string channel = "redisson_lock__channel:{" + n + "}";
    int slot = cluster->slot(n), from = cluster->owner(slot), to = (from + 1) % 3;
    hold_elsewhere(n, false);
    ASSERT_EQ(1, shard_subscribers(from, channel));
    ASSERT_TRUE(cluster->move_slot(slot, to)); /* the old owner pushes sunsubscribe */
    auto t0 = Clock::now();
    ASSERT_TRUE(wait_until([&] { return shard_subscribers(to, channel) == 1; }, ms(2000)))
        << "the waiter did not resubscribe at the new owner";
    int64_t took = elapsed_ms(t0);
    std::cerr << "[cluster] resubscribed at the new owner " << took << " ms after the move\n";
    EXPECT_LT(took, scaled(ms(50)).count());
    EXPECT_GT(stats().resubscribes_moved, 0u);
    EXPECT_FALSE(waiter->done());
    release_and_expect_wake();
}

TEST_F(ClusterPubSub, AFairHandOffWakesTheWaiterAcrossTheCluster)
{
    std::string n = name("fair");
    hold_elsewhere(n, true);
    release_and_expect_wake();
}

/* Redisson on Redis 7 Cluster uses sharded pub/sub for its locks (its
 * AUTO subscription mode): a release by either side wakes the other's
 * waiter.  The Redisson side is the protocol client of the compatibility
 * tests, publishing with SPUBLISH and listening with SSUBSCRIBE. */
TEST_F(ClusterPubSub, ARedissonReleaseWakesAnRmutexWaiterThroughShardedPubSub)
{
    std::string n = name("from-redisson");
    Redis &owner = cluster->client(cluster->owner(cluster->slot(n)));
    RedissonClient java(owner, "0f8fad5b-d9cb-469f-a165-70867728950e", 1, "spublish");
    ASSERT_EQ(-1, java.acquire(n, 30000));
    ASSERT_RC(0, rmutex_init(&m, n.c_str(), nullptr));
    waiter = std::make_unique<Async>([this] {
        int r = rmutex_lock(&m);
        return r ? r : rmutex_unlock(&m);
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting > 0 && stats().subscribes > 0; }, ms(3000)));
    auto t0 = Clock::now();
    EXPECT_EQ(1, java.unlock(n));
    ASSERT_TRUE(waiter->wait(ms(2000)));
    EXPECT_EQ(0, waiter->rc());
    EXPECT_LT(elapsed_ms(t0), scaled(ms(500)).count()) << "woken by Redisson's SPUBLISH, not by a poll";
    waiter.reset();
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(ClusterPubSub, AnRmutexReleaseReachesARedissonShardedSubscriber)
{
    std::string n = name("to-redisson");
    std::string channel = "redisson_lock__channel:{" + n + "}";
    int node = cluster->owner(cluster->slot(n));
    Redis sub("127.0.0.1", cluster->nodes[node]->port());
    ASSERT_TRUE(sub.cmd({"SSUBSCRIBE", channel}));
    ASSERT_RC(0, rmutex_init(&m, n.c_str(), nullptr));
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    auto msg = sub.next_message(ms(2000));
    ASSERT_TRUE(msg) << "no smessage";
    EXPECT_EQ(channel, msg->first);
    EXPECT_EQ("0", msg->second) << "Redisson's release message";
    EXPECT_RC(0, rmutex_destroy(&m));
}

/* ---- read-write locks ------------------------------------------------------------ */

/* Key prefix:{n} of read-write lock n (prefix:n when n brings its {tag}). */
std::string rw_key(const std::string &prefix, const std::string &n)
{
    return n.find('{') != std::string::npos ? prefix + ":" + n : prefix + ":{" + n + "}";
}

/* Every key of any node whose name contains n: (node, key). */
std::vector<std::pair<int, std::string>> keys_naming(const std::string &n)
{
    std::vector<std::pair<int, std::string>> out;
    for (int i = 0; i < (int)cluster->nodes.size(); i++) {
        if (!cluster->nodes[i]->running()) continue;
        std::string cursor = "0";
        do {
            Reply r = cluster->client(i).cmd({"SCAN", cursor, "MATCH", "*" + n + "*", "COUNT", "1000"});
            if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) break;
            cursor = r->element[0]->str;
            for (size_t k = 0; k < r->element[1]->elements; k++) out.emplace_back(i, r->element[1]->element[k]->str);
        } while (cursor != "0");
    }
    return out;
}

/* Readers and writers of one process: a reader checks that no writer is
 * inside and that the counter does not move while it reads; a writer that
 * nobody else is inside, and bumps the counter with a load and a store
 * apart (two writers inside lose a bump). */
struct RwChecker {
    std::atomic<int> readers{0}, writers{0}, overlaps{0}, writes{0};
    std::atomic<long> counter{0};

    void read()
    {
        readers++;
        if (writers.load()) overlaps++;
        long v = counter.load();
        std::this_thread::sleep_for(ms(1));
        if (counter.load() != v) overlaps++;
        readers--;
    }
    void write()
    {
        if (writers.fetch_add(1) || readers.load()) overlaps++;
        long v = counter.load();
        std::this_thread::sleep_for(ms(1));
        counter.store(v + 1);
        writes++;
        writers--;
    }
};

/* Each round on a name: a robust writer (with its fencing token) and a
 * reader queued behind it; then the reader holding and a writer queued
 * behind it -- every key the lock has must be in its slot, on its owner.
 * After a warm-up round (the map, connections, scripts, subscriptions), no
 * call is redirected. */
TEST_F(ClusterTest, ReadersAndWritersOnManyNamesKeepEveryKeyInTheLocksSlotWithNoRedirectAfterWarmUp)
{
    const int N = 24;
    std::vector<std::string> names;
    for (int i = 0; i < N; i++) {
        std::string n = name(std::to_string(i) + "/");
        names.push_back(i % 4 == 3 ? "{" + n + "}:tagged" : n); /* both shapes of key */
    }
    std::vector<rrwlock_t> rd(N), wr(N), wr2(N);
    rrwlockattr_t robust;
    ASSERT_RC(0, rrwlockattr_init(&robust));
    ASSERT_RC(0, rrwlockattr_setrobust(&robust, RMUTEX_ROBUST));
    for (int i = 0; i < N; i++) {
        ASSERT_RC(0, rrwlock_init(&rd[i], names[i].c_str(), nullptr));
        ASSERT_RC(0, rrwlock_init(&wr[i], names[i].c_str(), &robust));
        ASSERT_RC(0, rrwlock_init(&wr2[i], names[i].c_str(), nullptr));
    }
    rrwlockattr_destroy(&robust);
    std::vector<int> per(3, 0);
    auto round = [&](int i, bool check) {
        const std::string &n = names[i];
        int slot = cluster->slot(n), owner = cluster->owner(slot);
        ASSERT_GE(owner, 0);
        auto queued = [&] { return cluster->client(owner).cmd({"ZCARD", rw_key("rmutex_rw_queue", n)}).integer() == 1; };
        std::set<std::pair<int, std::string>> seen;
        ASSERT_RC(0, rrwlock_wrlock(&wr[i]));
        uint64_t token;
        ASSERT_RC(0, rrwlock_fence(&wr[i], &token));
        {
            RwHolder reader(&rd[i], false);
            ASSERT_TRUE(wait_until(queued, ms(3000))) << n << ": the reader did not queue";
            for (auto &k : keys_naming(n)) seen.insert(k);
            ASSERT_RC(0, rrwlock_unlock(&wr[i]));
            ASSERT_EQ(0, reader.taken(ms(3000))) << n;
            RwHolder writer(&wr2[i], true);
            ASSERT_TRUE(wait_until(queued, ms(3000))) << n << ": the writer did not queue";
            for (auto &k : keys_naming(n)) seen.insert(k);
            EXPECT_EQ(0, reader.release());
            ASSERT_EQ(0, writer.taken(ms(3000))) << n;
            EXPECT_EQ(0, writer.release());
        }
        if (!check) return;
        per[owner]++;
        /* The lock's hash, its readers, holds and Redisson's timeout key,
         * the queue, its writers, liveness and ticket counter, the owner
         * mark, the fencing token: ten kinds of key, one slot. */
        std::set<std::string> kinds;
        for (auto &k : seen) {
            EXPECT_EQ(owner, k.first) << k.second << " is not on the owner of " << n << "'s slot";
            EXPECT_EQ(slot, cluster->slot(k.second)) << k.second << " is outside the slot of " << n;
            kinds.insert(k.second == n ? "hash" : k.second.find(":rwlock_timeout:") != std::string::npos
                                                      ? "timeout" : k.second.substr(0, k.second.find(':')));
        }
        EXPECT_EQ(10u, kinds.size()) << n << ": " << ::testing::PrintToString(kinds);
    };
    for (int i = 0; i < N; i++) round(i, false);
    ASSERT_FALSE(HasFailure());
    rmutex_stats_t before = stats();
    for (int i = 0; i < N && !HasFailure(); i++) round(i, true);
    rmutex_stats_t after = stats();
    EXPECT_EQ(0u, after.redirects_moved - before.redirects_moved);
    EXPECT_EQ(0u, after.redirects_ask - before.redirects_ask);
    EXPECT_EQ(0u, after.cluster_retries - before.cluster_retries);
    for (int k = 0; k < 3; k++) EXPECT_GT(per[k], 0) << "no name on node " << k;
    for (int i = 0; i < N; i++) {
        EXPECT_RC(0, rrwlock_destroy(&rd[i]));
        EXPECT_RC(0, rrwlock_destroy(&wr[i]));
        EXPECT_RC(0, rrwlock_destroy(&wr2[i]));
    }
}

/* Two handles read, a writer waits; the slot moves.  The reads are renewed
 * at the new owner (MOVED), the writer's subscription follows the channel
 * there, and the readers' release wakes it through sharded pub/sub at the
 * new owner -- never while a reader is inside. */
TEST_F(ClusterTest, ReadHoldsSurviveTheMoveOfTheirSlotAndTheirQueuedWriterIsWokenAtTheNewOwner)
{
    std::string n = name("rw-moved"), channel = rw_key("redisson_rwlock", n);
    int slot = cluster->slot(n), from = cluster->owner(slot), to = (from + 1) % 3;
    rrwlock_t r1, r2, w;
    ASSERT_RC(0, rrwlock_init(&r1, n.c_str(), nullptr));
    ASSERT_RC(0, rrwlock_init(&r2, n.c_str(), nullptr));
    ASSERT_RC(0, rrwlock_init(&w, n.c_str(), nullptr));
    std::atomic<int> readers_in{2}, overlaps{0};
    auto reader1 = std::make_unique<RwHolder>(&r1, false), reader2 = std::make_unique<RwHolder>(&r2, false);
    ASSERT_EQ(0, reader1->taken(ms(3000)));
    ASSERT_EQ(0, reader2->taken(ms(3000)));
    Async writer([&] {
        int r = rrwlock_wrlock(&w);
        if (r) return r;
        if (readers_in.load()) overlaps++;
        return rrwlock_unlock(&w);
    });
    ASSERT_TRUE(wait_until([&] {
        return cluster->client(from).cmd({"ZCARD", rw_key("rmutex_rw_queue", n)}).integer() == 1 &&
               cluster->client(from).cmd({"PUBSUB", "SHARDNUMSUB", channel})->element[1]->integer == 1;
    }, ms(3000))) << "the writer did not queue and listen at the slot's owner";
    rmutex_stats_t before = stats();
    ASSERT_TRUE(cluster->move_slot(slot, to));
    ASSERT_TRUE(wait_until([&] {
        return cluster->client(to).cmd({"PUBSUB", "SHARDNUMSUB", channel})->element[1]->integer == 1;
    }, ms(2000))) << "the writer did not listen again at the new owner";
    std::this_thread::sleep_for(ms(3200)); /* two leases: a span to survive, not a wait */
    EXPECT_GT(cluster->client(to).pttl(n), 0) << "the reads lapsed: their renewals did not follow the slot";
    EXPECT_EQ("read", cluster->client(to).cmd({"HGET", n, "mode"}).str());
    EXPECT_EQ(1, cluster->client(to).cmd({"ZCARD", rw_key("rmutex_rw_queue", n)}).integer()) << "the writer left";
    EXPECT_FALSE(writer.done()) << "the writer got in while two handles read";
    EXPECT_EQ(0u, stats().locks_lost - before.locks_lost);
    /* (Whether a renewal met MOVED depends on who learnt the new owner
     * first: the writer's subscription moving can refresh the map before
     * the next renewal goes.  The reads' lease above is what says the
     * renewals followed.) */
    readers_in = 1;
    EXPECT_EQ(0, reader1->release());
    EXPECT_FALSE(wait_until_unscaled([&] { return writer.done(); }, ms(200))) << "in beside a reader";
    uint64_t woken = stats().wakeups_pubsub;
    readers_in = 0;
    auto t0 = Clock::now();
    EXPECT_EQ(0, reader2->release());
    ASSERT_TRUE(writer.wait(ms(3000)));
    EXPECT_EQ(0, writer.rc());
    EXPECT_LT(std::chrono::duration_cast<ms>(writer.finished_at() - t0).count(), scaled(ms(500)).count());
    EXPECT_GT(stats().wakeups_pubsub, woken) << "woken by a poll, not by the release's message";
    EXPECT_EQ(0, overlaps.load());
    EXPECT_FALSE(cluster->client(to).exists(n));
    reader1.reset();
    reader2.reset();
    EXPECT_RC(0, rrwlock_destroy(&r1));
    EXPECT_RC(0, rrwlock_destroy(&r2));
    EXPECT_RC(0, rrwlock_destroy(&w));
}

TEST_F(ClusterTest, ReadAndWriteCallsWaitOutAMigrationHeldOpenAndNeverOverlap)
{
    /* Three names in one slot: one that threads read and write in turns,
     * one read through the whole migration, one never used before. */
    std::string tag = "{" + name("rw-migrating") + "}";
    std::string n = tag + ":turns", held_name = tag + ":held", fresh_name = tag + ":fresh";
    int slot = cluster->slot(n), from = cluster->owner(slot), to = (from + 2) % 3;
    rrwlock_t held, fresh;
    ASSERT_RC(0, rrwlock_init(&held, held_name.c_str(), nullptr));
    ASSERT_RC(0, rrwlock_init(&fresh, fresh_name.c_str(), nullptr));
    RwHolder holder(&held, false); /* keys of the slot exist: mixed-key calls get TRYAGAIN */
    ASSERT_EQ(0, holder.taken(ms(3000)));
    const int T = 4;
    std::vector<rrwlock_t> l(T);
    for (auto &x : l) ASSERT_RC(0, rrwlock_init(&x, n.c_str(), nullptr));
    RwChecker check;
    std::atomic<int> done{0}, errors{0}, last_error{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> th;
    for (int t = 0; t < T; t++)
        th.emplace_back([&, t] {
            for (int k = 0; !stop; k++) {
                bool write = (k + t) % 3 == 0;
                struct timespec dl = abs_after(CLOCK_REALTIME, 10000);
                int r = write ? rrwlock_timedwrlock(&l[t], &dl) : rrwlock_timedrdlock(&l[t], &dl);
                if (!r) {
                    write ? check.write() : check.read();
                    r = rrwlock_unlock(&l[t]);
                }
                if (r) {
                    errors++;
                    last_error = r;
                }
                done++;
            }
        });
    ASSERT_TRUE(wait_until([&] { return done > 20; }, ms(5000)));
    rmutex_stats_t before = migrate_held_open(slot, from, to, done, [&] {
        EXPECT_RC(EAGAIN, rrwlock_tryrdlock(&fresh));
        EXPECT_RC(EAGAIN, rrwlock_trywrlock(&fresh));
    });
    stop = true;
    for (auto &x : th) x.join();
    rmutex_stats_t after = stats();
    std::cerr << "[cluster] rw migration: " << after.cluster_retries - before.cluster_retries << " retries, "
              << after.redirects_moved - before.redirects_moved << " MOVED, "
              << after.redirects_ask - before.redirects_ask << " ASK; " << check.writes << " writes\n";
    EXPECT_EQ(0, check.overlaps.load()) << "a reader and a writer, or two writers, were inside together";
    EXPECT_EQ(check.writes.load(), check.counter.load()) << "a write was lost";
    EXPECT_EQ(0, errors.load()) << "last error " << err_name(last_error);
    EXPECT_GT(after.cluster_retries, before.cluster_retries) << "the migration was never met";
    EXPECT_EQ(0u, after.locks_lost - before.locks_lost);
    /* The read taken before the migration was renewed through it, at the
     * new owner, and is still this thread's to give back. */
    EXPECT_GT(cluster->client(to).pttl(held_name), 0);
    EXPECT_EQ(0, holder.release());
    EXPECT_FALSE(cluster->client(to).exists(held_name));
    EXPECT_RC(0, rrwlock_trywrlock(&fresh));
    EXPECT_RC(0, rrwlock_unlock(&fresh));
    for (auto &x : l) EXPECT_RC(0, rrwlock_destroy(&x));
    EXPECT_RC(0, rrwlock_destroy(&held));
    EXPECT_RC(0, rrwlock_destroy(&fresh));
}

/* A reader starts while its slot's migration is held open (every call of
 * it answered TRYAGAIN), and a release message (Redisson's "0") reaches
 * it then, unused: it is not waiting yet.  At the end of the move the
 * server takes its channel away.  That must not be lost behind the
 * message: the reader listens again at the new owner, and the writer's
 * release there wakes it at once.  (Polls are 20 s apart here: a reader
 * left listening at the old owner hears nothing until its deadline.) */
TEST_F(ClusterTest, AReaderSentAMessageBeforeItsChannelMovedStillListensAtTheNewOwner)
{
    reconfigure("poll=20000&waiter_lease=40000&lease=30000&command_timeout=1000");
    std::string n = name("rw-message-then-moved"), channel = rw_key("redisson_rwlock", n);
    int slot = cluster->slot(n), from = cluster->owner(slot), to = (from + 1) % 3;
    rrwlock_t w, r;
    ASSERT_RC(0, rrwlock_init(&w, n.c_str(), nullptr));
    ASSERT_RC(0, rrwlock_init(&r, n.c_str(), nullptr));
    ASSERT_RC(0, rrwlock_wrlock(&w));
    auto listeners = [&](int node) {
        return cluster->client(node).cmd({"PUBSUB", "SHARDNUMSUB", channel})->element[1]->integer;
    };
    ASSERT_TRUE(cluster->begin_migration(slot, from, to));
    rmutex_stats_t before = stats();
    struct timespec deadline = abs_after(CLOCK_REALTIME, scaled(ms(10000)).count());
    Async reader([&] {
        int rc = rrwlock_timedrdlock(&r, &deadline);
        return rc ? rc : rrwlock_unlock(&r);
    });
    ASSERT_TRUE(wait_until([&] { return listeners(from) == 1 && stats().cluster_retries > before.cluster_retries; },
                           ms(3000))) << "the reader did not listen at the old owner and meet the migration";
    EXPECT_EQ(1, cluster->client(from).cmd({"SPUBLISH", channel, "0"}).integer());
    ASSERT_TRUE(cluster->migrate_keys(slot, from, to));
    ASSERT_TRUE(cluster->finish_migration(slot, from, to));
    EXPECT_TRUE(wait_until([&] {
        return listeners(to) == 1 &&
               cluster->client(to).cmd({"ZCARD", rw_key("rmutex_rw_queue", n)}).integer() == 1;
    }, ms(3000))) << "the reader did not queue and listen again at the new owner";
    EXPECT_FALSE(reader.done()) << "in beside the writer: " << err_name(reader.rc());
    auto t0 = Clock::now();
    EXPECT_RC(0, rrwlock_unlock(&w));
    ASSERT_TRUE(reader.wait(ms(12000)));
    EXPECT_EQ(0, reader.rc()) << err_name(reader.rc());
    EXPECT_LT(std::chrono::duration_cast<ms>(reader.finished_at() - t0).count(), scaled(ms(1000)).count())
        << "the writer's release did not wake the reader: it was still listening at the old owner";
    EXPECT_RC(0, rrwlock_destroy(&w));
    EXPECT_RC(0, rrwlock_destroy(&r));
}

/* A read hold and a write hold on a primary that restarts empty: each
 * holder is told (the callback, by name), each unlock is EPERM, never 0;
 * the other process's waiters get the locks meanwhile.  A restarted
 * primary answers CLUSTERDOWN for 2 s more (it lets the cluster look at
 * it before it serves): a 5 s lease outlives that outage, so the wipe
 * must be found by a renewal, not by the lease running out. */
TEST_F(ClusterTest, ReadAndWriteHoldsWipedByAPrimaryRestartedWithoutDataAreLostNotReleased)
{
    const std::string opts = "lease=5000&command_timeout=1000";
    reconfigure(opts);
    static std::atomic<int> lost{0};
    static std::atomic<Clock::rep> last_told{0};
    lost = 0;
    ASSERT_RC(0, rmutex_set_lost_callback([](rmutex_t *m, const char *, void *) {
        last_told = Clock::now().time_since_epoch().count();
        if (!m) lost++;
    }, nullptr));
    std::string tag = "{" + name("rw-wiped") + "}";
    std::string rname = tag + ":read", wname = tag + ":write";
    int at = cluster->owner(cluster->slot(tag));
    ASSERT_GE(at, 0);
    rrwlock_t r, w;
    ASSERT_RC(0, rrwlock_init(&r, rname.c_str(), nullptr));
    ASSERT_RC(0, rrwlock_init(&w, wname.c_str(), nullptr));
    ASSERT_RC(0, rrwlock_rdlock(&r));
    ASSERT_RC(0, rrwlock_wrlock(&w));
    std::vector<std::unique_ptr<Child>> waiters;
    waiters.push_back(std::make_unique<Child>(std::vector<std::string>{"rw", rname, "w", "--hold-ms=100"},
                                              cluster->url(opts)));
    waiters.push_back(std::make_unique<Child>(std::vector<std::string>{"rw", wname, "r", "--hold-ms=100"},
                                              cluster->url(opts)));
    for (auto &c : waiters)
        ASSERT_TRUE(wait_until([&] {
            return !cluster->client(at).client_ids("rmutex:sub:" + std::to_string(c->pid())).empty();
        }, ms(5000))) << "a waiter did not subscribe";
    for (auto &c : waiters) ASSERT_FALSE(c->poll_line()) << "a waiter got a lock that was held";
    cluster->nodes[at]->stop();
    cluster->clients.resize(cluster->nodes.size());
    cluster->clients[at].reset();
    std::this_thread::sleep_for(ms(500)); /* the outage injected */
    ASSERT_TRUE(cluster->nodes[at]->restart());
    ASSERT_TRUE(wait_until([&] { return cluster->stable(); }, ms(30000)));
    auto back = Clock::now(); /* serving again */
    EXPECT_TRUE(wait_until([] { return lost.load() == 2; }, ms(3000))) << lost.load() << " of 2 told";
    int64_t told = std::chrono::duration_cast<ms>(Clock::time_point(Clock::duration(last_told.load())) - back).count();
    std::cerr << "[cluster] wiped read and write holds reported lost " << told
              << " ms after the primary served again\n";
    EXPECT_LE(told, scaled(ms(1500)).count());
    for (auto &c : waiters) {
        auto held = c->expect_line("held", ms(5000));
        ASSERT_TRUE(held) << "a waiter did not get its lock after the wipe";
        EXPECT_EQ("0", field(*held, "rc")) << *held;
        EXPECT_TRUE(c->expect_line("unlocked rc=0", ms(3000)));
    }
    EXPECT_RC(EPERM, rrwlock_unlock(&r)) << "a wiped read unlocked as released";
    EXPECT_RC(EPERM, rrwlock_unlock(&w)) << "a wiped write unlocked as released";
    EXPECT_EQ(2, lost.load()) << "a loss was reported twice";
    for (auto &c : waiters) c->wait(ms(5000));
    EXPECT_RC(0, rrwlock_rdlock(&r)) << "usable again";
    EXPECT_RC(0, rrwlock_unlock(&r));
    rmutex_set_lost_callback(nullptr, nullptr);
    EXPECT_RC(0, rrwlock_destroy(&r));
    EXPECT_RC(0, rrwlock_destroy(&w));
}

/* ---- fork ---------------------------------------------------------------------- */

TEST_F(ClusterTest, AForkedChildLocksWithoutReinitialising)
{
    EXPECT_RC(0, fork_and_lock_in_child(name("fork")));
}

/* Semaphores, barriers and once on a cluster: on names spread over every
 * primary, each keeps all its keys in its name's slot (on that slot's
 * owner), a fair semaphore's waiter is woken through sharded pub/sub by a
 * post, a barrier's generations fill and once runs once -- and after the
 * warm-up, nothing is redirected. */
TEST_F(ClusterTest, SemaphoresBarriersAndOnceKeepTheirKeysInTheirSlotAndWakeThroughShardedPubSub)
{
    const int N = 12;
    std::vector<std::string> names;
    for (int i = 0; i < N; i++) names.push_back(name("sbo" + std::to_string(i) + "/"));
    std::vector<rsem_t> sems(N);
    std::vector<rbarrier_t> barriers(N);
    std::vector<ronce_t> onces(N);
    rsemattr_t fair;
    ASSERT_RC(0, rsemattr_init(&fair));
    ASSERT_RC(0, rsemattr_setfair(&fair, 1));
    for (int i = 0; i < N; i++) {
        ASSERT_RC(0, rsem_init(&sems[i], names[i].c_str(), 1, &fair));
        ASSERT_RC(0, rbarrier_init(&barriers[i], names[i].c_str(), 2, nullptr));
        ronce_t once = RONCE_INIT(names[i].c_str());
        onces[i] = once;
    }
    rsemattr_destroy(&fair);
    static std::atomic<int> ran{0};
    std::vector<int> per(3, 0);
    auto round = [&](int i, bool check) {
        const std::string &n = names[i];
        int slot = cluster->slot(n), owner = cluster->owner(slot);
        ASSERT_GE(owner, 0);
        ASSERT_RC(0, rsem_wait(&sems[i]));
        std::atomic<int> got{-1};
        std::thread waiter([&] { got = rsem_wait(&sems[i]); });
        auto queued = [&] {
            return cluster->client(owner).cmd({"ZCARD", "rmutex_sem_queue:{" + n + "}"}).integer() == 1;
        };
        ASSERT_TRUE(wait_until(queued, ms(3000))) << n << ": the waiter did not queue";
        std::set<std::pair<int, std::string>> seen;
        for (auto &k : keys_naming(n)) seen.insert(k);
        ASSERT_RC(0, rsem_post(&sems[i]));
        waiter.join();
        EXPECT_RC(0, got.load()) << n;
        EXPECT_RC(0, rsem_post(&sems[i]));
        int serial = 0;
        for (int g = 0; g < 2; g++) {
            std::atomic<int> other{-2};
            std::thread member([&] { other = rbarrier_wait(&barriers[i]); });
            int mine = rbarrier_wait(&barriers[i]);
            member.join();
            serial += (mine == RBARRIER_SERIAL_THREAD) + (other == RBARRIER_SERIAL_THREAD);
            EXPECT_TRUE((mine == 0 || mine == RBARRIER_SERIAL_THREAD) && (other == 0 || other == RBARRIER_SERIAL_THREAD))
                << n << ": " << mine << ", " << other;
        }
        EXPECT_EQ(2, serial) << n << ": one serial member per generation";
        EXPECT_RC(0, ronce(&onces[i], [] { ran++; }));
        for (auto &k : keys_naming(n)) seen.insert(k);
        if (!check) return;
        per[owner]++;
        for (auto &k : seen) {
            EXPECT_EQ(owner, k.first) << k.second << " is not on the owner of " << n << "'s slot";
            EXPECT_EQ(slot, cluster->slot(k.second)) << k.second << " is outside the slot of " << n;
        }
    };
    for (int i = 0; i < N / 2 && !HasFailure(); i++) round(i, false);
    ASSERT_FALSE(HasFailure());
    rmutex_stats_t before = stats();
    for (int i = N / 2; i < N && !HasFailure(); i++) round(i, true);
    rmutex_stats_t after = stats();
    EXPECT_EQ(0u, after.redirects_moved - before.redirects_moved);
    EXPECT_EQ(0u, after.redirects_ask - before.redirects_ask);
    EXPECT_EQ(N, ran.load()) << "each once ran once";
    for (int i = 0; i < N; i++) {
        EXPECT_RC(0, rsem_destroy(&sems[i]));
        EXPECT_RC(0, rbarrier_destroy(&barriers[i]));
        EXPECT_RC(0, rsem_unlink(names[i].c_str()));
        EXPECT_RC(0, ronce_reset(names[i].c_str()));
    }
}

/* ---- waits and deadlocks across the primaries ---------------------------------- */

#ifdef RMUTEX_CLI
class ClusterDeadlocks : public ClusterTest {
  protected:
    /* Three names, one on each primary; and each member's registry key
     * lands wherever its process's uuid hashes. */
    std::vector<std::string> spread(const std::string &stem)
    {
        std::vector<std::string> names(3);
        for (int k = 0, found = 0; found < 3 && k < 1000; k++) {
            std::string n = name(stem + std::to_string(k));
            int o = cluster->owner(cluster->slot(n));
            if (names[o].empty()) names[o] = n, found++;
        }
        return names;
    }
    std::unique_ptr<Child> chain(const std::string &first, const std::string &second,
                                 const std::vector<std::string> &opts = {})
    {
        std::vector<std::string> args{ "chain", first, second };
        args.insert(args.end(), opts.begin(), opts.end());
        auto c = std::make_unique<Child>(args, cluster->url(options()));
        auto l = c->expect_line("first ", ms(10000));
        EXPECT_TRUE(l && field(*l, "rc") == "0") << (l ? *l : "no answer");
        return c;
    }
    /* rmutex deadlocks on the cluster: its exit code, its output. */
    int deadlocks(std::string *out) { return cli({ "deadlocks" }, out); }
    /* rmutex ARGS on the cluster: its exit code, its output. */
    int cli(const std::vector<std::string> &args, std::string *out)
    {
        std::vector<std::string> argv{ RMUTEX_CLI };
        argv.insert(argv.end(), args.begin(), args.end());
        return run_to_end(argv, { { "RMUTEX_URL", cluster->url(options()) } }, out);
    }
};

/* The registry entries and the locks of a cycle are spread over every
 * primary: rmutex deadlocks walks them all and finds it. */
TEST_F(ClusterDeadlocks, AThreeProcessCycleAcrossThePrimariesIsFound)
{
    auto n = spread("cyc");
    ASSERT_FALSE(n[0].empty() || n[1].empty() || n[2].empty());
    auto a = chain(n[0], n[1]), b = chain(n[1], n[2]), c = chain(n[2], n[0]);
    for (auto *p : { a.get(), b.get(), c.get() }) p->write_line("go");
    std::string out;
    ASSERT_TRUE(wait_until([&] { return deadlocks(&out) == 1; }, ms(10000))) << out;
    EXPECT_NE(out.find("3 threads"), std::string::npos) << out;
    for (auto *p : { a.get(), b.get(), c.get() })
        EXPECT_NE(out.find("pid " + std::to_string(p->pid()) + " on "), std::string::npos) << out;
}

/* A detecting ERRORCHECK mutex follows the chain through locks and
 * registry entries on different primaries, and gives up. */
TEST_F(ClusterDeadlocks, ADetectingMutexBreaksACycleAcrossThePrimaries)
{
    auto n = spread("brk");
    ASSERT_FALSE(n[0].empty() || n[1].empty() || n[2].empty());
    auto a = chain(n[0], n[1]), b = chain(n[1], n[2]), c = chain(n[2], n[0], { "--type=2", "--detect" });
    for (auto *p : { a.get(), b.get(), c.get() }) p->write_line("go");
    auto l = c->expect_line("second ", ms(10000));
    ASSERT_TRUE(l) << "the detecting process never gave up";
    EXPECT_EQ(std::to_string(EDEADLK), field(*l, "rc")) << *l;
    EXPECT_FALSE(a->poll_line() || b->poll_line());
}

/* Every process's published counters, on whichever primary its registry
 * key lands: rmutex stats --prom reads every primary. */
TEST_F(ClusterDeadlocks, StatsPromReadsTheCountersOfEveryProcessOnEveryPrimary)
{
    auto n = spread("stat");
    ASSERT_FALSE(n[0].empty() || n[1].empty() || n[2].empty());
    std::vector<std::unique_ptr<Child>> churns;
    for (int i = 0; i < 6; i++) {
        churns.push_back(std::make_unique<Child>(
            std::vector<std::string>{ "churn", n[i % 3], "1", "3000", "5" }, cluster->url(options())));
        ASSERT_TRUE(churns.back()->expect_line("ready", ms(10000)));
    }
    std::string out;
    EXPECT_TRUE(wait_until([&] {
        if (cli({ "stats", "--prom" }, &out) != 0) return false;
        for (auto &p : churns)
            if (out.find("rmutex_acquisitions_total{name=\"" + n[0]) == std::string::npos ||
                out.find(",pid=\"" + std::to_string(p->pid()) + "\"") == std::string::npos)
                return false;
        return true;
    }, ms(10000))) << out;
    for (auto &p : churns) p->expect_line("done ", ms(10000));
}
#endif

} // namespace
