/* tls.c -- TLS (OpenSSL 3) under conn.c's sockets, loaded on first use.
 *
 * DESIGN
 * ------
 * rmutex owns its sockets and uses hiredis only to parse replies, so TLS
 * is a layer between conn.c's buffers and the socket, and needs nothing
 * of hiredis.  OpenSSL is not linked in: the first TLS connection
 * dlopen()s libssl.so.3 and looks up the few functions used here, so that
 * a program -- and the preload shim -- that never names a rediss:// URL
 * needs no libssl, and one that does needs only the runtime package
 * (libssl3).  Headers give the types and constants; the calls go through
 * the table `ossl`.
 *
 * The socket is OpenSSL's through a BIO of ours, not its socket BIO:
 *   - writes are send(MSG_NOSIGNAL | MSG_DONTWAIT): a server gone away is
 *     an error, never a SIGPIPE that kills the program (a library must not
 *     ignore SIGPIPE for it);
 *   - reads are recv(MSG_DONTWAIT), except where conn.c asks to wait: its
 *     one-system-call read (a blocking recv bounded by the socket's
 *     receive timeout) works over TLS as over plain TCP.  Only the first
 *     recv of such a read may block: once bytes came, the rest of a record
 *     that is not there yet is "want read", and conn.c waits for it with
 *     its own deadline -- a record cut in two never stretches a wait past
 *     the caller's deadline.
 * So every wait stays in conn.c, bounded by its deadlines: the handshake
 * too (conn.c polls for what it wants until the connect deadline).
 *
 * Plaintext OpenSSL decrypted but nobody read yet is invisible to poll();
 * rm_tls_pending() says when there is some, and conn.c reads until there
 * is none before it lets anyone poll the socket (the multiplexer, the
 * watchdog, the topology watch).
 *
 * One context per process, made from the URL's options at the first
 * connection and kept while they stay the same (a new URL after
 * rmutex_shutdown with other files makes a new one).  Every connection
 * checks the server's certificate chain (cacert/capath, or the system's
 * store) and the name: the sni option or the host the address came from
 * (the URL's, or the one a cluster or Sentinel named), as a DNS name or an
 * IP address; SNI is sent for a name only (RFC 6066).  insecure=1 checks
 * nothing, and says so in the detail once per context.
 *
 * OpenSSL needs more stack than the 8 KiB rmutex promises to use of the
 * caller's (RMUTEX_STACK_NEED; loading it, a handshake, even a read): every
 * call into it goes through rm_bigstack_run(), which runs it on a stack
 * from the heap when the calling thread's own is small, and right there
 * otherwise (bigstack.c).
 *
 * Errors are sorted for conn.c: a lost connection (RM_E_UNSENT, retried
 * like any outage) or one that cannot work until someone changes a
 * configuration -- a certificate that fails the check, a refused client
 * certificate, a server that does not speak TLS -- EACCES, with the reason
 * in the detail; never a hang.
 *
 * Fork: a child never touches an SSL object of its parent's (conn.c
 * abandons them, as it does the plain connections): a write on it would
 * corrupt the parent's stream, a close_notify end it.  And OpenSSL does
 * not reset its own locks in a child (openssl/openssl#19066): a child
 * forked while a thread of the parent was inside OpenSSL, holding one,
 * hung at its first handshake.  So every call into OpenSSL from here goes
 * through a gate that counts it, and fork's prepare handler closes the gate
 * and waits for the count to fall to 0 (rm_tls_atfork, after every other
 * lock of the library): a fork waits for the calls in progress, which are
 * short -- all but a read that waits in recv() for a reply, and that one
 * leaves the gate for its recv (bio_read: OpenSSL holds no lock of its own
 * there).  A closed gate holds new calls back, so a stream of them cannot
 * hold a fork off.  A thread of the application's own inside OpenSSL at
 * the fork is not covered: a limit docs/tls.md states. */
