/* harness.cc -- redis-server control, a raw hiredis client, the child helper
 * and the time bounds shared by the rmutex tests.  See harness.h. */
#include "harness.h"
#include "acl_rule.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <sstream>
#include <thread>
#include <mutex>
#include <condition_variable>

extern char **environ;

#ifndef RMUTEX_TEST_CHILD
#error "RMUTEX_TEST_CHILD must name the rmutex_test_child binary"
#endif

namespace rmt {

/* ---- time ------------------------------------------------------------ */

double time_scale()
{
    static const double scale = [] {
        const char *s = getenv("RMUTEX_TEST_TIME_SCALE");
        double v = s ? strtod(s, nullptr) : 1.0;
        return v >= 1.0 ? v : 1.0;
    }();
    return scale;
}

ms scaled(ms d) { return ms(static_cast<int64_t>(static_cast<double>(d.count()) * time_scale())); }

int64_t elapsed_ms(Clock::time_point t)
{
    return std::chrono::duration_cast<ms>(Clock::now() - t).count();
}

bool wait_until_unscaled(const std::function<bool()> &pred, ms bound)
{
    auto end = Clock::now() + bound;
    for (;;) {
        if (pred())
            return true;
        if (Clock::now() >= end)
            return pred();
        std::this_thread::sleep_for(ms(3));
    }
}

bool wait_until(const std::function<bool()> &pred, ms bound) { return wait_until_unscaled(pred, scaled(bound)); }

struct timespec abs_after(clockid_t clock, int64_t offset_ms)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    int64_t ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec + offset_ms * 1000000;
    ts.tv_sec = ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    return ts;
}

bool reached(clockid_t clock, const struct timespec &t)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return now.tv_sec > t.tv_sec || (now.tv_sec == t.tv_sec && now.tv_nsec >= t.tv_nsec);
}

/* ---- rmutex conveniences ---------------------------------------------- */

rmutex_stats_t stats()
{
    rmutex_stats_t s;
    memset(&s, 0, sizeof s);
    int rc = rmutex_stats(&s, sizeof s);
    EXPECT_EQ(0, rc);
    return s;
}

std::string err_name(int code)
{
    static const std::map<int, const char *> names = {
        {0, "0"},
        {EPERM, "EPERM"},
        {ENOENT, "ENOENT"},
        {EINTR, "EINTR"},
        {EAGAIN, "EAGAIN"},
        {ENOMEM, "ENOMEM"},
        {EACCES, "EACCES"},
        {EBUSY, "EBUSY"},
        {EINVAL, "EINVAL"},
        {EROFS, "EROFS"},
        {EDEADLK, "EDEADLK"},
        {ENOSYS, "ENOSYS"},
        {ETIMEDOUT, "ETIMEDOUT"},
        {ENOTSUP, "ENOTSUP"},
        {EOWNERDEAD, "EOWNERDEAD"},
        {ENOTRECOVERABLE, "ENOTRECOVERABLE"},
        {RMUTEX_ENOREPLICAS, "RMUTEX_ENOREPLICAS"},
        {-1, "-1"},
    };
    auto it = names.find(code);
    std::string n = it != names.end() ? it->second : "errno";
    return n + " (" + std::to_string(code) + ")";
}

/* ---- redis-server ------------------------------------------------------ */

int free_port()
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
    close(fd);
    return ntohs(a.sin_port);
}

/* ---- TLS ------------------------------------------------------------------- */

bool tls_mode()
{
    const char *v = getenv("RMUTEX_TEST_TLS");
    return v && !strcmp(v, "1");
}

