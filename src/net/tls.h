/* tls.h -- TLS on one of conn.c's sockets, with OpenSSL loaded at the first
 * use.  conn.c does every wait; these calls never block but where asked. */
#ifndef RM_TLS_H
#define RM_TLS_H

#include <sys/types.h>

#include "url.h"

struct rm_tls;

/* A TLS session for the connected socket fd to a (a->tls set), before its
 * handshake.  Loads OpenSSL and makes the process's context for a->tls on
 * first use.  Returns 0 and *out; EINVAL when OpenSSL is missing or the
 * configured files are unusable (a bad PEM, a key that is not the
 * certificate's); ENOMEM; the detail says which. */
int rm_tls_new(const struct rm_server_addr *a, int fd, struct rm_tls **out);

/* One step of the handshake.  Returns 0 when done; EAGAIN with *want
 * (POLLIN or POLLOUT) to wait for; RM_E_UNSENT when the connection was
 * lost; EACCES when it cannot be trusted or was refused (the server's
 * certificate failed the check -- the reason is in the detail -- or the
 * server refused ours, or it does not speak TLS). */
int rm_tls_handshake(struct rm_tls *t, short *want);

/* 1 once a byte came from the server on t's socket. */
int rm_tls_heard(const struct rm_tls *t);

/* Up to n bytes of plaintext into buf.  wait: the socket's recv may block
 * (its receive timeout bounds it).  Returns n > 0; 0 when the server
 * closed (close_notify, or EOF); -1 with errno EAGAIN (nothing now: wait
 * for *want), EACCES (the server refused us: a TLS alert; the detail set),
 * EPROTO (any other TLS failure; the detail set) or a socket's errno. */
ssize_t rm_tls_read(struct rm_tls *t, void *buf, size_t n, int wait, short *want);

/* Write up to n bytes (at least one record, or nothing): as rm_tls_read.
 * After EAGAIN the next call must offer the same bytes again. */
ssize_t rm_tls_write(struct rm_tls *t, const void *buf, size_t n, short *want);

/* 1 if plaintext waits inside OpenSSL: a poll() of the socket would not
 * see it. */
int rm_tls_pending(const struct rm_tls *t);

/* Free t without a word to the server (no close_notify): the caller
 * closes the socket. */
void rm_tls_free(struct rm_tls *t);

/* fork(): -1 prepare (wait until no thread of this process is inside
 * OpenSSL through this file, and keep it so), 0 parent, 1 child (let go).
 * Last of the library's locks: a thread inside OpenSSL holds none of
 * those, but one holding them may be on its way in. */
void rm_tls_atfork(int who);

#endif
