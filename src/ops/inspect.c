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
 * The same call knows a read-write lock (the hash has a mode; or its
 * readers, queue or writer's mark exist) and answers it in its own terms:
 * mode, writer, readers (the first RMUTEX_INSPECT_READERS described: their
 * lowest thread, threads, lease left), its queue with each waiter's kind.
 * The fields a mutex has are filled for it too (holders, owner, queue,
 * holder_*: the writer's or the first reader's), so a program built
 * before the read-write fields still reads something true.  whois.lua is
 * asked for the writer, or for each reader described (one call each).
 *
 * rmutex_list SCANs each primary in turn (MATCH the pattern, TYPE hash,
 * COUNT 500 a page), gives the connection back between pages, and
 * inspects each candidate.  A free lock has no keys, so only held locks
 * are found; a hash counts as a lock only if it has a lease and its first
 * field is an owner id ("...:<digits>", Redisson's form and ours), or it is
 * a read-write lock read or written.  The info filled is on the heap (with
 * its readers it is kilobytes: every call fits RMUTEX_STACK_NEED).  It is
 * O(keyspace) and meant for operators; SCAN's guarantees apply (a key
 * present for the whole walk is seen; one created or deleted during it may
 * or may not be). */
#include "call.h"
#include "conn.h"
#include "endpoint.h"
#include "inspect.h"
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

/* Whether r is an array of at least n elements. */
static int array_of(const redisReply *r, size_t n)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements >= n;
}

/* The read-write part of inspect.lua's reply (rw: {mode, writer, readers,
 * {owners}, {threads}, {lease left}, writers queued}) into *info; the
 * queue's members ("r|<id>|<owner>|<acquisition>") become "<owner>|
 * <acquisition>" and their kind. */
static int read_rw(const redisReply *rw, rmutex_lockinfo_t *info)
{
    redisReply **e = rw->element;
    if (!array_of(rw, 7) || e[0]->type != REDIS_REPLY_STRING || !array_of(e[3], 0) ||
        e[4]->elements != e[3]->elements || e[5]->elements != e[3]->elements)
        return EIO;
    info->kind = RMUTEX_KIND_RWLOCK;
    info->readers = (unsigned)e[2]->integer;
    char writer[sizeof info->owner];
    copy_str(writer, sizeof writer, e[1]);
    info->mode = writer[0] ? RMUTEX_RW_WRITE : info->readers ? RMUTEX_RW_READ : RMUTEX_RW_FREE;
    info->held = info->mode != RMUTEX_RW_FREE;
    info->holders = writer[0] ? 1 : info->readers;
    for (size_t i = 0; i < e[3]->elements && i < RMUTEX_INSPECT_READERS; i++) {
        rmutex_readerinfo_t *rd = &info->reader[i];
        copy_str(rd->owner, sizeof rd->owner, e[3]->element[i]);
        rd->holds = (unsigned)e[4]->element[i]->integer;
        rd->ttl_ms = e[5]->element[i]->integer;
        rd->held_ms = -1;
        info->readers_shown = (unsigned)i + 1;
    }
    snprintf(info->owner, sizeof info->owner, "%s",
             writer[0] ? writer : info->readers_shown ? info->reader[0].owner : "");
    info->queued_writers = (unsigned)e[6]->integer;
    info->queued_readers = info->queue_len - (info->queued_writers < info->queue_len
                                                  ? info->queued_writers : info->queue_len);
    for (unsigned i = 0; i < info->queue_shown; i++) {
        char *q = info->queue[i], *bar = strchr(q, '|'), *owner = bar ? strchr(bar + 1, '|') : NULL;
        info->queue_mode[i] = q[0];
        if (owner) memmove(q, owner + 1, strlen(owner + 1) + 1);
    }
    return 0;
}

/* inspect.lua's reply into *info. */
static int read_info(const redisReply *r, rmutex_lockinfo_t *info)
{
    redisReply **e = r->element;
    if (!array_of(r, 12) || !array_of(e[0], 0) || !array_of(e[6], 0) || !array_of(e[7], 0)) {
        rm_detail("unexpected reply from inspect.lua");
        return EIO;
    }
    memset(info, 0, sizeof *info);
    info->holders = (unsigned)e[0]->elements;
    info->held = info->holders > 0;
    if (info->held) copy_str(info->owner, sizeof info->owner, e[0]->element[0]);
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
    if (e[11]->type == REDIS_REPLY_ARRAY && read_rw(e[11], info)) {
        rm_detail("unexpected reply from inspect.lua");
        return EIO;
    }
    info->ttl_ms = info->held ? e[1]->integer : -1;
    /* A mutex's process field ("<uuid>:0") is a cache (rmutexattr_setcache). */
    size_t n = strlen(info->owner);
    if (info->kind == RMUTEX_KIND_MUTEX && info->held && n > 2 && !strcmp(info->owner + n - 2, ":0"))
        info->cached = e[10]->type == REDIS_REPLY_STRING && e[10]->len && e[10]->str[0] == 'p'
                           ? RMUTEX_CACHED_PARKED
                           : RMUTEX_CACHED_KEPT;
    return 0;
}

