/* harness.h -- what every rmutex test needs besides GoogleTest.
 *
 *   - RedisServer: a private redis-server on a free loopback port, in a
 *     mktemp -d directory, without persistence; stop/restart on the same
 *     port, kill -9.  RMUTEX_TEST_REDIS_SERVER names the binary (default:
 *     redis-server from PATH).  RMUTEX_TEST_TLS=1: each also listens on a
 *     TLS port, with certificates the program makes once (tls_files()),
 *     and url() names that port (rediss://, client certificate and all);
 *     the tests' own Redis client stays on the plain port.
 *   - Redis: a raw hiredis client for assertions on the server's state.
 *   - Child: the rmutex_test_child helper, spawned with RMUTEX_URL in its
 *     environment, talked to line by line over its stdin/stdout.
 *   - Time: every liveness bound goes through scaled() (multiplied by
 *     RMUTEX_TEST_TIME_SCALE, default 1), and tests wait for conditions with
 *     wait_until(), never with a bare sleep.
 *   - RedisTest: a fixture that gives each test a server (its own, or the one
 *     named by RMUTEX_TEST_URL when the test does not need to restart or
 *     kill it) and lock names that are unique to the test.
 */
#ifndef RMUTEX_TEST_HARNESS_H
#define RMUTEX_TEST_HARNESS_H

#include <gtest/gtest.h>

/* RMT_ASAN: built with AddressSanitizer (a test it cannot run skips). */
#if defined(__SANITIZE_ADDRESS__)
#define RMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RMT_ASAN 1
#endif
#endif
#include <hiredis/hiredis.h>
#include <rmutex.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rmt {

using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

/* ---- time ------------------------------------------------------------ */

/* RMUTEX_TEST_TIME_SCALE (default 1). */
double time_scale();

/* d multiplied by the time scale: use it for every liveness bound. */
ms scaled(ms d);

/* Milliseconds elapsed on CLOCK_MONOTONIC since t. */
int64_t elapsed_ms(Clock::time_point t);

/* Poll pred every few milliseconds until it is true or scaled(bound) has
 * passed.  Returns pred's last value. */
bool wait_until(const std::function<bool()> &pred, ms bound);

/* As wait_until, but the bound is not scaled: for tests that assert that
 * something does NOT happen within a precise span. */
bool wait_until_unscaled(const std::function<bool()> &pred, ms bound);

/* An absolute time on clock, offset_ms from now (negative: in the past). */
struct timespec abs_after(clockid_t clock, int64_t offset_ms);

/* now(clock) >= t */
bool reached(clockid_t clock, const struct timespec &t);

/* ---- rmutex conveniences ---------------------------------------------- */

rmutex_stats_t stats();

/* An errno name for readable assertion messages: "EBUSY (16)". */
std::string err_name(int code);

/* A formatter so ASSERT_EQ(EBUSY, rc) prints names: use EXPECT_RC(EBUSY, rc). */
#define EXPECT_RC(expected, actual)                                                   \
    EXPECT_EQ(::rmt::err_name(expected), ::rmt::err_name(actual)) << "detail: " << rmutex_detail()
#define ASSERT_RC(expected, actual)                                                   \
    ASSERT_EQ(::rmt::err_name(expected), ::rmt::err_name(actual)) << "detail: " << rmutex_detail()

/* ---- redis-server ------------------------------------------------------ */

/* A port on 127.0.0.1 that nothing listens on right now. */
int free_port();

/* ---- TLS ----------------------------------------------------------------- */

/* RMUTEX_TEST_TLS=1: servers listen on TLS too, and URLs name it. */
bool tls_mode();

/* A CA and certificates signed by it, made with openssl once per program
 * in a temporary directory: the server's (localhost, 127.0.0.1) and a
 * client's. */
struct TlsFiles {
    std::string dir, ca, ca_key, server_crt, server_key, client_crt, client_key;
};
const TlsFiles &tls_files();

/* "cacert=...&cert=...&key=...": the options of a URL to a test server. */
std::string tls_query();

class RedisServer {
  public:
    /* Start redis-server on a free port (or on port, if nonzero) with extra
     * command-line arguments (e.g. {"--requirepass", "pw"}).  Fails the
     * current test (fatal) if it does not answer PING in time. */
    static std::unique_ptr<RedisServer> start(std::vector<std::string> extra = {}, int port = 0);
    ~RedisServer();

    int port() const { return port_; }
    int tls_port() const { return tls_port_; } /* 0: no TLS */
    const std::string &host() const { return host_; }
    const std::string &unix_socket() const { return sock_; }
    const std::string &password() const { return password_; }
    pid_t pid() const { return pid_; }
    bool running() const { return pid_ > 0; }

