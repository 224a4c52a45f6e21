/* ack.c -- replica acknowledgement of the library's writes (Redis WAIT).
 *
 * Redis replicates asynchronously: a lock granted by a primary that dies
 * before its replicas have it is granted again by the replica promoted in
 * its place.  WAIT after the write closes that window for the replicas that
 * acknowledged.  What to wait for comes from the settings -- a number, or
 * "auto": every replica the topology knows the primary has -- and a floor,
 * min_replicas, that the server's own word cannot lower: a primary
 * restarted stale reports no replicas at all, and a client that skipped
 * WAIT on that report (as Redisson does) would be granted locks that
 * exist nowhere else.  WAIT may take its whole timeout, longer than the
 * command timeout, so its reply is read with its own deadline.  A server
 * without WAIT (ElastiCache Serverless answers "unknown command") gets no
 * acknowledgement: every acquisition is given back, and the detail says
 * the server refused WAIT, with its words.  rmutex_configure looks first
 * (rm_ack_probe): with a number of replicas or a floor asked for, a
 * "WAIT 0 0" to the server (a cluster's first seed that answers) must be
 * answered, or the URL is refused there and then.  A server it cannot
 * reach is not refused (the library starts lazily), nor one that answers
 * that WAIT is not for replicas: a cluster's seeds are where its map is
 * asked for, and after a failover the first may be a replica -- the next
 * seed is asked; Sentinel's primary is not known yet; replicas=auto alone
 * needs nothing of a server without replicas.  The acquisitions' check
 * stays behind it for those. */
#include "ack.h"
#include "conn.h"
#include "url.h"
#include "internal.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

struct rm_ack rm_ack_want(unsigned known)
{
    unsigned n = RM_SETTING(replicas), floor = RM_SETTING(min_replicas);
    struct rm_ack a = { 0, 0, 0, "" };
    if (n == RM_REPLICAS_AUTO) {
        a.wait_for = known > floor ? known : floor;
        a.need = floor ? floor : known ? 1 : 0;
    } else {
        a.wait_for = a.need = n > floor ? n : floor;
    }
    return a;
}

void rm_ack_append(struct rm_conn *c, const struct rm_ack *a)
{
    char ns[16], ts[24];
    const char *argv[] = { "WAIT", ns, ts };
    size_t lens[] = { 4, (size_t)snprintf(ns, sizeof ns, "%u", a->wait_for),
                      (size_t)snprintf(ts, sizeof ts, "%lu", RM_SETTING(wait_timeout_ms)) };
    rm_conn_append(c, 3, argv, lens);
}

int rm_ack_read(struct rm_conn *c, struct rm_ack *a)
{
    /* WAIT answers after wait_timeout at the latest: read that long, plus
     * a command timeout for the round trip itself. */
    rm_nsec deadline = rm_clock_after(RM_MSEC(RM_SETTING(wait_timeout_ms)) +
                                      RM_MSEC(RM_SETTING(command_timeout_ms)));
    redisReply *reply;
    int r = rm_conn_read_slow(c, deadline, &reply);
    if (r) return r;
    a->acked = reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0;
    if (reply->type == REDIS_REPLY_ERROR) /* a server without WAIT (a serverless one) */
        snprintf(a->refused, sizeof a->refused, "%.*s", (int)reply->len, reply->str);
    freeReplyObject(reply);
    if (a->acked < (long long)a->need) {
        RM_COUNT(replica_shortfalls);
        return 0;
    }
    return 1;
}

void rm_ack_shortfall_detail(const struct rm_ack *a, const char *lock, int given_back)
{
    if (a->refused[0]) {
        rm_detail("the server refused WAIT (%s): replica acknowledgement (replicas=, "
                  "min_replicas=) cannot work there; the acquisition of %s %s", a->refused, lock,
                  given_back == 0 ? "was given back" : "is being given back");
        return;
    }
    rm_detail("only %lld of the %u replica acknowledgements required (WAIT %u, %lu ms) came "
              "for the acquisition of %s; %s", a->acked, a->need, a->wait_for,
              RM_SETTING(wait_timeout_ms), lock,
              given_back == 0 ? "it was given back"
              : given_back == RM_DEFERRED ? "its give-back was handed to the watchdog"
                                          : "giving it back failed: it lapses with its lease");
}

int rm_ack_probe(const struct rm_service *svc)
{
    unsigned n = RM_SETTING(replicas);
    if ((n == 0 || n == RM_REPLICAS_AUTO) && !RM_SETTING(min_replicas)) return 0;
    if (svc->mode == RM_MODE_SENTINEL) return 0;
    rm_nsec deadline = rm_clock_after(RM_MSEC(RM_SETTING(connect_timeout_ms)) +
                                      RM_MSEC(RM_SETTING(command_timeout_ms)));
    for (unsigned i = 0; i < svc->nseeds; i++) {
        struct rm_conn *c;
        redisReply *reply;
        const char *argv[] = { "WAIT", "0", "0" };
        size_t lens[] = { 4, 1, 1 };
        if (rm_conn_dial(&svc->seeds[i], "probe", deadline, &c)) continue;
        int r = rm_conn_call(c, 3, argv, lens, deadline, &reply);
        rm_conn_close(c);
        if (r) continue;
        if (reply->type == REDIS_REPLY_ERROR && reply->str &&
            strstr(reply->str, "replica instances")) { /* a replica: ask the next seed */
            freeReplyObject(reply);
            continue;
        }
        int refused = reply->type == REDIS_REPLY_ERROR;
        if (refused)
            rm_detail("Redis at %s refused WAIT (%.*s): replica acknowledgement (replicas=, "
                      "min_replicas=) cannot work there; leave it out for this server",
                      svc->seeds[i].display, (int)reply->len, reply->str);
        freeReplyObject(reply);
        return refused ? RMUTEX_ENOREPLICAS : 0;
    }
    return 0;
}
