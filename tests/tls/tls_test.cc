/* tls_test.cc -- rmutex over TLS (rediss://) to real redis-servers that
 * require client certificates, one of each kind started once for the
 * program: the good one, one whose certificate names another host, one
 * whose certificate has expired, one that asks for no client certificate,
 * a plain-text one, and a listener that never answers.
 *
 * Everything the library does goes over TLS here -- the pool, the
 * multiplexer's subscription, the watchdog, fork -- and every mistake a
 * user makes with TLS is an answer with a reason (EACCES, EINVAL), never a
 * hang: a wrong CA, a wrong name, an expired certificate, no or an unknown
 * client certificate, a plain server on a TLS URL and the reverse.
 * Deadlines hold through a handshake that gets no answer (the connect
 * timeout) and through a record that arrives in part (a proxy holds its
 * rest: the command timeout). */
#include "tls_util.h"
#include "program_env.h"

#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace rmt;

namespace {

struct Servers {
    std::unique_ptr<RedisServer> good, other, expired, no_client_auth, plain;
    bool start()
    {
        const BadCerts &b = bad_certs();
        good = RedisServer::start();
        other = RedisServer::start({"--tls-cert-file", b.other_crt, "--tls-key-file", b.other_key});
        expired = RedisServer::start({"--tls-cert-file", b.expired_crt, "--tls-key-file", b.expired_key});
        no_client_auth = RedisServer::start({"--tls-auth-clients", "no"});
        unsetenv("RMUTEX_TEST_TLS");
        plain = RedisServer::start();
        setenv("RMUTEX_TEST_TLS", "1", 1);
        return good && other && expired && no_client_auth && plain && !plain->tls_port();
    }
};
Servers *servers;
::testing::Environment *const env = ::testing::AddGlobalTestEnvironment(
    new ProgramServers<Servers>(&servers, [](Servers &s) { return s.start(); }, "TLS servers"));

/* A raw TCP proxy in front of one server: forwards bytes both ways, and on
 * hold(n) lets only n more bytes go from the server to the client, keeping
 * the rest (a TLS record that arrives in part). */
class HoldingProxy {
  public:
    explicit HoldingProxy(int upstream) : upstream_(upstream)
    {
        lfd_ = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        bind(lfd_, (sockaddr *)&a, sizeof a);
        listen(lfd_, 16);
        getsockname(lfd_, (sockaddr *)&a, &len);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { run(); });
    }
    ~HoldingProxy()
    {
        stop_ = true;
        thread_.join();
        for (auto &p : pairs_) close(p.first), close(p.second);
        close(lfd_);
    }
    int port() const { return port_; }
    void hold(long n) { allow_ = n; }

  private:
    void run()
    {
        while (!stop_) {
            std::vector<pollfd> fds{{lfd_, POLLIN, 0}};
            for (auto &p : pairs_) {
                fds.push_back({p.first, POLLIN, 0});
                fds.push_back({p.second, (short)(allow_ != 0 ? POLLIN : 0), 0});
            }
            if (poll(fds.data(), fds.size(), 20) <= 0) continue;
            if (fds[0].revents) {
                int c = accept(lfd_, nullptr, nullptr);
                int u = socket(AF_INET, SOCK_STREAM, 0);
                sockaddr_in a{};
                a.sin_family = AF_INET;
                a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                a.sin_port = htons((uint16_t)upstream_);
                if (c >= 0 && connect(u, (sockaddr *)&a, sizeof a) == 0) pairs_.push_back({c, u});
                else close(c), close(u);
            }
            for (size_t i = 0; i < pairs_.size(); i++) {
                char buf[16384];
                bool gone = false;
                if (fds[1 + 2 * i].revents) { /* client -> server */
                    ssize_t n = read(pairs_[i].first, buf, sizeof buf);
                    if (n > 0) gone = send(pairs_[i].second, buf, n, MSG_NOSIGNAL) != n;
                    else gone = n == 0 || errno != EINTR;
                }
                if (!gone && fds[2 + 2 * i].revents) { /* server -> client, maybe in part */
                    long allow = allow_;
                    size_t want = allow < 0 ? sizeof buf : std::min<size_t>(sizeof buf, allow);
                    ssize_t n = want ? read(pairs_[i].second, buf, want) : 0;
                    if (n > 0) {
                        gone = send(pairs_[i].first, buf, n, MSG_NOSIGNAL) != n;
                        if (allow >= 0) allow_ = allow - n;
                    } else if (want) {
                        gone = n == 0 || errno != EINTR;
                    }
                }
                if (gone) { /* either side closed: close both, as a proxy does */
                    close(pairs_[i].first), close(pairs_[i].second);
                    pairs_.erase(pairs_.begin() + (long)i);
                    break; /* fds no longer lines up with pairs_: poll again */
                }
            }
        }
    }
    int upstream_, lfd_, port_;
    std::atomic<bool> stop_{false};
    std::atomic<long> allow_{-1};
    std::vector<std::pair<int, int>> pairs_;
    std::thread thread_;
};

