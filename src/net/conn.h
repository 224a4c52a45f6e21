/* conn.h -- one connection to Redis: a socket, a RESP encoder and hiredis's
 * reply parser, with every wait bounded by a deadline. */
#ifndef RM_CONN_H
#define RM_CONN_H

#include <stddef.h>
#include <sys/types.h>

#include "clock.h"
#include "config.h"

struct redisReply;
struct redisReader;
struct rm_tls;

enum { RM_CONN_RBUF = 16384 };

struct rm_conn {
    int fd;
    struct rm_tls *tls;    /* NULL: plain TCP or a unix socket */
    struct redisReader *reader;
    char *wbuf;
    size_t wlen, wcap;
    char *rbuf;            /* RM_CONN_RBUF bytes: recv() lands here */
    int broken;            /* an append ran out of memory */
    rm_nsec recv_wait;     /* the socket's receive timeout; 0: none, never block */
    int count_round_trips; /* a calling thread's connection: count in stats */
    int heard;             /* a byte of a reply came */
    int reset;             /* the last read failed with ECONNRESET */
    int refused;           /* the last read failed on a TLS alert: the server refused us */
    pid_t pid;             /* the process that dialled it */
    char user[33];         /* the user it logged in as, for details ("default": none given) */
    char run_id[41];       /* the server's run_id (INFO server), "" if it would not say */
    struct rm_conn *next, *prev; /* the owner's list of every connection */
    struct rm_conn *idle_next;   /* the pool's idle stack */
    int spare;                   /* the pool's: lent as a spare (RM_POOL_SPARE) */
};

/* Who is told whether a dial reached the server: the endpoint, which
 * tracks outages (endpoint.c).  Pool, multiplexer and watchdog dial; none
 * of them knows the endpoint. */
struct rm_reach {
    void (*fn)(void *arg, int ok);
    void *arg;
};

/* Connect to a (over TLS when a->tls says so), log in (AUTH, SELECT), name
 * the connection "rmutex:<role>:<pid>" and learn the server's run_id, all
 * in one round trip before deadline (and within the connect timeout).
 * Returns 0 and *out; RM_E_UNSENT when the server cannot be reached in
 * time; EACCES when it refuses the credentials, or TLS cannot be had with
 * it (a certificate that fails the check, a client certificate refused, a
 * plain-text server on a TLS URL or the reverse); EINVAL when TLS's files
 * are unusable; ENOMEM. */
int rm_conn_dial(const struct rm_server_addr *a, const char *role, rm_nsec deadline,
                 struct rm_conn **out);

/* 1 if c can carry a request: the server has not closed it (or reset it)
 * and nothing unasked-for waits on it.  One non-blocking peek, no I/O
 * wait.  A pooled connection is looked at before each use, so that a
 * request is never written to a connection the server had already closed
 * (a restart): such a request provably never ran. */
int rm_conn_usable(struct rm_conn *c);

/* Close the socket and free c.  Sends nothing (no TLS close_notify). */
void rm_conn_close(struct rm_conn *c);

/* A forked child's share of its parent's connection: close the socket,
 * free nothing -- a parent thread that does not exist here may have been
 * in the middle of reading into c's reply parser or growing its buffer,
 * and freeing that state can free what was never allocated.  (A few
 * kilobytes per connection, once per fork.)  A TLS session is left alone
 * too: a word from the child on it (a close_notify, a request) would end
 * or corrupt the parent's stream. */
void rm_conn_abandon(struct rm_conn *c);

/* Queue one command.  Nothing is sent until rm_conn_flush(). */
void rm_conn_append(struct rm_conn *c, int argc, const char *const *argv, const size_t *lens);

/* Send everything queued.  Returns 0; RM_E_UNSENT if nothing was written;
 * RM_E_LOST if part was.  The I/O deadline is the earlier of deadline and
 * the command timeout. */
int rm_conn_flush(struct rm_conn *c, rm_nsec deadline);

/* Read the next reply into *out (freed with freeReplyObject).  Error
 * replies are replies.  Returns 0 or RM_E_LOST (timeout, EOF, protocol). */
int rm_conn_read(struct rm_conn *c, rm_nsec deadline, struct redisReply **out);

/* rm_conn_read for a command that is meant to take long (WAIT): deadline
 * is not cut to the command timeout. */
int rm_conn_read_slow(struct rm_conn *c, rm_nsec deadline, struct redisReply **out);

/* v in decimal at buf (RM_CONN_UINT bytes at least), NUL-terminated;
 * returns its length.  For the numbers of a command's arguments, which
 * are built on every call: snprintf costs far more. */
enum { RM_CONN_UINT = 24 };
size_t rm_conn_uint(char *buf, unsigned long long v);

/* rm_conn_append + rm_conn_flush + rm_conn_read. */
int rm_conn_call(struct rm_conn *c, int argc, const char *const *argv, const size_t *lens,
                 rm_nsec deadline, struct redisReply **out);


/* Read what the socket has without blocking and feed it to the parser.
 * Returns 0, or RM_E_LOST on EOF or error. */
int rm_conn_read_available(struct rm_conn *c);

/* Take the next complete reply already parsed, if any: 1 and *out, 0 if
 * none, RM_E_LOST on a protocol error. */
int rm_conn_next_reply(struct rm_conn *c, struct redisReply **out);

/* Classify a reply: 0 unless it is an error; then the internal status
 * (RM_E_TRANSIENT, or a public errno) with the detail set to its text. */
int rm_conn_reply_status(const struct redisReply *r);

/* 1 if r is the error reply "NOSCRIPT ...". */
int rm_conn_reply_is_noscript(const struct redisReply *r);

#endif
