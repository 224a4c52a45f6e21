/* sentinel.c -- finding the primary through Redis Sentinel.
 *
 * The procedure is the one Redis's Sentinel client guidelines give: ask the
 * sentinels in order, each with a short connect timeout (a dead sentinel
 * costs little), for the primary's address (SENTINEL
 * get-master-addr-by-name); move the one that answered to the front; then
 * ask that server's ROLE, because a sentinel can be stale and a restarted
 * old primary believes it still is one.  One departure: when the server
 * named fails that check, the next sentinel is asked at once rather than
 * the same one again after a pause -- right after a failover only the
 * leader knows the new primary, the others learn it over ~2 s.  ROLE alone does not
 * catch every stale primary (it says master for up to ~10 s after its
 * restart); the replica-acknowledgement floor (min_replicas, ack.c) does,
 * since such a primary has no replica.
 *
 * Sentinels learnt from the answering one (SENTINEL SENTINELS) are added
 * to the list, so a client configured with one sentinel survives its
 * loss.  "No sentinel reachable" and "no sentinel knows this master" are
 * different failures with different details.
 *
 * +switch-master messages (rm_sentinel_watch) only hurry the next
 * resolution: pub/sub can miss them, so the endpoint also resolves on a
 * timer (endpoint.c). */
#include "sentinel.h"
#include "conn.h"
#include "internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL_CONNECT RM_MSEC(300)
#define ROLE_RETRY RM_MSEC(200)

static rm_nsec short_deadline(void)
{
    rm_nsec connect = RM_MSEC(RM_SETTING(connect_timeout_ms));
    return rm_clock_after((connect < SENTINEL_CONNECT ? connect : SENTINEL_CONNECT) +
                          RM_MSEC(RM_SETTING(command_timeout_ms)));
}

static int call(struct rm_conn *c, int argc, const char *const *argv, redisReply **out)
{
    size_t lens[8];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    return rm_conn_call(c, argc, argv, lens, short_deadline(), out);
}

/* The value of field name in a flat [k, v, k, v...] reply (a RESP2 map). */
static const redisReply *field(const redisReply *r, const char *name)
{
    if (r->type != REDIS_REPLY_ARRAY) return NULL;
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING && !strcmp(r->element[i]->str, name))
            return r->element[i + 1];
    return NULL;
}

/* Replicas the sentinel on c sees up. */
static unsigned count_replicas(struct rm_conn *c, const char *master)
{
    const char *argv[] = { "SENTINEL", "REPLICAS", master };
    redisReply *r;
    unsigned n = 0;
    if (call(c, 3, argv, &r)) return 0;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *flags = field(r->element[i], "flags");
        if (flags && flags->type == REDIS_REPLY_STRING && !strstr(flags->str, "s_down") &&
            !strstr(flags->str, "o_down") && !strstr(flags->str, "disconnected"))
            n++;
    }
    freeReplyObject(r);
    return n;
}

/* Add the sentinels the one on c knows to svc->seeds. */
static void learn_sentinels(struct rm_service *svc, struct rm_conn *c)
{
    const char *argv[] = { "SENTINEL", "SENTINELS", svc->master };
    redisReply *r;
    if (call(c, 3, argv, &r)) return;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements && svc->nseeds < RM_SEEDS_MAX; i++) {
        const redisReply *ip = field(r->element[i], "ip"), *port = field(r->element[i], "port");
        if (!ip || !port || ip->type != REDIS_REPLY_STRING || port->type != REDIS_REPLY_STRING) continue;
        struct rm_server_addr a;
        if (rm_config_node_addr(ip->str, (unsigned)atoi(port->str), &svc->seeds[0], &a)) continue;
        int known = 0;
        for (unsigned k = 0; k < svc->nseeds && !known; k++) known = rm_config_same_addr(&svc->seeds[k], &a);
        if (known) {
            rm_config_addr_free(&a);
            continue;
        }
        rm_log("learnt sentinel %s", a.display);
        svc->seeds[svc->nseeds++] = a;
    }
    freeReplyObject(r);
}

/* Ask the sentinel on c for the primary.  0, ENOENT (unknown name), or an
 * I/O status. */
