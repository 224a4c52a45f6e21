/* server.c -- the Redis server under the benchmark.
 *
 * Without a URL the benchmark starts its own redis-server: a free loopback
 * port (bind to port 0, read it back, close, hand it over; retried if the
 * server loses the race for it), a fresh temp dir, no persistence
 * (--save '' --appendonly no).  It also listens on TLS (W14), with a CA
 * and a certificate that openssl makes in the temp dir (no TLS if that
 * fails).  The server dies with us (PR_SET_PDEATHSIG)
 * and is stopped with SHUTDOWN NOSAVE at the end.  A given URL must point
 * at a loopback address or a unix socket: the benchmark sends traffic
 * nowhere else. */
#include "server.h"
#include "clock.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct server srv;

static void decode(const char *s, size_t n, char *out, size_t size)
{
    size_t j = 0;
    for (size_t i = 0; i < n && j + 1 < size; i++) {
        if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
            isxdigit((unsigned char)s[i + 2])) {
            char hex[3] = { s[i + 1], s[i + 2], 0 };
            out[j++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            out[j++] = s[i];
        }
    }
    out[j] = 0;
}

static int loopback(const char *host)
{
    if (!strcmp(host, "localhost") || !strcmp(host, "::1")) return 1;
    struct in_addr a;
    return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int server_use_url(const char *url)
{
    memset(&srv, 0, sizeof srv);
    const char *q = strchr(url, '?');
    size_t baselen = q ? (size_t)(q - url) : strlen(url);
    if (baselen >= sizeof srv.base) return -1;
    memcpy(srv.base, url, baselen);
    srv.base[baselen] = 0;
    if (q) snprintf(srv.query, sizeof srv.query, "%s", q + 1);
    int is_unix = !strncmp(srv.base, "unix://", 7);
    if (!is_unix && strncmp(srv.base, "redis://", 8)) {
        fprintf(stderr, "bench: only redis:// and unix:// URLs\n");
        return -1;
    }
    const char *p = srv.base + (is_unix ? 7 : 8);
    const char *at = strchr(p, '@');
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon) {
            decode(p, (size_t)(colon - p), srv.user, sizeof srv.user);
            decode(colon + 1, (size_t)(at - colon - 1), srv.pass, sizeof srv.pass);
        } else {
            decode(p, (size_t)(at - p), srv.pass, sizeof srv.pass);
        }
        p = at + 1;
    }
    if (is_unix) {
        snprintf(srv.sock, sizeof srv.sock, "%.*s", (int)sizeof srv.sock - 1, p);
        const char *d = strstr(srv.query, "db=");
        if (d && (d == srv.query || d[-1] == '&')) srv.db = atoi(d + 3);
        return 0;
    }
    const char *end;
    if (*p == '[') {
        end = strchr(p, ']');
        if (!end) return -1;
        snprintf(srv.host, sizeof srv.host, "%.*s", (int)(end - p - 1), p + 1);
        end++;
    } else {
        end = p + strcspn(p, ":/");
        snprintf(srv.host, sizeof srv.host, "%.*s", (int)(end - p), p);
    }
    srv.port = 6379;
    if (*end == ':') srv.port = atoi(end + 1);
    const char *slash = strchr(end, '/');
    if (slash) srv.db = atoi(slash + 1);
    if (!loopback(srv.host)) {
        fprintf(stderr, "bench: %s is not a loopback address; the benchmark only talks to "
                        "127.0.0.1, ::1 or a unix socket\n", srv.host);
        return -1;
    }
    return 0;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    int port = -1;
    if (!bind(fd, (struct sockaddr *)&a, sizeof a) && !getsockname(fd, (struct sockaddr *)&a, &len))
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static redisContext *dial(int quiet)
{
    struct timeval tv = { 2, 0 };
    redisContext *c = srv.sock[0] ? redisConnectUnixWithTimeout(srv.sock, tv)
                                  : redisConnectWithTimeout(srv.host, srv.port, tv);
    if (!c || c->err) {
        if (!quiet) fprintf(stderr, "bench: cannot connect: %s\n", c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return NULL;
    }
    struct timeval cmd_tv = { 60, 0 };
    redisSetTimeout(c, cmd_tv);
    return c;
}

redisContext *server_connect(void)
{
    redisContext *c = dial(0);
    if (!c) return NULL;
    redisReply *r = NULL;
    if (srv.pass[0]) {
        r = srv.user[0] ? redisCommand(c, "AUTH %s %s", srv.user, srv.pass)
                        : redisCommand(c, "AUTH %s", srv.pass);
        if (!r || r->type == REDIS_REPLY_ERROR) goto fail;
        freeReplyObject(r);
    }
    if (srv.db) {
        r = redisCommand(c, "SELECT %d", srv.db);
        if (!r || r->type == REDIS_REPLY_ERROR) goto fail;
        freeReplyObject(r);
    }
    return c;
fail:
    fprintf(stderr, "bench: AUTH/SELECT failed: %s\n", r ? r->str : c->errstr);
    if (r) freeReplyObject(r);
    redisFree(c);
    return NULL;
}

/* A CA and a server certificate for 127.0.0.1 in srv.dir: 0 or -1. */
static int make_certs(void)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && exec >openssl.log 2>&1 && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
             "-subj /CN=bench-ca -keyout ca.key -out ca.crt && "
             "printf '[s]\nsubjectAltName=IP:127.0.0.1\n' >ext.cnf && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=bench "
             "-keyout tls.key -out tls.csr && "
             "openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
             "-extfile ext.cnf -extensions s -out tls.crt", srv.dir);
    if (system(cmd) != 0) return -1;
    snprintf(srv.ca, sizeof srv.ca, "%s/ca.crt", srv.dir);
    return 0;
}

