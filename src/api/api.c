/* api.c -- the public rmutex_* entry points.
 *
 * Each entry point saves errno and disables cancellation (the calls are
 * not cancellation points, and a blocking network wait must not be
 * cancelled half-way), checks its arguments, applies the type rules of
 * glibc (ERRORCHECK, RECURSIVE, robust) with no round trip, and hands the
 * rest to the mutex's lock algorithm.  A RECURSIVE relock, and the unlock
 * of an inner level, never reach Redis. */
#include "attr.h"
#include "call.h"
#include "endpoint.h"
#include "hold.h"
#include "thread.h"
#include "internal.h"
#include "keys.h"
#include "lock.h"
#include "names.h"
#include "mutex.h"
#include "runtime.h"
#include "session.h"
#include "script.h"
#include "watchdog.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

RMUTEX_API unsigned rmutex_version(void) { return RMUTEX_VERSION_NUM; }

RMUTEX_API const char *rmutex_version_string(void) { return RM_VERSION_STRING; }

RMUTEX_API int rmutex_init(rmutex_t *m, const char *name, const rmutexattr_t *attr)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int kind = 0, r;
    unsigned long lease = 0;
    if (!m) {
        rm_detail("the mutex is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    if (attr && (r = rm_attr_kind(attr, &kind, &lease))) {
        rm_detail("the attributes were not initialized");
        return rm_entry_leave(&e, r);
    }
    return rm_entry_leave(&e, rm_mutex_init(m, name, kind, lease));
}

RMUTEX_API int rmutex_destroy(rmutex_t *m)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    return rm_entry_leave(&e, rm_mutex_destroy(m));
}

/* The calling thread relocks a name it holds (h), through handle mx,
 * possibly another handle of the same name: the handle's type decides. */
static int relock(struct rm_mutex *mx, struct rm_hold *h, const struct rm_wait *w)
{
    struct rm_lock *l = mx->lock;
    if (mx->type == RMUTEX_ERRORCHECK) {
        pthread_mutex_unlock(&l->mu);
        rm_detail("the calling thread already holds %s", l->keys.lock);
        return w->mode == RM_WAIT_TRY ? EBUSY : EDEADLK;
    }
    if (mx->type == RMUTEX_RECURSIVE) {
        int r = 0;
        if (h->depth >= RMUTEX_RECURSION_MAX) {
            rm_detail("%s is already held %u times", l->keys.lock, h->depth);
            r = EAGAIN;
        } else {
            h->depth++;
        }
        pthread_mutex_unlock(&l->mu);
        return r;
    }
    /* NORMAL: relocking deadlocks, as in glibc; trylock is EBUSY, a timed
     * lock waits for its deadline. */
    pthread_mutex_unlock(&l->mu);
    rm_detail("the calling thread already holds %s (a NORMAL mutex: relocking deadlocks)",
              l->keys.lock);
    int r = rm_wait_check(w);
    if (r) return r;
    do rm_clock_sleep_until(w->deadline == RM_FOREVER ? rm_clock_after(RM_MSEC(3600000)) : w->deadline);
    while (rm_clock_now() < w->deadline);
    return ETIMEDOUT;
}

/* A lock call of self's got l: into the wait-time histograms if it waited
 * (the gate or Redis said busy: one clock read), else one more uncontended
 * acquisition (no clock read). */
static void count_wait(struct rm_lock *l, struct rm_thread *self)
{
    if (!self->wait_began) {
        RM_COUNT(uncontended);
        RM_NAMES_COUNT(l->stats, uncontended);
        return;
    }
    rm_nsec waited = rm_clock_now() - self->wait_began;
    rm_stats_record(&rm_counters.wait_time, waited);
    rm_stats_record(&l->stats->wait_time, waited);
    RM_NAMES_COUNT(l->stats, contended);
}

static int lock_common(rmutex_t *m, struct rm_wait *w)
{
    int r;
    struct rm_mutex *mx = rm_mutex_get(m, &r);
    if (!mx) return r;
    struct rm_lock *l = mx->lock;
    struct rm_thread *self = rm_thread_self();
    pthread_mutex_lock(&l->mu);
    struct rm_hold *h = rm_hold_of(l, self);
    if (h) return relock(mx, h, w); /* unlocks l->mu */
    mx->users++;
    pthread_mutex_unlock(&l->mu);

    struct rm_endpoint *ep;
    self->wait_began = 0;
    if (!(r = rm_session_enter(&ep))) {
        r = mx->ops->lock(mx, self, ep, w);
        rm_session_leave();
    }
    if (!r || r == EOWNERDEAD) count_wait(l, self);
    pthread_mutex_lock(&l->mu);
    mx->users--;
    pthread_mutex_unlock(&l->mu);
    return r;
}

