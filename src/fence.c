/* fence.c -- fencing tokens: rmutex_fence().
 *
 * A token is taken when a holder first asks for one, not at every
 * acquisition: fence.lua INCRs the name's counter only while the asking
 * hold is in Redis, so every later holder that asks gets a greater number.
 * A thread's hold asks once and keeps its token.  A hold of a cached lock
 * (cache.c) is a new owner each time a thread takes it from the cache; the
 * cache reserves a range of tokens in one call and hands them out in
 * order, so those holds get greater tokens without a round trip each. */
#include "cache.h"
#include "call.h"
#include "endpoint.h"
#include "hold.h"
#include "internal.h"
#include "lock.h"
#include "mutex.h"
#include "runtime.h"
#include "script.h"
#include "thread.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

int rm_fence_take(struct rm_lock *l, const char *owner, size_t owner_len, uint64_t acq,
                  unsigned count, uint64_t *token)
{
    struct rm_endpoint *ep;
    int r = rm_runtime_enter(&ep);
    if (r) return r;
    char acqs[24], counts[16];
    snprintf(acqs, sizeof acqs, "%llu", (unsigned long long)acq);
    snprintf(counts, sizeof counts, "%u", count);
    const char *argv[] = { l->keys.lock, l->keys.token, owner, acqs, counts };
    size_t lens[] = { strlen(argv[0]), strlen(argv[1]), owner_len, strlen(acqs), strlen(counts) };
    rm_nsec deadline = rm_call_deadline();
    for (int tries = 0; tries < 3; tries++) {
        redisReply *reply;
        r = rm_call(ep, RM_SCRIPT_FENCE, 2, 5, argv, lens, deadline, 0, &reply, NULL);
        if (r > 0) break;
        if (r) continue; /* an INCR whose reply was lost only skips numbers */
        if (reply->type != REDIS_REPLY_INTEGER) {
            rm_detail("unexpected reply from fence.lua");
            r = EIO;
        } else if (reply->integer <= 0) {
            rm_detail("%s is not held by this thread in Redis (its lease ran out, or it was "
                      "force-unlocked)", l->keys.lock);
            r = EPERM;
        } else {
            *token = (uint64_t)reply->integer;
        }
        freeReplyObject(reply);
        break;
    }
    rm_runtime_leave();
    return r < 0 ? ETIMEDOUT : r;
}

RMUTEX_API int rmutex_fence(rmutex_t *m, uint64_t *token)
{
    struct rm_entry e;
    struct rm_thread *self;
    int r;
    rm_entry_enter(&e);
    struct rm_mutex *mx = rm_api_query(m, token, &self, &r);
    if (!mx) return rm_entry_leave(&e, r);
    struct rm_lock *l = mx->lock;
    pthread_mutex_lock(&l->mu);
    struct rm_hold *h = rm_hold_of(l, self);
    if (h && !h->token && !(h->wd && rm_watchdog_lost(h->wd))) {
        if (h->shared) {
            r = rm_cache_token_locked(l, self, h);
        } else {
            /* The first ask of this hold: take one from Redis, with no lock
             * held (only this thread can end its own hold meanwhile). */
            uint64_t acq = h->acq, got = 0;
            pthread_mutex_unlock(&l->mu);
            r = rm_fence_take(l, self->owner, self->owner_len, acq, 1, &got);
            pthread_mutex_lock(&l->mu);
            h = rm_hold_of(l, self);
            if (!r && h && h->acq == acq && !h->token) h->token = got;
        }
        h = rm_hold_of(l, self);
    }
    if (!r && (!h || (h->wd && rm_watchdog_lost(h->wd)))) {
        r = EPERM;
        rm_detail("the calling thread does not hold %s%s", l->keys.lock,
                  h ? " any more (its lease was lost)" : "");
    } else if (!r) {
        *token = h->token;
    }
    pthread_mutex_unlock(&l->mu);
    return rm_entry_leave(&e, r);
}