static int try_start(const char *binary)
{
    srv.port = free_port();
    srv.tls_port = srv.ca[0] ? free_port() : 0;
    if (srv.port < 0 || srv.tls_port < 0 || srv.tls_port == srv.port) return -1;
    char port[16], tport[16], logf[300], crt[300], key[300];
    snprintf(port, sizeof port, "%d", srv.port);
    snprintf(tport, sizeof tport, "%d", srv.tls_port);
    snprintf(logf, sizeof logf, "%s/redis.log", srv.dir);
    snprintf(crt, sizeof crt, "%s/tls.crt", srv.dir);
    snprintf(key, sizeof key, "%s/tls.key", srv.dir);
    const char *argv[] = { binary, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly",
                           "no", "--dir", srv.dir, "--logfile", logf, "--daemonize", "no", "--maxclients",
                           "10000", "--tls-port", tport, "--tls-cert-file", crt, "--tls-key-file", key,
                           "--tls-ca-cert-file", srv.ca, "--tls-auth-clients", "no", NULL };
    if (!srv.tls_port) argv[17] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1);
        execvp(binary, (char *const *)argv);
        _exit(127);
    }
    srv.pid = pid;
    srv.owner = parent;
    for (int64_t until = now_ns() + 5000000000LL; now_ns() < until; sleep_ns(20000000)) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            srv.pid = 0;
            return -1;
        }
        redisContext *c = dial(1);
        if (!c) continue;
        redisReply *r = redisCommand(c, "PING");
        int ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        redisFree(c);
        if (ok) return 0;
    }
    server_stop();
    return -1;
}

int server_start(const char *binary)
{
    memset(&srv, 0, sizeof srv);
    const char *tmp = getenv("TMPDIR");
    snprintf(srv.dir, sizeof srv.dir, "%s/rmutex-bench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(srv.dir)) {
        perror("bench: mkdtemp");
        return -1;
    }
    snprintf(srv.host, sizeof srv.host, "127.0.0.1");
    if (make_certs()) fprintf(stderr, "bench: openssl made no certificate: no TLS (W14)\n");
    for (int i = 0; i < 5; i++) {
        if (!try_start(binary)) {
            snprintf(srv.base, sizeof srv.base, "redis://127.0.0.1:%d", srv.port);
            return 0;
        }
    }
    fprintf(stderr, "bench: could not start %s (see %s/redis.log)\n", binary, srv.dir);
    return -1;
}