RMUTEX_API int rmutex_lock(rmutex_t *m)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    struct rm_wait w = { RM_WAIT_FOREVER, 0, RM_FOREVER };
    return rm_entry_leave(&e, lock_common(m, &w));
}

RMUTEX_API int rmutex_trylock(rmutex_t *m)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    struct rm_wait w = { RM_WAIT_TRY, 0, 0 };
    return rm_entry_leave(&e, lock_common(m, &w));
}

RMUTEX_API int rmutex_timedlock(rmutex_t *m, const struct timespec *abstime)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    struct rm_wait w;
    rm_wait_timed(&w, CLOCK_REALTIME, abstime);
    return rm_entry_leave(&e, lock_common(m, &w));
}

RMUTEX_API int rmutex_clocklock(rmutex_t *m, clockid_t clock, const struct timespec *abstime)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) {
        rm_detail("clocklock accepts CLOCK_REALTIME and CLOCK_MONOTONIC only");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_wait w;
    rm_wait_timed(&w, clock, abstime);
    return rm_entry_leave(&e, lock_common(m, &w));
}

RMUTEX_API int rmutex_unlock(rmutex_t *m)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_mutex *mx = rm_mutex_get(m, &r);
    if (!mx) return rm_entry_leave(&e, r);
    struct rm_lock *l = mx->lock;
    struct rm_thread *self = rm_thread_self();
    pthread_mutex_lock(&l->mu);
    struct rm_hold *h = rm_hold_of(l, self);
    if (!h) {
        pthread_mutex_unlock(&l->mu);
        if (rm_hold_forget(l, self))
            rm_detail("the calling thread's hold of %s was lost, and another thread of this "
                      "process has taken it since", l->keys.lock);
        else
            rm_detail("the calling thread does not hold %s", l->keys.lock);
        return rm_entry_leave(&e, EPERM);
    }
    /* The hold is released the way it was taken: through its handle. */
    struct rm_mutex *via = h->via;
    int dropped = 0;
    if (h->depth > 1) {
        if (via->robust && h->inconsistent) {
            dropped = 1; /* glibc: all levels go, ENOTRECOVERABLE */
        } else if (!h->wd || !rm_watchdog_lost(h->wd)) {
            h->depth--;
            pthread_mutex_unlock(&l->mu);
            return rm_entry_leave(&e, 0);
        }
        /* Lost: the whole hold goes, at whatever level, with EPERM below. */
    }
    int notrec = via->robust && h->inconsistent;
    pthread_mutex_unlock(&l->mu);

    struct rm_endpoint *ep;
    if (!(r = rm_session_enter(&ep))) {
        r = via->ops->unlock(via, self, ep, notrec);
        rm_session_leave();
    }
    if (!r && dropped) {
        rm_detail("%s was released at all levels and is now not recoverable", l->keys.lock);
        r = ENOTRECOVERABLE;
    }
    return rm_entry_leave(&e, r);
}

RMUTEX_API int rmutex_consistent(rmutex_t *m)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r;
    struct rm_mutex *mx = rm_mutex_get(m, &r);
    if (!mx) return rm_entry_leave(&e, r);
    struct rm_lock *l = mx->lock;
    struct rm_thread *self = rm_thread_self();
    r = 0;
    pthread_mutex_lock(&l->mu);
    struct rm_hold *h = rm_hold_of(l, self);
    if (!mx->robust) {
        r = EINVAL;
        rm_detail("%s is not robust", l->keys.lock);
    } else if (!h) {
        r = EPERM;
        rm_detail("the calling thread does not hold %s", l->keys.lock);
    } else if (!h->inconsistent) {
        r = EINVAL;
        rm_detail("%s is not in the inconsistent state", l->keys.lock);
    } else {
        h->inconsistent = 0;
    }
    pthread_mutex_unlock(&l->mu);
    return rm_entry_leave(&e, r);
}


RMUTEX_API int rmutex_hold_deadline(rmutex_t *m, struct timespec *deadline)
{
    struct rm_entry e;
    struct rm_thread *self;
    int r;
    rm_entry_enter(&e);
    struct rm_mutex *mx = rm_mutex_query(m, deadline, &self, &r);
    if (!mx) return rm_entry_leave(&e, r);
    struct rm_lock *l = mx->lock;
    pthread_mutex_lock(&l->mu);
    struct rm_hold *h = rm_hold_of(l, self);
    struct rm_watchdog_entry *wd = h ? h->wd : NULL;
    rm_nsec until = h ? h->lease_end : 0;
    int lost = wd && rm_watchdog_lost(wd);
    pthread_mutex_unlock(&l->mu);
    if (!h || lost) {
        rm_detail("the calling thread does not hold %s%s", l->keys.lock,
                  h ? " any more (its lease was lost)" : "");
        return rm_entry_leave(&e, EPERM);
    }
    /* (The entry lives until this thread's unlock: reading it unlocked is
     * safe.) */
    if (wd) until = rm_watchdog_valid_until(wd);
    deadline->tv_sec = (time_t)(until / 1000000000);
    deadline->tv_nsec = (long)(until % 1000000000);
    return rm_entry_leave(&e, 0);
}