const TlsFiles &tls_files()
{
    static TlsFiles f;
    static std::once_flag once;
    std::call_once(once, [] {
        char tmpl[] = "/tmp/rmutex-tls-XXXXXX";
        if (!mkdtemp(tmpl)) {
            ADD_FAILURE() << "mkdtemp: " << strerror(errno);
            return;
        }
        TlsFiles t;
        t.dir = tmpl;
        t.ca = t.dir + "/ca.crt", t.ca_key = t.dir + "/ca.key";
        t.server_crt = t.dir + "/server.crt", t.server_key = t.dir + "/server.key";
        t.client_crt = t.dir + "/client.crt", t.client_key = t.dir + "/client.key";
        /* EC keys: made in a millisecond, where RSA takes a tenth of a second. */
        std::string d = "'" + t.dir + "'";
        std::string cmd =
            "cd " + d + " && exec >openssl.log 2>&1 && "
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 "
            "-subj '/CN=rmutex test CA' -keyout ca.key -out ca.crt && "
            "printf '[srv]\nsubjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"
            "[cli]\nextendedKeyUsage=clientAuth\n' >ext.cnf && "
            "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost "
            "-keyout server.key -out server.csr && "
            "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 "
            "-extfile ext.cnf -extensions srv -out server.crt && "
            "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=client "
            "-keyout client.key -out client.csr && "
            "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 "
            "-extfile ext.cnf -extensions cli -out client.crt";
        int st = 0;
        shell(cmd, &st);
        if (st != 0) {
            ADD_FAILURE() << "openssl could not make the test certificates: see " << t.dir << "/openssl.log";
            return;
        }
        f = t;
        static std::string dir = t.dir;
        atexit([] { std::filesystem::remove_all(dir); });
    });
    return f;
}

std::string tls_query()
{
    const TlsFiles &t = tls_files();
    return "cacert=" + t.ca + "&cert=" + t.client_crt + "&key=" + t.client_key;
}

std::unique_ptr<RedisServer> RedisServer::start(std::vector<std::string> extra, int port)
{
    std::unique_ptr<RedisServer> s(new RedisServer());
    const char *bin = getenv("RMUTEX_TEST_REDIS_SERVER");
    s->bin_ = bin && *bin ? bin : "redis-server";
    char tmpl[] = "/tmp/rmutex-test-XXXXXX";
    if (!mkdtemp(tmpl)) {
        ADD_FAILURE() << "mkdtemp: " << strerror(errno);
        return nullptr;
    }
    s->dir_ = tmpl;
    s->sock_ = s->dir_ + "/redis.sock";
    s->extra_ = std::move(extra);
    for (size_t i = 0; i + 1 < s->extra_.size(); i++)
        if (s->extra_[i] == "--requirepass")
            s->password_ = s->extra_[i + 1];
    /* A port picked by free_port() can be taken by somebody else before
     * redis-server binds it; then it exits and we try another. */
    for (int attempt = 0; attempt < (port ? 1 : 8); attempt++) {
        s->port_ = port ? port : free_port();
        /* A TLS cluster node's bus is at port + 10000 (see spawn()). */
        bool bus = std::find(s->extra_.begin(), s->extra_.end(), "--cluster-enabled") != s->extra_.end();
        while (!port && tls_mode() && bus && s->port_ > 55535) s->port_ = free_port();
        if (tls_mode()) {
            if (tls_files().dir.empty()) return nullptr;
            do s->tls_port_ = free_port();
            while (s->tls_port_ == s->port_);
        }
        if (s->spawn() && s->wait_ready(scaled(ms(10000))))
            return s;
        s->kill9();
    }
    ADD_FAILURE() << "redis-server (" << s->bin_ << ") did not start; log in " << s->dir_;
    return nullptr;
}

RedisServer::~RedisServer()
{
    stop();
    if (::testing::Test::HasFailure())
        fprintf(stderr, "[harness] redis-server log kept in %s\n", dir_.c_str());
    else if (!dir_.empty())
        std::filesystem::remove_all(dir_);
}

std::string RedisServer::url() const
{
    std::string auth = password_.empty() ? "" : ":" + password_ + "@";
    if (tls_port_)
        return "rediss://" + auth + host_ + ":" + std::to_string(tls_port_) + "?" + tls_query();
    return "redis://" + auth + host_ + ":" + std::to_string(port_);
}

