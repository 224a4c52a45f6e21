/* call.c -- script calls through the pool, shared by the lock algorithms.
 *
 * rm_call is the one round trip every acquire, release and force-unlock
 * makes.  rm_call_release adds the rule for releases: they are safe to
 * repeat (the scripts release only the hold of the acquisition they name),
 * so a lost reply is simply asked again, a bounded number of times within
 * the caller's deadline, and what is still unanswered then is handed to
 * the watchdog, which keeps trying until the hold's lease would have run
 * out anyway.  (Redisson keeps a latch key per unlock for this; the client
 * knows it retried, so rmutex needs none and writes no key per pair.)
 *
 * A retry that finds the hold gone is the hard case: did the try whose
 * reply was lost release it, or was the hold gone before (lost)?  It is
 * answered "released" only when that try provably reached the same
 * server the retry read: it was written to a connection the server had
 * not closed (the pool peeks at every idle connection before lending it,
 * so a request is never written to a connection a restart closed: such a
 * try counts as unsent), on a server with the same run_id as the retry's
 * (learnt at each dial), and while the hold was known good (sent before
 * known_good: its lease could not have run out first).  Otherwise the
 * hold is reported lost (RM_E_GONE: the holder is told, the unlock is
 * EPERM): a server that restarted between the two tries may have wiped
 * the hold before the release ran, and nothing can tell that apart from
 * a release that ran and lost its reply.  Those cases are counted
 * (releases_unconfirmed): a false "lost" is the safe answer, a false
 * "released" is not.  (Without INFO -- an ACL that refuses it -- the
 * run_id is unknown and only the first two checks apply.)
 *
 * A call may also be sent ahead (rm_call_send) and its reply read after
 * another call of the same thread (rm_call_collect): two round trips in
 * the time of one, for a call that is safe to repeat -- anything but a
 * plain answer (no reply, NOSCRIPT, a redirection) and the caller makes
 * it again the usual way.  It goes on a spare connection (pool.c), so the
 * call in between never waits for it. */
#include "call.h"
#include "ack.h"
#include "conn.h"
#include "internal.h"
#include "endpoint.h"
#include "keys.h"
#include "node.h"
#include "script.h"

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

/* The server a call's last try was written to: its run_id ("" unknown). */
struct where {
    char run_id[sizeof ((struct rm_conn *)0)->run_id];
};

