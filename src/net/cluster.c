/* cluster.c -- reading a Redis Cluster's own account of itself.
 *
 * The slot map comes from CLUSTER SLOTS: every Redis since 3.0 answers it
 * (7.0 calls it deprecated in favour of CLUSTER SHARDS, whose early 7.0
 * replies had bugs of their own; Valkey took the deprecation back).  Its
 * reply is one entry per range of slots: start, end, the primary as
 * [host, port, id, ...], then the replicas the same way.  Only primaries
 * are kept, with their replica count -- the library sends nothing to a
 * replica: a lock read from one could be stale.  The endpoint (endpoint.c)
 * decides whether to believe a map and what to do with it.
 *
 * Redirections are the cluster's answer to a command sent to the wrong
 * node: MOVED (the slot lives elsewhere now: update the map) and ASK (the
 * slot is being migrated and this command's keys are already on the
 * target: send it there once, after ASKING, without touching the map). */
#include "cluster.h"
#include "conn.h"
#include "internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rm_cluster_map_free(struct rm_cluster_map *m)
{
    free(m->primaries);
    m->primaries = NULL;
    m->nprimaries = m->cap = m->covered = 0;
}

/* The index of host:port among m's primaries, added if new; -1: ENOMEM. */
static int primary_index(struct rm_cluster_map *m, const char *host, size_t hlen, unsigned port)
{
    for (unsigned i = 0; i < m->nprimaries; i++)
        if (m->primaries[i].port == port && strlen(m->primaries[i].host) == hlen &&
            !memcmp(m->primaries[i].host, host, hlen))
            return (int)i;
    if (m->nprimaries == m->cap) {
        unsigned cap = m->cap ? m->cap * 2 : 8;
        void *p = realloc(m->primaries, cap * sizeof *m->primaries);
        if (!p) return -1;
        m->primaries = p;
        m->cap = cap;
    }
    struct rm_cluster_primary *p = &m->primaries[m->nprimaries];
    memset(p, 0, sizeof *p);
    snprintf(p->host, sizeof p->host, "%.*s", (int)hlen, host);
    p->port = port;
    return (int)m->nprimaries++;
}

/* [host, port, ...] of one node in a CLUSTER SLOTS entry. */
static int node_of(const redisReply *n, const char **host, size_t *hlen, unsigned *port)
{
    if (n->type != REDIS_REPLY_ARRAY || n->elements < 2 || n->element[0]->type != REDIS_REPLY_STRING ||
        n->element[1]->type != REDIS_REPLY_INTEGER || n->element[1]->integer < 1 ||
        n->element[1]->integer > 65535 || n->element[0]->len >= sizeof ((struct rm_cluster_primary *)0)->host)
        return -1;
    *host = n->element[0]->str;
    *hlen = n->element[0]->len;
    *port = (unsigned)n->element[1]->integer;
    return 0;
}

static int parse_slots(const redisReply *r, struct rm_cluster_map *m)
{
    if (r->type == REDIS_REPLY_ERROR) {
        rm_detail("CLUSTER SLOTS: %.*s", (int)(r->len > 120 ? 120 : r->len), r->str);
        return EIO;
    }
    if (r->type != REDIS_REPLY_ARRAY) goto bad;
    memset(m->owner, 0, sizeof m->owner);
    m->covered = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        const char *host;
        size_t hlen;
        unsigned port;
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER || node_of(e->element[2], &host, &hlen, &port))
            goto bad;
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        if (lo < 0 || hi < lo || hi >= RM_SLOTS) goto bad;
        int idx = primary_index(m, host, hlen, port);
        if (idx < 0) {
            rm_detail("out of memory");
            return ENOMEM;
        }
        unsigned replicas = (unsigned)(e->elements - 3);
        if (replicas > m->primaries[idx].replicas) m->primaries[idx].replicas = replicas;
        for (long long s = lo; s <= hi; s++) {
            if (!m->owner[s]) m->covered++;
            m->owner[s] = (uint16_t)(idx + 1);
        }
    }
    return 0;
bad:
    rm_detail("CLUSTER SLOTS answered something that is not a slot map");
    return EIO;
}

int rm_cluster_slots(struct rm_conn *c, rm_nsec deadline, struct rm_cluster_map *m)
{
    static const char *argv[] = { "CLUSTER", "SLOTS" };
    static const size_t lens[] = { 7, 5 };
    redisReply *r;
    int e = rm_conn_call(c, 2, argv, lens, deadline, &r);
    if (e) return e;
    e = parse_slots(r, m);
    freeReplyObject(r);
    return e;
}

int rm_cluster_map_same(const struct rm_cluster_map *a, const struct rm_cluster_map *b)
{
    for (unsigned s = 0; s < RM_SLOTS; s++) {
        if (!a->owner[s] != !b->owner[s]) return 0;
        if (!a->owner[s]) continue;
        const struct rm_cluster_primary *x = &a->primaries[a->owner[s] - 1];
        const struct rm_cluster_primary *y = &b->primaries[b->owner[s] - 1];
        if (x->port != y->port || strcmp(x->host, y->host)) return 0;
    }
    return 1;
}

int rm_cluster_redirect(const char *s, size_t len, int *slot, char *host, size_t hostcap,
                        unsigned *port)
{
    int kind;
    size_t skip;
    if (len > 6 && !memcmp(s, "MOVED ", 6)) kind = RM_CLUSTER_MOVED, skip = 6;
    else if (len > 4 && !memcmp(s, "ASK ", 4)) kind = RM_CLUSTER_ASK, skip = 4;
    else return 0;
    const char *p = s + skip, *end = s + len;
    long v = 0;
    const char *digits = p;
    while (p < end && *p >= '0' && *p <= '9' && v < RM_SLOTS) v = v * 10 + (*p++ - '0');
    if (p == digits || p == end || *p != ' ' || v >= RM_SLOTS) return 0;
    p++;
    /* host:port -- the host may be an IPv6 address with colons of its own. */
    const char *colon = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == ':') colon = q;
    if (!colon || (size_t)(colon - p) >= hostcap) return 0;
    unsigned long pv = 0;
    const char *q = colon + 1;
    if (q == end) return 0;
    for (; q < end; q++) {
        if (*q < '0' || *q > '9' || (pv = pv * 10 + (unsigned long)(*q - '0')) > 65535) return 0;
    }
    if (pv == 0) return 0;
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = 0;
    *slot = (int)v;
    *port = (unsigned)pv;
    return kind;
}
