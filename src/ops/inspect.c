/* inspect.c -- looking at locks without taking them: rmutex_inspect (one
 * lock, for `rmutex status` and `rmutex wait`) and rmutex_list (every lock
 * whose name matches a pattern, for `rmutex list`).
 *
 * DESIGN
 * ------
 * inspect.lua reads a lock's keys in one call on the primary that serves
 * the name: holders, lease, fencing counter, robust marks, the head of a
 * fair queue, the release channel's subscribers, server time.  Nothing is
 * written and no fencing token is spent.  When the lock is held, a second
 * call (whois.lua) reads the holder's entry in the holder registry
 * (registry.c) -- on whichever node serves that key -- for its host, pid,
 * program and how long it has held; a failure there leaves those unknown,
 * since the lock's own state was read.
 *
 * rmutex_list SCANs each primary in turn (MATCH the pattern, TYPE hash,
 * COUNT 500 a page), gives the connection back between pages, and
 * inspects each candidate.  A free lock has no keys, so only held locks
 * are found; a hash counts as a lock only if it has a lease and its first
 * field is an owner id ("...:<digits>", Redisson's form and ours).  It is
 * O(keyspace) and meant for operators; SCAN's guarantees apply (a key
 * present for the whole walk is seen; one created or deleted during it may
 * or may not be). */
#include "call.h"
#include "conn.h"
#include "endpoint.h"
#include "internal.h"
#include "keys.h"
#include "node.h"
#include "pool.h"
#include "registry.h"
#include "session.h"
#include "script.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy_str(char *dst, size_t n, const redisReply *r)
{
    if (r->type == REDIS_REPLY_STRING) snprintf(dst, n, "%.*s", (int)r->len, r->str);
    else dst[0] = 0;
}

/* inspect.lua's reply into *info. */
static int read_info(const redisReply *r, rmutex_lockinfo_t *info)
{
    redisReply **e = r->element;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 11 || e[0]->type != REDIS_REPLY_ARRAY ||
        e[6]->type != REDIS_REPLY_ARRAY || e[7]->type != REDIS_REPLY_ARRAY) {
        rm_detail("unexpected reply from inspect.lua");
        return EIO;
    }
    memset(info, 0, sizeof *info);
    info->holders = (unsigned)e[0]->elements;
    info->held = info->holders > 0;
    if (info->held) copy_str(info->owner, sizeof info->owner, e[0]->element[0]);
    info->ttl_ms = info->held ? e[1]->integer : -1;
    info->fence = (uint64_t)e[2]->integer;
    info->owner_died = e[3]->integer == 1;
    info->not_recoverable = e[4]->integer == 1;
    info->queue_len = (unsigned)e[5]->integer;
    for (size_t i = 0; i < e[6]->elements && i < RMUTEX_INSPECT_QUEUE; i++) {
        copy_str(info->queue[i], sizeof info->queue[i], e[6]->element[i]);
        info->queue_alive_ms[i] = i < e[7]->elements ? e[7]->element[i]->integer : 0;
        info->queue_shown = (unsigned)i + 1;
    }
    info->subscribers = (unsigned)e[8]->integer;
    info->server_time_ms = e[9]->integer;
    info->held_ms = -1;
    /* A process's field ("<uuid>:0") is a cache (rmutexattr_setcache). */
    size_t n = strlen(info->owner);
    if (info->held && n > 2 && !strcmp(info->owner + n - 2, ":0"))
        info->cached = e[10]->type == REDIS_REPLY_STRING && e[10]->len && e[10]->str[0] == 'p'
                           ? RMUTEX_CACHED_PARKED
                           : RMUTEX_CACHED_KEPT;
    return 0;
}

/* Who holds it, from the holder registry (fills the holder_* fields when
 * the holder announces).  A failure here leaves them unknown: the lock's
 * own state was read. */
static void read_holder(struct rm_endpoint *ep, const char *lock, rmutex_lockinfo_t *info,
                        rm_nsec deadline)
{
    char key[128];
    size_t klen = rm_registry_key(info->owner, key, sizeof key);
    if (!info->held || !klen) return;
    const char *argv[] = { key, lock };
    size_t lens[] = { klen, strlen(lock) };
    redisReply *reply;
    int r = rm_call(ep, RM_SCRIPT_WHOIS, 1, 2, argv, lens, deadline, 0, &reply, NULL);
    if (r) return;
    rm_registry_read(reply, info);
    freeReplyObject(reply);
}

