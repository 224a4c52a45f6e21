/* lock.c -- the per-name state of this process: a registry of locks, and
 * the local gate.
 *
 * A name is one lock.  Every rmutex_t initialized with a given name (two
 * handles in one program, the mutexes a loop initializes at one call site
 * under the header swap) shares one struct rm_lock: one gate, one hold.
 * So a thread that holds the name through one handle and locks it through
 * another meets its own hold and gets what the handle's type says for a
 * relock (mutex.c's callers in api.c), instead of a second, silent "hold"
 * that the first unlock would end in Redis.  The registry is a hash of
 * names; a lock lives while a handle or a hold refers to it.
 *
 * The local gate serializes, per name and per process, the threads that
 * talk to Redis about the non-fair lock: a thread takes the gate, acquires
 * in Redis, holds, releases, and passes the gate to the next local thread
 * in FIFO order.  Threads of one process thus never race each other in
 * Redis (one EVAL and one subscription waiter per process per lock instead
 * of one per thread), and they are served in arrival order.  The fair lock
 * does not use the gate -- its order is kept across processes, so every
 * thread queues in Redis itself -- but for a cached fair mutex, whose
 * threads take turns through it while the process queues as one member
 * (cache.c).
 *
 * A name's state points at its counters (names.c), made with it: the
 * lock path counts there with no lookup.
 *
 * Lock order: the registry, then a lock's mu, then the watchdog, the
 * multiplexer, the pool.  A lock's mu is never held across a round trip. */
#include "lock.h"
#include "clock.h"
#include "names.h"
#include "thread.h"
#include "internal.h"
#include "wait.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rm_lock *buckets[NBUCKETS];

static unsigned bucket_of(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 16777619u;
    return h % NBUCKETS;
}

int rm_lock_get(const char *name, struct rm_lock **out)
{
    struct rm_keys k;
    int r = rm_keys_make(name, &k); /* checks the name, before any lookup */
    if (r) return r;
    unsigned b = bucket_of(name);
    pthread_mutex_lock(&registry_mu);
    struct rm_lock *l = buckets[b];
    while (l && strcmp(l->keys.lock, name)) l = l->reg_next;
    if (l) {
        l->refs++;
        pthread_mutex_unlock(&registry_mu);
        rm_keys_free(&k);
        *out = l;
        return 0;
    }
    if (!(l = calloc(1, sizeof *l))) {
        pthread_mutex_unlock(&registry_mu);
        rm_keys_free(&k);
        rm_detail("out of memory");
        return ENOMEM;
    }
    l->keys = k;
    l->stats = rm_names_get(name);
    l->refs = 1;
    pthread_mutex_init(&l->mu, NULL);
    l->reg_next = buckets[b];
    buckets[b] = l;
    pthread_mutex_unlock(&registry_mu);
    *out = l;
    return 0;
}

void rm_lock_ref(struct rm_lock *l)
{
    pthread_mutex_lock(&registry_mu);
    l->refs++;
    pthread_mutex_unlock(&registry_mu);
}

void rm_lock_put(struct rm_lock *l)
{
    pthread_mutex_lock(&registry_mu);
    RM_ASSERT(l->refs > 0);
    if (--l->refs) {
        pthread_mutex_unlock(&registry_mu);
        return;
    }
    struct rm_lock **p = &buckets[bucket_of(l->keys.lock)];
    while (*p != l) p = &(*p)->reg_next;
    *p = l->reg_next;
    pthread_mutex_unlock(&registry_mu);
    RM_ASSERT(!l->hold && !l->gate && !l->gq_head && !l->cache);
    pthread_mutex_destroy(&l->mu);
    rm_keys_free(&l->keys);
    free(l);
}

void rm_lock_each(void (*fn)(struct rm_lock *l, void *arg), void *arg)
{
    pthread_mutex_lock(&registry_mu);
    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct rm_lock *l = buckets[b]; l; l = l->reg_next) fn(l, arg);
    pthread_mutex_unlock(&registry_mu);
}

/* ---- the gate ---- */

int rm_lock_gate_enter(struct rm_lock *l, struct rm_thread *self, const struct rm_wait *w)
{
    pthread_mutex_lock(&l->mu);
    if (l->gate == self->tid) { /* kept from a hold that was lost and replaced */
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    if (!l->gate && !l->gq_head) {
        l->gate = self->tid;
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    int r = rm_wait_check(w);
    if (r) {
        pthread_mutex_unlock(&l->mu);
        return r;
    }
    struct rm_gate_waiter me = { .tid = self->tid };
    rm_clock_cond_init(&me.cv);
    if (l->gq_tail) l->gq_tail->next = &me;
    else l->gq_head = &me;
    l->gq_tail = &me;
    if (!self->wait_began) self->wait_began = rm_clock_now();
    RM_COUNT(waiting);
    while (!me.granted) {
        if (rm_clock_cond_wait_until(&me.cv, &l->mu, w->deadline) == ETIMEDOUT && !me.granted) {
            /* Give up our place. */
            struct rm_gate_waiter **p = &l->gq_head, *prev = NULL;
            while (*p != &me) prev = *p, p = &(*p)->next;
            *p = me.next;
            if (l->gq_tail == &me) l->gq_tail = prev;
            r = ETIMEDOUT;
            rm_detail("%s is held or being acquired by another thread of this process "
                      "(still at the deadline)", l->keys.lock);
            break;
        }
    }
    RM_COUNT_SUB(waiting, 1);
    pthread_mutex_unlock(&l->mu);
    pthread_cond_destroy(&me.cv);
    return r;
}

void rm_lock_gate_leave_locked(struct rm_lock *l)
{
    struct rm_gate_waiter *next = l->gq_head;
    if (!next) {
        l->gate = 0;
        return;
    }
    l->gq_head = next->next;
    if (!l->gq_head) l->gq_tail = NULL;
    l->gate = next->tid;
    next->granted = 1;
    pthread_cond_signal(&next->cv);
}

void rm_lock_gate_leave(struct rm_lock *l)
{
    pthread_mutex_lock(&l->mu);
    rm_lock_gate_leave_locked(l);
    pthread_mutex_unlock(&l->mu);
}

void rm_lock_atfork(int who)
{
    if (who < 0) {
        pthread_mutex_lock(&registry_mu);
        return;
    }
    if (who == 1) {
        /* The child: no other thread, no hold (the holds are the parent's;
         * they stay allocated, as do the locks they refer to). */
        for (unsigned b = 0; b < NBUCKETS; b++)
            for (struct rm_lock *l = buckets[b]; l; l = l->reg_next) {
                pthread_mutex_init(&l->mu, NULL);
                l->gate = 0;
                l->gq_head = l->gq_tail = NULL;
                l->hold = NULL;
                l->cache = NULL; /* the parent's; the child caches nothing */
                l->courtesy_until = 0;
                l->fair_queued = 0;
            }
    }
    pthread_mutex_unlock(&registry_mu);
}
