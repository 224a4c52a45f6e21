/* conn.c -- one connection to Redis.
 *
 * hiredis is used for what it is good at, parsing replies (redisReader);
 * the socket, the encoding of commands and every wait are ours, because
 * the library needs things hiredis 0.14's blocking context does not give:
 * a deadline per call (not a socket timeout set once), restarts after
 * EINTR, a non-blocking connect bounded by the caller's deadline, and
 * knowing whether a failed request was sent at all (an unsent request may
 * be retried freely; a sent one whose reply was lost is "indeterminate").
 *
 * A connection is used by one thread at a time and is thrown away after
 * any I/O error: a stream whose state is unknown is never reused.
 *
 * Waiting for a reply costs one system call, not two.  The socket is
 * non-blocking while it connects and blocking afterwards, with a receive
 * timeout (SO_RCVTIMEO) a margin short of the command timeout: a wait
 * whose deadline is at least that far off -- the usual one, a call bounded
 * by the command timeout -- is one recv() that sleeps until the reply
 * comes, instead of a poll() and then a recv().  Every other wait, and the
 * end of one whose recv() timed out, polls until the exact deadline as
 * before (SO_RCVTIMEO counts in scheduler ticks, so it is kept a margin
 * short of where it may end).  Everything else -- sends, and reads of what
 * is already there -- passes MSG_DONTWAIT and never blocks.
 *
 * TLS (rediss://, tls=1) sits between the buffers and the socket (tls.c):
 * get() and put() are recv() and send() or their TLS counterparts, and the
 * design above holds over both -- the one blocking read included, and
 * every wait in this file, the handshake's too (connect timeout).  What
 * TLS adds: plaintext decrypted but not yet read is invisible to poll(),
 * so every read here goes on until none is left (a caller may poll the
 * socket next: the multiplexer, the watchdog); a write may want to read
 * first; and the peek of rm_conn_usable reads records that carry no data
 * (a session ticket) instead of taking them for unexpected data.  Two
 * mistakes that would otherwise look like an outage, retried for ever, are
 * told apart by a second look when a dial fails: a plain-text server on a
 * TLS URL never answers the handshake (a plain PING on a new connection
 * gets an answer), and a TLS server resets a plain connection at once,
 * without a byte (it does it again, every time: three plain PINGs in a
 * row must be reset so, because a CLIENT KILL can reset a connection the
 * same way -- under a storm of kills one second look was fooled, and a
 * plain-text server was taken for a TLS port).  Both are EACCES, with the
 * reason.
 *
 * Nothing large lives on the caller's stack: the receive buffer belongs to
 * the connection, because the calling thread may have been created with a
 * PTHREAD_STACK_MIN (16 KiB) stack, of which the library promises to use
 * no more than 8 KiB (rmutex.h). */
#include "conn.h"
#include "internal.h"
#include "tls.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static rm_nsec io_deadline(rm_nsec deadline)
{
    return rm_clock_min(deadline, rm_clock_after(RM_MSEC(RM_SETTING(command_timeout_ms))));
}

/* Wait for ev on fd until deadline.  0 when ready, ETIMEDOUT, or errno. */
static int wait_fd(int fd, short ev, rm_nsec deadline)
{
    for (;;) {
        int ms = -1;
        if (deadline != RM_FOREVER) {
            rm_nsec left = deadline - rm_clock_now();
            if (left <= 0) return ETIMEDOUT;
            ms = (int)((left + 999999) / 1000000);
        }
        struct pollfd p = { fd, ev, 0 };
        int r = poll(&p, 1, ms);
        if (r > 0) return 0;
        if (r < 0 && errno != EINTR) return errno;
    }
}

/* recv() or TLS's read of up to n bytes into c->rbuf: n > 0, 0 at EOF, or
 * -1 with errno (EAGAIN: nothing now, wait for *want).  wait: the socket's
 * receive timeout may bound a blocking read. */
static ssize_t get(struct rm_conn *c, size_t n, int wait, short *want)
{
    ssize_t r;
    *want = POLLIN;
    if (c->tls) r = rm_tls_read(c->tls, c->rbuf, n, wait, want);
    else r = recv(c->fd, c->rbuf, n, wait ? 0 : MSG_DONTWAIT);
    if (r > 0) c->heard = 1;
    return r;
}

