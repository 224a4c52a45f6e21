/* deadlock.c -- does this thread's wait close a cycle of waits?
 *
 * DESIGN
 * ------
 * A thread whose mutex asks for it (an ERRORCHECK mutex with
 * rmutexattr_setdeadlock_detect) and that has waited long enough follows
 * the chain its wait starts, in Redis: the lock it waits for is held by
 * thread T1 (the lock's hash, inspect.lua), T1's process announces what T1
 * waits for (its registry entry's "wait:<T1>", whois.lua), that lock is
 * held by T2, and so on.  The chain ends at a free lock, a thread that
 * does not wait (or whose process does not announce), a lock read (a
 * read-write lock's readers are processes, not threads) or a cache's hold
 * -- no cycle through us -- or back at this thread: a cycle, a deadlock no
 * member can leave by itself.  A chain that loops without us is someone
 * else's cycle, not ours to break.  At most MAX_CHAIN steps.
 *
 * Only a cycle every wait of which has lasted the threshold counts: each
 * wait in it is then announced and renewed, and a snapshot of entries
 * written at different times cannot make one out of waits that already
 * ended.  Of the members that detect (the "d" of their entry), the one
 * with the youngest wait (ties: the greater owner id) gives up, so that a
 * cycle of detecting threads loses one wait, not all of them; the others
 * see the cycle gone at their next look.  Every member judges by the same
 * numbers: each wait's start as the registry has it (server time, written
 * once: announce.lua keeps it), its own too.
 *
 * What it cannot see: waits shorter than the announce delay, processes
 * with RMUTEX_ANNOUNCE=0 or announce_wait=0, clients of other libraries
 * (Redisson's), a thread queued behind its own process's thread at the
 * non-fair mutex's gate, read holds.  It costs nothing before the
 * threshold, then two or three calls per member once a second. */
#include "deadlock.h"
#include "call.h"
#include "inspect.h"
#include "internal.h"
#include "registry.h"
#include "script.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CHAIN = 16 };

rm_nsec rm_deadlock_threshold(void)
{
    return 2 * RM_MSEC(RM_SETTING(announce_wait_ms)) + RM_MSEC(rm_registry_period_ms());
}

struct member {
    char owner[64];
    long long since_ms, waited_ms; /* server time */
    int detect;
};

/* What thread (owner) waits for, per its process's entry: 0 with *m and
 * lock filled; -1 when it does not wait (as far as the registry says). */
static int wait_of(struct rm_endpoint *ep, const char *owner, struct member *m, char *lock,
                   size_t lock_size)
{
    char key[128];
    size_t klen = rm_registry_key(owner, key, sizeof key);
    if (!klen) return -1;
    const char *argv[] = { key, "", owner };
    size_t lens[] = { klen, 0, strlen(owner) };
    redisReply *reply;
    if (rm_call(ep, RM_SCRIPT_WHOIS, 1, 3, argv, lens, rm_call_deadline(), 0, &reply, NULL))
        return -1;
    struct rm_registry_waitfield f;
    int r = -1;
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 8 &&
        reply->element[6]->type == REDIS_REPLY_STRING &&
        reply->element[7]->type == REDIS_REPLY_INTEGER &&
        !rm_registry_parse_wait(reply->element[6]->str, reply->element[6]->len, &f) &&
        RM_REGISTRY_WAIT_FOR_HOLDER(f.kind) && f.lock_len < lock_size) {
        snprintf(m->owner, sizeof m->owner, "%s", owner);
        m->since_ms = f.since_ms;
        m->waited_ms = reply->element[7]->integer - f.since_ms;
        m->detect = f.detect;
        memcpy(lock, f.lock, f.lock_len);
        lock[f.lock_len] = 0;
        r = 0;
    }
    freeReplyObject(reply);
    return r;
}

/* What one look needs (on the heap: the caller's stack may be small,
 * RMUTEX_STACK_NEED). */
struct look {
    struct member chain[MAX_CHAIN + 1];
    char at[RMUTEX_NAME_MAX + 1], holder[64];
};

/* 1 when owner's wait closes a cycle it is the one to break (see the
 * header), with x's chain filled. */
static int closes(struct rm_endpoint *ep, const char *lock, const char *owner, struct look *x)
{
    struct member *chain = x->chain;
    /* Our own wait as the registry has it: every member judges the same
     * numbers (a wait's moment is written once: announce.lua). */
    if (wait_of(ep, owner, &chain[0], x->at, sizeof x->at) || strcmp(x->at, lock)) return 0;
    int n = 1;
    for (;;) {
        if (rm_inspect_holder(ep, x->at, x->holder, sizeof x->holder)) return 0;
        if (!strcmp(x->holder, owner)) break; /* back at us: a cycle */
        for (int i = 1; i < n; i++)
            if (!strcmp(chain[i].owner, x->holder)) return 0; /* a cycle without us */
        if (n > MAX_CHAIN || wait_of(ep, x->holder, &chain[n], x->at, sizeof x->at)) return 0;
        n++;
    }
    long long threshold = rm_deadlock_threshold() / RM_MSEC(1);
    int breaker = 0;
    for (int i = 0; i < n; i++) {
        if (chain[i].waited_ms < threshold) return 0;
        const struct member *b = &chain[breaker];
        if (chain[i].detect && (chain[i].since_ms > b->since_ms ||
                                (chain[i].since_ms == b->since_ms &&
                                 strcmp(chain[i].owner, b->owner) > 0)))
            breaker = i;
    }
    if (breaker) return 0;
    rm_detail("waiting for %s closes a cycle of %d waiting threads (after %s, %s%s); "
              "the youngest wait gives up",
              lock, n, n > 1 ? chain[1].owner : owner, n > 2 ? chain[2].owner : "",
              n > 3 ? ", ..." : "");
    return 1;
}

int rm_deadlock_closed(struct rm_endpoint *ep, const char *lock, const char *owner, rm_nsec waited)
{
    if (waited < rm_deadlock_threshold()) return 0;
    struct look *x = malloc(sizeof *x);
    if (!x) return 0; /* (looked for again in a second) */
    int r = closes(ep, lock, owner, x);
    free(x);
    return r;
}
