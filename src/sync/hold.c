/* hold.c -- holds: one per acquisition, owned by one thread.
 *
 * A hold is made when rmutex_lock (or trylock...) gets the lock in Redis and
 * lives until its thread's last unlock or the thread's exit, whichever is
 * first; nothing else ends it.  It is on two lists: its lock's current hold
 * (l->hold, under l->mu) and its thread's holds (touched by that thread
 * only).  The two can disagree in one way: a hold whose lease was lost (a
 * stall longer than the lease, a force-unlock) can be replaced, in Redis
 * and then as l->hold, by another thread's acquisition.  The replaced hold
 * stays on its thread's list, known to be stale because l->hold is no
 * longer it, until that thread unlocks (EPERM, and the stale hold is freed)
 * or exits (freed, touching nothing else).  So the exit of a thread whose
 * hold was lost can never end the hold of the thread that took the lock
 * after it -- a hold belongs to exactly one thread and is ended once.
 *
 * A hold keeps a reference to its lock, so the lock outlives every hold,
 * stale or not, even when all its handles are destroyed meanwhile.
 *
 * A thread that exits while holding mutexes would otherwise leave them
 * held, and renewed by the watchdog, for as long as the process lives.  A
 * thread's first hold arms a thread-specific-data destructor that ends its
 * holds: renewal stops, the lease runs out, and the next robust locker gets
 * EOWNERDEAD -- glibc's behaviour for a robust mutex whose owner thread
 * exits.  A thread that exits inside a cached mutex ends its process's
 * cache of it the same way (cache.c).
 *
 * A hold remembers when it began (its acquiring request's send time, read
 * from the grant: no clock read) and its last unlock adds how long it
 * lasted to the hold-time histograms, the process's and its name's
 * (rmutex_stats, names.c) -- a lost hold's too, whose unlock says EPERM;
 * one ended by its thread's exit is not counted.
 *
 * A hold of a cached lock (cache.c) is a thread's turn with the process's
 * Redis hold: it shares the cache's watchdog entry (h->shared) and never
 * cancels it; the cache does, and says through h->share what its
 * thread's exit inside does (the cache sits above this file: a hook, not
 * a call). */
#include "hold.h"
#include "thread.h"
#include "internal.h"
#include "lock.h"
#include "names.h"
#include "watchdog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;

/* The destructor: the thread's identity is still there (TLS outlives TSD
 * destructors); rm_thread_self() refreshes it first in a forked child,
 * whose inherited holds are not its own. */
static void thread_exit(void *p)
{
    RM_UNUSED(p);
    rm_hold_thread_exit(rm_thread_self());
}

static void make_key(void) { pthread_key_create(&exit_key, thread_exit); }

static void arm_exit(struct rm_thread *t)
{
    if (t->exit_hook) return;
    pthread_once(&key_once, make_key);
    pthread_setspecific(exit_key, t);
    t->exit_hook = 1;
}

struct rm_hold *rm_hold_of(struct rm_lock *l, const struct rm_thread *self)
{
    return l->hold && l->hold->tid == self->tid ? l->hold : NULL;
}

static void thread_list_remove(struct rm_thread *t, struct rm_hold *h)
{
    if (h->prev) h->prev->next = h->next;
    else t->holds = h->next;
    if (h->next) h->next->prev = h->prev;
}

/* h is off its thread's list and is no longer current: let it go. */
static void hold_free(struct rm_hold *h)
{
    rm_lock_put(h->lock);
    free(h);
}

/* When the hold g grants began: its request's send time, which the grant's
 * validity was counted from (no clock read), or now for a grant that
 * says none (a cached hold's turn). */
static rm_nsec began(const struct rm_grant *g, const struct rm_hold_terms *terms)
{
    rm_nsec lease = RM_MSEC(terms->lease_ms);
    if (g->valid_until > lease && g->valid_until != RM_FOREVER && !terms->shared_wd)
        return g->valid_until - lease;
    return rm_clock_now();
}

