/* tls_sentinel_test.cc -- rmutex on a primary that Sentinel manages, all
 * over TLS: a primary and a replica with tls-replication on, and 3
 * sentinels that listen on TLS and reach the servers and each other over
 * TLS (tls-replication yes in their configuration), started once.  The
 * URL names the sentinels' TLS ports with tls=1: rmutex asks them over
 * TLS, connects to the primary they name over TLS, and follows a
 * failover. */
#include "tls_util.h"
#include "program_env.h"

#include <fcntl.h>
#include <fstream>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace rmt;

namespace {

/* A sentinel on a plain port (the tests' looks) and a TLS one (rmutex's). */
struct TlsSentinel {
    int port = free_port(), tls_port = free_port();
    pid_t pid = -1;
    bool start(const std::string &dir, int primary_tls_port)
    {
        const TlsFiles &t = tls_files();
        std::string conf = dir + "/sentinel-" + std::to_string(port) + ".conf";
        std::ofstream(conf) << "port " << port << "\ntls-port " << tls_port << "\nbind 127.0.0.1\n"
                            << "tls-cert-file " << t.server_crt << "\ntls-key-file " << t.server_key
                            << "\ntls-ca-cert-file " << t.ca << "\ntls-replication yes\n"
                            << "dir " << dir << "\nlogfile " << dir << "/sentinel-" << port << ".log\n"
                            << "sentinel monitor mymaster 127.0.0.1 " << primary_tls_port << " 2\n"
                            << "sentinel down-after-milliseconds mymaster 1000\n"
                            << "sentinel failover-timeout mymaster 3000\n";
        const char *bin = getenv("RMUTEX_TEST_REDIS_SERVER");
        std::string server = bin && *bin ? bin : "redis-server";
        pid_t parent = getpid();
        if ((pid = fork()) == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(127);
            int null = open("/dev/null", O_RDWR);
            dup2(null, 0), dup2(null, 1);
            execlp(server.c_str(), server.c_str(), conf.c_str(), "--sentinel", (char *)nullptr);
            _exit(127);
        }
        return wait_until([&] { return Redis("127.0.0.1", port).cmd({"PING"}).str() == "PONG"; }, ms(10000));
    }
    ~TlsSentinel()
    {
        if (pid > 0) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
    }
};

struct TlsSentinelSet {
    std::unique_ptr<RedisServer> data[2];
    std::vector<std::unique_ptr<TlsSentinel>> sentinels;
    std::string dir = tls_files().dir;

    bool start()
    {
        data[0] = RedisServer::start({"--tls-replication", "yes", "--repl-diskless-sync-delay", "0"});
        if (!data[0]) return false;
        data[1] = RedisServer::start({"--tls-replication", "yes", "--repl-diskless-sync-delay", "0", "--replicaof",
                                      "127.0.0.1", std::to_string(data[0]->tls_port())});
        if (!data[1]) return false;
        for (int i = 0; i < 3; i++) {
            sentinels.push_back(std::make_unique<TlsSentinel>());
            if (!sentinels.back()->start(dir, data[0]->tls_port())) return false;
        }
        return wait_until([&] { return settled(); }, ms(30000));
    }

    /* The TLS port of the primary every sentinel names, once all agree
     * and know each other and the replica; 0 before. */
    int primary_tls_port()
    {
        std::string agreed;
        for (auto &s : sentinels) {
            Reply m = Redis("127.0.0.1", s->port).cmd({"SENTINEL", "MASTER", "mymaster"});
            if (!m || m->type != REDIS_REPLY_ARRAY) return 0;
            std::map<std::string, std::string> f;
            for (size_t i = 0; i + 1 < m->elements; i += 2) f[m->element[i]->str] = m->element[i + 1]->str;
            if (f["flags"] != "master" || f["num-slaves"] != "1" || f["num-other-sentinels"] != "2") return 0;
            if (!agreed.empty() && agreed != f["port"]) return 0;
            agreed = f["port"];
        }
        return atoi(agreed.c_str());
    }
    bool settled() { return primary_tls_port() > 0; }