bool RedisServer::spawn()
{
    std::vector<std::string> args = {bin_,
                                     "--port", std::to_string(port_),
                                     "--bind", host_,
                                     "--save", "",
                                     "--appendonly", "no",
                                     "--daemonize", "no",
                                     "--dir", dir_,
                                     "--logfile", dir_ + "/redis.log",
                                     "--unixsocket", sock_,
                                     "--unixsocketperm", "700"};
    if (tls_port_) {
        const TlsFiles &t = tls_files();
        args.insert(args.end(), {"--tls-port", std::to_string(tls_port_), "--tls-cert-file", t.server_crt,
                                 "--tls-key-file", t.server_key, "--tls-ca-cert-file", t.ca});
        /* A cluster node: its bus and its replication over TLS too, the bus
         * where a CLUSTER MEET of the plain port looks for it. */
        if (std::find(extra_.begin(), extra_.end(), "--cluster-enabled") != extra_.end())
            args.insert(args.end(), {"--tls-cluster", "yes", "--tls-replication", "yes", "--cluster-port",
                                     std::to_string(port_ + 10000)});
    }
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char *> argv;
    for (auto &a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        /* Only async-signal-safe calls until exec. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        setpgid(0, 0);
        execvp(argv[0], argv.data());
        _exit(127);
    }
    pid_ = pid;
    return true;
}

bool RedisServer::wait_ready(ms bound)
{
    auto end = Clock::now() + bound;
    while (Clock::now() < end) {
        int status;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return false;
        }
        struct timeval tv = {0, 200000};
        redisContext *c = redisConnectWithTimeout(host_.c_str(), port_, tv);
        if (c && !c->err) {
            auto *r = static_cast<redisReply *>(redisCommand(c, "PING"));
            bool ready = r && ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) ||
                               (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0));
            if (r)
                freeReplyObject(r);
            redisFree(c);
            if (ready)
                return true;
        } else if (c) {
            redisFree(c);
        }
        std::this_thread::sleep_for(ms(10));
    }
    return false;
}

void RedisServer::stop()
{
    if (pid_ <= 0)
        return;
    ::kill(pid_, SIGTERM);
    auto end = Clock::now() + ms(10000);
    int status;
    while (waitpid(pid_, &status, WNOHANG) != pid_) {
        if (Clock::now() >= end) {
            ::kill(pid_, SIGKILL);
            waitpid(pid_, &status, 0);
            break;
        }
        std::this_thread::sleep_for(ms(5));
    }
    pid_ = -1;
}

void RedisServer::kill9()
{
    if (pid_ <= 0)
        return;
    ::kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
}

bool RedisServer::restart()
{
    stop();
    /* The old server's socket may linger in TIME_WAIT; redis-server uses
     * SO_REUSEADDR, so the same port binds at once.  Retry briefly anyway. */
    for (int attempt = 0; attempt < 20; attempt++) {
        if (spawn() && wait_ready(scaled(ms(10000))))
            return true;
        kill9();
        std::this_thread::sleep_for(ms(50));
    }
    return false;
}

/* ---- raw hiredis client -------------------------------------------------- */

Redis::Redis(const std::string &host, int port, const std::string &password)
    : host_(host), password_(password), port_(port)
{
    connect();
}

Redis::~Redis()
{
    if (c_)
        redisFree(c_);
}

void Redis::connect()
{
    if (c_)
        redisFree(c_);
    struct timeval tv = {2, 0};
    c_ = redisConnectWithTimeout(host_.c_str(), port_, tv);
    if (!c_ || c_->err)
        return;
    redisSetTimeout(c_, {10, 0});
    if (!password_.empty()) {
        auto *r = static_cast<redisReply *>(redisCommand(c_, "AUTH %s", password_.c_str()));
        if (r)
            freeReplyObject(r);
    }
}

Reply Redis::cmd(const std::vector<std::string> &argv)
{
    if (!c_ || c_->err)
        connect();
    Reply out;
    if (!c_ || c_->err)
        return out;
    std::vector<const char *> a;
    std::vector<size_t> l;
    for (auto &s : argv) {
        a.push_back(s.data());
        l.push_back(s.size());
    }
    out.r.reset(static_cast<redisReply *>(redisCommandArgv(c_, static_cast<int>(a.size()), a.data(), l.data())));
    return out;
}

Reply Redis::cmdf(const char *fmt, ...)
{
    if (!c_ || c_->err)
        connect();
    Reply out;
    if (!c_ || c_->err)
        return out;
    va_list ap;
    va_start(ap, fmt);
    out.r.reset(static_cast<redisReply *>(redisvCommand(c_, fmt, ap)));
    va_end(ap);
    return out;
}

std::string Redis::type(const std::string &key) { return cmd({"TYPE", key}).str(); }

std::string Redis::lock_value(const std::string &name)
{
    auto h = hgetall(name);
    return h.size() == 1 ? h.begin()->second : "";
}

std::map<std::string, std::string> Redis::hgetall(const std::string &key)
{
    std::map<std::string, std::string> m;
    Reply r = cmd({"HGETALL", key});
    if (r && r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i + 1 < r->elements; i += 2)
            m[std::string(r->element[i]->str, r->element[i]->len)] =
                std::string(r->element[i + 1]->str, r->element[i + 1]->len);
    return m;
}

long long Redis::pttl(const std::string &key) { return cmd({"PTTL", key}).integer(); }

bool Redis::exists(const std::string &key) { return cmd({"EXISTS", key}).integer() == 1; }

std::optional<std::string> Redis::get(const std::string &key)
{
    Reply r = cmd({"GET", key});
    if (!r || r->type != REDIS_REPLY_STRING)
        return std::nullopt;
    return r.str();
}

long long Redis::numsub(const std::string &channel)
{
    Reply r = cmd({"PUBSUB", "NUMSUB", channel});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return -1;
    return r->element[1]->integer;
}

std::vector<std::map<std::string, std::string>> Redis::client_list()
{
    std::vector<std::map<std::string, std::string>> out;
    std::istringstream lines(cmd({"CLIENT", "LIST"}).str());
    std::string line;
    while (std::getline(lines, line)) {
        std::map<std::string, std::string> m;
        std::istringstream toks(line);
        std::string tok;
        while (toks >> tok) {
            auto eq = tok.find('=');
            if (eq != std::string::npos)
                m[tok.substr(0, eq)] = tok.substr(eq + 1);
        }
        if (!m.empty())
            out.push_back(std::move(m));
    }
    return out;
}

std::vector<long long> Redis::client_ids(const std::string &name)
{
    std::vector<long long> ids;
    for (auto &c : client_list())
        if (c["name"] == name)
            ids.push_back(std::stoll(c["id"]));
    return ids;
}

bool Redis::client_kill_id(long long id)
{
    return cmd({"CLIENT", "KILL", "ID", std::to_string(id)}).integer() == 1;
}

std::optional<std::pair<std::string, std::string>> Redis::next_message(ms bound)
{
    if (!c_ || c_->err)
        return std::nullopt;
    auto b = scaled(bound);
    struct timeval tv = {static_cast<time_t>(b.count() / 1000), static_cast<suseconds_t>(b.count() % 1000 * 1000)};
    redisSetTimeout(c_, tv);
    for (;;) {
        void *raw = nullptr;
        if (redisGetReply(c_, &raw) != REDIS_OK || !raw)
            return std::nullopt; /* timed out: this context is now unusable */
        Reply r;
        r.r.reset(static_cast<redisReply *>(raw));
        /* ["message" or, sharded, "smessage", channel, payload]. */
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->str &&
            (std::string(r->element[0]->str) == "message" || std::string(r->element[0]->str) == "smessage"))
            return std::make_pair(std::string(r->element[1]->str, r->element[1]->len),
                                  std::string(r->element[2]->str, r->element[2]->len));
        /* A PSUBSCRIBE's message: ["pmessage", pattern, channel, payload]. */
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 && r->element[0]->str &&
            std::string(r->element[0]->str) == "pmessage")
            return std::make_pair(std::string(r->element[2]->str, r->element[2]->len),
                                  std::string(r->element[3]->str, r->element[3]->len));
    }
}

