/* call.h -- one script call on a pooled connection, and releases that
 * must happen even when Redis does not answer in time. */
#ifndef RM_CALL_H
#define RM_CALL_H

#include <stddef.h>

#include "ack.h"
#include "clock.h"

struct rm_endpoint;
struct rm_conn;
struct redisReply;


/* The first element of an acquiring script's reply (acquire.lua, fair.lua). */
enum { RM_CALL_ACQUIRED = 0, RM_CALL_BUSY = 1, RM_CALL_NOTRECOVERABLE = 2 };

/* How long the not-recoverable mark lives in Redis: a day (ms). */
#define RM_CALL_NOTREC_MS "86400000"

/* A deadline one command timeout from now. */
rm_nsec rm_call_deadline(void);

/* Borrow a connection, call script id, give the connection back (or, when
 * keep is not NULL and the call succeeded, hand it to the caller, who
 * returns it with rm_pool_put).  Returns what rm_script_call returns, or
 * the pool's error. */
int rm_call(struct rm_endpoint *ep, int script, int nkeys, int argc, const char *const *argv,
            const size_t *lens, rm_nsec deadline, int pool_flags, struct redisReply **out,
            struct rm_conn **keep);

/* A release-type call (idempotent: latched or owner-checked): try until
 * deadline, and after that leave it to the watchdog until give_up_at.
 * Returns 0 with the integer Redis answered in *answer (0 for a lock key
 * that holds something else: not our lock any more), RM_DEFERRED, or the
 * errno of an error reply. */
int rm_call_release(struct rm_endpoint *ep, int script, int nkeys, int argc,
                    const char *const *argv, const size_t *lens, rm_nsec deadline,
                    rm_nsec give_up_at, long long *answer);

/* An unlock's release: rm_call_release, then what the caller returns --
 * 0 when Redis released it or the release was deferred, EPERM (with the
 * detail) when Redis says the caller did not hold KEYS[1], or the error. */
int rm_call_unlock(struct rm_endpoint *ep, int script, int nkeys, int argc,
                   const char *const *argv, const size_t *lens, rm_nsec deadline,
                   rm_nsec give_up_at);

/* After an acquiring call that succeeded on c (kept from rm_call on ep):
 * WAIT as a says, then give c back (closed if its WAIT reply never came).
 * Returns 0, or RMUTEX_ENOREPLICAS: the caller gives the hold back and
 * says so with rm_ack_shortfall_detail (given_back: the give-back's
 * result, 0, RM_DEFERRED or an error). */
int rm_call_acknowledged(struct rm_endpoint *ep, struct rm_conn *c, struct rm_ack *a);

#endif