/* send() or TLS's write, never blocking: as get(). */
static ssize_t put(struct rm_conn *c, const char *p, size_t n, short *want)
{
    *want = POLLOUT;
    if (c->tls) return rm_tls_write(c->tls, p, n, want);
    return send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Plaintext inside TLS that poll() cannot see. */
static int pending(const struct rm_conn *c) { return c->tls && rm_tls_pending(c->tls); }

/* The detail of a failed read or write (n: its result), unless TLS set
 * one already (EACCES: refused, EPROTO); remembers a reset and a refusal. */
static void failed(struct rm_conn *c, const char *doing, ssize_t n)
{
    int e = n < 0 ? errno : 0;
    c->reset = e == ECONNRESET;
    c->refused = c->tls && e == EACCES;
    if (c->tls && (e == EACCES || e == EPROTO)) return;
    rm_detail("%s Redis: %s", doing, n < 0 ? strerror(e) : "connection closed");
}

static int reserve(struct rm_conn *c, size_t more)
{
    if (c->wlen + more <= c->wcap) return 0;
    size_t cap = c->wcap ? c->wcap : 256;
    while (cap < c->wlen + more) cap *= 2;
    char *b = realloc(c->wbuf, cap);
    if (!b) return -1;
    c->wbuf = b;
    c->wcap = cap;
    return 0;
}

size_t rm_conn_uint(char *buf, unsigned long long v)
{
    char tmp[RM_CONN_UINT], *end = tmp + sizeof tmp, *p = end;
    do *--p = (char)('0' + v % 10);
    while (v /= 10);
    size_t n = (size_t)(end - p);
    memcpy(buf, p, n);
    buf[n] = 0;
    return n;
}

/* "*<n>\r\n" or "$<n>\r\n": written by hand, because a command has a
 * dozen of them and sprintf costs as much as the rest of the call. */
static void put_header(struct rm_conn *c, char kind, size_t n)
{
    char *p = c->wbuf + c->wlen;
    *p++ = kind;
    p += rm_conn_uint(p, n);
    *p++ = '\r';
    *p++ = '\n';
    c->wlen = (size_t)(p - c->wbuf);
}

void rm_conn_append(struct rm_conn *c, int argc, const char *const *argv, const size_t *lens)
{
    size_t need = 24;
    for (int i = 0; i < argc; i++) need += lens[i] + 26;
    if (c->broken || reserve(c, need)) {
        c->broken = 1;
        return;
    }
    put_header(c, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        put_header(c, '$', lens[i]);
        memcpy(c->wbuf + c->wlen, argv[i], lens[i]);
        c->wlen += lens[i];
        c->wbuf[c->wlen++] = '\r';
        c->wbuf[c->wlen++] = '\n';
    }
}

int rm_conn_flush(struct rm_conn *c, rm_nsec deadline)
{
    size_t off = 0;
    if (c->broken) {
        rm_detail("out of memory building a command");
        return RM_E_UNSENT;
    }
    deadline = io_deadline(deadline);
    if (c->count_round_trips) RM_COUNT(round_trips);
    while (off < c->wlen) {
        short want;
        ssize_t n = put(c, c->wbuf + off, c->wlen - off, &want);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int r = wait_fd(c->fd, want, deadline);
            if (!r) continue;
            rm_detail("sending to Redis: %s", r == ETIMEDOUT ? "timed out" : strerror(r));
        } else {
            failed(c, "sending to", n);
        }
        c->wlen = 0;
        return off ? RM_E_LOST : RM_E_UNSENT;
    }
    c->wlen = 0;
    return 0;
}

int rm_conn_next_reply(struct rm_conn *c, redisReply **out)
{
    void *reply = NULL;
    if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
        rm_detail("protocol error from Redis: %s", c->reader->errstr);
        return RM_E_LOST;
    }
    if (!reply) return 0;
    *out = reply;
    return 1;
}