/* ---- the child helper ---------------------------------------------------- */

Child::Child(const std::vector<std::string> &args, const std::string &url,
             const std::vector<std::string> &extra_env)
    : Child(RMUTEX_TEST_CHILD, args, url, extra_env)
{
}

Child::Child(const std::string &program, const std::vector<std::string> &args,
             const std::string &url, const std::vector<std::string> &extra_env)
{
    /* The environment: ours, minus what RMUTEX_URL and extra_env replace. */
    auto replaced = [&](const char *e) {
        if (strncmp(e, "RMUTEX_URL=", 11) == 0)
            return true;
        for (auto &x : extra_env) {
            size_t eq = x.find('=');
            if (eq != std::string::npos && strncmp(e, x.c_str(), eq + 1) == 0)
                return true;
        }
        return false;
    };
    std::vector<std::string> env;
    for (char **e = environ; *e; e++)
        if (!replaced(*e))
            env.push_back(*e);
    env.push_back("RMUTEX_URL=" + url);
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<std::string> all = {program};
    all.insert(all.end(), args.begin(), args.end());
    spawn(all, env, false);
}

Child::Child(const std::vector<std::string> &argv, const std::map<std::string, std::string> &env)
{
    std::vector<std::string> envs;
    for (char **e = environ; *e; e++) {
        std::string kv(*e);
        std::string k = kv.substr(0, kv.find('='));
        if (k == "LD_PRELOAD" || k == "RMUTEX_PRELOAD" || k == "RMUTEX_URL" || env.count(k))
            continue;
        envs.push_back(kv);
    }
    for (const auto &[k, v] : env)
        if (!v.empty())
            envs.push_back(k + "=" + v);
    spawn(argv, envs, true);
}

