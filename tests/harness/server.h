/* server.h -- a private redis-server for the tests (part of harness.h).
 *
 * RedisServer starts redis-server on a free loopback port, in a mktemp -d
 * directory, without persistence, and can stop, kill -9 and restart it on
 * the same port.  RMUTEX_TEST_REDIS_SERVER names the binary (default:
 * redis-server from PATH).  The directory (with the server's log) is kept
 * when the test failed, removed otherwise.  RMUTEX_TEST_TLS=1: each also
 * listens on a TLS port, with certificates the program makes once
 * (tls_files()), and url() names that port (rediss://, client certificate
 * and all); the tests' own Redis client stays on the plain port. */
#ifndef RMUTEX_TEST_HARNESS_SERVER_H
#define RMUTEX_TEST_HARNESS_SERVER_H

#include "timing.h"

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace rmt {

/* A port on 127.0.0.1 that nothing listens on right now. */
int free_port();

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

} // namespace rmt

#endif