int rm_conn_read_available(struct rm_conn *c)
{
    for (;;) {
        short want;
        ssize_t n = get(c, RM_CONN_RBUF, 0, &want);
        if (n > 0) {
            if (redisReaderFeed(c->reader, c->rbuf, (size_t)n) != REDIS_OK) return RM_E_LOST;
            if ((size_t)n < RM_CONN_RBUF && !pending(c)) return 0;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        failed(c, "reading from", n);
        return RM_E_LOST;
    }
}

int rm_conn_read(struct rm_conn *c, rm_nsec deadline, redisReply **out)
{
    return rm_conn_read_slow(c, io_deadline(deadline), out);
}

/* Wait for more of a reply until deadline and feed it to the parser: a
 * blocking recv() when the socket's receive timeout ends before deadline
 * (it may end early: the caller then looks again), else poll and read.
 * Returns 0, or RM_E_LOST with the detail set. */
static int receive(struct rm_conn *c, rm_nsec deadline)
{
    short want = POLLIN;
    if (c->recv_wait && c->recv_wait <= deadline - rm_clock_now()) {
        ssize_t n = get(c, RM_CONN_RBUF, 1, &want);
        if (n > 0) {
            if (redisReaderFeed(c->reader, c->rbuf, (size_t)n) != REDIS_OK) return RM_E_LOST;
            return (size_t)n < RM_CONN_RBUF && !pending(c) ? 0 : rm_conn_read_available(c);
        }
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* Timed out, or TLS has half a record: wait below, to the
             * exact deadline, when the next blocking read would pass it. */
            if (want == POLLIN && c->recv_wait <= deadline - rm_clock_now()) return 0;
        } else {
            failed(c, "reading from", n);
            return RM_E_LOST;
        }
    }
    if (pending(c)) return rm_conn_read_available(c);
    int r = wait_fd(c->fd, want, deadline);
    if (r) {
        rm_detail("waiting for Redis's reply: %s", r == ETIMEDOUT ? "timed out" : strerror(r));
        return RM_E_LOST;
    }
    return rm_conn_read_available(c); /* (after POLLOUT: TLS writes, then reads) */
}

int rm_conn_read_slow(struct rm_conn *c, rm_nsec deadline, redisReply **out)
{
    for (;;) {
        int r = rm_conn_next_reply(c, out);
        if (r) return r > 0 ? 0 : r;
        if ((r = receive(c, deadline))) return r;
    }
}

int rm_conn_call(struct rm_conn *c, int argc, const char *const *argv, const size_t *lens,
                 rm_nsec deadline, redisReply **out)
{
    rm_conn_append(c, argc, argv, lens);
    int r = rm_conn_flush(c, deadline);
    return r ? r : rm_conn_read(c, deadline, out);
}

static int starts_with(const redisReply *r, const char *word)
{
    size_t n = strlen(word);
    return r->len >= n && !memcmp(r->str, word, n) && (r->len == n || r->str[n] == ' ');
}

int rm_conn_reply_is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && starts_with(r, "NOSCRIPT");
}

int rm_conn_reply_status(const redisReply *r)
{
    static const char *const transient[] = {
        "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "MOVED", "ASK", NULL,
    };
    if (r->type != REDIS_REPLY_ERROR) return 0;
    rm_detail("Redis answered: %.*s", (int)r->len, r->str);
    for (int i = 0; transient[i]; i++)
        if (starts_with(r, transient[i])) return RM_E_TRANSIENT;
    if (starts_with(r, "OOM")) return ENOMEM;
    if (starts_with(r, "READONLY")) return EROFS;
    if (starts_with(r, "NOPERM") || starts_with(r, "NOAUTH") || starts_with(r, "WRONGPASS") ||
        memmem(r->str, r->len, "can't run this command", 22) ||
        memmem(r->str, r->len, "no permissions to", 17))
        return EACCES; /* the last two: an ACL refusing a call inside a script */
    /* A script's redis.call() failing on a key of ours that holds something
     * else: the name collides with data that is not a lock. */
    if (memmem(r->str, r->len, "WRONGTYPE", 9) || memmem(r->str, r->len, "not an integer", 14))
        return EINVAL;
    return EIO;
}

/* Make c's socket blocking, with a receive timeout a margin short of the
 * command timeout (see the top of the file).  Without it (a command
 * timeout too short for the margin, or a failed call) c stays
 * non-blocking and every wait polls. */
static void block_with_timeout(struct rm_conn *c)
{
    rm_nsec t = RM_MSEC(RM_SETTING(command_timeout_ms));
    rm_nsec margin = rm_clock_max(t / 10, RM_MSEC(50));
    if (t <= 2 * margin) return;
    t -= margin;
    struct timeval tv = { (time_t)(t / 1000000000), (suseconds_t)(t % 1000000000 / 1000) };
    int fl = fcntl(c->fd, F_GETFL);
    if (fl < 0 || setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) ||
        fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK))
        return;
    c->recv_wait = t;
}

/* The run_id line of INFO server's reply, if it has one: the server's
 * identity for this run, new at every start (call.c tells a restart from
 * a lost reply with it). */
static void learn_run_id(struct rm_conn *c, const redisReply *r)
{
    c->run_id[0] = 0;
    if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) return;
    const char *p = memmem(r->str, r->len, "run_id:", 7);
    if (!p) return;
    p += 7;
    size_t n = 0;
    while (n < sizeof c->run_id - 1 && p + n < r->str + r->len && isxdigit((unsigned char)p[n])) n++;
    memcpy(c->run_id, p, n);
    c->run_id[n] = 0;
}