/* What the holder registry says of owner's process, into *f (nothing when
 * it does not announce).  A failure here leaves it unknown: the lock's own
 * state was read. */
void rm_inspect_process(struct rm_endpoint *ep, const char *lock, const char *owner,
                        int64_t server_time_ms, const struct rm_registry_fields *f,
                        rm_nsec deadline)
{
    char key[128];
    size_t klen = rm_registry_key(owner, key, sizeof key);
    if (!klen) return;
    const char *argv[] = { key, lock };
    size_t lens[] = { klen, strlen(lock) };
    redisReply *reply;
    int r = rm_call(ep, RM_SCRIPT_WHOIS, 1, 2, argv, lens, deadline, 0, &reply, NULL);
    if (r) return;
    rm_registry_read(reply, server_time_ms, f);
    freeReplyObject(reply);
}

/* Who holds it: the holder's process, or each reader's described (the
 * first one's also as the holder's). */
static void read_holders(struct rm_endpoint *ep, const char *lock, rmutex_lockinfo_t *info,
                         rm_nsec deadline)
{
    if (!info->held) return;
    if (info->mode != RMUTEX_RW_READ) {
        const struct rm_registry_fields f = RM_REGISTRY_FIELDS(info);
        rm_inspect_process(ep, lock, info->owner, info->server_time_ms, &f, deadline);
        return;
    }
    for (unsigned i = 0; i < info->readers_shown; i++) {
        rmutex_readerinfo_t *rd = &info->reader[i];
        const struct rm_registry_fields f = RM_REGISTRY_FIELDS(rd);
        rm_inspect_process(ep, lock, rd->owner, info->server_time_ms, &f, deadline);
    }
    const rmutex_readerinfo_t *first = &info->reader[0];
    info->holder_known = first->holder_known;
    info->holder_pid = first->holder_pid;
    memcpy(info->holder_host, first->holder_host, sizeof info->holder_host);
    memcpy(info->holder_exe, first->holder_exe, sizeof info->holder_exe);
    memcpy(info->holder_cmd, first->holder_cmd, sizeof info->holder_cmd);
    memcpy(info->holder_lib, first->holder_lib, sizeof info->holder_lib);
    info->held_ms = first->held_ms;
}

/* Read name's state (and its holders') into *info. */
static int inspect(struct rm_endpoint *ep, const char *name, rmutex_lockinfo_t *info)
{
    struct rm_keys k;
    struct rm_rw_keys rk;
    int r = rm_keys_make(name, &k);
    if (r) return r;
    if ((r = rm_keys_rwlock(name, &rk))) {
        rm_keys_free(&k);
        return r;
    }
    const char *shard = rm_endpoint_clustered(ep) ? "shard" : "";
    char show[8];
    snprintf(show, sizeof show, "%d", RMUTEX_INSPECT_READERS);
    enum { NKEYS = 12, NARGS = NKEYS + 5 };
    const char *argv[NARGS] = { k.lock,     k.token,    k.owner,      k.notrec,   k.queue,
                                k.alive,    rk.readers, rk.queue,     rk.writers, rk.alive,
                                rk.owner,   rk.seq,     k.channel,    shard,      rk.channel,
                                rk.holds,   show };
    size_t lens[NARGS];
    for (int i = 0; i < NARGS; i++) lens[i] = strlen(argv[i]);
    redisReply *reply;
    if (!(r = rm_call_retried(ep, RM_SCRIPT_INSPECT, NKEYS, NARGS, argv, lens, &reply))) {
        r = read_info(reply, info);
        freeReplyObject(reply);
        if (!r) read_holders(ep, k.lock, info, rm_call_deadline());
    }
    rm_keys_rw_free(&rk);
    rm_keys_free(&k);
    return r;
}

size_t rm_inspect_thread_of(const char *owner, char *buf, size_t size)
{
    static const char write[] = ":write";
    const char *bar = strchr(owner, '|');
    size_t n = bar ? (size_t)(bar - owner) : strlen(owner);
    if (n > sizeof write - 1 && !memcmp(owner + n - (sizeof write - 1), write, sizeof write - 1))
        n -= sizeof write - 1;
    if (!n || n >= size || (n > 2 && !memcmp(owner + n - 2, ":0", 2))) return 0;
    memcpy(buf, owner, n);
    buf[n] = 0;
    return n;
}