class Tls : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_TRUE(servers && servers->good); }
    void TearDown() override { rmutex_shutdown(); }
    std::string name(const std::string &s = "m") { return test_lock_name(s); }
    Redis admin(const RedisServer &s) { return Redis("127.0.0.1", s.port()); }

    /* The first call on url: its result, with the detail in *detail. */
    int first_trylock(const std::string &url, std::string *detail, int64_t *took = nullptr)
    {
        int r = rmutex_configure(url.c_str());
        if (r) {
            *detail = rmutex_detail();
            return r;
        }
        rmutex_t m;
        init_mutex(&m, name());
        auto t0 = Clock::now();
        r = rmutex_trylock(&m);
        if (took) *took = elapsed_ms(t0);
        *detail = rmutex_detail();
        if (!r) rmutex_unlock(&m);
        rmutex_destroy(&m);
        rmutex_shutdown();
        return r;
    }
};

/* ---- everything over TLS ------------------------------------------------ */

TEST_F(Tls, AWaiterIsWokenThroughTheTlsSubscriptionAndEveryConnectionIsTls)
{
    std::string url = tls_url(*servers->good, "poll=10000&lease=1500");
    ASSERT_RC(0, rmutex_configure(url.c_str()));
    rmutex_t m;
    init_mutex(&m, name());
    auto holder = child_holding(name(), url); /* another process, over TLS too */
    ASSERT_TRUE(holder);
    uint64_t woken = stats().wakeups_pubsub; /* (counters add up over the program) */
    Async waiter([&] { return rmutex_lock(&m) || rmutex_unlock(&m); });
    ASSERT_FALSE(waiter.wait(ms(300))) << "the lock was not held";
    auto t0 = Clock::now();
    ASSERT_TRUE(holder->write_line("unlock"));
    ASSERT_TRUE(waiter.wait(ms(3000))) << "not woken (the poll bound is 10 s): " << rmutex_detail();
    EXPECT_EQ(0, waiter.rc());
    EXPECT_LT(elapsed_ms(t0), scaled(ms(2000)).count());
    EXPECT_GE(stats().wakeups_pubsub, woken + 1);
    Redis r = admin(*servers->good);
    auto ports = rmutex_local_ports(r);
    ASSERT_FALSE(ports.empty());
    for (int p : ports) EXPECT_EQ(servers->good->tls_port(), p) << "a connection on the plain port";
    rmutex_destroy(&m);
}

TEST_F(Tls, TheWatchdogRenewsOverTlsPastTheLease)
{
    ASSERT_RC(0, rmutex_configure(tls_url(*servers->good, "lease=1000").c_str()));
    rmutex_t m;
    init_mutex(&m, name());
    uint64_t renewals = stats().renewals;
    ASSERT_RC(0, rmutex_lock(&m));
    Redis r = admin(*servers->good);
    std::this_thread::sleep_for(ms(2500)); /* lasting past the lease is the point */
    EXPECT_TRUE(r.exists(name())) << "the hold was not renewed";
    EXPECT_GE(stats().renewals, renewals + 2);
    EXPECT_RC(0, rmutex_unlock(&m));
    rmutex_destroy(&m);
}

TEST_F(Tls, KilledConnectionsAreSeenClosedAndReplacedWithoutAFailedCall)
{
    ASSERT_RC(0, rmutex_configure(tls_url(*servers->good, "lease=1200").c_str()));
    rmutex_t m, n;
    init_mutex(&m, name("held"));
    init_mutex(&n, name("other"));
    ASSERT_RC(0, rmutex_lock(&m)); /* the watchdog's connection, idle between renewals */
    uint64_t lost = stats().locks_lost;
    Redis r = admin(*servers->good);
    std::string pid = std::to_string(getpid());
    ASSERT_TRUE(wait_until([&] { return !r.client_ids("rmutex:wd:" + pid).empty(); }, ms(3000)));
    auto wd = r.client_ids("rmutex:wd:" + pid), cmd = r.client_ids("rmutex:cmd:" + pid);
    ASSERT_FALSE(cmd.empty());
    for (long long id : wd) r.client_kill_id(id); /* close_notify, then the close */
    for (long long id : cmd) r.client_kill_id(id);
    /* The pool's connection is seen closed before use: no call fails. */
    EXPECT_RC(0, rmutex_trylock(&n));
    EXPECT_RC(0, rmutex_unlock(&n));
    /* The watchdog saw its connection closed, dialled again, and renews. */
    EXPECT_TRUE(wait_until([&] {
        auto now = r.client_ids("rmutex:wd:" + pid);
        return !now.empty() && now != wd;
    }, ms(3000)));
    std::this_thread::sleep_for(ms(1500));
    EXPECT_TRUE(r.exists(name("held"))) << "the hold was lost after its connection was killed";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(lost, stats().locks_lost);
    rmutex_destroy(&m);
    rmutex_destroy(&n);
}

