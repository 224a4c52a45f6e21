/* waits.c -- rmutex_waits: every wait the processes announce.
 *
 * DESIGN
 * ------
 * A process lists its threads' long waits in its holder-registry entry
 * (registry.c: "wait:<owner>" = "<server ms>|<kind>|<d or ->|<name>").
 * There is no index of the entries: each process's key,
 * rmutex_client:{<uuid>}, lives on whichever primary serves its slot.  So
 * this SCANs every primary for them (MATCH rmutex_client:*, TYPE hash),
 * reads each entry whole (HGETALL, on the node that served the SCAN) and
 * the node's TIME once per page, and gives each wait with its process's
 * description; a timed wait past its deadline ("until:<owner>", written
 * with it) is over and left out, though its process may not have
 * rewritten its entry yet.  O(keyspace), for operators: `rmutex status NAME` (the
 * waiters of one lock), `rmutex deadlocks` (the wait-for graph).  An
 * entry read mid-rewrite is whole or absent (announce.lua rewrites it in
 * one script).  metrics.c reads the same entries for their counters
 * (rm_waits_each_entry: every entry, with its node's time). */
#include "waits.h"
#include "inspect.h"
#include "internal.h"
#include "registry.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct walk {
    rm_waits_entry_fn fn;
    void *arg;
    long long server_ms;
};

static int field_is(const redisReply *f, const char *name)
{
    return f->type == REDIS_REPLY_STRING && f->len == strlen(name) && !memcmp(f->str, name, f->len);
}

static void text_of(char *dst, size_t n, const redisReply *v)
{
    snprintf(dst, n, "%.*s", v->type == REDIS_REPLY_STRING ? (int)v->len : 0,
             v->type == REDIS_REPLY_STRING ? v->str : "");
}

void rm_waits_describe(const redisReply *h, const struct rm_waits_process *p)
{
    for (size_t i = 0; h->type == REDIS_REPLY_ARRAY && i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i], *v = h->element[i + 1];
        if (field_is(f, "host")) text_of(p->host, p->host_size, v);
        else if (field_is(f, "exe")) text_of(p->exe, p->exe_size, v);
        else if (field_is(f, "cmd")) text_of(p->cmd, p->cmd_size, v);
        else if (field_is(f, "lib")) text_of(p->lib, p->lib_size, v);
        else if (field_is(f, "pid") && v->type == REDIS_REPLY_STRING) *p->pid = strtol(v->str, NULL, 10);
    }
}

/* rmutex_waits' walk: the name asked (NULL: all), its callback, where
 * each wait is made. */
struct waits {
    const char *name;
    rmutex_waits_fn fn;
    void *arg;
    rmutex_waitinfo_t *info;
};

/* Whether entry h says the timed wait of owner (len bytes) is past its
 * deadline ("until:<owner>" at or before server_ms): over, not shown. */
static int past_deadline(const redisReply *h, const char *owner, size_t len, long long server_ms)
{
    static const char prefix[] = "until:";
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i], *v = h->element[i + 1];
        if (f->type == REDIS_REPLY_STRING && f->len == sizeof prefix - 1 + len &&
            !memcmp(f->str, prefix, sizeof prefix - 1) && !memcmp(f->str + sizeof prefix - 1, owner, len))
            return v->type == REDIS_REPLY_STRING && strtoll(v->str, NULL, 10) <= server_ms;
    }
    return 0;
}

/* One entry (HGETALL's reply): its process first, then fn for each wait. */
static int each_wait(const char *key, const redisReply *h, long long server_ms, void *arg)
{
    RM_UNUSED(key);
    struct waits *x = arg;
    rmutex_waitinfo_t *in = x->info;
    memset(in, 0, sizeof *in);
    rm_waits_describe(h, &(struct rm_waits_process)RM_WAITS_PROCESS(in));
    static const char prefix[] = "wait:";
    for (size_t i = 0; h->type == REDIS_REPLY_ARRAY && i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i], *v = h->element[i + 1];
        struct rm_registry_waitfield w;
        if (f->type != REDIS_REPLY_STRING || f->len <= sizeof prefix - 1 ||
            f->len - (sizeof prefix - 1) >= sizeof in->owner ||
            memcmp(f->str, prefix, sizeof prefix - 1) || v->type != REDIS_REPLY_STRING ||
            rm_registry_parse_wait(v->str, v->len, &w) || w.lock_len >= sizeof in->name)
            continue;
        if (x->name && (strlen(x->name) != w.lock_len || memcmp(x->name, w.lock, w.lock_len)))
            continue;
        if (past_deadline(h, f->str + sizeof prefix - 1, f->len - (sizeof prefix - 1), server_ms))
            continue;
        snprintf(in->owner, sizeof in->owner, "%.*s", (int)(f->len - (sizeof prefix - 1)),
                 f->str + sizeof prefix - 1);
        memcpy(in->name, w.lock, w.lock_len);
        in->name[w.lock_len] = 0;
        in->kind = w.kind;
        in->detect = w.detect;
        in->waited_ms = server_ms > w.since_ms ? server_ms - w.since_ms : 0;
        int r = x->fn(in, x->arg);
        if (r) return r;
    }
    return 0;
}

/* The server's time in ms on n. */
static int server_ms(struct rm_node *n, long long *ms)
{
    const char *argv[] = { "TIME" };
    redisReply *t;
    int r = rm_inspect_node_call(n, 1, argv, &t);
    if (r) return r;
    if (t->type == REDIS_REPLY_ARRAY && t->elements == 2 && t->element[0]->type == REDIS_REPLY_STRING)
        *ms = strtoll(t->element[0]->str, NULL, 10) * 1000 +
              strtoll(t->element[1]->str, NULL, 10) / 1000;
    else r = EIO;
    freeReplyObject(t);
    return r;
}

static int walk_node(struct rm_endpoint *ep, struct rm_node *n, void *arg)
{
    RM_UNUSED(ep);
    struct walk *x = arg;
    char cursor[32] = "0";
    int r = 0;
    do {
        redisReply *page;
        if ((r = rm_inspect_scan_page(n, cursor, sizeof cursor, "rmutex_client:*", &page))) break;
        redisReply *keys = page->element[1];
        if (keys->elements) r = server_ms(n, &x->server_ms);
        for (size_t i = 0; !r && i < keys->elements; i++) {
            const redisReply *key = keys->element[i];
            if (key->type != REDIS_REPLY_STRING || strlen(key->str) != key->len) continue;
            const char *argv[] = { "HGETALL", key->str };
            redisReply *h;
            if ((r = rm_inspect_node_call(n, 2, argv, &h))) break;
            if (h->type == REDIS_REPLY_ARRAY) r = x->fn(key->str, h, x->server_ms, x->arg);
            freeReplyObject(h);
        }
        freeReplyObject(page);
    } while (!r && strcmp(cursor, "0"));
    return r;
}

int rm_waits_each_entry(int has_callback, rm_waits_entry_fn fn, void *arg)
{
    struct walk x = { fn, arg, 0 };
    return rm_inspect_walk(has_callback, walk_node, &x);
}

RMUTEX_API int rmutex_waits(const char *name, rmutex_waits_fn fn, void *arg)
{
    struct waits x = { name, fn, arg, NULL };
    if (fn && !(x.info = malloc(sizeof *x.info))) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    int r = rm_waits_each_entry(fn != NULL, each_wait, &x);
    free(x.info);
    return r;
}