static int ask(struct rm_service *svc, struct rm_conn *c, struct rm_sentinel_answer *out)
{
    const char *argv[] = { "SENTINEL", "get-master-addr-by-name", svc->master };
    redisReply *r;
    int e = call(c, 3, argv, &r);
    if (e) return e;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof out->host) {
        if (r->type == REDIS_REPLY_ERROR)
            rm_detail("sentinel answered: %.*s", (int)(r->len > 100 ? 100 : r->len), r->str);
        freeReplyObject(r);
        return ENOENT;
    }
    memcpy(out->host, r->element[0]->str, r->element[0]->len + 1);
    out->port = (unsigned)atoi(r->element[1]->str);
    freeReplyObject(r);
    out->replicas = count_replicas(c, svc->master);
    learn_sentinels(svc, c);
    return 0;
}

/* ROLE of the server the sentinels named: 0 if it is a primary. */
static int check_role(const struct rm_service *svc, const struct rm_sentinel_answer *a)
{
    struct rm_server_addr addr;
    struct rm_conn *c;
    if (rm_config_node_addr(a->host, a->port, &svc->node_login, &addr)) return EAGAIN;
    int e = rm_conn_dial(&addr, "role", short_deadline(), &c);
    if (e) {
        rm_detail("the primary the sentinels name, %s, cannot be reached", addr.display);
        rm_config_addr_free(&addr);
        return EAGAIN;
    }
    const char *argv[] = { "ROLE" };
    redisReply *r;
    e = call(c, 1, argv, &r);
    rm_conn_close(c);
    if (!e) {
        int master = r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                     r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "master");
        freeReplyObject(r);
        if (!master) rm_detail("%s, named primary by the sentinels, is not one (yet)", addr.display);
        e = master ? 0 : EAGAIN;
    } else {
        e = EAGAIN;
    }
    rm_config_addr_free(&addr);
    return e;
}

int rm_sentinel_resolve(struct rm_service *svc, struct rm_sentinel_answer *out)
{
    char refusal[200] = "";
    for (int round = 0; round < 2; round++) {
        int unknown = 0, reached = 0;
        for (unsigned i = 0; i < svc->nseeds; i++) {
            struct rm_conn *c;
            int d = rm_conn_dial(&svc->seeds[i], "sentinel", short_deadline(), &c);
            if (d == EACCES && !refusal[0]) snprintf(refusal, sizeof refusal, "%s", rmutex_detail());
            if (d) continue;
            reached++;
            int e = ask(svc, c, out);
            rm_conn_close(c);
            if (e == ENOENT) unknown++;
            if (e) continue;
            if (i) { /* the one that answered goes first next time */
                struct rm_server_addr first = svc->seeds[i];
                memmove(svc->seeds + 1, svc->seeds, i * sizeof *svc->seeds);
                svc->seeds[0] = first;
            }
            if (!check_role(svc, out)) return 0;
            /* It named a server that is not a primary (yet), or is gone: a
             * stale sentinel, as the others learn of a failover over ~2 s
             * of hello messages.  Ask the next one. */
        }
        if (!reached && refusal[0]) { /* a configuration error, not an outage */
            rm_detail("%s", refusal);
            return EACCES;
        }
        if (!reached) {
            rm_detail("no sentinel reachable (of %u: %s)", svc->nseeds, svc->display);
            return RM_E_UNSENT;
        }
        if (unknown == reached) {
            rm_detail("no sentinel knows a master named '%s' (%s)", svc->master, svc->display);
            return ENOENT;
        }
        if (!round) rm_clock_sleep_until(rm_clock_after(ROLE_RETRY));
    }
    return EAGAIN;
}

int rm_sentinel_watch(const struct rm_service *svc, struct rm_conn **out)
{
    for (unsigned i = 0; i < svc->nseeds; i++) {
        if (rm_conn_dial(&svc->seeds[i], "sentinel-watch", short_deadline(), out)) continue;
        const char *argv[] = { "SUBSCRIBE", "+switch-master" };
        size_t lens[] = { 9, 14 };
        redisReply *r;
        if (!rm_conn_call(*out, 2, argv, lens, short_deadline(), &r)) {
            freeReplyObject(r);
            return 0;
        }
        rm_conn_close(*out);
    }
    *out = NULL;
    return RM_E_UNSENT;
}

int rm_sentinel_switched(const struct rm_service *svc, struct rm_conn *c)
{
    int e = rm_conn_read_available(c), switched = 0;
    redisReply *r;
    while (rm_conn_next_reply(c, &r) > 0) {
        /* ["message", "+switch-master", "<name> <oldip> <oldport> <newip> <newport>"] */
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[2]->type == REDIS_REPLY_STRING) {
            size_t n = strlen(svc->master);
            const char *m = r->element[2]->str;
            if (!strncmp(m, svc->master, n) && m[n] == ' ') switched = 1;
        }
        freeReplyObject(r);
    }
    return e ? e : switched;
}