TEST_F(Tls, ABurstOfMessagesLargerThanARecordStillEndsInTheWake)
{
    /* Messages arrive in 16 KiB records; what OpenSSL decrypted and nobody
     * read yet is invisible to poll(): the release after the burst must be
     * seen at once, not at the poll bound. */
    std::string url = tls_url(*servers->good, "poll=10000");
    ASSERT_RC(0, rmutex_configure(url.c_str()));
    rmutex_t m;
    init_mutex(&m, name());
    auto holder = child_holding(name(), url);
    ASSERT_TRUE(holder);
    Async waiter([&] { return rmutex_lock(&m) || rmutex_unlock(&m); });
    Redis r = admin(*servers->good);
    std::string channel = "redisson_lock__channel:{" + name() + "}";
    ASSERT_TRUE(wait_until([&] { return r.numsub(channel) == 1; }, ms(3000)));
    std::string blob(3000, 'x');
    for (int i = 0; i < 200; i++) redisAppendCommand(r.ctx(), "PUBLISH %s %s", channel.c_str(), blob.c_str());
    for (int i = 0; i < 200; i++) {
        void *reply = nullptr;
        ASSERT_EQ(REDIS_OK, redisGetReply(r.ctx(), &reply));
        freeReplyObject(reply);
    }
    auto t0 = Clock::now();
    ASSERT_TRUE(holder->write_line("unlock"));
    ASSERT_TRUE(waiter.wait(ms(3000))) << "the release after the burst was not seen";
    EXPECT_EQ(0, waiter.rc());
    EXPECT_LT(elapsed_ms(t0), scaled(ms(2500)).count());
    rmutex_destroy(&m);
}

TEST_F(Tls, AForkedChildLocksOverItsOwnTlsAndLeavesTheParentsSessionsAlone)
{
    ASSERT_RC(0, rmutex_configure(tls_url(*servers->good, "lease=1500").c_str()));
    rmutex_t held;
    init_mutex(&held, name("held"));
    ASSERT_RC(0, rmutex_lock(&held)); /* the watchdog renews it over TLS across the fork */
    uint64_t reconnects = stats().reconnects, failures = stats().renewal_failures;
    EXPECT_EQ(0, fork_and_lock_in_child(name("child")));
    /* A child that wrote on the parent's sessions would make the parent's
     * next read fail ("bad record mac") and dial again. */
    rmutex_t m;
    init_mutex(&m, name("after"));
    for (int i = 0; i < 20; i++) {
        ASSERT_RC(0, rmutex_trylock(&m));
        ASSERT_RC(0, rmutex_unlock(&m));
    }
    std::this_thread::sleep_for(ms(1200)); /* a renewal on the watchdog's session */
    EXPECT_RC(0, rmutex_unlock(&held));
    EXPECT_EQ(reconnects, stats().reconnects) << "a parent's connection broke after the fork";
    EXPECT_EQ(failures, stats().renewal_failures);
    rmutex_destroy(&m);
    rmutex_destroy(&held);
}

TEST_F(Tls, OpenSslIsLoadedOnlyByAProcessThatUsesTls)
{
    auto mapped = [](pid_t pid) {
        return shell("grep -c 'libssl\\.so' /proc/" + std::to_string(pid) + "/maps || true") != "0\n";
    };
    auto plain = child_holding(name("plain"), servers->plain->url());
    ASSERT_TRUE(plain);
    EXPECT_FALSE(mapped(plain->pid())) << "libssl loaded by a process with a plain URL";
    auto tls = child_holding(name("tls"), servers->good->url());
    ASSERT_TRUE(tls);
    EXPECT_TRUE(mapped(tls->pid())) << "libssl not loaded by a process with a TLS URL";
    /* Not linked either: the library names neither libssl nor libcrypto. */
    EXPECT_EQ("0\n", shell("readelf -d '" RMUTEX_LIB "' | grep -cE 'NEEDED.*lib(ssl|crypto)' || true"));
}

