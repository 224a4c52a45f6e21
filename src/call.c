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
#include "ack.h"
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

int rm_call_acknowledged(struct rm_endpoint *ep, struct rm_conn *c, struct rm_ack *a)
{
    int r = 1;
    if (a->wait_for) {
        rm_ack_append(c, a);
        r = rm_conn_flush(c, rm_call_deadline());
        if (!r) r = rm_ack_read(c, a);
    }
    /* A WAIT whose reply did not come is still pending on c: never reuse it. */
    rm_pool_put(&ep->pool, c, r >= 0);
    return r == 1 ? 0 : RMUTEX_ENOREPLICAS;
}