int rm_inspect_holder(struct rm_endpoint *ep, const char *name, char *buf, size_t size)
{
    rmutex_lockinfo_t *info = malloc(sizeof *info); /* (see rmutex_inspect) */
    if (!info) return ENOMEM;
    int r = inspect(ep, name, info);
    if (!r && (!info->held || info->mode == RMUTEX_RW_READ ||
               !rm_inspect_thread_of(info->owner, buf, size)))
        r = ENOENT;
    free(info);
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
    /* (On the heap: with its readers it is kilobytes, and every call fits
     * in RMUTEX_STACK_NEED.) */
    rmutex_lockinfo_t *info = malloc(sizeof *info);
    if (!info) {
        rm_detail("out of memory");
        return rm_entry_leave(&e, ENOMEM);
    }
    if (!(r = rm_session_enter(&ep))) {
        r = inspect(ep, name, info);
        rm_session_leave();
    }
    if (!r) memcpy(out, info, size < sizeof *info ? size : sizeof *info);
    free(info);
    return rm_entry_leave(&e, r);
}

/* A held hash with a lease whose field is an owner id ("...:<digits>"), or
 * a read-write lock read or written. */
static int looks_like_lock(const rmutex_lockinfo_t *in)
{
    if (!in->held || in->ttl_ms <= 0) return 0;
    if (in->kind == RMUTEX_KIND_RWLOCK) return 1;
    const char *colon = strrchr(in->owner, ':');
    if (!colon || colon == in->owner || !colon[1]) return 0;
    for (const char *p = colon + 1; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

int rm_inspect_node_call(struct rm_node *n, int argc, const char **argv, redisReply **out)
{
    rm_nsec deadline = rm_call_deadline();
    struct rm_conn *c;
    int r = rm_pool_get(&n->pool, deadline, 0, &c);
    if (r) return r;
    size_t lens[16];
    for (int i = 0; i < argc && i < 16; i++) lens[i] = strlen(argv[i]);
    r = rm_conn_call(c, argc, argv, lens, deadline, out);
    rm_pool_put(&n->pool, c, r == 0);
    if (r) return r;
    if ((r = rm_conn_reply_status(*out))) freeReplyObject(*out);
    return r;
}

int rm_inspect_scan_page(struct rm_node *n, char *cursor, size_t cursor_size, const char *pattern,
                         redisReply **out)
{
    const char *argv[] = { "SCAN", cursor, "MATCH", pattern, "COUNT", "500", "TYPE", "hash" };
    redisReply *reply;
    int r = rm_inspect_node_call(n, 8, argv, &reply);
    if (r) return r;
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
    rmutex_lockinfo_t *info = malloc(sizeof *info); /* (see rmutex_inspect) */
    if (!info) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    int r = 0;
    do {
        redisReply *page;
        if ((r = rm_inspect_scan_page(n, cursor, sizeof cursor, pattern, &page))) break;
        redisReply *keys = page->element[1];
        for (size_t i = 0; !r && i < keys->elements; i++) {
            const redisReply *key = keys->element[i];
            if (key->type != REDIS_REPLY_STRING || strlen(key->str) != key->len) continue;
            int ri = inspect(ep, key->str, info);
            if (ri == EINVAL) continue; /* not a lock name, or not a lock any more */
            if (ri) r = ri;
            else if (looks_like_lock(info)) r = fn(key->str, info, arg);
        }
        freeReplyObject(page);
    } while (!r && strcmp(cursor, "0"));
    free(info);
    return r;
}

int rm_inspect_each_primary(int (*fn)(struct rm_endpoint *ep, struct rm_node *n, void *arg),
                            void *arg)
{
    struct rm_endpoint *ep;
    int r = rm_session_enter(&ep);
    if (r) return r;
    enum { MAX = 1024 }; /* Redis Cluster's own bound on primaries */
    struct rm_node **primaries = malloc(MAX * sizeof *primaries);
    int count = primaries ? rm_endpoint_primaries(ep, primaries, MAX, rm_call_deadline()) : 0;
    r = !primaries ? ENOMEM : !count ? ETIMEDOUT : 0;
    for (int i = 0; !r && i < count; i++) r = fn(ep, primaries[i], arg);
    free(primaries);
    rm_session_leave();
    return r < 0 ? ETIMEDOUT : r;
}

struct listing {
    const char *pattern;
    rmutex_list_fn fn;
    void *arg;
};

static int list_primary(struct rm_endpoint *ep, struct rm_node *n, void *arg)
{
    struct listing *x = arg;
    return list_node(ep, n, x->pattern, x->fn, x->arg);
}

int rm_inspect_walk(int has_callback, int (*fn)(struct rm_endpoint *ep, struct rm_node *n, void *arg),
                    void *arg)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    if (!has_callback) {
        rm_detail("the callback is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    return rm_entry_leave(&e, rm_inspect_each_primary(fn, arg));
}

RMUTEX_API int rmutex_list(const char *pattern, rmutex_list_fn fn, void *arg)
{
    struct listing x = { pattern ? pattern : "*", fn, arg };
    return rm_inspect_walk(fn != NULL, list_primary, &x);
}