static int handshake(struct rm_conn *c, const struct rm_server_addr *a, const char *role,
                     rm_nsec deadline)
{
    const char *argv[4];
    size_t lens[4];
    int cmds = 0;
    char dbs[16], name[64];

    if (a->password) {
        int n = 0;
        argv[n++] = "AUTH";
        if (a->user) argv[n++] = a->user;
        argv[n++] = a->password;
        for (int i = 0; i < n; i++) lens[i] = strlen(argv[i]);
        rm_conn_append(c, n, argv, lens);
        cmds++;
    }
    if (a->db) {
        snprintf(dbs, sizeof dbs, "%d", a->db);
        argv[0] = "SELECT"; argv[1] = dbs;
        lens[0] = 6; lens[1] = strlen(dbs);
        rm_conn_append(c, 2, argv, lens);
        cmds++;
    }
    snprintf(name, sizeof name, "rmutex:%s:%d", role, (int)c->pid);
    argv[0] = "CLIENT"; argv[1] = "SETNAME"; argv[2] = name;
    lens[0] = 6; lens[1] = 7; lens[2] = strlen(name);
    rm_conn_append(c, 3, argv, lens);
    argv[0] = "INFO"; argv[1] = "server";
    lens[0] = 4; lens[1] = 6;
    rm_conn_append(c, 2, argv, lens);
    cmds += 2;

    int r = rm_conn_flush(c, deadline), status = 0;
    if (r && c->tls) rm_conn_read_available(c); /* the server's alert, if it sent one */
    if (r) return c->refused ? EACCES : RM_E_UNSENT;
    for (int i = 0; i < cmds; i++) {
        redisReply *reply;
        /* TLS 1.3: a client certificate refused shows here, at the first
         * read: a refusal, not an outage. */
        if (rm_conn_read(c, deadline, &reply)) return c->refused ? EACCES : RM_E_UNSENT;
        int last = i >= cmds - 2; /* SETNAME and INFO may be refused (ACL) */
        if (i == cmds - 1) learn_run_id(c, reply);
        int noauth = reply->type == REDIS_REPLY_ERROR && starts_with(reply, "NOAUTH");
        if (reply->type == REDIS_REPLY_ERROR && (!last || noauth) && !status) {
            /* AUTH or SELECT refused, or a password wanted and none given:
             * a configuration error, never retried away. */
            rm_detail("Redis at %s refused the login: %.*s", a->display, (int)reply->len, reply->str);
            status = starts_with(reply, "LOADING") ? RM_E_UNSENT
                   : (a->password && i == 0) || noauth || starts_with(reply, "NOPERM") ? EACCES
                   : EINVAL;
        }
        freeReplyObject(reply);
    }
    return status;
}

/* A socket connected to a before deadline, still non-blocking: 0 and *fd,
 * or RM_E_UNSENT with the detail set. */
static int open_socket(const struct rm_server_addr *a, rm_nsec deadline, int *fd)
{
    int s = socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) {
        rm_detail("cannot create a socket: %s", strerror(errno));
        return RM_E_UNSENT;
    }
    int r = connect(s, (const struct sockaddr *)&a->sa, a->salen);
    if (r < 0 && (errno == EINPROGRESS || errno == EINTR)) {
        /* Non-blocking: the connect goes on; wait for it to finish. */
        int e = wait_fd(s, POLLOUT, deadline);
        socklen_t len = sizeof r;
        if (!e && getsockopt(s, SOL_SOCKET, SO_ERROR, &r, &len) < 0) e = errno;
        if (!e && r) e = r;
        r = e ? -1 : 0;
        errno = e;
    }
    if (r < 0) {
        rm_detail("cannot connect to Redis at %s: %s", a->display,
                  errno == ETIMEDOUT ? "timed out" : strerror(errno));
        close(s);
        return RM_E_UNSENT;
    }
    if (a->sa.ss_family != AF_UNIX) {
        int one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    }
    *fd = s;
    return 0;
}

/* The second look of a failed dial (see the top): a plain PING to a on a
 * new connection before deadline.  Returns 1 if it was answered in RESP,
 * -1 if the connection was reset without a byte, 0 otherwise. */
static int plain_ping(const struct rm_server_addr *a, rm_nsec deadline)
{
    int fd, answer = 0;
    char detail[256], b = 0;
    snprintf(detail, sizeof detail, "%s", rmutex_detail()); /* the first failure's */
    if (open_socket(a, deadline, &fd)) goto out;
    if (send(fd, "PING\r\n", 6, MSG_NOSIGNAL | MSG_DONTWAIT) == 6 && !wait_fd(fd, POLLIN, deadline)) {
        ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
        answer = n == 1 && strchr("+-$*:", b) ? 1 : n < 0 && errno == ECONNRESET ? -1 : 0;
    }
    close(fd);
out:
    rm_detail("%s", detail);
    return answer;
}