TEST_F(Tls, AServerThatAsksNoClientCertificateNeedsNone)
{
    std::string detail;
    EXPECT_RC(0, first_trylock(bare_tls_url(*servers->no_client_auth, "localhost", "cacert=" + tls_files().ca),
                               &detail)) << detail;
}

/* ---- mistakes: an answer with the reason, never a hang --------------------- */

TEST_F(Tls, AWrongCaIsEaccesWithTheVerifyReasonOnEveryLockCall)
{
    ASSERT_RC(0, rmutex_configure(tls_url(*servers->good, "cacert=" + bad_certs().rogue_ca).c_str()));
    rmutex_t m;
    init_mutex(&m, name());
    EXPECT_RC(EACCES, rmutex_lock(&m)); /* lock too: it does not wait for ever */
    EXPECT_NE(nullptr, strstr(rmutex_detail(), "certificate verify failed")) << rmutex_detail();
    EXPECT_NE(nullptr, strstr(rmutex_detail(), "self-signed certificate in certificate chain")) << rmutex_detail();
    EXPECT_RC(EACCES, rmutex_trylock(&m));
    struct timespec ts = abs_after(CLOCK_REALTIME, 2000);
    EXPECT_RC(EACCES, rmutex_timedlock(&m, &ts));
    rmutex_destroy(&m);
}

TEST_F(Tls, AServerCertificateForAnotherNameIsEaccesAndSniNamesTheNameToCheck)
{
    std::string detail, ca = tls_query();
    EXPECT_RC(EACCES, first_trylock(bare_tls_url(*servers->other, "localhost", ca), &detail));
    EXPECT_NE(std::string::npos, detail.find("hostname mismatch")) << detail;
    EXPECT_RC(EACCES, first_trylock(bare_tls_url(*servers->other, "127.0.0.1", ca), &detail));
    EXPECT_NE(std::string::npos, detail.find("IP address mismatch")) << detail;
    EXPECT_RC(0, first_trylock(bare_tls_url(*servers->other, "127.0.0.1", ca + "&sni=other.example"), &detail))
        << detail;
}

TEST_F(Tls, AnExpiredServerCertificateIsEacces)
{
    std::string detail;
    EXPECT_RC(EACCES, first_trylock(tls_url(*servers->expired), &detail));
    EXPECT_NE(std::string::npos, detail.find("certificate has expired")) << detail;
}

TEST_F(Tls, NoClientCertificateOrAnUntrustedOneIsEacces)
{
    std::string detail;
    EXPECT_RC(EACCES, first_trylock(bare_tls_url(*servers->good, "localhost", "cacert=" + tls_files().ca), &detail));
    EXPECT_NE(std::string::npos, detail.find("certificate required")) << detail;
    const BadCerts &b = bad_certs();
    EXPECT_RC(EACCES, first_trylock(bare_tls_url(*servers->good, "localhost",
                                                 "cacert=" + tls_files().ca + "&cert=" + b.rogue_crt +
                                                     "&key=" + b.rogue_key),
                                    &detail));
    EXPECT_NE(std::string::npos, detail.find("refused the connection")) << detail;
}

TEST_F(Tls, APlainServerOnATlsUrlIsEaccesWithinTheConnectTimeout)
{
    std::string url = "rediss://127.0.0.1:" + std::to_string(servers->plain->port()) + "?" + tls_query() +
                      "&connect_timeout=400";
    std::string detail;
    int64_t took = 0;
    EXPECT_RC(EACCES, first_trylock(url, &detail, &took));
    EXPECT_NE(std::string::npos, detail.find("plain text")) << detail;
    EXPECT_LT(took, scaled(ms(1500)).count());
}

TEST_F(Tls, ATlsServerOnAPlainUrlIsEacces)
{
    std::string detail;
    EXPECT_RC(EACCES, first_trylock("redis://127.0.0.1:" + std::to_string(servers->good->tls_port()), &detail));
    EXPECT_NE(std::string::npos, detail.find("TLS port")) << detail;
}

TEST_F(Tls, InsecureSkipsTheCheckAndSaysSo)
{
    std::string url = tls_url(*servers->other, "insecure=1&cacert=" + bad_certs().rogue_ca);
    ASSERT_RC(0, rmutex_configure(url.c_str()));
    EXPECT_NE(nullptr, strstr(rmutex_detail(), "insecure=1")) << rmutex_detail();
    rmutex_shutdown();
    std::string detail;
    EXPECT_RC(0, first_trylock(url, &detail)) << detail;
}

