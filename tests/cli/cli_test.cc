/* cli_test.cc -- the rmutex command's run, as a user runs it, against a
 * real redis-server of the test's own: flock(1) drop-in cases checked
 * against flock itself, every exit code, the child's environment, signals
 * forwarded to the command's group, the command killed with rmutex, and the
 * command stopped before the lock can pass to anyone else when Redis stalls
 * longer than the lease or the lock is broken under it; what it says, with
 * stderr a file as under cron, when Redis is down, is not Redis, refuses
 * the login or answers an error. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "harness.h"
#include "proxy.h"

namespace {

using namespace rmt;

const std::string kCli = RMUTEX_CLI;

class Cli : public RedisTest {
  public:
    Cli() : RedisTest(true) {}
    using RedisTest::lock_name;

    void SetUp() override
    {
        RedisTest::SetUp();
        char tmpl[] = "/tmp/rmutex-cli-test.XXXXXX";
        ASSERT_TRUE(mkdtemp(tmpl));
        dir_ = tmpl;
    }

    void TearDown() override
    {
        shell("rm -rf '" + dir_ + "'");
        RedisTest::TearDown();
    }

    /* rmutex ARGS... with RMUTEX_URL=url (or the server's). */
    std::unique_ptr<Child> cli(const std::vector<std::string> &args, const std::string &u = "")
    {
        std::vector<std::string> argv{ kCli };
        argv.insert(argv.end(), args.begin(), args.end());
        return std::make_unique<Child>(argv, std::map<std::string, std::string>{
                                                 { "RMUTEX_URL", u.empty() ? url() : u } });
    }

    /* Run to the end: the exit code (or -1). */
    int exit_code(const std::vector<std::string> &args, const std::string &u = "",
                  std::string *err = nullptr, std::string *out = nullptr)
    {
        auto c = cli(args, u);
        std::string o;
        while (auto l = c->read_line(ms(20000))) o += *l + "\n";
        int st = c->wait(ms(20000));
        if (err) *err = c->err();
        if (out) *out = o;
        return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }

    std::string file(const std::string &n) { return dir_ + "/" + n; }

    std::string slurp(const std::string &path)
    {
        std::ifstream f(path);
        std::stringstream s;
        s << f.rdbuf();
        return s.str();
    }

    /* A holder of name for hold seconds; returns once it holds. */
    std::unique_ptr<Child> holder(const std::string &name, const std::string &hold = "30")
    {
        std::string mark = file("held." + name);
        auto c = cli({ "run", name, "--", "sh", "-c", "touch " + mark + "; sleep " + hold });
        EXPECT_TRUE(wait_until([&] { return access(mark.c_str(), F_OK) == 0; }, ms(5000)));
        return c;
    }

    /* rmutex run OPTS NAME with a command that runs until go(), then exits
     * with code; returns once the command runs. */
    std::unique_ptr<Child> run_until_go(std::vector<std::string> opts, const std::string &name,
                                        int code = 0)
    {
        std::string mark = file("started." + name);
        opts.insert(opts.begin(), "run");
        opts.insert(opts.end(), { name, "--", "sh", "-c",
                                  "touch " + mark + "; while [ ! -e " + file("go") +
                                      " ]; do sleep 0.01; done; exit " + std::to_string(code) });
        auto c = cli(opts);
        EXPECT_TRUE(wait_until([&] { return access(mark.c_str(), F_OK) == 0; }, ms(5000)));
        return c;
    }
    void go() { std::ofstream(file("go")) << ""; }

    std::string dir_;
};

static int signal_run(Cli *t, const std::string &n, const std::string &dir,
                      const std::vector<std::pair<int, std::string>> &sigs, int last);

/* ---- flock drop-in ------------------------------------------------------ */

/* Each case run by flock on a lock file and by rmutex run on a name, both
 * held by another process (or both free): the same exit code. */
TEST_F(Cli, FlockDropInCasesExitAsFlockDoes)
{
    std::string lockfile = file("flock.lock"), name = lock_name("dropin");
    std::string busy_mark = file("busy");
    /* Hold both: flock the file, and the name. */
    const std::map<std::string, std::string> no_env;
    Child flock_holder(std::vector<std::string>{ "/usr/bin/flock", lockfile, "sh", "-c",
                                                 "touch " + busy_mark + "; sleep 30" },
                       no_env);
    ASSERT_TRUE(wait_until([&] { return access(busy_mark.c_str(), F_OK) == 0; }, ms(5000)));
    auto h = holder(name);
    struct Case {
        std::vector<std::string> opts;
        bool busy;
    } cases[] = {
        { { "-n" }, true },         { { "-w", "0" }, true },   { { "-w", ".5" }, true },
        { { "-E", "0", "-n" }, true }, { { "-E", "42", "-w", "0.2" }, true },
        { { "-n" }, false },        { { "-w", "2" }, false },
    };
    for (const auto &c : cases) {
        std::string target = c.busy ? lockfile : file("free.lock");
        std::string rname = c.busy ? name : lock_name("free");
        std::string ran = file("ran"), flock_cmd = "touch " + ran + "; exit 7";
        std::vector<std::string> fargs{ "/usr/bin/flock" };
        fargs.insert(fargs.end(), c.opts.begin(), c.opts.end());
        fargs.insert(fargs.end(), { target, "-c", flock_cmd });
        Child f(fargs, no_env);
        int fst = f.wait(ms(10000));
        ASSERT_TRUE(fst >= 0 && WIFEXITED(fst));
        bool flock_ran = access(ran.c_str(), F_OK) == 0;
        unlink(ran.c_str());

        std::vector<std::string> rargs{ "run" };
        rargs.insert(rargs.end(), c.opts.begin(), c.opts.end());
        rargs.insert(rargs.end(), { rname, "-c", flock_cmd });
        auto t0 = Clock::now();
        int rc = exit_code(rargs);
        bool rmutex_ran = access(ran.c_str(), F_OK) == 0;
        unlink(ran.c_str());
        std::string what = ::testing::PrintToString(c.opts) + (c.busy ? " busy" : " free");
        EXPECT_EQ(WEXITSTATUS(fst), rc) << what;
        EXPECT_EQ(flock_ran, rmutex_ran) << what << ": the command ran in one and not the other";
        if (c.opts.size() == 2 && c.opts[1] == ".5") {
            EXPECT_GE(elapsed_ms(t0), 500) << "-w .5 gave up early";
        }
    }
    flock_holder.kill(SIGKILL);
}

TEST_F(Cli, VerboseSaysHowLongTheLockTookLikeFlock)
{
    std::string out, err;
    ASSERT_EQ(0, exit_code({ "run", "--verbose", lock_name(), "true" }, "", &err, &out));
    EXPECT_NE(std::string::npos, out.find("rmutex: getting lock took ")) << out;
    EXPECT_NE(std::string::npos, out.find(" seconds")) << out;
    EXPECT_NE(std::string::npos, out.find("rmutex: executing true")) << out;
}

/* ---- exit codes and the child's environment ----------------------------- */

TEST_F(Cli, TheCommandsStatusComesBackAndSignalsAre128PlusN)
{
    std::string n = lock_name();
    for (int code : { 0, 1, 42, 255 })
        EXPECT_EQ(code, exit_code({ "run", n, "--", "sh", "-c", "exit " + std::to_string(code) })) << code;
    for (int sig : { SIGTERM, SIGKILL, SIGSEGV, SIGUSR1 })
        EXPECT_EQ(128 + sig, exit_code({ "run", n, "--", "sh", "-c", "kill -" + std::to_string(sig) + " $$" }))
            << sig;
    EXPECT_EQ(127, exit_code({ "run", n, "--", "/no/such/program" }));
    std::string noexec = file("noexec");
    std::ofstream(noexec) << "not a program\n";
    EXPECT_EQ(126, exit_code({ "run", n, "--", noexec }));
    EXPECT_FALSE(redis().exists(n)) << "the lock outlived the command";
}

/* flock's -s: two runs read NAME together (a read-write lock), and a -x
 * run waits until both have ended. */
TEST_F(Cli, TwoSharedRunsHoldTogetherAndAnExclusiveRunWaitsForBoth)
{
    std::string n = lock_name();
    auto reader = [&](const std::string &tag) {
        return cli({ "run", "-s", n, "--", "sh", "-c",
                     "touch " + file(tag) + "; while [ ! -e " + file("go") + " ]; do sleep 0.01; done" });
    };
    auto r1 = reader("r1"), r2 = reader("r2");
    ASSERT_TRUE(wait_until([&] { return access(file("r1").c_str(), F_OK) == 0 && access(file("r2").c_str(), F_OK) == 0; },
                           ms(10000)))
        << "the second -s run did not share: " << r1->err() << r2->err();
    EXPECT_EQ("read", redis().cmd({ "HGET", n, "mode" }).str());
    EXPECT_EQ(2, redis().cmd({ "ZCARD", "rmutex_rw_readers:{" + n + "}" }).integer()) << "two processes read";
    auto writer = cli({ "run", "-x", n, "--", "sh", "-c", "touch " + file("w") });
    EXPECT_FALSE(wait_until_unscaled([&] { return access(file("w").c_str(), F_OK) == 0; }, ms(700)))
        << "the -x run went in beside the readers";
    EXPECT_EQ(1, exit_code({ "run", "-n", "-x", n, "true" })) << "-n -x: a conflict";
    go();
    EXPECT_EQ(0, r1->wait(ms(10000)));
    EXPECT_EQ(0, r2->wait(ms(10000)));
    EXPECT_TRUE(wait_until([&] { return access(file("w").c_str(), F_OK) == 0; }, ms(10000))) << writer->err();
    EXPECT_EQ(0, writer->wait(ms(10000)));
    EXPECT_FALSE(redis().exists(n));
}