    /* redis://[:password@]127.0.0.1:port, or with TLS
     * rediss://[:password@]127.0.0.1:tls_port?tls_query() */
    std::string url() const;

    /* SIGTERM and wait for it to exit (no persistence: data is gone). */
    void stop();
    /* SIGKILL and reap. */
    void kill9();
    /* Start again on the same port; waits for PING.  Returns success. */
    bool restart();

  private:
    RedisServer() = default;
    bool spawn();
    bool wait_ready(ms bound);

    std::string bin_, dir_, host_ = "127.0.0.1", sock_, password_;
    std::vector<std::string> extra_;
    int port_ = 0, tls_port_ = 0;
    pid_t pid_ = -1;
};

/* ---- raw hiredis client -------------------------------------------------- */

struct Reply {
    std::unique_ptr<redisReply, void (*)(void *)> r{nullptr, freeReplyObject};
    explicit operator bool() const { return r != nullptr; }
    redisReply *operator->() const { return r.get(); }
    bool is_nil() const { return r && r->type == REDIS_REPLY_NIL; }
    bool is_error() const { return !r || r->type == REDIS_REPLY_ERROR; }
    long long integer() const { return r && r->type == REDIS_REPLY_INTEGER ? r->integer : INT64_MIN; }
    std::string str() const { return r && r->str ? std::string(r->str, r->len) : std::string(); }
};

class Redis {
  public:
    Redis(const std::string &host, int port, const std::string &password = "");
    ~Redis();
    Redis(const Redis &) = delete;
    Redis &operator=(const Redis &) = delete;

    bool ok() const { return c_ && !c_->err; }
    const char *error() const { return c_ ? c_->errstr : "no context"; }
    redisContext *ctx() { return c_; }

    /* A command from an argument vector (binary-safe).  Reconnects once if
     * the connection had failed before. */
    Reply cmd(const std::vector<std::string> &argv);
    Reply cmdf(const char *fmt, ...);

    std::string type(const std::string &key);
    std::map<std::string, std::string> hgetall(const std::string &key);
    /* The value of the lock hash's only field ("" unless it has exactly
     * one): a cached lock's acquisition, "p<acquisition>" when parked. */
    std::string lock_value(const std::string &name);
    bool parked(const std::string &name) { return lock_value(name).rfind("p", 0) == 0; }
    long long pttl(const std::string &key);
    bool exists(const std::string &key);
    std::optional<std::string> get(const std::string &key);
    long long numsub(const std::string &channel);

    /* CLIENT LIST, one map per connection (id, name, addr, cmd, ...). */
    std::vector<std::map<std::string, std::string>> client_list();
    /* Ids of connections whose name is exactly name. */
    std::vector<long long> client_ids(const std::string &name);
    bool client_kill_id(long long id);

    /* Wait for one pub/sub message (after a SUBSCRIBE done with cmd()).
     * Returns {channel, payload} or nothing when the bound passed. */
    std::optional<std::pair<std::string, std::string>> next_message(ms bound);

  private:
    void connect();
    std::string host_, password_;
    int port_;
    redisContext *c_ = nullptr;
};

/* ---- the child helper ---------------------------------------------------- */

class Child {
  public:
    /* Spawn rmutex_test_child with args; RMUTEX_URL=url in its environment
     * (plus extra_env "K=V" entries, which replace inherited ones). */
    Child(const std::vector<std::string> &args, const std::string &url,
          const std::vector<std::string> &extra_env = {});
    /* The same with another helper program. */
    Child(const std::string &program, const std::vector<std::string> &args,
          const std::string &url, const std::vector<std::string> &extra_env = {});
    /* Any program (argv[0] is its path), with this process's environment
     * minus LD_PRELOAD, RMUTEX_PRELOAD and RMUTEX_URL, plus env (a value ""
     * unsets); its stderr is kept in a file for err().  For programs under
     * test, such as the preload shim's and the header swap's. */
    Child(const std::vector<std::string> &argv, const std::map<std::string, std::string> &env);
    ~Child();
    Child(const Child &) = delete;
    Child &operator=(const Child &) = delete;

