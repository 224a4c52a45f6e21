/* call.c -- script calls through the pool, shared by the lock algorithms.
 *
 * rm_call is the one round trip every acquire, release and force-unlock
 * makes.  rm_call_release adds the rule for releases: they are safe to
 * repeat (release.lua latches its first answer under the request id; the
 * fair script checks the owner and the acquisition), so a lost reply is
 * simply asked again, a bounded number of times within the caller's
 * deadline, and what is still unanswered then is handed to the watchdog,
 * which keeps trying until the hold's lease would have run out anyway. */
#include "call.h"
#include "conn.h"
#include "internal.h"
#include "endpoint.h"
#include "script.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>

int rm_call(struct rm_endpoint *ep, int script, int nkeys, int argc, const char *const *argv,
            const size_t *lens, rm_nsec deadline, int pool_flags, redisReply **out,
            struct rm_conn **keep)
{
    struct rm_conn *c;
    int r = rm_pool_get(&ep->pool, deadline, pool_flags, &c);
    if (r) return r;
    r = rm_script_call(c, script, nkeys, argc, argv, lens, deadline, out);
    if (!r && keep) {
        *keep = c;
        return 0;
    }
    /* An error reply leaves the connection usable; an I/O error does not. */
    rm_pool_put(&ep->pool, c, r >= 0 || r == RM_E_TRANSIENT);
    return r;
}

int rm_call_release(struct rm_endpoint *ep, int script, int nkeys, int argc,
                    const char *const *argv, const size_t *lens, rm_nsec deadline,
                    rm_nsec give_up_at, long long *answer)
{
    int unknown = 0;
    for (int tries = 0; tries < 4 && rm_clock_now() < deadline; tries++) {
        redisReply *reply;
        int r = rm_call(ep, script, nkeys, argc, argv, lens, deadline, 0, &reply, NULL);
        if (!r) {
            *answer = reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0;
            freeReplyObject(reply);
            if (unknown) RM_COUNT(indeterminate);
            return 0;
        }
        if (r == EINVAL) { /* WRONGTYPE: the key is not our lock any more */
            *answer = 0;
            return 0;
        }
        if (r > 0) return r;
        if (r == RM_E_LOST) unknown = 1;
    }
    rm_watchdog_defer(ep, script, nkeys, argc, argv, lens, give_up_at);
    rm_log("release of %s deferred to the watchdog: %s", argv[0], rmutex_detail());
    return RM_DEFERRED;
}

rm_nsec rm_call_deadline(void)
{
    return rm_clock_after(RM_MSEC(RM_SETTING(command_timeout_ms)));
}

int rm_call_unlock(struct rm_endpoint *ep, int script, int nkeys, int argc,
                   const char *const *argv, const size_t *lens, rm_nsec deadline,
                   rm_nsec give_up_at)
{
    long long released = 0;
    int r = rm_call_release(ep, script, nkeys, argc, argv, lens, deadline, give_up_at, &released);
    if (r == RM_DEFERRED) return 0;
    if (r) return r;
    if (released) return 0;
    rm_detail("%s is not held by this thread in Redis (its lease ran out, or it was "
              "force-unlocked)", argv[0]);
    return EPERM;
}

struct rm_ack rm_call_ack_want(unsigned known)
{
    unsigned n = RM_SETTING(replicas), floor = RM_SETTING(min_replicas);
    struct rm_ack a = { 0, 0, 0 };
    if (n == RM_REPLICAS_AUTO) {
        a.wait_for = known > floor ? known : floor;
        a.need = floor ? floor : known ? 1 : 0;
    } else {
        a.wait_for = a.need = n > floor ? n : floor;
    }
    return a;
}

void rm_call_ack_append(struct rm_conn *c, const struct rm_ack *a)
{
    char ns[16], ts[24];
    const char *argv[] = { "WAIT", ns, ts };
    size_t lens[] = { 4, (size_t)snprintf(ns, sizeof ns, "%u", a->wait_for),
                      (size_t)snprintf(ts, sizeof ts, "%lu", RM_SETTING(wait_timeout_ms)) };
    rm_conn_append(c, 3, argv, lens);
}

int rm_call_ack_read(struct rm_conn *c, struct rm_ack *a)
{
    /* WAIT answers after wait_timeout at the latest: read that long, plus
     * a command timeout for the round trip itself. */
    rm_nsec deadline = rm_clock_after(RM_MSEC(RM_SETTING(wait_timeout_ms)) +
                                      RM_MSEC(RM_SETTING(command_timeout_ms)));
    redisReply *reply;
    int r = rm_conn_read_slow(c, deadline, &reply);
    if (r) return r;
    a->acked = reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0;
    if (reply->type == REDIS_REPLY_ERROR) rm_conn_reply_status(reply);
    freeReplyObject(reply);
    if (a->acked < (long long)a->need) {
        RM_COUNT(replica_shortfalls);
        return 0;
    }
    return 1;
}

int rm_call_acknowledged(struct rm_endpoint *ep, struct rm_conn *c, struct rm_ack *a)
{
    int r = 1;
    if (a->wait_for) {
        rm_call_ack_append(c, a);
        r = rm_conn_flush(c, rm_call_deadline());
        if (!r) r = rm_call_ack_read(c, a);
    }
    /* A WAIT whose reply did not come is still pending on c: never reuse it. */
    rm_pool_put(&ep->pool, c, r >= 0);
    return r == 1 ? 0 : RMUTEX_ENOREPLICAS;
}

void rm_call_shortfall_detail(const struct rm_ack *a, const char *lock, int given_back)
{
    rm_detail("only %lld of the %u replica acknowledgements required (WAIT %u, %lu ms) came "
              "for the acquisition of %s; %s", a->acked, a->need, a->wait_for,
              RM_SETTING(wait_timeout_ms), lock,
              given_back == 0 ? "it was given back"
              : given_back == RM_DEFERRED ? "its give-back was handed to the watchdog"
                                          : "giving it back failed: it lapses with its lease");
}