/* --permits 2: two runs hold a permit each, a third waits until one ends,
 * -n is a conflict meanwhile (GNU parallel's sem, across machines). */
TEST_F(Cli, PermitsLetNRunsInAtOnceAndTheNextWaits)
{
    std::string n = lock_name();
    auto holder = [&](const std::string &tag) {
        return cli({ "run", "--permits", "2", n, "--", "sh", "-c",
                     "touch " + file(tag) + "; while [ ! -e " + file("go") + " ]; do sleep 0.01; done" });
    };
    auto h1 = holder("p1"), h2 = holder("p2");
    ASSERT_TRUE(wait_until([&] { return access(file("p1").c_str(), F_OK) == 0 && access(file("p2").c_str(), F_OK) == 0; },
                           ms(10000)))
        << "two permits did not let two runs in: " << h1->err() << h2->err();
    auto third = cli({ "run", "--permits", "2", n, "--", "sh", "-c", "touch " + file("p3") });
    EXPECT_FALSE(wait_until_unscaled([&] { return access(file("p3").c_str(), F_OK) == 0; }, ms(700)))
        << "a third run went in beside two holders of two permits";
    EXPECT_EQ(1, exit_code({ "run", "-n", "--permits", "2", n, "true" })) << "-n: a conflict";
    std::string out, err;
    EXPECT_EQ(0, exit_code({ "status", n }, "", &err, &out)) << err;
    EXPECT_NE(std::string::npos, out.find("semaphore, 0 permits free")) << out;
    EXPECT_NE(std::string::npos, out.find("holders  2 processes")) << out;
    EXPECT_NE(std::string::npos, out.find("holder   pid ")) << "the registry's lines: " << out;
    out.clear();
    EXPECT_EQ(0, exit_code({ "status", "--json", n }, "", &err, &out)) << err;
    EXPECT_NE(std::string::npos, out.find("\"kind\":\"semaphore\",\"value\":0")) << out;
    EXPECT_NE(std::string::npos, out.find("\"permits\":1")) << out;
    EXPECT_EQ(3, exit_code({ "run", "-w", "0.3", "-E", "3", "--permits", "2", n, "true" }))
        << "-w: a timeout is the -E code";
    go();
    EXPECT_EQ(0, h1->wait(ms(10000)));
    EXPECT_EQ(0, h2->wait(ms(10000)));
    EXPECT_TRUE(wait_until([&] { return access(file("p3").c_str(), F_OK) == 0; }, ms(10000))) << third->err();
    EXPECT_EQ(0, third->wait(ms(10000)));
    out.clear();
    EXPECT_EQ(3, exit_code({ "status", n }, "", &err, &out)) << "free: " << out;
    EXPECT_NE(std::string::npos, out.find("semaphore, 2 permits free")) << out;
    rsem_t s;
    ASSERT_EQ(0, rsem_init(&s, n.c_str(), 2, nullptr));
    int v = -1;
    EXPECT_EQ(0, rsem_getvalue(&s, &v));
    EXPECT_EQ(2, v) << "every permit came back";
    EXPECT_EQ(0, rsem_destroy(&s));
}

/* A run killed with SIGKILL gives its permit back within one lease: the
 * waiting run goes in then. */
TEST_F(Cli, AKilledPermitHoldersPermitComesBackWithinItsLease)
{
    std::string n = lock_name();
    auto holder = cli({ "run", "--lease", "2s", "--kill-after", "0.2s", "--permits", "1", n, "--", "sh", "-c",
                        "touch " + file("in") + "; sleep 60" });
    ASSERT_TRUE(wait_until([&] { return access(file("in").c_str(), F_OK) == 0; }, ms(10000))) << holder->err();
    auto next = cli({ "run", "--permits", "1", n, "--", "sh", "-c", "touch " + file("next") });
    holder->kill(SIGKILL);
    auto t0 = Clock::now();
    EXPECT_TRUE(wait_until([&] { return access(file("next").c_str(), F_OK) == 0; }, ms(10000))) << next->err();
    EXPECT_LT(elapsed_ms(t0), scaled(ms(2000 + 1500)).count()) << "later than one lease";
    EXPECT_EQ(0, next->wait(ms(10000)));
}

TEST_F(Cli, UsageErrorsAre64AndTakeNoLock)
{
    std::string n = lock_name(), err;
    EXPECT_EQ(64, exit_code({ "run", "-s", "--fair", n, "true" }, "", &err));
    EXPECT_NE(std::string::npos, err.find("--fair is for a mutex")) << err;
    EXPECT_EQ(64, exit_code({ "run", "-E", "256", n, "true" }));
    EXPECT_EQ(64, exit_code({ "run", "-w", "soon", n, "true" }));
    EXPECT_EQ(64, exit_code({ "run", n }));
    EXPECT_EQ(64, exit_code({ "run" }));
    EXPECT_EQ(64, exit_code({ "frobnicate" }));
    EXPECT_EQ(64, exit_code({ "run", "--lease", "2s", "--kill-after", "5s", n, "true" }))
        << "a grace longer than the lease leaves the renewals no room";
    EXPECT_EQ(64, exit_code({ "run", "a{b", "true" })) << "a name the library refuses";
    EXPECT_EQ(64, exit_code({ "run", "--permits", "0", n, "true" }));
    EXPECT_EQ(64, exit_code({ "run", "--permits", "two", n, "true" }));
    EXPECT_EQ(64, exit_code({ "run", "--permits", "2", "--robust", n, "true" }));
    EXPECT_EQ(0, redis().cmd({ "DBSIZE" }).integer());
}

TEST_F(Cli, RedisUnreachableIs69AndRefusedCredentialsAre77)
{
    std::string n = lock_name(), err;
    std::string closed = "redis://127.0.0.1:" + std::to_string(free_port()) + "?connect_timeout=200";
    EXPECT_EQ(69, exit_code({ "run", "-n", n, "true" }, closed, &err));
    EXPECT_EQ(69, exit_code({ "run", "-w", "0.5", n, "true" }, closed));
    auto secured = RedisServer::start({ "--requirepass", "right" });
    ASSERT_TRUE(secured);
    std::string wrong = "redis://:wrong@127.0.0.1:" + std::to_string(secured->port());
    EXPECT_EQ(77, exit_code({ "run", "-n", n, "true" }, wrong, &err)) << err;
}

/* ---- with stderr a file, as under cron ------------------------------------ */

/* A plain TCP service on 127.0.0.1 that is not Redis: it accepts, sends
 * greeting ("": nothing) and keeps the connection open until it ends. */
class NotRedis {
  public:
    explicit NotRedis(std::string greeting) : greeting_(std::move(greeting))
    {
        fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        EXPECT_EQ(0, bind(fd_, reinterpret_cast<sockaddr *>(&a), sizeof a));
        EXPECT_EQ(0, listen(fd_, 64));
        EXPECT_EQ(0, getsockname(fd_, reinterpret_cast<sockaddr *>(&a), &len));
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~NotRedis()
    {
        stop_ = true;
        thread_.join();
        for (int c : conns_) close(c);
        close(fd_);
    }
    int port() const { return port_; }
    std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  private:
    void serve()
    {
        while (!stop_) {
            pollfd p{ fd_, POLLIN, 0 };
            if (poll(&p, 1, 20) <= 0) continue;
            int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0) continue;
            if (!greeting_.empty()) send(c, greeting_.data(), greeting_.size(), MSG_NOSIGNAL);
            conns_.push_back(c);
        }
    }
    std::string greeting_;
    int fd_ = -1, port_ = 0;
    std::vector<int> conns_;
    std::atomic<bool> stop_{ false };
    std::thread thread_;
};

/* Redis down and no -w: one line says so at once, whatever stderr is, one
 * more when Redis is back; the wait goes on and the command runs then. */