void Child::spawn(const std::vector<std::string> &all, const std::vector<std::string> &env,
                  bool capture_stderr)
{
    int errfd = -1;
    if (capture_stderr) {
        char tmpl[] = "/tmp/rmutex-child-stderr.XXXXXX";
        if ((errfd = mkstemp(tmpl)) < 0) {
            ADD_FAILURE() << "mkstemp: " << strerror(errno);
            return;
        }
        err_path_ = tmpl;
    }
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) {
        ADD_FAILURE() << "pipe: " << strerror(errno);
        if (errfd >= 0)
            close(errfd);
        return;
    }
    std::vector<char *> argv, envp;
    for (auto &a : all)
        argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    for (auto &e : env)
        envp.push_back(const_cast<char *>(e.c_str()));
    envp.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
    if (errfd >= 0)
        posix_spawn_file_actions_adddup2(&fa, errfd, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    close(to_child[0]);
    close(from_child[1]);
    if (errfd >= 0)
        close(errfd);
    in_ = to_child[1];
    out_ = from_child[0];
    if (rc != 0) {
        ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << strerror(rc);
        return;
    }
    pid_ = pid;
}

Child::~Child()
{
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status;
        waitpid(pid_, &status, 0);
    }
    if (in_ >= 0)
        close(in_);
    if (out_ >= 0)
        close(out_);
    if (!err_path_.empty())
        unlink(err_path_.c_str());
}

std::optional<std::string> Child::read_line(ms bound) { return read_line_unscaled(scaled(bound)); }

std::optional<std::string> Child::read_line_unscaled(ms bound)
{
    auto end = Clock::now() + bound;
    for (;;) {
        auto nl = buf_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            log_.push_back(line);
            return line;
        }
        if (out_ < 0)
            return std::nullopt;
        /* A bound already passed still looks once at what has arrived. */
        auto left = std::max<int64_t>(0, std::chrono::duration_cast<ms>(end - Clock::now()).count());
        struct pollfd p = {out_, POLLIN, 0};
        int n = poll(&p, 1, static_cast<int>(left));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return std::nullopt;
        char chunk[4096];
        ssize_t got = read(out_, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return std::nullopt;
        buf_.append(chunk, static_cast<size_t>(got));
    }
}

std::optional<std::string> Child::expect_line(const std::string &prefix, ms bound)
{
    auto end = Clock::now() + scaled(bound);
    for (;;) {
        auto left = std::chrono::duration_cast<ms>(end - Clock::now());
        if (left.count() < 0)
            left = ms(0);
        auto line = read_line_unscaled(left);
        if (!line)
            return std::nullopt;
        if (line->compare(0, prefix.size(), prefix) == 0)
            return line;
        fprintf(stderr, "[child %d] %s\n", static_cast<int>(pid_), line->c_str());
    }
}

bool Child::write_line(const std::string &line)
{
    std::string s = line + "\n";
    return write(in_, s.data(), s.size()) == static_cast<ssize_t>(s.size());
}

void Child::kill(int sig)
{
    if (pid_ > 0)
        ::kill(pid_, sig);
}

int Child::wait(ms bound)
{
    if (pid_ <= 0)
        return reaped_ ? status_ : -1;
    auto end = Clock::now() + scaled(bound);
    int status;
    for (;;) {
        pid_t r = waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            pid_ = -1;
            reaped_ = true;
            status_ = status;
            return status;
        }
        if (Clock::now() >= end)
            return -1;
        std::this_thread::sleep_for(ms(5));
    }
}