static int call(struct rm_endpoint *ep, int script, int nkeys, int argc, const char *const *argv,
                const size_t *lens, rm_nsec deadline, int pool_flags, redisReply **out,
                struct rm_ack *ack, struct where *at)
{
    int slot = rm_endpoint_clustered(ep) ? rm_keys_slot(argv[0], lens[0]) : 0;
    struct rm_node *n = rm_endpoint_route(ep, slot, deadline);
    int asking = 0;
    if (ack) memset(ack, 0, sizeof *ack);
    for (int hops = 0;; hops++) {
        if (!n) /* no node serves the slot (the detail says): refused, or unreachable */
            return rm_endpoint_refused(ep) ? EACCES : RM_E_UNSENT;
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
        if (at) memcpy(at->run_id, c->run_id, sizeof at->run_id);
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

int rm_call_send(struct rm_endpoint *ep, int script, int nkeys, int argc, const char *const *argv,
                 const size_t *lens, rm_nsec deadline, struct rm_call_sent *sent)
{
    int slot = rm_endpoint_clustered(ep) ? rm_keys_slot(argv[0], lens[0]) : 0;
    struct rm_node *n = rm_endpoint_route(ep, slot, deadline);
    struct rm_conn *c;
    if (!n || rm_pool_get(&n->pool, deadline, RM_POOL_SPARE, &c)) return RM_E_UNSENT;
    rm_script_append(c, script, nkeys, argc, argv, lens, 0);
    int r = rm_conn_flush(c, deadline);
    if (r) {
        rm_pool_put(&n->pool, c, 0);
        return r;
    }
    sent->node = n;
    sent->conn = c;
    return 0;
}

int rm_call_collect(struct rm_call_sent *sent, rm_nsec deadline, redisReply **out)
{
    redisReply *reply;
    int r = rm_conn_read(sent->conn, deadline, &reply);
    if (!r && reply->type == REDIS_REPLY_ERROR) {
        /* NOSCRIPT, a redirection, a refusal: the caller's own call sorts
         * it out (the connection is still good). */
        freeReplyObject(reply);
        r = RM_E_TRANSIENT;
    }
    rm_pool_put(&sent->node->pool, sent->conn, r != RM_E_LOST);
    if (!r) *out = reply;
    return r;
}

/* Who retries a release its caller could not finish: the watchdog, which
 * sits above this file and registers itself (rm_call_set_deferrer). */
static _Atomic(rm_call_deferrer) deferrer;

void rm_call_set_deferrer(rm_call_deferrer fn) { atomic_store(&deferrer, fn); }

int rm_call(struct rm_endpoint *ep, int script, int nkeys, int argc, const char *const *argv,
            const size_t *lens, rm_nsec deadline, int pool_flags, redisReply **out,
            struct rm_ack *ack)
{
    return call(ep, script, nkeys, argc, argv, lens, deadline, pool_flags, out, ack, NULL);
}

int rm_call_retried(struct rm_endpoint *ep, int script, int nkeys, int argc,
                    const char *const *argv, const size_t *lens, redisReply **out)
{
    rm_nsec deadline = rm_call_deadline();
    int r = RM_E_UNSENT;
    for (int tries = 0; tries < 3 && rm_clock_now() < deadline; tries++) {
        r = call(ep, script, nkeys, argc, argv, lens, deadline, 0, out, NULL, NULL);
        if (r >= 0) return r;
        if (r == RM_E_TRANSIENT)
            rm_clock_sleep_until(rm_clock_min(deadline, rm_clock_after(RM_MSEC(20 << tries))));
    }
    return ETIMEDOUT;
}

/* A try whose reply was lost (sent to lost_on, at sent) and a later try
 * that found the hold gone (on now): did the first one release it? */
static int released_by_lost_try(const struct where *lost_on, const struct where *now,
                                rm_nsec sent, rm_nsec known_good)
{
    if (lost_on->run_id[0] && now->run_id[0] && strcmp(lost_on->run_id, now->run_id)) {
        RM_COUNT(releases_unconfirmed);
        rm_log("release: the server restarted (run_id %.8s -> %.8s) after a try whose reply "
               "was lost; the hold is reported lost", lost_on->run_id, now->run_id);
        return 0;
    }
    return sent < known_good;
}

static int release(struct rm_endpoint *ep, int script, int nkeys, int argc,
                   const char *const *argv, const size_t *lens, rm_nsec deadline,
                   rm_nsec known_good, long long *answer, const struct rm_call_said *said);

int rm_call_release(struct rm_endpoint *ep, int script, int nkeys, int argc,
                    const char *const *argv, const size_t *lens, rm_nsec deadline,
                    rm_nsec known_good, long long *answer)
{
    return release(ep, script, nkeys, argc, argv, lens, deadline, known_good, answer, NULL);
}

static int release(struct rm_endpoint *ep, int script, int nkeys, int argc,
                   const char *const *argv, const size_t *lens, rm_nsec deadline,
                   rm_nsec known_good, long long *answer, const struct rm_call_said *said)
{
    int unknown = 0;
    struct where lost_on = { "" }, at;
    rm_nsec lost_sent = 0;
    for (int tries = 0; tries < 4 && rm_clock_now() < deadline; tries++) {
        redisReply *reply;
        rm_nsec sent = rm_clock_now();
        at.run_id[0] = 0;
        int r = call(ep, script, nkeys, argc, argv, lens, deadline, 0, &reply, NULL, &at);
        if (!r) {
            /* A text: done, and this is what it published to a thread of
             * ours (call.h). */
            *answer = reply->type == REDIS_REPLY_INTEGER ? reply->integer
                      : reply->type == REDIS_REPLY_STRING ? 1 : 0;
            if (reply->type == REDIS_REPLY_STRING && said)
                said->fn(said->arg, reply->str, reply->len);
            freeReplyObject(reply);
            if (unknown) {
                RM_COUNT(indeterminate);
                if (*answer == 0 && released_by_lost_try(&lost_on, &at, lost_sent, known_good))
                    *answer = 1;
            }
            return 0;
        }
        if (r == EINVAL) { /* WRONGTYPE: the key is not our lock any more */
            *answer = 0;
            return 0;
        }
        if (r > 0) return r;
        if (r == RM_E_LOST) {
            /* The earliest lost try: a later one cannot have run first. */
            if (!unknown) lost_on = at, lost_sent = sent;
            unknown = 1;
        }
        if (r == RM_E_TRANSIENT) /* a migrating slot, a failover: give it a moment */
            rm_clock_sleep_until(rm_clock_min(deadline, rm_clock_after(RM_MSEC(20 << tries))));
    }
    rm_call_deferrer defer = atomic_load(&deferrer);
    if (defer) defer(ep, script, nkeys, argc, argv, lens, known_good);
    rm_log("release of %s deferred to the watchdog: %s", argv[0], rmutex_detail());
    return RM_DEFERRED;
}

rm_nsec rm_call_deadline(void)
{
    return rm_clock_after(RM_MSEC(RM_SETTING(command_timeout_ms)));
}

static int unlock(struct rm_endpoint *ep, int script, int nkeys, int argc,
                  const char *const *argv, const size_t *lens, rm_nsec deadline,
                  rm_nsec known_good, rm_nsec (*known_good_now)(void *), void *arg,
                  const struct rm_call_said *said);

int rm_call_unlock(struct rm_endpoint *ep, int script, int nkeys, int argc,
                   const char *const *argv, const size_t *lens, rm_nsec deadline,
                   rm_nsec known_good)
{
    return unlock(ep, script, nkeys, argc, argv, lens, deadline, known_good, NULL, NULL, NULL);
}

int rm_call_unlock_said(struct rm_endpoint *ep, int script, int nkeys, int argc,
                        const char *const *argv, const size_t *lens, rm_nsec deadline,
                        rm_nsec known_good, const struct rm_call_said *said)
{
    return unlock(ep, script, nkeys, argc, argv, lens, deadline, known_good, NULL, NULL, said);
}

int rm_call_unlock_live(struct rm_endpoint *ep, int script, int nkeys, int argc,
                        const char *const *argv, const size_t *lens, rm_nsec deadline,
                        rm_nsec known_good, rm_nsec (*known_good_now)(void *), void *arg)
{
    return unlock(ep, script, nkeys, argc, argv, lens, deadline, known_good, known_good_now, arg,
                  NULL);
}

static int unlock(struct rm_endpoint *ep, int script, int nkeys, int argc,
                  const char *const *argv, const size_t *lens, rm_nsec deadline,
                  rm_nsec known_good, rm_nsec (*known_good_now)(void *), void *arg,
                  const struct rm_call_said *said)
{
    long long released = 0;
    int r = release(ep, script, nkeys, argc, argv, lens, deadline, known_good, &released, said);
    if (r == RM_DEFERRED) {
        /* Redis did not answer in time.  A hold still known good is as
         * good as released: nobody can take it before the watchdog's
         * release lands or its lease runs out.  One past that may have
         * been taken already.  (A lease the watchdog still renews for
         * others -- a process's reads -- is asked again: it may have
         * moved during the wait.) */
        if (known_good_now) {
            rm_nsec now_good = known_good_now(arg);
            if (now_good > known_good) known_good = now_good;
        }
        if (rm_clock_now() < known_good) return 0;
        rm_detail("%s could not be released (Redis did not answer) and its lease has run out: "
                  "the hold may have been lost", argv[0]);
        return RM_E_GONE;
    }
    if (r) return r;
    if (released) return 0;
    rm_detail("%s is not held by this thread in Redis (its lease ran out, it was "
              "force-unlocked, or the server lost it)", argv[0]);
    return RM_E_GONE;
}