#include "tls.h"
#include "bigstack.h"
#include "internal.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The functions used, looked up in libssl (and libcrypto, its dependency). */
#define RM_TLS_FUNCTIONS(X)                                                                    \
    X(OPENSSL_init_ssl) X(TLS_client_method) X(SSL_CTX_new) X(SSL_CTX_free) X(SSL_CTX_ctrl)    \
    X(SSL_CTX_set_options) X(SSL_CTX_set_verify) X(SSL_CTX_load_verify_locations)              \
    X(SSL_CTX_set_default_verify_paths) X(SSL_CTX_use_certificate_chain_file)                  \
    X(SSL_CTX_use_PrivateKey_file) X(SSL_CTX_check_private_key) X(SSL_new) X(SSL_free)         \
    X(SSL_set_bio) X(SSL_set1_host) X(SSL_get0_param) X(SSL_ctrl) X(SSL_connect)               \
    X(SSL_read_ex) X(SSL_write_ex) X(SSL_get_error) X(SSL_pending) X(SSL_get_verify_result)    \
    X(ERR_get_error) X(ERR_clear_error) X(ERR_reason_error_string)                             \
    X(X509_verify_cert_error_string) X(X509_VERIFY_PARAM_set1_ip_asc) X(BIO_meth_new)          \
    X(BIO_meth_set_write) X(BIO_meth_set_read) X(BIO_meth_set_ctrl) X(BIO_new)                 \
    X(BIO_set_data) X(BIO_get_data) X(BIO_set_init) X(BIO_set_flags) X(BIO_clear_flags)

/* The calls into OpenSSL in progress, and a fork waiting for them to end
 * (the DESIGN's gate: a count under a plain mutex, which a fork's prepare
 * handler keeps locked until the parent or the child lets go of it, as
 * every lock of the library; the child's only thread can unlock a plain
 * mutex, not a rwlock's write lock). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned calls;  /* threads inside OpenSSL through this file */
    int forking;     /* a fork waits for calls to be 0; no new one starts */
} gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

static void gate_enter(void)
{
    pthread_mutex_lock(&gate.mu);
    while (gate.forking) pthread_cond_wait(&gate.cv, &gate.mu);
    gate.calls++;
    pthread_mutex_unlock(&gate.mu);
}

static void gate_leave(void)
{
    pthread_mutex_lock(&gate.mu);
    if (--gate.calls == 0 && gate.forking) pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
}

static struct {
#define RM_TLS_POINTER(name) __typeof__(name) *name;
    RM_TLS_FUNCTIONS(RM_TLS_POINTER)
#undef RM_TLS_POINTER
} ossl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256]; /* "" once loaded */
static BIO_METHOD *bio_method;

struct rm_tls {
    SSL *ssl;
    int fd;
    int wait;  /* the next recv may block (see the top) */
    int heard; /* a byte came from the server */
    char name[256];
    char display[160];
};

/* ---- our BIO: the socket, without SIGPIPE, blocking only when asked ---- */

static int bio_write(BIO *b, const char *buf, int len)
{
    struct rm_tls *t = ossl.BIO_get_data(b);
    ossl.BIO_clear_flags(b, BIO_FLAGS_RWS | BIO_FLAGS_SHOULD_RETRY);
    for (;;) {
        ssize_t n = send(t->fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) return (int)n;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            ossl.BIO_set_flags(b, BIO_FLAGS_WRITE | BIO_FLAGS_SHOULD_RETRY);
        return -1;
    }
}

