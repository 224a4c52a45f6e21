/* call.c -- script calls through the pool, shared by the lock algorithms.
 *
 * rm_call is the one round trip every acquire, release and force-unlock
 * makes.  rm_call_release adds the rule for releases: they are safe to
 * repeat (the scripts release only the hold of the acquisition they name),
 * so a lost reply is simply asked again, a bounded number of times within
 * the caller's deadline, and what is still unanswered then is handed to
 * the watchdog, which keeps trying until the hold's lease would have run
 * out anyway.  A retry that finds the hold gone is answered "released":
 * the try whose reply was lost did it -- unless it was sent after the
 * hold's lease could have run out (give_up_at), when the hold may have
 * lapsed first.  (Redisson keeps a latch key per unlock for this; the
 * client knows it retried, so rmutex needs none.) */
#include "call.h"
#include "ack.h"
#include "conn.h"
#include "internal.h"
#include "endpoint.h"
#include "keys.h"
#include "node.h"
#include "script.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

/* WAIT after an acquisition on c, as the settings want of node n, and
 * give c back (closed if WAIT's reply never came). */
static void acknowledge(struct rm_node *n, struct rm_conn *c, struct rm_ack *a)
{
    int r = 1;
    *a = rm_ack_want(atomic_load(&n->replicas));
    if (a->wait_for) {
        rm_ack_append(c, a);
        r = rm_conn_flush(c, rm_call_deadline());
        if (!r) r = rm_ack_read(c, a);
        rm_log("WAIT %u on %s: %lld acknowledged%s", a->wait_for, n->addr.display, a->acked,
               r < 0 ? " (no reply)" : "");
    }
    rm_pool_put(&n->pool, c, r >= 0);
}

static int acquired(const redisReply *r)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
           r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == RM_CALL_ACQUIRED;
}

int rm_call(struct rm_endpoint *ep, int script, int nkeys, int argc, const char *const *argv,
            const size_t *lens, rm_nsec deadline, int pool_flags, redisReply **out,
            struct rm_ack *ack)
{
    int slot = rm_endpoint_clustered(ep) ? rm_keys_slot(argv[0], lens[0]) : 0;
    struct rm_node *n = rm_endpoint_route(ep, slot, deadline);
    int asking = 0;
    if (ack) memset(ack, 0, sizeof *ack);
    for (int hops = 0;; hops++) {
        if (!n) return RM_E_UNSENT; /* no node serves the slot: the detail says */
        struct rm_conn *c;
        int r = rm_pool_get(&n->pool, deadline, pool_flags, &c);
        if (r == RM_E_UNSENT && hops < RM_CALL_HOPS) {
            /* A cluster node that cannot be reached may have failed over:
             * follow the map if a refresh names another node soon. */
            struct rm_node *to = rm_endpoint_reroute(ep, slot, n, rm_clock_min(deadline,
                                                     rm_clock_after(RM_CALL_REROUTE_WAIT)));
            if (to) {
                n = to;
                asking = 0;
                continue;
            }
            /* Its replacement may be named any moment: try again soon
             * (the caller backs off as from a busy server, not an outage). */
            if (rm_endpoint_follows(ep)) r = RM_E_TRANSIENT;
        }
        if (r) return r;
        r = rm_script_call(c, script, nkeys, argc, argv, lens, asking, deadline, out);
        if (r == RM_E_REDIRECT) {
            rm_pool_put(&n->pool, c, 1);
            struct rm_node *to = rm_endpoint_redirect(ep, *out, n, &asking);
            freeReplyObject(*out);
            if (hops == RM_CALL_HOPS) {
                rm_detail("more than %d cluster redirections for %s", RM_CALL_HOPS, argv[0]);
                return EIO;
            }
            n = to;
            continue;
        }
        if (!r && ack && acquired(*out)) {
            acknowledge(n, c, ack);
            return 0;
        }
        /* An error reply leaves the connection usable; an I/O error does not. */
        rm_pool_put(&n->pool, c, r >= 0 || r == RM_E_TRANSIENT);
        if (r == RM_E_TRANSIENT && rm_endpoint_clustered(ep)) {
            RM_COUNT(cluster_retries);
            if (strstr(rmutex_detail(), "CLUSTERDOWN")) rm_endpoint_suspect(ep, n);
        }
        if (r == RM_E_LOST) rm_endpoint_suspect(ep, n);
        if (r == EROFS && rm_endpoint_follows(ep)) {
            /* A primary demoted under us (Sentinel): find the new one. */
            rm_endpoint_suspect(ep, n);
            r = RM_E_TRANSIENT;
        }
        return r;
    }
}

int rm_call_release(struct rm_endpoint *ep, int script, int nkeys, int argc,
                    const char *const *argv, const size_t *lens, rm_nsec deadline,
                    rm_nsec give_up_at, long long *answer)
{
    int unknown = 0;
    rm_nsec first = rm_clock_now();
    for (int tries = 0; tries < 4 && rm_clock_now() < deadline; tries++) {
        redisReply *reply;
        int r = rm_call(ep, script, nkeys, argc, argv, lens, deadline, 0, &reply, NULL);
        if (!r) {
            *answer = reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0;
            freeReplyObject(reply);
            if (unknown) {
                RM_COUNT(indeterminate);
                /* An earlier try may have run and lost its reply: the hold
                 * gone now is its doing, unless the lease could have run
                 * out before it was sent. */
                if (*answer == 0 && first < give_up_at) *answer = 1;
            }
            return 0;
        }
        if (r == EINVAL) { /* WRONGTYPE: the key is not our lock any more */
            *answer = 0;
            return 0;
        }
        if (r > 0) return r;
        if (r == RM_E_LOST) unknown = 1;
        if (r == RM_E_TRANSIENT) /* a migrating slot, a failover: give it a moment */
            rm_clock_sleep_until(rm_clock_min(deadline, rm_clock_after(RM_MSEC(20 << tries))));
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