std::string Child::err() const
{
    std::ifstream f(err_path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::vector<std::string> lines(const std::string &s)
{
    std::vector<std::string> v;
    std::stringstream ss(s);
    std::string l;
    while (std::getline(ss, l))
        if (!l.empty())
            v.push_back(l);
    return v;
}

std::string shell(const std::string &cmd, int *status)
{
    std::string out;
    FILE *p = popen(cmd.c_str(), "r");
    if (!p)
        return out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        out.append(buf, n);
    int st = pclose(p);
    if (status)
        *status = st;
    return out;
}

std::unique_ptr<Child> child_holding(const std::string &name, const std::string &url,
                                     const std::vector<std::string> &opts, int expect_rc)
{
    std::vector<std::string> args = {"hold", name};
    args.insert(args.end(), opts.begin(), opts.end());
    auto c = std::make_unique<Child>(args, url);
    auto line = c->expect_line("held", ms(15000));
    if (!line) {
        ADD_FAILURE() << "the child did not report holding " << name;
        return nullptr;
    }
    if (field(*line, "rc") != std::to_string(expect_rc)) {
        ADD_FAILURE() << "the child's lock of " << name << " returned: " << *line;
        return nullptr;
    }
    return c;
}

std::vector<std::string> words(const std::string &line)
{
    std::vector<std::string> w;
    std::istringstream in(line);
    std::string s;
    while (in >> s)
        w.push_back(s);
    return w;
}

std::string field(const std::string &line, const std::string &key)
{
    for (auto &w : words(line))
        if (w.compare(0, key.size() + 1, key + "=") == 0)
            return w.substr(key.size() + 1);
    return "";
}

/* ---- threads ----------------------------------------------------------- */

struct Async::Impl {
    mutable std::mutex mu;
    mutable std::condition_variable cv;
    bool done = false;
    int rc = INT32_MIN;
    Clock::time_point at;
    std::thread t;
};

Async::Async(std::function<int()> fn) : impl_(new Impl)
{
    Impl *i = impl_.get();
    i->t = std::thread([i, fn = std::move(fn)] {
        int rc = fn();
        std::lock_guard<std::mutex> g(i->mu);
        i->rc = rc;
        i->at = Clock::now();
        i->done = true;
        i->cv.notify_all();
    });
}

Async::~Async()
{
    /* A thread still blocked in an rmutex call at the end of a test (which
     * has failed by then) would hang the process until ctest's timeout, or
     * outlive the stack it works on: end the process instead. */
    if (!wait(ms(20000))) {
        fprintf(stderr, "[harness] a thread is still blocked in an rmutex call; exiting\n");
        fflush(stderr);
        _exit(1);
    }
    join();
}

void Async::join()
{
    if (impl_->t.joinable())
        impl_->t.join();
}

bool Async::done() const
{
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->done;
}

bool Async::wait(ms bound) const
{
    std::unique_lock<std::mutex> g(impl_->mu);
    return impl_->cv.wait_for(g, scaled(bound), [this] { return impl_->done; });
}

int Async::rc() const
{
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->rc;
}

Clock::time_point Async::finished_at() const
{
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->at;
}

struct HolderThread::Impl {
    std::mutex mu;
    std::condition_variable cv;
    int lock_rc = INT32_MIN, unlock_rc = INT32_MIN;
    bool release = false;
    std::thread t;
};

HolderThread::HolderThread(rmutex_t *m) : impl_(new Impl)
{
    Impl *i = impl_.get();
    i->t = std::thread([i, m] {
        int rc = rmutex_lock(m);
        std::unique_lock<std::mutex> g(i->mu);
        i->lock_rc = rc;
        i->cv.notify_all();
        i->cv.wait(g, [i] { return i->release; });
        g.unlock();
        int u = rmutex_unlock(m);
        g.lock();
        i->unlock_rc = u;
    });
}

HolderThread::~HolderThread()
{
    if (!impl_->t.joinable())
        return;
    if (wait_locked(ms(20000)) == INT32_MIN) {
        fprintf(stderr, "[harness] a holder thread is still blocked in rmutex_lock; exiting\n");
        fflush(stderr);
        _exit(1);
    }
    release();
}

int HolderThread::wait_locked(ms bound)
{
    std::unique_lock<std::mutex> g(impl_->mu);
    impl_->cv.wait_for(g, scaled(bound), [this] { return impl_->lock_rc != INT32_MIN; });
    return impl_->lock_rc;
}

int HolderThread::release()
{
    {
        std::lock_guard<std::mutex> g(impl_->mu);
        impl_->release = true;
        impl_->cv.notify_all();
    }
    impl_->t.join();
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->unlock_rc;
}


/* ---- the fixture ------------------------------------------------------- */

namespace {
/* redis://[[user]:password@]host[:port][/db] -> host, port, password. */
bool parse_url(const std::string &url, std::string *host, int *port, std::string *password)
{
    const std::string scheme = "redis://";
    if (url.compare(0, scheme.size(), scheme) != 0)
        return false;
    std::string rest = url.substr(scheme.size());
    auto q = rest.find_first_of("/?");
    if (q != std::string::npos)
        rest = rest.substr(0, q);
    auto at = rest.rfind('@');
    if (at != std::string::npos) {
        std::string cred = rest.substr(0, at);
        auto colon = cred.find(':');
        *password = colon == std::string::npos ? cred : cred.substr(colon + 1);
        rest = rest.substr(at + 1);
    }
    auto colon = rest.rfind(':');
    *port = 6379;
    if (colon != std::string::npos) {
        *port = atoi(rest.substr(colon + 1).c_str());
        rest = rest.substr(0, colon);
    }
    *host = rest;
    return !host->empty() && *port > 0;
}
} // namespace

void RedisTest::SetUp()
{
    const char *ext = getenv("RMUTEX_TEST_URL");
    if (!own_server_ && ext && *ext) {
        base_url_ = ext;
        ASSERT_TRUE(parse_url(base_url_, &host_, &port_, &password_)) << "RMUTEX_TEST_URL: " << base_url_;
    } else {
        server_ = RedisServer::start();
        ASSERT_TRUE(server_);
        base_url_ = server_->url();
        host_ = server_->host();
        port_ = server_->port();
        password_ = server_->password();
    }
    redis_ = std::make_unique<Redis>(host_, port_, password_);
    ASSERT_TRUE(redis_->ok()) << redis_->error();
    const char *acl = getenv("RMUTEX_TEST_ACL");
    if (acl && !strcmp(acl, "1")) {
        /* ACL mode: the library (and every child) runs as docs/acl.md's
         * least-privileged user; redis() stays the default user, for the
         * tests' own looks at the server. */
        std::vector<std::string> cmd = {"ACL", "SETUSER", kAclUser, "reset", "on",
                                        std::string(">") + kAclPassword};
        cmd.insert(cmd.end(), acl_rule().begin(), acl_rule().end());
        Reply r = redis_->cmd(cmd);
        ASSERT_EQ("OK", r.str()) << "ACL SETUSER: " << r.str();
        base_url_ = "redis://" + std::string(kAclUser) + ":" + kAclPassword + "@" + host_ + ":" +
                    std::to_string(port_);
        if (server_ && server_->tls_port())
            base_url_ = "rediss://" + std::string(kAclUser) + ":" + kAclPassword + "@" + host_ + ":" +
                        std::to_string(server_->tls_port()) + "?" + tls_query();
    }
    setenv("RMUTEX_URL", url().c_str(), 1);
    if (configure_)
        ASSERT_RC(0, rmutex_configure(url().c_str()));
}

void RedisTest::TearDown()
{
    /* Each ctest test runs in its own process; this only matters when the
     * binary is run by hand with several tests in one process. */
    rmutex_shutdown();
    /* On a shared server (RMUTEX_TEST_URL), remove what this test left:
     * fencing counters never expire by design. */
    if (!server_ && redis_) {
        std::string pattern = "*" + lock_name("") + "*";
        std::string cursor = "0";
        do {
            Reply r = redis_->cmd({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
            if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
                break;
            cursor = std::string(r->element[0]->str, r->element[0]->len);
            for (size_t i = 0; i < r->element[1]->elements; i++)
                redis_->cmd({"DEL", std::string(r->element[1]->element[i]->str, r->element[1]->element[i]->len)});
        } while (cursor != "0");
    }
}

std::string RedisTest::lock_name(const std::string &suffix)
{
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string("rmt:") + info->test_suite_name() + "." + info->name() + ":" +
           std::to_string(getpid()) + ":" + suffix;
}

std::string RedisTest::url_with(const std::string &options) const
{
    if (options.empty())
        return base_url_;
    return base_url_ + (base_url_.find('?') == std::string::npos ? "?" : "&") + options;
}

void init_mutex(rmutex_t *m, const std::string &name, int type, int robust, unsigned long lease_ms)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_settype(&a, type));
    ASSERT_EQ(0, rmutexattr_setrobust(&a, robust));
    ASSERT_EQ(0, rmutexattr_setlease(&a, lease_ms));
    ASSERT_EQ(0, rmutex_init(m, name.c_str(), &a)) << rmutex_detail();
    ASSERT_EQ(0, rmutexattr_destroy(&a));
}

} // namespace rmt