/* TLS's handshake on c before deadline.  A server that has said nothing
 * at three quarters of the time is asked in plain text, in the last
 * quarter, whether it is a plain-text one. */
static int start_tls(struct rm_conn *c, const struct rm_server_addr *a, rm_nsec deadline)
{
    int r = rm_tls_new(a, c->fd, &c->tls);
    if (r) return r;
    rm_nsec now = rm_clock_now();
    rm_nsec quiet = deadline == RM_FOREVER ? RM_FOREVER : now + (deadline - now) / 4 * 3;
    for (;;) {
        short want;
        if ((r = rm_tls_handshake(c->tls, &want)) != EAGAIN) return r;
        int heard = rm_tls_heard(c->tls);
        if (!(r = wait_fd(c->fd, want, heard ? deadline : quiet))) continue;
        if (r == ETIMEDOUT && !heard && quiet < deadline) {
            if (plain_ping(a, deadline) > 0) {
                rm_detail("TLS: Redis at %s answers in plain text, not TLS: use redis://, or the "
                          "server's tls-port", a->display);
                return EACCES;
            }
            if (!(r = wait_fd(c->fd, want, deadline))) continue;
        }
        rm_detail("TLS handshake with Redis at %s: %s", a->display,
                  r == ETIMEDOUT ? "timed out" : strerror(r));
        return RM_E_UNSENT;
    }
}

int rm_conn_dial(const struct rm_server_addr *a, const char *role, rm_nsec deadline,
                 struct rm_conn **out)
{
    struct rm_conn *c = calloc(1, sizeof *c);
    if (!c) { rm_detail("out of memory"); return ENOMEM; }
    c->fd = -1;
    c->pid = getpid();
    snprintf(c->user, sizeof c->user, "%s", a->user ? a->user : "default");
    c->reader = redisReaderCreate();
    c->rbuf = malloc(RM_CONN_RBUF);
    if (!c->reader || !c->rbuf) {
        rm_conn_close(c);
        rm_detail("out of memory");
        return ENOMEM;
    }
    deadline = rm_clock_min(deadline, rm_clock_after(RM_MSEC(RM_SETTING(connect_timeout_ms))));
    int r = open_socket(a, deadline, &c->fd);
    if (!r && a->tls) r = start_tls(c, a, deadline);
    if (!r) {
        block_with_timeout(c);
        r = handshake(c, a, role, deadline);
        /* A plain connection reset before a byte came: a TLS port, if the
         * next three are too (a server that went down refuses them; one
         * killed by CLIENT KILL is reset so now and then, not every time). */
        if (r == RM_E_UNSENT && !a->tls && c->reset && !c->heard && plain_ping(a, deadline) < 0 &&
            plain_ping(a, deadline) < 0 && plain_ping(a, deadline) < 0) {
            rm_detail("Redis at %s resets plain-text connections: a TLS port? (use rediss://, or "
                      "tls=1)", a->display);
            r = EACCES;
        }
    }
    if (r) {
        rm_conn_close(c);
        return r;
    }
    rm_log("connected %s to %s (fd %d%s)", role, a->display, c->fd, c->tls ? ", TLS" : "");
    *out = c;
    return 0;
}

int rm_conn_usable(struct rm_conn *c)
{
    char b;
    /* TLS: records that carry no data (a session ticket) are read and
     * done with; a few at most, then the socket is empty. */
    for (int records = 0; records < 16; records++) {
        ssize_t n = pending(c) ? 1 : recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
        if (n > 0 && c->tls && !pending(c)) {
            short want;
            if ((n = rm_tls_read(c->tls, &b, 1, 0, &want)) < 0 && errno == EAGAIN) continue;
        }
        /* EOF (TLS: close_notify), a reset, or bytes nobody asked for (a
         * server's last words before it closed): the connection is done. */
        rm_log("connection fd %d to Redis %s before use", c->fd,
               n == 0 ? "was closed by the server" : n > 0 ? "has unexpected data" : "failed");
        return 0;
    }
    return 0;
}

void rm_conn_abandon(struct rm_conn *c)
{
    if (c && c->fd >= 0) close(c->fd);
}

void rm_conn_close(struct rm_conn *c)
{
    if (!c) return;
    rm_tls_free(c->tls);
    if (c->fd >= 0) close(c->fd);
    if (c->reader) redisReaderFree(c->reader);
    free(c->wbuf);
    free(c->rbuf);
    free(c);
}