    /* The index of the data node on TLS port p. */
    int index_of(int p) { return data[0] && data[0]->tls_port() == p ? 0 : 1; }

    std::string url(const std::string &opts) const
    {
        std::string u = "redis-sentinel://";
        for (size_t i = 0; i < sentinels.size(); i++)
            u += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(sentinels[i]->tls_port);
        return u + "/mymaster?tls=1&" + tls_query() + (opts.empty() ? "" : "&" + opts);
    }
};

TlsSentinelSet *set;
::testing::Environment *const env = ::testing::AddGlobalTestEnvironment(new ProgramServers<TlsSentinelSet>(
    &set, [](TlsSentinelSet &s) { return s.start(); }, "a TLS Sentinel set (1 primary, 1 replica, 3 sentinels)"));

class TlsSentinelTest : public ::testing::Test {
  protected:
    void SetUp() override
    {
        ASSERT_TRUE(set && set->settled());
        ASSERT_RC(0, rmutex_configure(set->url("lease=1500&command_timeout=1000").c_str()));
    }
    void TearDown() override { EXPECT_RC(0, rmutex_shutdown()); }
};

TEST_F(TlsSentinelTest, LocksLiveOnThePrimaryTheSentinelsNameOverTls)
{
    std::string n = test_lock_name("m");
    rmutex_t m;
    init_mutex(&m, n);
    ASSERT_RC(0, rmutex_lock(&m));
    int primary = set->index_of(set->primary_tls_port());
    Redis r("127.0.0.1", set->data[primary]->port());
    EXPECT_TRUE(r.exists(n));
    for (int p : rmutex_local_ports(r)) EXPECT_EQ(set->data[primary]->tls_port(), p) << "a plain connection";
    for (auto &s : set->sentinels) {
        Redis sr("127.0.0.1", s->port);
        for (int p : rmutex_local_ports(sr)) EXPECT_EQ(s->tls_port, p) << "a plain connection to a sentinel";
    }
    EXPECT_RC(0, rmutex_unlock(&m));
    rmutex_destroy(&m);
}

TEST_F(TlsSentinelTest, AWrongCaForTheSentinelsIsEaccesNotUnreachable)
{
    rmutex_shutdown();
    std::string url = set->url("cacert=" + bad_certs().rogue_ca);
    ASSERT_RC(0, rmutex_configure(url.c_str()));
    rmutex_t m;
    init_mutex(&m, test_lock_name("m"));
    EXPECT_RC(EACCES, rmutex_trylock(&m));
    EXPECT_NE(nullptr, strstr(rmutex_detail(), "certificate verify failed")) << rmutex_detail();
    rmutex_destroy(&m);
}

TEST_F(TlsSentinelTest, ZKillingThePrimaryMovesTheLocksToTheNewOneOverTls)
{
    std::string n = test_lock_name("m");
    rmutex_t m;
    init_mutex(&m, n);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    int old_port = set->primary_tls_port(), old = set->index_of(old_port);
    set->data[old]->kill9();
    /* Sentinel's failover: down after 1 s, then an election. */
    ASSERT_TRUE(wait_until([&] {
        int p = set->primary_tls_port();
        return p > 0 && p != old_port;
    }, ms(30000))) << "no failover";
    auto t0 = Clock::now();
    struct timespec ts = abs_after(CLOCK_MONOTONIC, scaled(ms(10000)).count());
    EXPECT_RC(0, rmutex_clocklock(&m, CLOCK_MONOTONIC, &ts)) << "not at the new primary";
    std::cerr << "[sentinel] locked at the new primary " << elapsed_ms(t0) << " ms after the sentinels named it\n";
    Redis r("127.0.0.1", set->data[1 - old]->port());
    EXPECT_TRUE(r.exists(n));
    EXPECT_RC(0, rmutex_unlock(&m));
    rmutex_destroy(&m);
}

} // namespace