static int bio_read(BIO *b, char *buf, int len)
{
    struct rm_tls *t = ossl.BIO_get_data(b);
    ossl.BIO_clear_flags(b, BIO_FLAGS_RWS | BIO_FLAGS_SHOULD_RETRY);
    ssize_t n;
    if (t->wait) { /* it may block until the reply: a fork need not wait for it (DESIGN) */
        gate_leave();
        n = recv(t->fd, buf, (size_t)len, 0);
        int saved = errno;
        gate_enter();
        errno = saved;
    } else {
        n = recv(t->fd, buf, (size_t)len, MSG_DONTWAIT);
    }
    if (n > 0) {
        t->heard = 1;
        t->wait = 0; /* the rest of a record: conn.c waits for it */
        return (int)n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        t->wait = 0;
        ossl.BIO_set_flags(b, BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY);
    }
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    RM_UNUSED(b), RM_UNUSED(num), RM_UNUSED(ptr);
    return cmd == BIO_CTRL_FLUSH; /* nothing is buffered here */
}

/* ---- loading ---- */

static void load(void)
{
    void *lib = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(load_error, sizeof load_error, "TLS needs OpenSSL 3 (libssl.so.3): %s", dlerror());
        return;
    }
#define RM_TLS_LOOKUP(name)                                                                  \
    if (!(*(void **)&ossl.name = dlsym(lib, #name))) {                                      \
        snprintf(load_error, sizeof load_error, "TLS: libssl.so.3 has no %s", #name);       \
        return;                                                                             \
    }
    RM_TLS_FUNCTIONS(RM_TLS_LOOKUP)
#undef RM_TLS_LOOKUP
    /* No atexit clean-up: a thread of ours may still be inside OpenSSL
     * while the program exits. */
    ossl.OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT | OPENSSL_INIT_LOAD_SSL_STRINGS |
                              OPENSSL_INIT_LOAD_CRYPTO_STRINGS, NULL);
    bio_method = ossl.BIO_meth_new(BIO_TYPE_SOURCE_SINK | 0x7f, "rmutex socket");
    if (!bio_method || !ossl.BIO_meth_set_write(bio_method, bio_write) ||
        !ossl.BIO_meth_set_read(bio_method, bio_read) || !ossl.BIO_meth_set_ctrl(bio_method, bio_ctrl)) {
        snprintf(load_error, sizeof load_error, "TLS: cannot make a BIO method");
        return;
    }
    load_error[0] = 0;
}

/* The reason of OpenSSL's last error on this thread ("" if none). */
static const char *reason(unsigned long e)
{
    const char *s = e ? ossl.ERR_reason_error_string(e) : NULL;
    return s ? s : "";
}

/* ---- the context ---- */

static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static SSL_CTX *ctx;               /* the process's, for ctx_conf */
static struct rm_tls_conf ctx_conf; /* a copy of what made it */

static int same_text(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static int same_conf(const struct rm_tls_conf *a, const struct rm_tls_conf *b)
{
    return same_text(a->cacert, b->cacert) && same_text(a->capath, b->capath) &&
           same_text(a->cert, b->cert) && same_text(a->key, b->key) && a->insecure == b->insecure;
}

static void conf_free(struct rm_tls_conf *c)
{
    free(c->cacert), free(c->capath), free(c->cert), free(c->key);
    memset(c, 0, sizeof *c);
}

/* A new context for conf, or NULL with the detail set. */
static SSL_CTX *make_ctx(const struct rm_tls_conf *conf)
{
    ossl.ERR_clear_error();
    SSL_CTX *x = ossl.SSL_CTX_new(ossl.TLS_client_method());
    const char *step = "cannot make a context";
    if (!x) goto fail;
    ossl.SSL_CTX_ctrl(x, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
    ossl.SSL_CTX_ctrl(x, SSL_CTRL_MODE, SSL_MODE_ENABLE_PARTIAL_WRITE |
                      SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, NULL);
    /* An EOF without close_notify is a closed connection, as on TCP. */
    ossl.SSL_CTX_set_options(x, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    ossl.SSL_CTX_set_verify(x, conf->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    step = "cannot load the CA certificates (cacert, capath)";
    if (conf->cacert || conf->capath) {
        if (ossl.SSL_CTX_load_verify_locations(x, conf->cacert, conf->capath) != 1) goto fail;
    } else if (ossl.SSL_CTX_set_default_verify_paths(x) != 1) {
        step = "cannot load the system's CA certificates";
        goto fail;
    }
    if (conf->cert) {
        step = "cannot load the client certificate (cert)";
        if (ossl.SSL_CTX_use_certificate_chain_file(x, conf->cert) != 1) goto fail;
        step = "cannot load the client key (key)";
        if (ossl.SSL_CTX_use_PrivateKey_file(x, conf->key, SSL_FILETYPE_PEM) != 1) goto fail;
        step = "the key is not the client certificate's (cert, key)";
        if (ossl.SSL_CTX_check_private_key(x) != 1) goto fail;
    }
    if (conf->insecure)
        rm_detail("warning: insecure=1: TLS without checking the server's certificate or name");
    return x;
fail:
    rm_detail("TLS: %s: %s", step, reason(ossl.ERR_get_error()));
    if (x) ossl.SSL_CTX_free(x);
    return NULL;
}

/* A new SSL object on the context for conf: the one kept, or a new one if
 * the options changed.  SSL_new takes its own reference, so a replaced
 * context lives as long as its connections.  NULL with the detail set;
 * *bad: the options are at fault (EINVAL), not memory. */
static SSL *ssl_for(const struct rm_tls_conf *conf, int *bad)
{
    SSL *s = NULL;
    *bad = 0;
    pthread_mutex_lock(&ctx_mu);
    if (!ctx || !same_conf(conf, &ctx_conf)) {
        SSL_CTX *x = make_ctx(conf);
        struct rm_tls_conf copy = { .insecure = conf->insecure };
        int nomem = 0;
#define COPY(f) if (conf->f && !(copy.f = strdup(conf->f))) nomem = 1
        COPY(cacert); COPY(capath); COPY(cert); COPY(key);
#undef COPY
        if (!x || nomem) {
            if (x) ossl.SSL_CTX_free(x);
            conf_free(&copy);
            *bad = !x;
            if (nomem) rm_detail("out of memory");
            pthread_mutex_unlock(&ctx_mu);
            return NULL;
        }
        if (ctx) ossl.SSL_CTX_free(ctx);
        conf_free(&ctx_conf);
        ctx = x;
        ctx_conf = copy;
    }
    if (!(s = ossl.SSL_new(ctx))) rm_detail("out of memory (TLS)");
    pthread_mutex_unlock(&ctx_mu);
    return s;
}

static void tls_free(struct rm_tls *t);

static int ip_literal(const char *name)
{
    unsigned char ip[16];
    return inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
}

static int tls_new(const struct rm_server_addr *a, int fd, struct rm_tls **out)
{
    pthread_once(&load_once, load);
    if (load_error[0]) {
        rm_detail("%s", load_error);
        return EINVAL;
    }
    struct rm_tls *t = calloc(1, sizeof *t);
    if (!t) { rm_detail("out of memory"); return ENOMEM; }
    t->fd = fd;
    snprintf(t->name, sizeof t->name, "%s", a->tls->sni ? a->tls->sni : a->host);
    snprintf(t->display, sizeof t->display, "%s", a->display);
    int bad;
    BIO *bio = NULL;
    if (!(t->ssl = ssl_for(a->tls, &bad))) {
        free(t);
        return bad ? EINVAL : ENOMEM;
    }
    if (!(bio = ossl.BIO_new(bio_method))) goto nomem;
    ossl.BIO_set_data(bio, t);
    ossl.BIO_set_init(bio, 1);
    ossl.SSL_set_bio(t->ssl, bio, bio);
    int literal = ip_literal(t->name);
    if (!a->tls->insecure &&
        (literal ? ossl.X509_VERIFY_PARAM_set1_ip_asc(ossl.SSL_get0_param(t->ssl), t->name) != 1
                 : ossl.SSL_set1_host(t->ssl, t->name) != 1))
        goto nomem;
    if (!literal) /* SNI names a host, never an address (RFC 6066 3) */
        ossl.SSL_ctrl(t->ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, t->name);
    *out = t;
    return 0;
nomem:
    tls_free(t);
    rm_detail("out of memory (TLS)");
    return ENOMEM;
}

/* The detail when the server sent a fatal alert (reason why, error e):
 * it refused us. */
static void refused(const struct rm_tls *t, unsigned long e, int why)
{
    rm_detail("TLS: Redis at %s refused the connection: %s%s", t->display, reason(e),
              why == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED || why == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
                      why == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE
                  ? " (it wants a client certificate it trusts: cert= and key=)"
                  : "");
}

/* The detail and status of a failed handshake. */
static int handshake_failed(struct rm_tls *t, int err, int lost)
{
    unsigned long e = ossl.ERR_get_error();
    int why = e ? ERR_GET_REASON(e) : 0;
    long v = ossl.SSL_get_verify_result(t->ssl);
    if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN ||
        why == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        rm_detail("TLS handshake with Redis at %s: %s", t->display,
                  err == SSL_ERROR_SYSCALL && lost ? strerror(lost) : "connection closed");
        return RM_E_UNSENT;
    }
    if (v != X509_V_OK) {
        const char *hint = "";
        if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
            hint = " (sni= names the name to check)";
        else if (v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                 v == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN || v == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
                 v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT)
            hint = " (cacert= or capath= must name the CA that signed it)";
        rm_detail("TLS: certificate verify failed for Redis at %s: %s%s (verify error %ld, name "
                  "checked: %s)", t->display, ossl.X509_verify_cert_error_string(v), hint, v, t->name);
        return EACCES;
    }
    if (why >= SSL_AD_REASON_OFFSET) {
        refused(t, e, why);
        return EACCES;
    }
    if (why == SSL_R_WRONG_VERSION_NUMBER || why == SSL_R_PACKET_LENGTH_TOO_LONG ||
        why == SSL_R_HTTP_REQUEST) {
        rm_detail("TLS: Redis at %s does not speak TLS on that port (%s): use redis://, or the "
                  "server's tls-port", t->display, reason(e));
        return EACCES;
    }
    rm_detail("TLS handshake with Redis at %s failed: %s", t->display,
              e ? reason(e) : "unknown error");
    return EACCES;
}

static int handshake(struct rm_tls *t, short *want)
{
    t->wait = 0;
    ossl.ERR_clear_error();
    int r = ossl.SSL_connect(t->ssl);
    if (r == 1) return 0;
    int lost = errno, err = ossl.SSL_get_error(t->ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        *want = err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return EAGAIN;
    }
    return handshake_failed(t, err, lost);
}

int rm_tls_heard(const struct rm_tls *t) { return t->heard; }

/* What a failed read or write returns (see tls.h). */
static ssize_t io_failed(struct rm_tls *t, int r, short *want)
{
    int saved = errno, err = ossl.SSL_get_error(t->ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        *want = err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        errno = EAGAIN;
        return -1;
    }
    if (err == SSL_ERROR_ZERO_RETURN) return 0;
    if (err == SSL_ERROR_SYSCALL) {
        if (!saved) return 0; /* EOF */
        errno = saved;
        return -1;
    }
    unsigned long e = ossl.ERR_get_error();
    int why = e ? ERR_GET_REASON(e) : 0;
    if (why == SSL_R_UNEXPECTED_EOF_WHILE_READING) return 0;
    if (why >= SSL_AD_REASON_OFFSET) {
        /* TLS 1.3: a refused client certificate shows at the first read. */
        refused(t, e, why);
        errno = EACCES;
        return -1;
    }
    rm_detail("TLS with Redis at %s: %s", t->display, e ? reason(e) : "unknown error");
    errno = EPROTO;
    return -1;
}

static ssize_t tls_read(struct rm_tls *t, void *buf, size_t n, int wait, short *want)
{
    size_t got = 0;
    t->wait = wait;
    ossl.ERR_clear_error();
    int r = ossl.SSL_read_ex(t->ssl, buf, n, &got);
    t->wait = 0;
    return r == 1 ? (ssize_t)got : io_failed(t, r, want);
}

static ssize_t tls_write(struct rm_tls *t, const void *buf, size_t n, short *want)
{
    size_t put = 0;
    t->wait = 0;
    ossl.ERR_clear_error();
    int r = ossl.SSL_write_ex(t->ssl, buf, n, &put);
    return r == 1 ? (ssize_t)put : io_failed(t, r, want);
}

int rm_tls_pending(const struct rm_tls *t) { return ossl.SSL_pending(t->ssl) > 0; }

static void tls_free(struct rm_tls *t)
{
    if (!t) return;
    if (t->ssl) ossl.SSL_free(t->ssl); /* frees the BIO too; sends nothing */
    free(t);
}

/* ---- the calls, each where it has stack enough (bigstack.c) ---- */

struct call {
    enum { NEW, HANDSHAKE, READ, WRITE, FREE } op;
    const struct rm_server_addr *a;
    struct rm_tls *t, **out;
    int fd, wait;
    void *buf;
    size_t n;
    short *want;
    ssize_t r;
};

static void run(void *p)
{
    struct call *c = p;
    switch (c->op) {
    case NEW: c->r = tls_new(c->a, c->fd, c->out); break;
    case HANDSHAKE: c->r = handshake(c->t, c->want); break;
    case READ: c->r = tls_read(c->t, c->buf, c->n, c->wait, c->want); break;
    case WRITE: c->r = tls_write(c->t, c->buf, c->n, c->want); break;
    case FREE: tls_free(c->t); break;
    }
}

/* c's answer; without a stack to run it on, ENOMEM as an answer of its
 * kind (a status, or -1 and errno). */
static ssize_t call(struct call c)
{
    gate_enter();
    int no_stack = rm_bigstack_run(run, &c);
    gate_leave();
    if (!no_stack) return c.r;
    rm_detail("out of memory (TLS)");
    if (c.op == NEW || c.op == HANDSHAKE) return ENOMEM;
    errno = ENOMEM;
    return -1;
}

int rm_tls_new(const struct rm_server_addr *a, int fd, struct rm_tls **out)
{
    return (int)call((struct call){ .op = NEW, .a = a, .fd = fd, .out = out });
}

int rm_tls_handshake(struct rm_tls *t, short *want)
{
    return (int)call((struct call){ .op = HANDSHAKE, .t = t, .want = want });
}

ssize_t rm_tls_read(struct rm_tls *t, void *buf, size_t n, int wait, short *want)
{
    return call((struct call){ .op = READ, .t = t, .buf = buf, .n = n, .wait = wait, .want = want });
}

ssize_t rm_tls_write(struct rm_tls *t, const void *buf, size_t n, short *want)
{
    return call((struct call){ .op = WRITE, .t = t, .buf = (void *)buf, .n = n, .want = want });
}

void rm_tls_free(struct rm_tls *t)
{
    if (!t) return;
    gate_enter();
    if (rm_bigstack_run(run, &(struct call){ .op = FREE, .t = t }))
        tls_free(t); /* no memory for a stack: SSL_free needs little of it */
    gate_leave();
}

void rm_tls_atfork(int who)
{
    if (who < 0) { /* kept locked until the parent or the child goes on */
        pthread_mutex_lock(&gate.mu);
        gate.forking = 1;
        while (gate.calls) pthread_cond_wait(&gate.cv, &gate.mu);
        return;
    }
    gate.forking = 0;
    if (who == 0) {
        pthread_cond_broadcast(&gate.cv); /* the calls held back meanwhile */
    } else {
        gate.calls = 0; /* (it was; the parent's waiters are not here) */
        pthread_cond_init(&gate.cv, NULL);
    }
    pthread_mutex_unlock(&gate.mu);
}