#ifdef RMUTEX_CLI
TEST_F(Tls, TheCommandTakesATlsUrlAndItsStatusSaysWhenNothingIsChecked)
{
    auto status = [&](const std::string &url, std::string *err) {
        Child cli({RMUTEX_CLI, "--url", url, "status", name()}, std::map<std::string, std::string>{});
        int st = cli.wait(ms(10000));
        *err = cli.err();
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    };
    std::string err;
    EXPECT_EQ(3, status(servers->good->url(), &err)) << err; /* 3: free */
    EXPECT_EQ(std::string::npos, err.find("insecure")) << err;
    EXPECT_EQ(3, status(tls_url(*servers->other, "insecure=1"), &err)) << err;
    EXPECT_NE(std::string::npos, err.find("insecure=1")) << err;
    EXPECT_EQ(4, status(tls_url(*servers->good, "cacert=" + bad_certs().rogue_ca), &err)) << err;
    EXPECT_NE(std::string::npos, err.find("certificate verify failed")) << err;
}
#endif

TEST_F(Tls, BadTlsOptionsAreEinvalAtConfigure)
{
    std::string good = servers->good->url();
    for (const std::string &bad :
         {good + "&cacert=/nonexistent/ca.crt", good + "&capath=" + tls_files().ca,
          "rediss://127.0.0.1:1?cert=" + tls_files().client_crt, "redis://127.0.0.1:1?cacert=" + tls_files().ca,
          std::string("redis://127.0.0.1:1?insecure=1"), std::string("unix:///tmp/x.sock?tls=1"),
          std::string("rediss://127.0.0.1:1?tls=2"), std::string("rediss://127.0.0.1:1?sni=")}) {
        EXPECT_RC(EINVAL, rmutex_configure(bad.c_str())) << bad;
        EXPECT_STRNE("", rmutex_detail()) << bad;
    }
    /* A key that is not the certificate's: at the first connection. */
    std::string mismatched = bare_tls_url(*servers->good, "localhost",
                                          "cacert=" + tls_files().ca + "&cert=" + tls_files().client_crt +
                                              "&key=" + bad_certs().other_key);
    std::string detail;
    EXPECT_RC(EINVAL, first_trylock(mismatched, &detail));
    EXPECT_NE(std::string::npos, detail.find("key")) << detail;
}

/* ---- deadlines ------------------------------------------------------------ */

TEST_F(Tls, AHandshakeThatGetsNoAnswerEndsAtTheConnectTimeout)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(0, bind(fd, (sockaddr *)&a, sizeof a));
    ASSERT_EQ(0, listen(fd, 8)); /* the kernel accepts; nobody answers */
    getsockname(fd, (sockaddr *)&a, &len);
    std::string url = "rediss://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "?" + tls_query() +
                      "&connect_timeout=300";
    std::string detail;
    int64_t took = 0;
    EXPECT_RC(EAGAIN, first_trylock(url, &detail, &took));
    EXPECT_NE(std::string::npos, detail.find("timed out")) << detail;
    EXPECT_GE(took, 250);
    EXPECT_LT(took, scaled(ms(1200)).count());
    close(fd);
}

TEST_F(Tls, ARecordThatArrivesInPartEndsAtTheCallsDeadline)
{
    HoldingProxy proxy(servers->good->tls_port());
    std::string url = "rediss://127.0.0.1:" + std::to_string(proxy.port()) + "?" + tls_query() +
                      "&pool=1&command_timeout=500";
    ASSERT_RC(0, rmutex_configure(url.c_str()));
    rmutex_t m;
    init_mutex(&m, name());
    /* Connected, through the proxy.  The handshake shares the 500 ms
     * command timeout, which a loaded machine can overrun: the first
     * connection is tried again, as a caller would (it is not what this
     * test is about). */
    int r = EAGAIN;
    for (auto until = Clock::now() + scaled(ms(10000)); r == EAGAIN && Clock::now() < until;)
        r = rmutex_trylock(&m);
    ASSERT_RC(0, r) << rmutex_detail();
    ASSERT_RC(0, rmutex_unlock(&m));
    proxy.hold(7); /* the next reply: a record header and two bytes of it */
    auto t0 = Clock::now();
    EXPECT_RC(EAGAIN, rmutex_trylock(&m)); /* a reply is awaited for the command timeout */
    EXPECT_NE(nullptr, strstr(rmutex_detail(), "timed out")) << rmutex_detail();
    EXPECT_GE(elapsed_ms(t0), 490);
    EXPECT_LT(elapsed_ms(t0), scaled(ms(1200)).count()) << "the wait went past the command timeout";
    proxy.hold(-1);
    rmutex_destroy(&m);
}

} // namespace