RMUTEX_API int rmutex_owner_id(char *buf, size_t size)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    if (!buf) {
        rm_detail("the buffer is NULL");
        return rm_entry_leave(&e, EINVAL);
    }
    struct rm_thread *self = rm_thread_self();
    if (size <= self->owner_len) {
        rm_detail("the owner id needs %zu bytes", self->owner_len + 1);
        return rm_entry_leave(&e, ERANGE);
    }
    memcpy(buf, self->owner, self->owner_len);
    buf[self->owner_len] = 0;
    return rm_entry_leave(&e, 0);
}

RMUTEX_API int rmutex_holdcount(rmutex_t *m, unsigned *count)
{
    struct rm_entry e;
    struct rm_thread *self;
    int r;
    rm_entry_enter(&e);
    struct rm_mutex *mx = rm_mutex_query(m, count, &self, &r);
    if (!mx) return rm_entry_leave(&e, r);
    pthread_mutex_lock(&mx->lock->mu);
    struct rm_hold *h = rm_hold_of(mx->lock, self);
    *count = h ? h->depth : 0;
    pthread_mutex_unlock(&mx->lock->mu);
    return rm_entry_leave(&e, 0);
}

/* force_unlock.lua for name, only if owner ("": anyone) holds it.  0
 * released, ENOENT free, ESRCH held by another; the holder's field into
 * holder (when given). */
static int force_unlock(const char *name, const char *owner, char *holder, size_t holder_size)
{
    struct rm_keys k;
    struct rm_endpoint *ep;
    int r = rm_keys_make(name, &k);
    if (r) return r;
    if ((r = rm_session_enter(&ep))) {
        rm_keys_free(&k);
        return r;
    }
    const char *argv[] = { k.lock, k.channel, k.owner, k.notrec, rm_endpoint_publish(ep), owner };
    size_t lens[] = { strlen(k.lock), strlen(k.channel), strlen(k.owner), strlen(k.notrec),
                      strlen(argv[4]), strlen(owner) };
    if (holder && holder_size) holder[0] = 0;
    redisReply *reply;
    /* Asked again after a lost reply: finding it free then is the same
     * answer (ENOENT, 0 to rmutex_force_unlock). */
    if (!(r = rm_call_retried(ep, RM_SCRIPT_FORCE_UNLOCK, 4, 6, argv, lens, &reply))) {
        redisReply **e = reply->element;
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 ||
            e[0]->type != REDIS_REPLY_INTEGER) {
            rm_detail("unexpected reply from force_unlock.lua");
            r = EIO;
        } else {
            int released = e[0]->integer == 1, held = reply->elements > 1;
            if (held && holder && holder_size && e[1]->type == REDIS_REPLY_STRING)
                snprintf(holder, holder_size, "%.*s", (int)e[1]->len, e[1]->str);
            r = released ? 0 : held ? ESRCH : ENOENT;
            if (r == ESRCH) rm_detail("%s is held by another owner than %s; left alone", k.lock, owner);
            if (r == ENOENT) rm_detail("%s was not held", k.lock);
            rm_log("force-unlock of %s: %s", k.lock, released ? "released" : held ? "held by another" : "free");
        }
        freeReplyObject(reply);
    }
    rm_session_leave();
    rm_keys_free(&k);
    return r;
}

RMUTEX_API int rmutex_force_unlock(const char *name)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    int r = force_unlock(name, "", NULL, 0);
    return rm_entry_leave(&e, r == ENOENT ? 0 : r);
}

RMUTEX_API int rmutex_force_unlock_owner(const char *name, const char *owner_id, char *holder,
                                         size_t holder_size)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    return rm_entry_leave(&e, force_unlock(name, owner_id ? owner_id : "", holder, holder_size));
}

RMUTEX_API int rmutex_configure(const char *url)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    return rm_entry_leave(&e, rm_session_configure(url));
}

RMUTEX_API int rmutex_shutdown(void)
{
    struct rm_entry e;
    rm_entry_enter(&e);
    return rm_entry_leave(&e, rm_runtime_shutdown());
}