int rm_hold_take(struct rm_lock *l, const struct rm_hold_terms *terms, struct rm_thread *self,
                 struct rm_endpoint *ep, const struct rm_grant *g)
{
    /* malloc, not calloc: glibc's calloc bypasses the thread's cache (an
     * arena lock on every lock call). */
    struct rm_hold *h = malloc(sizeof *h);
    if (h) memset(h, 0, sizeof *h);
    if (!h) {
        rm_detail("out of memory");
        return ENOMEM;
    }
    if (terms->shared_wd) {
        h->wd = terms->shared_wd;
        h->shared = 1;
        h->share = terms->share;
    } else if (terms->renewed) {
        h->wd = rm_watchdog_hold(ep, l->keys.lock, l->keys.owner, terms->robust, self->owner,
                                 self->owner_len, terms->lease_ms, g->valid_until, g->due,
                                 terms->user, 0);
        if (!h->wd) {
            free(h);
            rm_detail("out of memory");
            return ENOMEM;
        }
    }
    int dead = g->dead && terms->robust;
    rm_lock_ref(l);
    h->lock = l;
    h->via = terms->via;
    h->lease_ms = terms->lease_ms;
    h->tid = self->tid;
    h->acq = g->acq;
    h->depth = 1;
    h->token = g->token;
    h->inconsistent = dead;
    h->lease_end = g->valid_until;
    h->since = began(g, terms);
    RM_COUNT(acquisitions);
    RM_NAMES_COUNT(l->stats, acquisitions);
    pthread_mutex_lock(&l->mu);
    if (l->hold) RM_COUNT_SUB(held, 1); /* the replaced hold: lost, and its thread's now */
    l->hold = h;
    pthread_mutex_unlock(&l->mu);
    h->next = self->holds;
    if (self->holds) self->holds->prev = h;
    self->holds = h;
    arm_exit(self);
    RM_COUNT(held);
    if (dead) rm_detail("the previous holder of %s died holding it (its lease ran out)", l->keys.lock);
    return dead ? EOWNERDEAD : 0;
}

int rm_hold_drop(struct rm_lock *l, struct rm_thread *self, rm_nsec *lease_end, uint64_t *acq)
{
    pthread_mutex_lock(&l->mu);
    struct rm_hold *h = rm_hold_of(l, self);
    RM_ASSERT(h);
    l->hold = NULL;
    pthread_mutex_unlock(&l->mu);
    RM_COUNT_SUB(held, 1);
    rm_nsec held_for = rm_clock_now() - h->since;
    rm_stats_record(&rm_counters.hold_time, held_for);
    rm_stats_record(&l->stats->hold_time, held_for);
    /* Known good until: the last acknowledged renewal's send time plus the
     * lease (read before the entry is cancelled), or the fixed lease's end. */
    *lease_end = h->wd ? rm_watchdog_valid_until(h->wd) : h->lease_end;
    *acq = h->acq;
    thread_list_remove(self, h);
    int lost = h->wd && (h->shared ? rm_watchdog_lost(h->wd) : rm_watchdog_cancel(h->wd));
    hold_free(h);
    if (lost) rm_detail("the lease of %s was lost before this unlock", l->keys.lock);
    return lost;
}

int rm_hold_forget(struct rm_lock *l, struct rm_thread *self)
{
    for (struct rm_hold *h = self->holds; h; h = h->next) {
        if (h->lock != l) continue;
        pthread_mutex_lock(&l->mu);
        int current = l->hold == h;
        if (!current && l->gate == self->tid) rm_lock_gate_leave_locked(l);
        pthread_mutex_unlock(&l->mu);
        if (current) continue; /* cannot be: the caller found self not holding l */
        thread_list_remove(self, h);
        if (h->wd && !h->shared) rm_watchdog_cancel(h->wd);
        hold_free(h);
        return 1;
    }
    return 0;
}

void rm_hold_thread_exit(struct rm_thread *t)
{
    while (t->holds) {
        struct rm_hold *h = t->holds;
        struct rm_lock *l = h->lock;
        thread_list_remove(t, h);
        pthread_mutex_lock(&l->mu);
        int current = l->hold == h;
        void *abandoned = NULL;
        if (current) l->hold = NULL;
        if (current && h->share) abandoned = h->share->detach_locked(l);
        if (l->gate == t->tid) rm_lock_gate_leave_locked(l);
        pthread_mutex_unlock(&l->mu);
        if (abandoned) h->share->abandon(abandoned); /* its lease runs out, as a hold's */
        else if (h->wd && !h->shared) rm_watchdog_cancel(h->wd);
        if (current) {
            RM_COUNT_SUB(held, 1);
            rm_log("thread %llu exited holding %s; its lease will run out",
                   (unsigned long long)t->tid, l->keys.lock);
        }
        hold_free(h);
    }
}
