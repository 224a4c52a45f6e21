/* tls_cluster_test.cc -- rmutex on a Redis Cluster that speaks TLS only to
 * its clients and itself: 3 primaries and 3 replicas with tls-cluster and
 * tls-replication on (the harness's TLS mode), started once.  The seeds
 * are TLS ports, and the cluster names TLS ports to a TLS client: the slot
 * map, MOVED and ASK all send rmutex to TLS ports, where it follows with a
 * handshake each.  Waiters are woken through sharded pub/sub over TLS,
 * WAIT reaches the replicas, and a failover is followed. */
#include "tls_util.h"
#include "cluster_util.h"
#include "program_env.h"

#include <atomic>
#include <thread>

using namespace rmt;

namespace {

Cluster *cluster;
::testing::Environment *const env = ::testing::AddGlobalTestEnvironment(new ProgramServers<Cluster>(
    &cluster, [](Cluster &c) { return c.start(3, 1); }, "a TLS cluster of 3 primaries and 3 replicas"));

class TlsCluster : public ::testing::Test {
  protected:
    void SetUp() override
    {
        ASSERT_TRUE(cluster && cluster->nodes.size() == 6);
        std::string url = "redis-cluster://";
        for (int i = 0; i < 3; i++)
            url += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(cluster->nodes[i]->tls_port());
        url += "?tls=1&" + tls_query() + "&lease=1500&command_timeout=1000";
        ASSERT_RC(0, rmutex_configure(url.c_str()));
    }
    void TearDown() override { EXPECT_RC(0, rmutex_shutdown()); }
    std::string name(const std::string &s) { return test_lock_name(s); }

    /* A name whose slot primary i serves. */
    std::string name_on(int i, const std::string &s)
    {
        for (int k = 0;; k++) {
            std::string n = name(s + std::to_string(k));
            if (cluster->owner(cluster->slot(n)) == i) return n;
        }
    }

    /* Every rmutex connection at node i is on its TLS port. */
    void expect_only_tls(int i)
    {
        for (int p : rmutex_local_ports(cluster->client(i)))
            EXPECT_EQ(cluster->nodes[i]->tls_port(), p) << "a plain connection to node " << i;
    }
};

TEST_F(TlsCluster, LocksOnEveryPrimaryGoOverTlsAndWaitForTheirReplica)
{
    ASSERT_RC(0, rmutex_set_wait_replicas(1, 2000));
    for (int i = 0; i < 3; i++) {
        rmutex_t m;
        init_mutex(&m, name_on(i, "p"));
        EXPECT_RC(0, rmutex_lock(&m)) << "primary " << i;
        EXPECT_RC(0, rmutex_unlock(&m));
        rmutex_destroy(&m);
        expect_only_tls(i);
    }
    EXPECT_EQ(0u, stats().replica_shortfalls);
    ASSERT_RC(0, rmutex_set_wait_replicas(0, 0));
}

TEST_F(TlsCluster, AWaiterElsewhereIsWokenThroughShardedPubSubOverTls)
{
    std::string n = name("wake");
    std::string url = "redis-cluster://127.0.0.1:" + std::to_string(cluster->nodes[0]->tls_port()) + "?tls=1&" +
                      tls_query();
    auto holder = child_holding(n, url);
    ASSERT_TRUE(holder);
    rmutex_t m;
    init_mutex(&m, n);
    /* Woken by the release's message, or -- when the SSUBSCRIBE's
     * confirmation reached the multiplexer only after the release -- by
     * that confirmation (sub.c): either way through the sharded pub/sub
     * connection over TLS, not by a poll. */
    uint64_t woken = stats().wakeups_pubsub + stats().wakeups_subscribe;
    Async waiter([&] { return rmutex_lock(&m) || rmutex_unlock(&m); });
    int owner = cluster->owner(cluster->slot(n));
    std::string channel = "redisson_lock__channel:{" + n + "}";
    ASSERT_TRUE(wait_until([&] {
        Reply r = cluster->client(owner).cmd({"PUBSUB", "SHARDNUMSUB", channel});
        return r && r->elements == 2 && r->element[1]->integer == 1;
    }, ms(3000))) << "not SSUBSCRIBEd at the slot's owner";
    auto t0 = Clock::now();
    ASSERT_TRUE(holder->write_line("unlock"));
    ASSERT_TRUE(waiter.wait(ms(3000)));
    EXPECT_EQ(0, waiter.rc());
    EXPECT_LT(elapsed_ms(t0), scaled(ms(1500)).count());
    EXPECT_GT(stats().wakeups_pubsub + stats().wakeups_subscribe, woken);
    expect_only_tls(owner);
    rmutex_destroy(&m);
}

TEST_F(TlsCluster, MovedAndAskSendItToTlsPortsAndItFollows)
{
    std::string n = name("moving");
    int slot = cluster->slot(n), from = cluster->owner(slot), to = (from + 1) % 3;
    rmutex_t m;
    init_mutex(&m, n);
    ASSERT_RC(0, rmutex_lock(&m)); /* the slot map is known */
    ASSERT_RC(0, rmutex_unlock(&m));
    rmutex_stats_t before = stats();
    /* ASK: the slot migrating; the target, IMPORTING, answers the
     * multi-key call TRYAGAIN until the end (as on plain TCP). */
    ASSERT_TRUE(cluster->begin_migration(slot, from, to) && cluster->migrate_keys(slot, from, to));
    EXPECT_RC(EAGAIN, rmutex_trylock(&m));
    EXPECT_GT(stats().redirects_ask, before.redirects_ask) << "ASK was not followed";
    expect_only_tls(to);
    /* MOVED: the move done. */
    ASSERT_TRUE(cluster->migrate_keys(slot, from, to) && cluster->finish_migration(slot, from, to));
    ASSERT_TRUE(wait_until([&] { return cluster->owner(slot) == to; }, ms(3000)));
    EXPECT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_GT(stats().redirects_moved, before.redirects_moved);
    expect_only_tls(to);
    ASSERT_TRUE(cluster->move_slot(slot, from)); /* as it was */
    rmutex_destroy(&m);
}

TEST_F(TlsCluster, ZAHoldOutlivesTheFailoverOfItsPrimary)
{
    std::string n = name_on(1, "failover");
    rmutex_t m;
    init_mutex(&m, n);
    ASSERT_RC(0, rmutex_set_wait_replicas(1, 2000)); /* the hold is on the replica too */
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_set_wait_replicas(0, 0));
    int replica = 3 + 1; /* Cluster::start: node 3 + i follows primary i */
    ASSERT_TRUE(cluster->failover(replica));
    std::this_thread::sleep_for(ms(2000)); /* renewals across the change, past the lease */
    EXPECT_GT(cluster->client(replica).pttl(n), 0) << "the hold was not renewed at the new primary";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(0u, stats().locks_lost);
    expect_only_tls(replica);
    rmutex_destroy(&m);
}

} // namespace