void server_stop(void)
{
    if (!srv.pid || srv.owner != getpid()) return;
    redisContext *c = dial(1);
    if (c) {
        redisReply *r = redisCommand(c, "SHUTDOWN NOSAVE");
        if (r) freeReplyObject(r);
        redisFree(c);
    }
    int status;
    for (int i = 0; i < 100 && waitpid(srv.pid, &status, WNOHANG) == 0; i++) sleep_ns(20000000);
    if (waitpid(srv.pid, &status, WNOHANG) == 0) {
        kill(srv.pid, SIGKILL);
        waitpid(srv.pid, &status, 0);
    }
    srv.pid = 0;
    char f[300];
    snprintf(f, sizeof f, "%s/redis.log", srv.dir);
    unlink(f);
    snprintf(f, sizeof f, "%s/dump.rdb", srv.dir);
    unlink(f);
    static const char *const made[] = { "ca.crt", "ca.key", "ca.srl", "ext.cnf", "tls.csr",
                                        "tls.crt", "tls.key", "openssl.log" };
    for (size_t i = 0; i < sizeof made / sizeof *made; i++) {
        snprintf(f, sizeof f, "%s/%s", srv.dir, made[i]);
        unlink(f);
    }
    rmdir(srv.dir);
}

void server_url(const char *opts, char *out, size_t n)
{
    const char *sep1 = srv.query[0] || (opts && opts[0]) ? "?" : "";
    const char *sep2 = srv.query[0] && opts && opts[0] ? "&" : "";
    snprintf(out, n, "%s%s%s%s%s", srv.base, sep1, srv.query, sep2, opts ? opts : "");
}

static redisReply *checked(redisContext *c, redisReply *r, const char *what)
{
    if (!r) {
        fprintf(stderr, "bench: %s: %s\n", what, c->errstr);
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "bench: %s: %s\n", what, r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

redisReply *rcmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    return checked(c, r, fmt);
}

redisReply *rcmd_argv(redisContext *c, int argc, const char **argv, const size_t *lens)
{
    return checked(c, redisCommandArgv(c, argc, argv, lens), argv[0]);
}

long long rcmd_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = checked(c, redisvCommand(c, fmt, ap), fmt);
    va_end(ap);
    if (!r) return -1;
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

double info_field(redisContext *c, const char *section, const char *field)
{
    redisReply *r = rcmd(c, "INFO %s", section);
    if (!r) return NAN;
    double v = NAN;
    size_t fl = strlen(field);
    for (const char *p = r->str; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, field, fl) && p[fl] == ':') {
            v = strtod(p + fl + 1, NULL);
            break;
        }
    }
    freeReplyObject(r);
    return v;
}

int server_benchmark_args(const char **argv, int max)
{
    static char port[16], db[16];
    int n = 0;
    if (max < 12) return 0;
    if (srv.sock[0]) {
        argv[n++] = "-s";
        argv[n++] = srv.sock;
    } else {
        snprintf(port, sizeof port, "%d", srv.port);
        argv[n++] = "-h";
        argv[n++] = srv.host;
        argv[n++] = "-p";
        argv[n++] = port;
    }
    if (srv.pass[0]) {
        if (srv.user[0]) {
            argv[n++] = "--user";
            argv[n++] = srv.user;
        }
        argv[n++] = "--no-auth-warning";
        argv[n++] = "-a";
        argv[n++] = srv.pass;
    }
    if (srv.db) {
        snprintf(db, sizeof db, "%d", srv.db);
        argv[n++] = "--dbnum";
        argv[n++] = db;
    }
    return n;
}