TEST_F(Cli, RedisDownWithoutWaitSaysSoOnceAndAgainWhenItIsBack)
{
    int port = free_port();
    std::string u = "redis://127.0.0.1:" + std::to_string(port);
    std::string down = "rmutex: Redis unreachable: cannot connect to Redis at " + u +
                       "/0: Connection refused\n";
    auto c = cli({ "run", lock_name(), "--", "echo", "ran" }, u);
    ASSERT_TRUE(wait_until([&] { return c->err() == down; }, ms(5000)))
        << "nothing said, or not this: " << c->err();
    EXPECT_FALSE(c->poll_line()) << "it ran without the lock";
    auto srv = RedisServer::start({}, port);
    ASSERT_TRUE(srv);
    EXPECT_EQ("ran", c->read_line(ms(10000)).value_or("(nothing)"));
    int st = c->wait(ms(5000));
    EXPECT_TRUE(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
    EXPECT_EQ(down + "rmutex: Redis reachable again\n", c->err());
}

/* A service on the port that is not Redis is named as such; one that
 * accepts and says nothing too.  The wait goes on (the port may yet be
 * Redis's); -n gives up with 69 and the same words. */
TEST_F(Cli, AServerThatIsNotRedisOnThePortIsNamedNotRedis)
{
    NotRedis http("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    std::string n = lock_name(), err;
    std::string why = "the server at " + http.url() +
                      " is not Redis (Protocol error, got \"H\" as reply type byte)";
    auto c = cli({ "run", n, "--", "echo", "ran" }, http.url());
    ASSERT_TRUE(wait_until([&] { return c->err() == "rmutex: Redis unreachable: " + why + "\n"; },
                           ms(5000)))
        << c->err();
    EXPECT_FALSE(c->poll_line()) << "it ran without the lock";
    c->kill(SIGTERM);
    c->wait(ms(5000));
    EXPECT_EQ(69, exit_code({ "run", "-n", n, "--", "true" }, http.url(), &err));
    EXPECT_EQ("rmutex: run: " + n + ": " + why + "\n", err);

    NotRedis mute("");
    auto m = cli({ "run", n, "--", "echo", "ran" }, mute.url() + "?command_timeout=300");
    std::string said = "rmutex: Redis unreachable: the server at " + mute.url() +
                       " accepted the connection but gave no answer (waiting for Redis's reply: "
                       "timed out)\n";
    ASSERT_TRUE(wait_until([&] { return m->err() == said; }, ms(5000))) << m->err();
    m->kill(SIGTERM);
    m->wait(ms(5000));
}

/* A refused login is a configuration error: said, and 77 at once, even
 * without -w: a wrong password, none where one is needed, a disabled ACL
 * user. */
TEST_F(Cli, ARefusedLoginExits77AtOnceWithoutWaiting)
{
    std::string n = lock_name(), err;
    auto secured = RedisServer::start({ "--requirepass", "right" });
    ASSERT_TRUE(secured);
    std::string at = "127.0.0.1:" + std::to_string(secured->port());
    struct Case {
        std::string url, said;
    } cases[] = {
        { "redis://:wrong@" + at, "Redis at redis://:***@" + at +
                                     "/0 refused the login: WRONGPASS invalid username-password "
                                     "pair or user is disabled." },
        { "redis://" + at, "Redis at redis://" + at + "/0 refused the login: NOAUTH Authentication "
                                                      "required." },
        { "redis://cli-off:pw@" + at, "Redis at redis://cli-off:***@" + at +
                                         "/0 refused the login: WRONGPASS invalid "
                                         "username-password pair or user is disabled." },
    };
    Redis admin(secured->host(), secured->port(), "right");
    ASSERT_EQ("OK", admin.cmd({ "ACL", "SETUSER", "cli-off", "off", ">pw", "~*", "+@all" }).str());
    for (const auto &c : cases) {
        auto t0 = Clock::now();
        EXPECT_EQ(77, exit_code({ "run", n, "--", "true" }, c.url, &err)) << c.url;
        EXPECT_EQ("rmutex: run: " + n + ": " + c.said + "\n", err);
        EXPECT_LT(elapsed_ms(t0), scaled(ms(3000)).count()) << c.url << ": it waited";
    }
}

/* flock's words, besides 127 and 126. */
TEST_F(Cli, ACommandThatCannotBeExecutedIsNamedAsFlockDoes)
{
    std::string n = lock_name(), err, noexec = file("noexec");
    std::ofstream(noexec) << "not a program\n";
    EXPECT_EQ(127, exit_code({ "run", n, "--", "/no/such/program", "arg" }, "", &err));
    EXPECT_EQ("rmutex: failed to execute /no/such/program: No such file or directory\n", err);
    EXPECT_EQ(126, exit_code({ "run", n, "--", noexec }, "", &err));
    EXPECT_EQ("rmutex: failed to execute " + noexec + ": Permission denied\n", err);
    EXPECT_FALSE(redis().exists(n)) << "the lock outlived the command";
}

/* The lock force-unlocked under a command that ends before the watchdog
 * looks (its next renewal is 10 s away with the default lease): the loss
 * is found at the release, and the exit status says it. */
TEST_F(Cli, ALossFoundOnlyAtTheReleaseExits75)
{
    std::string n = lock_name();
    auto c = run_until_go({}, n);
    ASSERT_EQ(0, rmutex_force_unlock(n.c_str())) << rmutex_detail();
    go();
    int st = c->wait(ms(5000));
    EXPECT_TRUE(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 75) << st;
    /* (On a loaded machine the watchdog may find the loss first, before the
     * command has ended: then it says so and stops the command -- 75 too.) */
    std::string at_release = "rmutex: run: " + n +
                             ": the lock was lost under the command (found at its release: " + n +
                             " is not held by this thread in Redis (its lease ran out, it was "
                             "force-unlocked, or the server lost it)); the command's status was 0\n",
                by_watchdog = "rmutex: run: " + n + ": the lock was lost; stopping the command\n";
    EXPECT_TRUE(c->err() == at_release || c->err() == by_watchdog) << c->err();
}

/* --on-lost ignore: the command is not stopped, it ends by itself; the
 * exit status still tells the loss, and the command's own status is said. */
TEST_F(Cli, OnLostIgnoreLetsTheCommandFinishAndStillExits75)
{
    std::string n = lock_name();
    auto c = run_until_go({ "--on-lost", "ignore", "--lease", "3s" }, n, 3);
    ASSERT_EQ(0, rmutex_force_unlock(n.c_str())) << rmutex_detail();
    std::string lost = "rmutex: run: " + n + ": the lock was lost; the command goes on (--on-lost ignore)\n";
    ASSERT_TRUE(wait_until([&] { return c->err() == lost; }, ms(3000 / 3 + 1000 + 1000))) << c->err();
    EXPECT_FALSE(c->exited());
    go();
    int st = c->wait(ms(5000));
    EXPECT_TRUE(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 75) << st;
    EXPECT_EQ(lost + "rmutex: run: " + n + ": the command's status was 3; the lock was lost while it ran\n",
              c->err());
}

/* --on-lost ignore and Redis stalled past the hold's deadline (CLIENT
 * PAUSE): the command runs on, the exit status still says it did not run
 * alone for sure.  (The watchdog's redial in the pause may add an outage
 * line, at a moment that depends on the renewals' phase: left out.) */
TEST_F(Cli, OnLostIgnoreLetsTheCommandRunThroughAStallAndStillExits75)
{
    std::string n = lock_name();
    auto c = run_until_go({ "--on-lost", "ignore", "--lease", "1500ms" }, n);
    ASSERT_EQ("OK", redis().cmd({ "CLIENT", "PAUSE", "2500", "ALL" }).str());
    auto said = [&] {
        std::string kept, line;
        std::istringstream in(c->err());
        while (std::getline(in, line))
            if (line.rfind("rmutex: Redis unreachable: ", 0) && line != "rmutex: Redis reachable again")
                kept += line + "\n";
        return kept;
    };
    std::string going_on = "rmutex: run: " + n +
                           ": Redis has not acknowledged a renewal in time; the command goes on "
                           "(--on-lost ignore)\n";
    ASSERT_TRUE(wait_until([&] { return said() == going_on; }, ms(5000))) << c->err();
    EXPECT_EQ("PONG", redis().cmd({ "PING" }).str()) << "(answered when the pause ends)";
    EXPECT_FALSE(c->exited());
    go();
    int st = c->wait(ms(10000));
    EXPECT_TRUE(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 75) << st;
    EXPECT_EQ(going_on + "rmutex: run: " + n +
                  ": the command's status was 0; Redis did not acknowledge a renewal in time "
                  "while it ran\n",
              said());
}

/* --help on every subcommand (stdout, exit 0), -V and --version. */
TEST_F(Cli, HelpOnEverySubcommandAndVersion)
{
    for (std::vector<std::string> args :
         { std::vector<std::string>{ "--help" }, { "-h" }, { "run", "--help" }, { "run", "-h" },
           { "unlock", "--help" }, { "status", "--help" }, { "wait", "--help" }, { "list", "--help" } }) {
        std::string out, err;
        EXPECT_EQ(0, exit_code(args, "", &err, &out)) << ::testing::PrintToString(args);
        EXPECT_EQ(0u, out.rfind("usage: rmutex ", 0)) << ::testing::PrintToString(args) << out;
        if (args[0] != "--help" && args[0] != "-h") {
            EXPECT_NE(std::string::npos, out.find(" " + args[0] + " ")) << out;
        }
        EXPECT_EQ("", err);
    }
    for (std::string v : { "-V", "--version" }) {
        std::string out;
        EXPECT_EQ(0, exit_code({ v }, "", nullptr, &out)) << v;
        EXPECT_EQ("rmutex " + std::string(rmutex_version_string()) + "\n", out) << v;
    }
    EXPECT_EQ(0, redis().cmd({ "DBSIZE" }).integer()) << "help took a lock";
}

/* The long options: what --help names is in the man page and the bash
 * completion, and what the completion offers --help names. */
TEST_F(Cli, HelpTheManPageAndTheCompletionNameTheSameOptions)
{
    std::string src = __FILE__;
    src = src.substr(0, src.rfind("/tests/cli/"));
    std::string man = slurp(src + "/cli/rmutex.1"), completion = slurp(src + "/cli/rmutex.bash-completion");
    ASSERT_FALSE(man.empty());
    ASSERT_FALSE(completion.empty());
    for (size_t p; (p = man.find("\\-")) != std::string::npos;) man.replace(p, 2, "-");
    std::string help;
    for (std::string sub : { "", "run", "unlock", "status", "wait", "list", "deadlocks" }) {
        std::string out;
        EXPECT_EQ(0, exit_code(sub.empty() ? std::vector<std::string>{ "--help" }
                                           : std::vector<std::string>{ sub, "--help" },
                               "", nullptr, &out));
        help += out;
    }
    std::regex opt("--[a-z][a-z-]*[a-z]");
    auto options = [&](const std::string &text) {
        std::set<std::string> found;
        for (std::sregex_iterator i(text.begin(), text.end(), opt), e; i != e; ++i) found.insert(i->str());
        return found;
    };
    auto in_help = options(help);
    EXPECT_GT(in_help.size(), 20u) << help;
    for (const auto &o : in_help) {
        EXPECT_TRUE(std::regex_search(man, std::regex(o + "\\b"))) << o << " is not in rmutex.1";
        EXPECT_TRUE(std::regex_search(completion, std::regex(o + "\\b"))) << o << " is not completed";
    }
    for (const auto &o : options(completion)) EXPECT_TRUE(in_help.count(o)) << o << " is not in --help";
}

/* A Redis error: its own exit code and a readable line, Redis's text whole
 * -- WRONGTYPE (the name is a string) and MISCONF (over 300 characters). */
TEST_F(Cli, ARedisErrorIsReadableWithItsCodeAndNotCutOff)
{
    std::string n = lock_name(), err;
    redis().cmd({ "SET", n, "a string" });
    std::string wrongtype = ": " + n + ": the name is taken by data that is not a lock (Redis answered: "
                            "WRONGTYPE Operation against a key holding the wrong kind of value)\n";
    EXPECT_EQ(76, exit_code({ "run", n, "--", "true" }, "", &err));
    EXPECT_EQ("rmutex: run" + wrongtype, err);
    /* (wait and status read through inspect.lua, which names the type) */
    std::string string_key = ": " + n + ": the name is taken by data that is not a lock (Redis "
                             "answered: WRONGTYPE the lock key holds a string, not a lock)\n";
    EXPECT_EQ(76, exit_code({ "wait", n }, "", &err));
    EXPECT_EQ("rmutex: wait" + string_key, err);
    EXPECT_EQ(4, exit_code({ "status", n }, "", &err)) << "status: unreadable";
    EXPECT_EQ("rmutex: status" + string_key, err);
    EXPECT_EQ("a string", redis().get(n).value_or("")) << "the data was touched";

    /* MISCONF: writes refused after a failed snapshot (its directory gone). */
    char tmpl[] = "/tmp/rmutex-cli-misconf.XXXXXX";
    ASSERT_TRUE(mkdtemp(tmpl));
    auto srv = RedisServer::start({ "--dir", tmpl, "--save", "3600 1" });
    ASSERT_TRUE(srv);
    struct Kill { /* SIGTERM would have it save first, and fail, and stay */
        RedisServer *s;
        ~Kill() { s->kill9(); }
    } kill9{ srv.get() };
    ASSERT_EQ(0, rmdir(tmpl));
    Redis r(srv->host(), srv->port());
    r.cmd({ "BGSAVE" });
    std::string misconf;
    ASSERT_TRUE(wait_until([&] {
        misconf = r.cmd({ "SET", "probe", "1" }).str();
        return misconf.rfind("MISCONF ", 0) == 0;
    }, ms(5000))) << misconf;
    ASSERT_GT(misconf.size(), 300u);
    EXPECT_EQ(76, exit_code({ "run", n, "--", "true" }, srv->url(), &err));
    EXPECT_EQ(0u, err.find("rmutex: run: " + n + ": Redis answered: " + misconf)) << err;
    EXPECT_EQ(1, std::count(err.begin(), err.end(), '\n')) << err;
}

TEST_F(Cli, TheCommandGetsTheLockItsFencingTokenAndItsOwnerInItsEnvironment)
{
    std::string n = lock_name(), out;
    std::string show = "echo \"$RMUTEX_LOCK $RMUTEX_FENCE $RMUTEX_OWNER $RMUTEX_HELD\"";
    ASSERT_EQ(0, exit_code({ "run", n, "-c", show }, "", nullptr, &out));
    auto w1 = words(out);
    ASSERT_EQ(4u, w1.size()) << out;
    EXPECT_EQ(n, w1[0]);
    EXPECT_EQ("1", w1[3]);
    EXPECT_NE(std::string::npos, w1[2].find(':')) << "owner <uuid>:<thread>";
    ASSERT_EQ(0, exit_code({ "run", n, "-c", show }, "", nullptr, &out));
    auto w2 = words(out);
    ASSERT_EQ(4u, w2.size());
    EXPECT_GT(std::stoull(w2[1]), std::stoull(w1[1])) << "the fencing token must grow";
}

/* ---- signals --------------------------------------------------------------- */

/* rmutex run with a command whose two processes (the command and a
 * grandchild in its group) log every signal they get; sends sigs one by
 * one, each checked in the logs, then `last`, which must kill the group (a
 * second TERM or INT).  Returns the exit code.  (A background job of a
 * non-interactive shell starts with INT and QUIT ignored and cannot trap
 * them: those two are checked in the command only.) */
static int signal_run(Cli *t, const std::string &n, const std::string &dir,
                      const std::vector<std::pair<int, std::string>> &sigs, int last)
{
    std::string log = dir + "/log", ready = dir + "/ready", script = dir + "/sig.sh";
    std::ofstream(script) << "role=$1\n"
                             "for s in TERM INT HUP QUIT USR1 USR2; do trap \"echo $s-$role >> " << log
                          << "\" $s; done\n"
                             "if [ \"$role\" = top ]; then sh " << script << " grand & fi\n"
                             "if [ \"$role\" = grand ]; then touch " << ready << "; fi\n"
                             "while :; do sleep 0.05; done\n";
    unlink(log.c_str());
    unlink(ready.c_str());
    auto c = t->cli({ "run", n, "--", "sh", script, "top" });
    EXPECT_TRUE(wait_until([&] { return access(ready.c_str(), F_OK) == 0; }, ms(5000)));
    for (const auto &[sig, nm] : sigs) {
        c->kill(sig);
        bool both = sig != SIGINT && sig != SIGQUIT;
        EXPECT_TRUE(wait_until([&, nm = nm] {
            std::ifstream f(log);
            std::stringstream ss;
            ss << f.rdbuf();
            std::string s = ss.str();
            return s.find(nm + "-top") != std::string::npos &&
                   (!both || s.find(nm + "-grand") != std::string::npos);
        }, ms(3000))) << nm << " did not reach the command's group";
    }
    c->kill(last);
    int st = c->wait(ms(5000));
    EXPECT_GE(st, 0) << "rmutex did not end after a second TERM/INT";
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST_F(Cli, SignalsReachTheCommandsGroupAndASecondTermOrIntKillsIt)
{
    std::string n = lock_name();
    EXPECT_EQ(128 + SIGKILL, signal_run(this, n, dir_,
                                        { { SIGHUP, "HUP" }, { SIGQUIT, "QUIT" }, { SIGUSR1, "USR1" },
                                          { SIGUSR2, "USR2" }, { SIGINT, "INT" } },
                                        SIGTERM));
    EXPECT_EQ(128 + SIGKILL, signal_run(this, n, dir_, { { SIGTERM, "TERM" } }, SIGINT));
    EXPECT_TRUE(wait_until([&] { return !redis().exists(n); }, ms(3000)));
}

TEST_F(Cli, KillingRmutexWithSigkillKillsTheCommandAtOnce)
{
    std::string n = lock_name(), pidfile = file("pid");
    auto c = cli({ "run", n, "--", "sh", "-c", "echo $$ > " + pidfile + "; exec sleep 100" });
    pid_t child = 0;
    ASSERT_TRUE(wait_until([&] {
        std::ifstream f(pidfile);
        return (f >> child) && child > 0;
    }, ms(5000)));
    c->kill(SIGKILL);
    auto t0 = Clock::now();
    /* The command is reaped by init once it dies: gone from /proc, or a
     * zombie on its way there. */
    auto gone = [&] {
        std::ifstream st("/proc/" + std::to_string(child) + "/stat");
        std::string line;
        if (!std::getline(st, line)) return true;
        return line.find(") Z ") != std::string::npos;
    };
    ASSERT_TRUE(wait_until(gone, ms(1000)));
    EXPECT_LE(elapsed_ms(t0), scaled(ms(100)).count()) << "PR_SET_PDEATHSIG";
}

/* ---- losing the lock under the command -------------------------------------- */

/* `rmutex run OPTS` holds through holder_url when Redis stalls for it
 * (stall(): from then on, until it returns) longer than the lease: the
 * command is dead before the lease can have run out in Redis, so before
 * the next run (`run NEXT`, through srv, waiting from the stall on) gets
 * the lock; run exits 75.  Trial i varies the phase against the renewals. */
static void stall_trial(Cli *t, RedisServer *srv, const std::string &holder_url,
                        const std::vector<std::string> &opts, const std::vector<std::string> &next_opts,
                        int i, const std::function<void()> &stall)
{
    std::string n = t->lock_name("stall" + std::to_string(i)), pidfile = t->file("pid" + std::to_string(i));
    std::vector<std::string> args{ "run" };
    args.insert(args.end(), opts.begin(), opts.end());
    args.insert(args.end(), { "--lease", "1500ms", "--kill-after", "300ms", n, "--", "sh", "-c",
                              "trap '' TERM; echo $$ > " + pidfile + "; while :; do sleep 0.02; done" });
    auto c = t->cli(args, holder_url);
    pid_t child = 0;
    ASSERT_TRUE(wait_until([&] {
        std::ifstream f(pidfile);
        return (f >> child) && child > 0;
    }, ms(5000)));
    std::this_thread::sleep_for(ms(100 + 150 * i));
    std::atomic<int64_t> died_at{0};
    std::atomic<bool> watching{true};
    std::thread watch([&] {
        while (watching && !died_at) {
            if (kill(child, 0) != 0) died_at = Clock::now().time_since_epoch().count();
            std::this_thread::sleep_for(ms(2));
        }
    });
    std::thread staller(stall);
    std::this_thread::sleep_for(ms(50));
    /* The next taker, waiting from now on. */
    std::vector<std::string> next_args{ "run" };
    next_args.insert(next_args.end(), next_opts.begin(), next_opts.end());
    next_args.insert(next_args.end(), { "-w", "20", n, "--", "sh", "-c", "echo got" });
    auto next = t->cli(next_args, srv->url());
    auto got = next->read_line(ms(20000));
    int64_t acquired_at = Clock::now().time_since_epoch().count();
    staller.join();
    EXPECT_TRUE(got) << "the next run never got the lock";
    EXPECT_TRUE(wait_until([&] { return died_at != 0; }, ms(5000)));
    watching = false;
    watch.join();
    /* The zombie state counts as dead: kill(0) still succeeds on a
     * zombie, so died_at is late if anything. */
    if (got) {
        EXPECT_LT(died_at.load(), acquired_at) << "the command still ran when another run acquired";
    }
    int st = c->wait(ms(10000));
    EXPECT_TRUE(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 75) << st << " " << c->err();
    next->wait(ms(5000));
}

/* The whole server stalls: DEBUG SLEEP, or CLIENT PAUSE ALL (a
 * connection of its own: it blocks for the whole stall). */
static std::function<void()> server_stall(RedisServer *srv, bool pause)
{
    return [srv, pause] {
        Redis r(srv->host(), srv->port());
        if (!pause) r.cmd({ "DEBUG", "SLEEP", "2.5" });
        else r.cmd({ "CLIENT", "PAUSE", "2500", "ALL" });
    };
}

/* A mutex: six trials sleep, the last two pause. */
TEST_F(Cli, ACommandIsDeadBeforeAnotherRunCanAcquireWhenRedisStalls)
{
    auto srv = RedisServer::start({ "--enable-debug-command", "local" });
    ASSERT_TRUE(srv);
    for (int i = 0; i < 8; i++) {
        SCOPED_TRACE(i);
        stall_trial(this, srv.get(), srv->url(), {}, {}, i, server_stall(srv.get(), i >= 6));
    }
}

/* A read-write lock, read (-s) or written (-x); the next run writes.  Redis
 * stops answering the holder only (a proxy drops all it sends), so the
 * next run gets the lock the moment the lease runs out in Redis: the
 * command must be dead by then, not merely when the hold is found lost.
 * And once the whole server stalls. */
TEST_F(Cli, ASharedOrExclusiveRunsCommandIsDeadBeforeAWriterCanAcquireWhenRedisStalls)
{
    auto srv = RedisServer::start({ "--enable-debug-command", "local" });
    ASSERT_TRUE(srv);
    int i = 0;
    for (const char *how : { "-s", "-x" }) {
        SCOPED_TRACE(std::string(how) + ", Redis gone for the holder");
        Proxy proxy(srv->host(), srv->port());
        auto cut = [&] {
            proxy.drop_requests([](const Proxy::Args &) { return true; });
            std::this_thread::sleep_for(ms(2500));
        };
        stall_trial(this, srv.get(), proxy.url(), { how }, { "-x" }, i++, cut);
        proxy.disarm();
    }
    SCOPED_TRACE("-s, the server asleep");
    stall_trial(this, srv.get(), srv->url(), { "-s" }, { "-x" }, i++, server_stall(srv.get(), false));
}

TEST_F(Cli, ALockBrokenUnderTheCommandStopsItAndExits75)
{
    std::string n = lock_name();
    auto c = cli({ "run", "--lease", "3s", "--kill-after", "1s", n, "--", "sleep", "60" });
    ASSERT_TRUE(wait_until([&] { return redis().exists(n); }, ms(5000)));
    auto t0 = Clock::now();
    ASSERT_EQ(0, rmutex_force_unlock(n.c_str())) << rmutex_detail();
    int st = c->wait(ms(3000 / 3 + 1000 + 1000 + 2000));
    ASSERT_GE(st, 0) << "the command went on";
    EXPECT_TRUE(WIFEXITED(st));
    EXPECT_EQ(75, WEXITSTATUS(st));
    EXPECT_LE(elapsed_ms(t0), scaled(ms(3000 / 3 + 1000)).count()) << "signalled too late";
    EXPECT_NE(std::string::npos, c->err().find("the lock was lost")) << c->err();
}

TEST_F(Cli, MaxTimeStopsTheCommandWith124)
{
    std::string n = lock_name();
    auto t0 = Clock::now();
    EXPECT_EQ(124, exit_code({ "run", "--max-time", "300ms", "--kill-after", "200ms", n, "--", "sh",
                               "-c", "trap '' TERM; sleep 30" }));
    EXPECT_LT(elapsed_ms(t0), scaled(ms(3000)).count());
    EXPECT_FALSE(redis().exists(n));
}

/* ---- unlock --force ---------------------------------------------------------- */

TEST_F(Cli, UnlockForceBreaksALockOnlyIfTheNamedOwnerStillHoldsIt)
{
    std::string n = lock_name(), ownerfile = file("owner"), out;
    EXPECT_EQ(64, exit_code({ "unlock", n })) << "without --force";
    EXPECT_EQ(1, exit_code({ "unlock", "--force", n }, "", nullptr, &out));
    EXPECT_NE(std::string::npos, out.find("was not held")) << out;

    auto c = cli({ "run", "--lease", "3s", "--kill-after", "1s", n, "--", "sh", "-c",
                   "echo $RMUTEX_OWNER > " + ownerfile + "; exec sleep 60" });
    std::string owner;
    ASSERT_TRUE(wait_until([&] {
        std::ifstream f(ownerfile);
        return (f >> owner) && !owner.empty();
    }, ms(5000)));
    EXPECT_EQ(1, exit_code({ "unlock", "--force", "--if-owner", "someone:1", n }, "", nullptr, &out));
    EXPECT_NE(std::string::npos, out.find("is held by " + owner + ", not someone:1")) << out;
    EXPECT_TRUE(redis().exists(n)) << "a hold of another owner was broken";
    EXPECT_EQ(0, exit_code({ "unlock", "--force", "--if-owner", owner, n }, "", nullptr, &out));
    EXPECT_NE(std::string::npos, out.find("released " + n + " (held by " + owner + ")")) << out;
    EXPECT_FALSE(redis().exists(n));
    int st = c->wait(ms(3000 / 3 + 1000 + 1000 + 2000));
    EXPECT_TRUE(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 75) << st;
}

/* ---- status and wait ------------------------------------------------------------ */

/* "key":value of a flat JSON object line, as text ("" when absent). */
std::string json_field(const std::string &line, const std::string &key)
{
    std::string k = "\"" + key + "\":";
    auto p = line.find(k);
    if (p == std::string::npos) return "";
    p += k.size();
    size_t e = p;
    if (line[p] == '"') e = line.find('"', p + 1) + 1;
    else if (line[p] == '[') e = line.find(']', p) + 1;
    else e = line.find_first_of(",}", p);
    return line.substr(p, e - p);
}

TEST_F(Cli, StatusJsonTellsFreeHeldTheOwnerTheLeaseTheFenceAndTheFairQueue)
{
    std::string n = lock_name(), out, ownerfile = file("owner");
    ASSERT_EQ(3, exit_code({ "status", "--json", n }, "", nullptr, &out)) << "free: 3";
    EXPECT_EQ("\"" + n + "\"", json_field(out, "name"));
    EXPECT_EQ("\"free\"", json_field(out, "state"));
    EXPECT_EQ("null", json_field(out, "owner"));
    EXPECT_EQ("-1", json_field(out, "ttl_ms"));
    EXPECT_EQ("0", json_field(out, "fence"));
    EXPECT_EQ("false", json_field(out, "owner_died"));
    EXPECT_EQ("0", json_field(out, "queue_length"));

    auto h = cli({ "run", "--fair", "--lease", "3s", "--kill-after", "1s", n, "--", "sh", "-c",
                   "echo $RMUTEX_OWNER > " + ownerfile + "; exec sleep 30" });
    std::string owner;
    ASSERT_TRUE(wait_until([&] {
        std::ifstream f(ownerfile);
        return (f >> owner) && !owner.empty();
    }, ms(5000)));
    auto w = cli({ "run", "--fair", "-w", "30", n, "--", "true" });
    ASSERT_TRUE(wait_until([&] { return redis().cmd({ "ZCARD", "rmutex_fair_queue:{" + n + "}" }).integer() == 1; },
                           ms(5000)));
    ASSERT_EQ(0, exit_code({ "status", "--json", n }, "", nullptr, &out)) << "held: 0";
    EXPECT_EQ("\"held\"", json_field(out, "state"));
    EXPECT_EQ("\"" + owner + "\"", json_field(out, "owner"));
    long long ttl = std::stoll(json_field(out, "ttl_ms"));
    EXPECT_GT(ttl, 0);
    EXPECT_LE(ttl, 3000);
    EXPECT_EQ(redis().get("redisson_lock_token:{" + n + "}").value_or("none"), json_field(out, "fence"))
        << "the holder's token";
    EXPECT_EQ("1", json_field(out, "queue_length"));
    EXPECT_EQ("\"no\"", json_field(out, "cached")) << out;
    std::string q = json_field(out, "queue");
    EXPECT_NE(std::string::npos, q.find("\"alive_ms\":")) << q;
    EXPECT_NE(std::string::npos, q.find("|")) << "a waiter is <owner>|<acquisition>: " << q;
    EXPECT_NE("", json_field(out, "server_time_ms"));
    /* Two names, one free: 3. */
    EXPECT_EQ(3, exit_code({ "status", n, lock_name("other") }, "", nullptr, &out));
    EXPECT_NE(std::string::npos, out.find(n + "  held")) << out;
    EXPECT_NE(std::string::npos, out.find("owner    " + owner)) << out;
    std::string closed = "redis://127.0.0.1:" + std::to_string(free_port()) + "?connect_timeout=200";
    EXPECT_EQ(4, exit_code({ "status", n }, closed)) << "unreachable: 4";
    EXPECT_EQ(64, exit_code({ "status" }));
    h->kill(SIGTERM);
    h->wait(ms(5000));
    w->wait(ms(10000));
}

/* The holder registry: a librmutex holder says who it is (host, pid,
 * program, command line) and status shows how long it has held; with
 * RMUTEX_ANNOUNCE=0 nothing is written and only the owner id shows. */
TEST_F(Cli, StatusNamesTheHoldersHostPidCommandAndHowLongItHasHeld)
{
    std::string n = lock_name(), out;
    auto h = holder(n);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    ASSERT_TRUE(wait_until([&] {
        exit_code({ "status", "--json", n }, "", nullptr, &out);
        return json_field(out, "held_ms") != "null" && std::stoll(json_field(out, "held_ms")) >= 1000;
    }, ms(10000))) << "how long held reaches a second: " << out;
    EXPECT_EQ(std::to_string(h->pid()), json_field(out, "pid")) << out;
    EXPECT_EQ("\"" + std::string(host) + "\"", json_field(out, "host")) << out;
    std::string exe = json_field(out, "exe");
    EXPECT_EQ("/rmutex\"", exe.substr(exe.size() - 8)) << exe;
    EXPECT_NE(std::string::npos, json_field(out, "cmd").find(" run " + n + " -- sh -c touch")) << out;
    EXPECT_NE("\"\"", json_field(out, "lib"));
    long long held = std::stoll(json_field(out, "held_ms"));
    EXPECT_LT(held, 10000 * time_scale()) << "never longer than the test has run";
    /* It grows with the hold, in server time. */
    std::string later;
    ASSERT_TRUE(wait_until([&] {
        exit_code({ "status", "--json", n }, "", nullptr, &later);
        return std::stoll(json_field(later, "held_ms")) >= held + 1000;
    }, ms(5000))) << later;
    ASSERT_EQ(0, exit_code({ "status", n }, "", nullptr, &out));
    EXPECT_NE(std::string::npos, out.find("holder   pid " + std::to_string(h->pid()) + " on " + host))
        << out;
    EXPECT_NE(std::string::npos, out.find("command  ")) << out;
    EXPECT_NE(std::string::npos, out.find("held     ")) << out;
    /* The entry lives two leases at most (30 s default). */
    auto keys = redis().cmd({ "KEYS", "rmutex_client:*" });
    ASSERT_TRUE(keys && keys->type == REDIS_REPLY_ARRAY && keys->elements >= 1);
    for (size_t i = 0; i < keys->elements; i++) {
        long long pttl = redis().cmd({ "PTTL", keys->element[i]->str }).integer();
        EXPECT_GT(pttl, 0);
        EXPECT_LE(pttl, 60000);
    }
    h->kill(SIGTERM);
    h->wait(ms(5000));

    /* Opted out: no entry, the holder shows by owner id only. */
    redis().cmd({ "FLUSHALL" });
    std::string mark = file("held.quiet");
    auto c = std::make_unique<Child>(
        std::vector<std::string>{ kCli, "run", n, "--", "sh", "-c", "touch " + mark + "; sleep 30" },
        std::map<std::string, std::string>{ { "RMUTEX_URL", url() }, { "RMUTEX_ANNOUNCE", "0" } });
    ASSERT_TRUE(wait_until([&] { return access(mark.c_str(), F_OK) == 0; }, ms(5000)));
    ASSERT_EQ(0, exit_code({ "status", "--json", n }, "", nullptr, &out));
    EXPECT_EQ("null", json_field(out, "holder")) << out;
    EXPECT_EQ("null", json_field(out, "held_ms")) << out;
    ASSERT_EQ(0, exit_code({ "status", n }, "", nullptr, &out));
    EXPECT_NE(std::string::npos, out.find("not announced")) << out;
    EXPECT_EQ(0u, redis().cmd({ "KEYS", "rmutex_client:*" })->elements);
    c->kill(SIGTERM);
    c->wait(ms(5000));
}

TEST_F(Cli, StatusTellsACachedLockKeptOrParked)
{
    /* This process caches the lock (the default cache_park: 1 ms), and
     * keeps it unused for a minute, not the default 100 ms: each status
     * below is a process of its own, slow to start under a sanitizer. */
    ASSERT_RC(0, rmutex_configure(url_with("cache_idle=60000").c_str()));
    struct Restore { /* options a URL leaves out keep their value: put it back */
        std::string url;
        ~Restore() { rmutex_configure(url.c_str()); }
    } restore{ url_with("cache_idle=100") };
    std::string n = lock_name(), out;
    rmutexattr_t a;
    rmutexattr_init(&a);
    rmutexattr_setcache(&a, 1);
    rmutex_t m;
    ASSERT_RC(0, rmutex_init(&m, n.c_str(), &a));
    rmutexattr_destroy(&a);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_EQ(0, exit_code({ "status", "--json", n }, "", nullptr, &out));
    EXPECT_EQ("\"held\"", json_field(out, "state"));
    EXPECT_EQ("\"kept\"", json_field(out, "cached")) << out;
    ASSERT_EQ(0, exit_code({ "status", n }, "", nullptr, &out));
    EXPECT_NE(std::string::npos, out.find("cached   kept by its process")) << out;
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_TRUE(wait_until([&] { return redis().parked(n); }, ms(5000))) << "not parked";
    ASSERT_EQ(0, exit_code({ "status", "--json", n }, "", nullptr, &out)) << "parked is still held";
    EXPECT_EQ("\"parked\"", json_field(out, "cached")) << out;
    ASSERT_EQ(0, exit_code({ "status", n }, "", nullptr, &out));
    EXPECT_NE(std::string::npos, out.find("cached   parked by its process")) << out;
    EXPECT_RC(0, rmutex_destroy(&m));
}

/* The labels of status's text lines ("owner", "holder", ...; the first
 * line: the name), in order. */
static std::vector<std::string> labels(const std::string &out)
{
    std::vector<std::string> v;
    for (auto &l : lines(out)) {
        size_t b = l.find_first_not_of(' ');
        if (b == std::string::npos) continue;
        v.push_back(l.substr(b, l.find(' ', b) - b));
    }
    /* The announced waiters that may follow (a wait older than
     * announce_wait, once the registry has it: a matter of timing here)
     * are another test's subject. */
    auto w = std::find(v.begin(), v.end(), "waiters");
    v.erase(w, v.end());
    return v;
}

/* A read-write lock in status and list, text and JSON: read by two runs
 * (each reader with its process), a writer queued; written (the writer
 * named, with its process); free. */
TEST_F(Cli, StatusAndListShowAReadWriteLocksReadersWriterAndQueue)
{
    std::string n = lock_name("rw"), out;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    auto r1 = run_until_go({ "-s" }, n), r2 = run_until_go({ "-s", "-w", "10" }, n);
    /* (The two share their started mark: wait for the second's read.) */
    ASSERT_TRUE(wait_until([&] { return redis().cmd({ "ZCARD", "rmutex_rw_readers:{" + n + "}" }).integer() == 2; },
                           ms(5000)));
    std::string wmark = file("writing"), wgo = file("wgo");
    auto w = cli({ "run", "-x", "-w", "30", n, "--", "sh", "-c",
                   "touch " + wmark + "; while [ ! -e " + wgo + " ]; do sleep 0.01; done" });
    ASSERT_TRUE(wait_until([&] {
        exit_code({ "status", "--json", n }, "", nullptr, &out);
        return json_field(out, "queued_writers") == "1" && out.find("\"held_ms\":null") == std::string::npos;
    }, ms(10000))) << "two readers announced, a writer queued: " << out;
    EXPECT_EQ("\"held\"", json_field(out, "state"));
    EXPECT_EQ("\"rwlock\"", json_field(out, "kind"));
    EXPECT_EQ("\"read\"", json_field(out, "mode"));
    EXPECT_EQ("null", json_field(out, "writer"));
    EXPECT_EQ("2", json_field(out, "readers"));
    EXPECT_EQ("0", json_field(out, "queued_readers"));
    for (auto *r : { r1.get(), r2.get() })
        EXPECT_NE(std::string::npos, out.find("\"pid\":" + std::to_string(r->pid()) + ",")) << out;
    EXPECT_NE(std::string::npos, out.find("\"holds\":1,")) << out;
    EXPECT_NE(std::string::npos, out.find("\"wants\":\"write\"")) << out;
    EXPECT_EQ("1", json_field(out, "queue_length"));
    ASSERT_EQ(0, exit_code({ "status", n }, "", nullptr, &out));
    EXPECT_EQ((std::vector<std::string>{ n, "kind", "readers", "reader", "holder", "command", "held",
                                         "reader", "holder", "command", "held", "lease", "fence",
                                         "robust", "queue", "waiting" }),
              labels(out)) << out;
    EXPECT_NE(std::string::npos, out.find("  kind     read-write lock, read\n")) << out;
    EXPECT_NE(std::string::npos, out.find("  readers  2\n")) << out;
    EXPECT_NE(std::string::npos, out.find("    holder   pid " + std::to_string(r1->pid()) + " on " + host))
        << out;
    EXPECT_NE(std::string::npos, out.find(", 1 hold, lease ")) << out;
    EXPECT_NE(std::string::npos, out.find("  queue    1 waiting (0 readers, 1 writer, in order): writer "))
        << out;
    ASSERT_EQ(0, exit_code({ "list", n }, "", nullptr, &out));
    EXPECT_TRUE(std::regex_search(out, std::regex(n + "\tread by 2: pid [0-9]+ on [^,]+ \\(rmutex\\), "
                                                      "pid [0-9]+ on .+ \\(rmutex\\)\tlease [0-9.]+s left\t1 queued"
                                                      "(\t1 waiting)?\n"))) /* (announced after 100 ms) */
        << out;
    ASSERT_EQ(0, exit_code({ "list", "--json", n }, "", nullptr, &out));
    EXPECT_EQ("\"read\"", json_field(out, "mode")) << out;

    go(); /* the readers end: the writer writes */
    EXPECT_EQ(0, r1->wait(ms(10000)));
    EXPECT_EQ(0, r2->wait(ms(10000)));
    ASSERT_TRUE(wait_until([&] { return access(wmark.c_str(), F_OK) == 0; }, ms(5000)));
    ASSERT_TRUE(wait_until([&] {
        exit_code({ "status", "--json", n }, "", nullptr, &out);
        return json_field(out, "mode") == "\"write\"" && json_field(out, "held_ms") != "null";
    }, ms(10000))) << "written, the writer announced: " << out;
    EXPECT_EQ(json_field(out, "owner"), json_field(out, "writer"));
    EXPECT_EQ(std::to_string(w->pid()), json_field(out, "pid")) << out;
    EXPECT_EQ("0", json_field(out, "readers"));
    EXPECT_EQ("[]", json_field(out, "reader"));
    EXPECT_EQ(redis().get("redisson_lock_token:{" + n + "}").value_or("none"), json_field(out, "fence"))
        << "the writer's token";
    ASSERT_EQ(0, exit_code({ "status", n }, "", nullptr, &out));
    EXPECT_EQ((std::vector<std::string>{ n, "kind", "writer", "holder", "command", "held", "lease",
                                         "fence", "robust", "waiting" }),
              labels(out)) << out;
    EXPECT_NE(std::string::npos, out.find("  kind     read-write lock, written\n")) << out;
    EXPECT_NE(std::string::npos, out.find("  holder   pid " + std::to_string(w->pid()) + " on " + host))
        << out;
    ASSERT_EQ(0, exit_code({ "list", n }, "", nullptr, &out));
    EXPECT_TRUE(std::regex_search(out, std::regex(n + "\twritten [0-9.a-z]+ by pid " + std::to_string(w->pid()) +
                                                      " on .+ \\(rmutex\\)\tlease [0-9.]+s left\n")))
        << out;

    std::ofstream(wgo) << "";
    EXPECT_EQ(0, w->wait(ms(10000)));
    EXPECT_EQ(3, exit_code({ "status", "--json", n }, "", nullptr, &out)) << "free: 3";
    EXPECT_EQ("\"free\"", json_field(out, "state"));
    EXPECT_EQ("-1", json_field(out, "ttl_ms"));
    std::string mode = json_field(out, "mode");
    EXPECT_TRUE(mode == "" || mode == "\"free\"") << "a free read-write lock: " << out;
    ASSERT_EQ(0, exit_code({ "list", n }, "", nullptr, &out));
    EXPECT_EQ("", out) << "free: not listed";
}

/* A mutex's status is what it was before read-write locks: the same
 * lines, the same JSON fields. */
TEST_F(Cli, StatusOfAMutexKeepsItsLinesAndFields)
{
    std::string n = lock_name(), out;
    auto h = holder(n);
    ASSERT_EQ(0, exit_code({ "status", n }, "", nullptr, &out));
    EXPECT_EQ((std::vector<std::string>{ n, "owner", "holder", "command", "held", "lease", "fence",
                                         "robust", "waiting" }),
              labels(out)) << out;
    EXPECT_NE(std::string::npos, out.find("\n  owner    ")) << out;
    ASSERT_EQ(0, exit_code({ "status", "--json", n }, "", nullptr, &out));
    std::vector<std::string> keys;
    std::string top = std::regex_replace(out, std::regex("\\{\"host\"[^}]*\\}|\\[[^\\]]*\\]"), "x");
    std::regex key("\"([a-z_]+)\":");
    for (std::sregex_iterator i(top.begin(), top.end(), key), e; i != e; ++i)
        keys.push_back((*i)[1]);
    /* (The announced waiters came later, appended: "waiters", a list.) */
    EXPECT_EQ((std::vector<std::string>{ "name", "state", "owner", "holder", "held_ms", "cached", "ttl_ms",
                                         "fence", "owner_died", "not_recoverable", "queue_length", "queue",
                                         "subscribers", "server_time_ms", "waiters" }),
              keys) << out;
    h->kill(SIGTERM);
    h->wait(ms(5000));
}

/* list: every held lock whose name matches, from a SCAN; not free locks,
 * not hashes that only look alike, not other types. */
TEST_F(Cli, ListFindsTheHeldLocksThatMatchAndNothingElse)
{
    std::string a = lock_name("list:a"), b = lock_name("list:b"), c = lock_name("other"), out;
    auto ha = holder(a), hb = holder(b), hc = holder(c);
    std::string pre = a.substr(0, a.find("list:a"));
    redis().cmd({ "HSET", pre + "list:user", "field", "1" });           /* no lease */
    redis().cmd({ "HSET", pre + "list:cache", "name", "x" });          /* no owner id */
    redis().cmd({ "PEXPIRE", pre + "list:cache", "60000" });
    redis().cmd({ "SET", pre + "list:string", "1" });
    for (int i = 0; i < 1500; i++) /* more than one SCAN page */
        redis().cmd({ "SET", pre + "filler:" + std::to_string(i), "1" });
    ASSERT_EQ(0, exit_code({ "list", pre + "list:*" }, "", nullptr, &out));
    EXPECT_NE(std::string::npos, out.find(a + "\theld ")) << out;
    EXPECT_NE(std::string::npos, out.find(b + "\theld ")) << out;
    EXPECT_NE(std::string::npos, out.find("by pid " + std::to_string(ha->pid()) + " on ")) << out;
    EXPECT_EQ(std::string::npos, out.find(c)) << "the pattern filters: " << out;
    EXPECT_EQ(std::string::npos, out.find("list:user")) << out;
    EXPECT_EQ(std::string::npos, out.find("list:cache")) << out;
    EXPECT_EQ(std::string::npos, out.find("list:string")) << out;
    EXPECT_EQ(2, std::count(out.begin(), out.end(), '\n')) << out;
    /* Everything, as JSON lines with status's schema. */
    ASSERT_EQ(0, exit_code({ "list", "--json", pre + "*" }, "", nullptr, &out));
    EXPECT_EQ(3, std::count(out.begin(), out.end(), '\n')) << out;
    EXPECT_NE(std::string::npos, out.find("{\"name\":\"" + c + "\",\"state\":\"held\"")) << out;
    /* A free lock is not there; nothing found is not an error. */
    hb->kill(SIGTERM);
    hb->wait(ms(5000));
    ASSERT_EQ(0, exit_code({ "list", pre + "list:*" }, "", nullptr, &out));
    EXPECT_EQ(1, std::count(out.begin(), out.end(), '\n')) << out;
    ASSERT_EQ(0, exit_code({ "list", pre + "nothing:*" }, "", nullptr, &out));
    EXPECT_EQ("", out);
    EXPECT_EQ(64, exit_code({ "list", "a", "b" }));
    EXPECT_EQ(64, exit_code({ "list", "--bogus" }));
    std::string closed = "redis://127.0.0.1:" + std::to_string(free_port()) + "?connect_timeout=200";
    EXPECT_EQ(69, exit_code({ "list" }, closed));
    ha->kill(SIGTERM);
    hc->kill(SIGTERM);
    ha->wait(ms(5000));
    hc->wait(ms(5000));
}

TEST_F(Cli, StatusShowsARobustHoldersDeathAndTheWaitersSubscribed)
{
    std::string n = lock_name(), out;
    auto h = cli({ "run", "--robust", "--lease", "1s", "--kill-after", "0", n, "--", "sleep", "30" });
    ASSERT_TRUE(wait_until([&] { return redis().exists(n); }, ms(5000)));
    auto w = cli({ "run", "-w", "30", n, "--", "true" });
    ASSERT_TRUE(wait_until([&] {
        exit_code({ "status", "--json", n }, "", nullptr, &out);
        return json_field(out, "subscribers") == "1";
    }, ms(5000))) << out;
    w->kill(SIGKILL);
    w->wait(ms(5000));
    h->kill(SIGKILL); /* dies holding it: the lease runs out */
    h->wait(ms(5000));
    ASSERT_TRUE(wait_until([&] { return !redis().exists(n); }, ms(3000)));
    EXPECT_EQ(3, exit_code({ "status", "--json", n }, "", nullptr, &out));
    EXPECT_EQ("true", json_field(out, "owner_died")) << out;
}

TEST_F(Cli, WaitSeesALockFreeOrHeldWithoutTakingIt)
{
    std::string n = lock_name(), out;
    EXPECT_EQ(0, exit_code({ "wait", n })) << "free at once";
    auto t0 = Clock::now();
    EXPECT_EQ(1, exit_code({ "wait", "--held", "-w", "0.3", n }));
    EXPECT_GE(elapsed_ms(t0), 300);
    /* Held for a scaled second: a loaded machine (an instrumented command
     * starting slowly) must not see it released before it looks. */
    const long hold_ms = scaled(ms(1000)).count();
    auto h = cli({ "run", n, "--", "sleep", std::to_string(hold_ms / 1000.0) });
    EXPECT_EQ(0, exit_code({ "wait", "--held", "-w", "5", n }));
    EXPECT_EQ(5, exit_code({ "wait", "-w", "0.2", "-E", "5", n })) << "still held";
    t0 = Clock::now();
    EXPECT_EQ(0, exit_code({ "wait", "-w", "30", n }));
    EXPECT_LT(elapsed_ms(t0), hold_ms + scaled(ms(2000)).count());
    h->wait(scaled(ms(5000)));
    std::string counter = redis().cmd({ "GET", "redisson_lock_token:{" + n + "}" }).str();
    EXPECT_EQ(0, exit_code({ "wait", n }));
    EXPECT_EQ(counter, redis().cmd({ "GET", "redisson_lock_token:{" + n + "}" }).str())
        << "a wait took a fencing token";
    std::string closed = "redis://127.0.0.1:" + std::to_string(free_port()) + "?connect_timeout=200";
    EXPECT_EQ(69, exit_code({ "wait", "-w", "0.5", n }, closed));
}

/* ---- the waiting line --------------------------------------------------------------- */

TEST_F(Cli, WaitingOnATerminalRewritesOneLineEachSecondAndNothingOtherwise)
{
    std::string n = lock_name(), ownerfile = file("owner");
    /* Held long enough for two rewrites after the waiter's start, which
     * can take seconds on a loaded machine (script(1), the CLI). */
    auto h = cli({ "run", n, "--", "sh", "-c", "echo $RMUTEX_OWNER > " + ownerfile + "; sleep 7" });
    std::string owner;
    ASSERT_TRUE(wait_until([&] {
        std::ifstream f(ownerfile);
        return (f >> owner) && !owner.empty();
    }, ms(5000))) << "the holder never ran its command: " << h->err();
    /* In a pseudo-terminal (script(1)): the line, rewritten, then cleared
     * before the command's output. */
    std::string out = shell("RMUTEX_URL='" + url() + "' script -qfec '" + kCli + " run " + n +
                            " -- echo got-it' /dev/null");
    /* The holder as the registry names it (the owner id when it has not
     * announced itself yet: right after its acquisition). */
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    std::string line = "\rrmutex: waiting for " + n + " -- held by pid " + std::to_string(h->pid()) +
                       " on " + host + " (rmutex), lease ";
    auto first = out.find(line);
    ASSERT_NE(std::string::npos, first) << out;
    EXPECT_NE(std::string::npos, out.find(line, first + 1)) << "rewritten each second: " << out;
    auto cleared = out.find("\r\033[K");
    auto got = out.find("got-it");
    ASSERT_NE(std::string::npos, got) << out;
    EXPECT_LT(cleared, got) << "the line is cleared before the command runs: " << out;
    h->wait(ms(5000));
    /* Not a terminal: nothing on stderr. */
    auto h2 = cli({ "run", n, "--", "sleep", "1.5" });
    ASSERT_TRUE(wait_until([&] { return redis().exists(n); }, ms(5000)));
    std::string err;
    EXPECT_EQ(0, exit_code({ "run", n, "--", "true" }, "", &err));
    EXPECT_EQ("", err);
    h2->wait(ms(5000));
}

/* A writer waiting behind a reader: its place in the read-write lock's
 * queue, called that (not a fair mutex's). */
TEST_F(Cli, AWriterWaitingOnATerminalShowsItsPlaceInTheReadWriteLocksQueue)
{
    std::string n = lock_name();
    auto h = cli({ "run", "-s", n, "--", "sleep", "3" });
    ASSERT_TRUE(wait_until([&] { return redis().cmd({ "HGET", n, "mode" }).str() == "read"; }, ms(5000)))
        << h->err();
    std::string out = shell("RMUTEX_URL='" + url() + "' script -qfec '" + kCli + " run -x " + n +
                            " -- echo got-it' /dev/null");
    EXPECT_NE(std::string::npos, out.find("; 0 ahead (queue)")) << out;
    EXPECT_EQ(std::string::npos, out.find("(fair)")) << out;
    EXPECT_NE(std::string::npos, out.find("got-it")) << out;
    h->wait(ms(5000));
}

} // namespace
