/* server.cc -- a private redis-server for the tests.  See server.h. */
#include "server.h"
#include "child.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

namespace rmt {

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

} // namespace rmt
