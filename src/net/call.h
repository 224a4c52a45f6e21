/* call.h -- one script call on a pooled connection, and releases that
 * must happen even when Redis does not answer in time. */
#ifndef RM_CALL_H
#define RM_CALL_H

#include <stddef.h>

#include "ack.h"
#include "clock.h"

struct rm_endpoint;
struct rm_conn;
struct rm_node;
struct redisReply;


/* The first element of an acquiring script's reply (acquire.lua, fair.lua);
 * and, beside them, what the client makes of an acquisition too few
 * replicas acknowledged (it gives it back: RMUTEX_ENOREPLICAS). */
enum { RM_CALL_ACQUIRED = 0, RM_CALL_BUSY = 1, RM_CALL_NOTRECOVERABLE = 2, RM_CALL_SHORTFALL = 3 };

/* How long the not-recoverable mark lives in Redis: a day (ms). */
#define RM_CALL_NOTREC_MS "86400000"

/* A deadline one command timeout from now. */
rm_nsec rm_call_deadline(void);

/* A call follows at most this many MOVED/ASK redirections. */
#define RM_CALL_HOPS 5

/* How long a call waits for a refreshed cluster map after its node could
 * not be reached (the caller's own backoff follows). */
#define RM_CALL_REROUTE_WAIT RM_MSEC(300)

/* Call script id on the node that serves argv[0] (KEYS[1]): borrow a
 * connection there, follow MOVED and ASK, give the connection back.  With
 * ack, an answer that says the lock was acquired (first element
 * RM_CALL_ACQUIRED) is followed by WAIT as the settings want, and *ack
 * says how many replicas acknowledged (rm_ack_short).  Returns what
 * rm_script_call returns, or the pool's or the routing's error. */
int rm_call(struct rm_endpoint *ep, int script, int nkeys, int argc, const char *const *argv,
            const size_t *lens, rm_nsec deadline, int pool_flags, struct redisReply **out,
            struct rm_ack *ack);

/* A call sent and not yet answered (rm_call_send). */
struct rm_call_sent {
    struct rm_node *node;
    struct rm_conn *conn;
};

/* Send a call of script to the node that serves argv[0], and return
 * without its reply, so that the calling thread can make another call
 * while this one is on its way (two round trips in the time of one).  One
 * try: no redirection followed, and only a spare connection of the pool
 * is used (RM_POOL_SPARE: never one the other call would have to wait
 * for).  0: read the reply with rm_call_collect, which gives the
 * connection back; else nothing was sent or it may have been (the caller
 * makes the call the usual way, so the script must be safe to repeat). */
int rm_call_send(struct rm_endpoint *ep, int script, int nkeys, int argc, const char *const *argv,
                 const size_t *lens, rm_nsec deadline, struct rm_call_sent *sent);

/* The reply of a sent call: 0 and *out (freeReplyObject).  Else (no reply
 * by deadline, or an error reply: NOSCRIPT, a cluster's redirection) a
 * negative status, and the call may or may not have run. */
int rm_call_collect(struct rm_call_sent *sent, rm_nsec deadline, struct redisReply **out);

/* A call that is safe to make again (it reads, or doing it twice does no
 * harm -- a token skipped, a force-unlock of what is already free): up to
 * three tries within one command timeout, a try that was not sent or
 * whose reply was lost made again (after a short pause when Redis said
 * TRYAGAIN or alike).  Returns 0 with the reply in *out (freeReplyObject),
 * an error reply's errno, or ETIMEDOUT (with the detail) when no try was
 * answered in time. */
int rm_call_retried(struct rm_endpoint *ep, int script, int nkeys, int argc,
                    const char *const *argv, const size_t *lens, struct redisReply **out);

/* Where rm_call_release hands what it could not finish: fn calls script
 * in the background until it answers or give_up_at (rm_watchdog_defer;
 * argv is copied).  Set once at start (runtime.c). */
typedef void (*rm_call_deferrer)(struct rm_endpoint *ep, int script, int nkeys, int argc,
                                 const char *const *argv, const size_t *lens, rm_nsec give_up_at);
void rm_call_set_deferrer(rm_call_deferrer fn);

/* A release-type call (idempotent: it names the acquisition it ends): try until
 * deadline, and after that leave it to the watchdog until known_good (when
 * the hold's lease runs out at the latest).  A retry that finds the hold
 * gone after a try whose reply was lost answers "released" only when that
 * try reached the same server incarnation while the hold was known good
 * (see call.c).  Returns 0 with the integer Redis answered in *answer (0
 * for a lock key that holds something else: not our lock any more; 1 for
 * a text, below),
 * RM_DEFERRED, or the errno of an error reply. */
int rm_call_release(struct rm_endpoint *ep, int script, int nkeys, int argc,
                    const char *const *argv, const size_t *lens, rm_nsec deadline,
                    rm_nsec known_good, long long *answer);

/* A release that hands the lock to a thread of the caller's own process
 * may answer, instead of 1, the text of the message it published to that
 * thread (fair.lua); rm_call_unlock_said passes it to fn(arg, text, len)
 * as soon as it is read, the others take it for 1. */
struct rm_call_said {
    void (*fn)(void *arg, const char *text, size_t len);
    void *arg;
};

/* An unlock's release: rm_call_release, then what the caller returns --
 * 0 when Redis released it (or, the release deferred, while the hold is
 * still known good), RM_E_GONE (with the detail) when Redis says the
 * caller did not hold KEYS[1] or its lease ran out unreleased, or the
 * error. */
int rm_call_unlock(struct rm_endpoint *ep, int script, int nkeys, int argc,
                   const char *const *argv, const size_t *lens, rm_nsec deadline,
                   rm_nsec known_good);

/* The same, telling said of the text a release answered (above). */
int rm_call_unlock_said(struct rm_endpoint *ep, int script, int nkeys, int argc,
                        const char *const *argv, const size_t *lens, rm_nsec deadline,
                        rm_nsec known_good, const struct rm_call_said *said);

/* The same, for a hold whose lease the watchdog may go on renewing while
 * the release waits (a process's read lease, kept by its other readers):
 * a deferred release asks known_good_now(arg) how long the hold is known
 * good now, rather than trusting known_good from before the wait. */
int rm_call_unlock_live(struct rm_endpoint *ep, int script, int nkeys, int argc,
                        const char *const *argv, const size_t *lens, rm_nsec deadline,
                        rm_nsec known_good, rm_nsec (*known_good_now)(void *), void *arg);

#endif