/* Read name's state (and its holder's) into *info. */
static int inspect(struct rm_endpoint *ep, const char *name, rmutex_lockinfo_t *info)
{
    struct rm_keys k;
    int r = rm_keys_make(name, &k);
    if (r) return r;
    const char *shard = rm_endpoint_clustered(ep) ? "shard" : "";
    const char *argv[] = { k.lock, k.token, k.owner, k.notrec, k.queue, k.alive, k.channel, shard };
    size_t lens[8];
    for (int i = 0; i < 8; i++) lens[i] = strlen(argv[i]);
    redisReply *reply;
    if (!(r = rm_call_retried(ep, RM_SCRIPT_INSPECT, 6, 8, argv, lens, &reply))) {
        r = read_info(reply, info);
        freeReplyObject(reply);
        if (!r) read_holder(ep, k.lock, info, rm_call_deadline());
    }
    rm_keys_free(&k);
    return r;
}

RMUTEX_API int rmutex_inspect(const char *name, rmutex_lockinfo_t *out, size_t size)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    if (!out) {
        rm_detail("the output pointer is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_endpoint *ep;
    struct rm_keys k;
    int r = rm_keys_make(name, &k); /* a bad name is EINVAL before any I/O */
    if (r) return rm_entry_leave(&e, r);
    rm_keys_free(&k);
    if ((r = rm_session_enter(&ep))) return rm_entry_leave(&e, r);
    rmutex_lockinfo_t info;
    r = inspect(ep, name, &info);
    rm_session_leave();
    if (!r) memcpy(out, &info, size < sizeof info ? size : sizeof info);
    return rm_entry_leave(&e, r);
}

/* A held hash with a lease whose field is an owner id ("...:<digits>"). */
static int looks_like_lock(const rmutex_lockinfo_t *in)
{
    if (!in->held || in->ttl_ms <= 0) return 0;
    const char *colon = strrchr(in->owner, ':');
    if (!colon || colon == in->owner || !colon[1]) return 0;
    for (const char *p = colon + 1; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

/* One SCAN page on n from *cursor (updated; "0" at the end): the hash
 * keys it names into *out (an array reply, freed by the caller). */
static int scan_page(struct rm_node *n, char *cursor, size_t cursor_size, const char *pattern,
                     redisReply **out)
{
    rm_nsec deadline = rm_call_deadline();
    struct rm_conn *c;
    int r = rm_pool_get(&n->pool, deadline, 0, &c);
    if (r) return r;
    const char *argv[] = { "SCAN", cursor, "MATCH", pattern, "COUNT", "500", "TYPE", "hash" };
    size_t lens[8];
    for (int i = 0; i < 8; i++) lens[i] = strlen(argv[i]);
    redisReply *reply;
    r = rm_conn_call(c, 8, argv, lens, deadline, &reply);
    rm_pool_put(&n->pool, c, r == 0);
    if (r) return r;
    if ((r = rm_conn_reply_status(reply))) {
        freeReplyObject(reply);
        return r;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING || reply->element[1]->type != REDIS_REPLY_ARRAY ||
        reply->element[0]->len >= cursor_size) {
        freeReplyObject(reply);
        rm_detail("unexpected reply to SCAN");
        return EIO;
    }
    memcpy(cursor, reply->element[0]->str, reply->element[0]->len + 1);
    *out = reply;
    return 0;
}

/* Walk n's keyspace; fn for each lock. */
static int list_node(struct rm_endpoint *ep, struct rm_node *n, const char *pattern,
                     rmutex_list_fn fn, void *arg)
{
    char cursor[32] = "0";
    do {
        redisReply *page;
        int r = scan_page(n, cursor, sizeof cursor, pattern, &page);
        if (r) return r;
        redisReply *keys = page->element[1];
        for (size_t i = 0; !r && i < keys->elements; i++) {
            const redisReply *key = keys->element[i];
            if (key->type != REDIS_REPLY_STRING || strlen(key->str) != key->len) continue;
            rmutex_lockinfo_t info;
            int ri = inspect(ep, key->str, &info);
            if (ri == EINVAL) continue; /* not a lock name, or not a lock any more */
            if (ri) r = ri;
            else if (looks_like_lock(&info)) r = fn(key->str, &info, arg);
        }
        freeReplyObject(page);
        if (r) return r;
    } while (strcmp(cursor, "0"));
    return 0;
}

RMUTEX_API int rmutex_list(const char *pattern, rmutex_list_fn fn, void *arg)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    if (!fn) {
        rm_detail("the callback is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    if (!pattern) pattern = "*";
    struct rm_endpoint *ep;
    int r = rm_session_enter(&ep);
    if (r) return rm_entry_leave(&e, r);
    enum { MAX = 1024 }; /* Redis Cluster's own bound on primaries */
    struct rm_node **primaries = malloc(MAX * sizeof *primaries);
    int count = primaries ? rm_endpoint_primaries(ep, primaries, MAX, rm_call_deadline()) : 0;
    r = !primaries ? ENOMEM : !count ? ETIMEDOUT : 0;
    for (int i = 0; !r && i < count; i++) r = list_node(ep, primaries[i], pattern, fn, arg);
    free(primaries);
    rm_session_leave();
    return rm_entry_leave(&e, r < 0 ? ETIMEDOUT : r);
}