    pid_t pid() const { return pid_; }
    /* The next line on the child's stdout (without the newline), or nothing
     * when scaled(bound) passed or the child closed stdout. */
    std::optional<std::string> read_line(ms bound);
    std::optional<std::string> read_line_unscaled(ms bound);
    /* A complete line already received or arriving within bound (unscaled),
     * without waiting longer: for "has it said anything yet?". */
    std::optional<std::string> poll_line(ms bound = ms(0)) { return read_line_unscaled(bound); }
    /* Read lines until one starts with prefix; returns it. */
    std::optional<std::string> expect_line(const std::string &prefix, ms bound);
    bool write_line(const std::string &line);
    void kill(int sig);
    /* Wait for exit within scaled(bound).  Returns the wait status, or -1. */
    int wait(ms bound);
    bool exited() const { return pid_ < 0; }
    /* It was spawned (and may have exited since). */
    bool started() const { return pid_ > 0 || reaped_; }
    /* Everything it wrote to stderr so far (the env constructor only). */
    std::string err() const;
    /* The stdout lines read so far. */
    const std::vector<std::string> &log() const { return log_; }

  private:
    void spawn(const std::vector<std::string> &argv, const std::vector<std::string> &env,
               bool capture_stderr);

    pid_t pid_ = -1;
    bool reaped_ = false;
    int status_ = -1;
    int in_ = -1, out_ = -1;
    std::string buf_, err_path_;
    std::vector<std::string> log_;
};

/* Lines of s (without newlines, empty lines dropped). */
std::vector<std::string> lines(const std::string &s);

/* Run a command through /bin/sh and return its stdout. */
std::string shell(const std::string &cmd, int *status = nullptr);

/* Spawn "rmutex_test_child hold name opts..." and wait until it prints
 * "held rc=<expect_rc>".  nullptr (and a test failure) otherwise. */
std::unique_ptr<Child> child_holding(const std::string &name, const std::string &url,
                                     const std::vector<std::string> &opts = {}, int expect_rc = 0);

/* The words of a line: "held 0 17" -> {"held", "0", "17"}. */
std::vector<std::string> words(const std::string &line);
/* "key=value" lookup among words; "" if missing. */
std::string field(const std::string &line, const std::string &key);

/* ---- threads ----------------------------------------------------------- */

/* Runs fn on its own thread right away; remembers its result and when it
 * returned.  The destructor joins. */
class Async {
  public:
    explicit Async(std::function<int()> fn);
    ~Async();
    Async(const Async &) = delete;
    Async &operator=(const Async &) = delete;
    bool done() const;
    /* Wait up to scaled(bound) for fn to return. */
    bool wait(ms bound) const;
    int rc() const; /* fn's result; INT32_MIN while it runs */
    Clock::time_point finished_at() const;
    void join();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/* A thread of this process that locks m, holds it until release(), then
 * unlocks it. */
class HolderThread {
  public:
    explicit HolderThread(rmutex_t *m);
    ~HolderThread();
    HolderThread(const HolderThread &) = delete;
    HolderThread &operator=(const HolderThread &) = delete;
    /* The lock's result once it returned (within scaled(bound)), else INT32_MIN. */
    int wait_locked(ms bound);
    /* Unlock on the holder thread; returns rmutex_unlock's result. */
    int release();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/* ---- the fixture ------------------------------------------------------- */

class RedisTest : public ::testing::Test {
  protected:
    /* own_server: this test restarts, kills or reconfigures the server, so
     * it never uses RMUTEX_TEST_URL.  options: appended to the URL given to
     * rmutex_configure() ("lease=1000&poll=10000"); configure: whether
     * SetUp() calls rmutex_configure() at all. */
    explicit RedisTest(bool own_server = false, std::string options = "", bool configure = true)
        : own_server_(own_server), options_(std::move(options)), configure_(configure) {}

    void SetUp() override;
    void TearDown() override;

    /* A lock name unique to this test (and process): "rmt:<Suite>.<Test>:<pid>:suffix". */
    std::string lock_name(const std::string &suffix = "m");

    /* Base URL of the server, without options. */
    std::string base_url() const { return base_url_; }
    /* base_url() + "?" + options (options may be empty). */
    std::string url_with(const std::string &options) const;
    /* The URL rmutex was configured with (base + this test's options). */
    std::string url() const { return url_with(options_); }

    Redis &redis() { return *redis_; }
    RedisServer *server() { return server_.get(); }
    const std::string &host() const { return host_; }
    int port() const { return port_; }

    bool own_server_;
    std::string options_;
    bool configure_;
    std::unique_ptr<RedisServer> server_;
    std::unique_ptr<Redis> redis_;
    std::string base_url_, host_, password_;
    int port_ = 0;
};

/* Init m on name with the given type/robust/lease; asserts success. */
void init_mutex(rmutex_t *m, const std::string &name, int type = RMUTEX_NORMAL,
                int robust = RMUTEX_STALLED, unsigned long lease_ms = 0);

} // namespace rmt

#endif
