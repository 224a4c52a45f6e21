/* fence.c -- rmutex_fence(): the calling thread's fencing token.
 *
 * A thread's hold asks once and keeps its token (token.c takes it from
 * Redis).  A hold of a cached lock (cache.c) is a new owner each time a
 * thread takes it from the cache; the cache reserves a range of tokens in
 * one call and hands them out in order, so those holds get greater tokens
 * without a round trip each. */
#include "cache.h"
#include "hold.h"
#include "internal.h"
#include "lock.h"
#include "mutex.h"
#include "session.h"
#include "token.h"
#include "thread.h"
#include "watchdog.h"

#include <errno.h>
#include <string.h>

RMUTEX_API int rmutex_fence(rmutex_t *m, uint64_t *token)
{
    struct rm_entry e;
    struct rm_thread *self;
    int r;
    rm_entry_enter(&e);
    struct rm_mutex *mx = rm_mutex_query(m, token, &self, &r);
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
            struct rm_endpoint *ep;
            if (!(r = rm_session_enter(&ep))) {
                r = rm_token_take(ep, l->keys.lock, l->keys.token, self->owner, self->owner_len, acq, 1,
                                  &got);
                rm_session_leave();
            }
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
