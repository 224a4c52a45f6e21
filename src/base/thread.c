/* thread.c -- the calling thread as the library sees it: its owner identity.
 *
 * A hold in Redis is owned by "<process-uuid>:<thread-number>", the shape
 * of Redisson's "<client-uuid>:<java-thread-id>".  The UUID comes from
 * libuuid and is made again in a forked child, so a child never speaks
 * for its parent's holds.  Thread numbers come from a process-wide counter
 * and are never reused, unlike pthread_t or kernel TIDs: a thread that
 * exits holding a lock cannot be mistaken for a later thread.
 *
 * A thread that exits while holding mutexes would otherwise leave them
 * held, and renewed by the watchdog, for as long as the process lives.  The
 * first hold of a thread arms a thread-specific-data destructor that hands
 * its holds to rm_hold_thread_exit(): renewal stops, the lease runs out, and the next robust locker gets EOWNERDEAD -- glibc's behaviour for
 * a robust mutex whose owner thread exits. */
#include "thread.h"
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

static _Atomic uint64_t next_tid = 1;
static _Atomic unsigned generation = 1;
static char process_uuid[37];
static pthread_once_t uuid_once = PTHREAD_ONCE_INIT;
static __thread struct rm_thread self;

static void make_uuid(void)
{
    uuid_t u;
    uuid_generate(u);
    uuid_unparse_lower(u, process_uuid);
}

struct rm_thread *rm_thread_self(void)
{
    struct rm_thread *t = &self;
    unsigned gen = atomic_load_explicit(&generation, memory_order_acquire);
    if (t->gen == gen) return t;
    pthread_once(&uuid_once, make_uuid);
    if (!t->tid) {
        t->tid = atomic_fetch_add(&next_tid, 1);
        t->rng = (uint32_t)(t->tid * 2654435761u) ^ (uint32_t)(uintptr_t)t;
    }
    t->owner_len = rm_thread_owner_of(t->tid, t->owner, sizeof t->owner);
    t->holds = NULL; /* a forked child holds nothing */
    t->gen = gen;
    return t;
}

size_t rm_thread_owner_of(uint64_t tid, char *buf, size_t size)
{
    pthread_once(&uuid_once, make_uuid);
    return (size_t)snprintf(buf, size, "%s:%llu", process_uuid, (unsigned long long)tid);
}

void rm_thread_atfork_child(void)
{
    make_uuid();
    atomic_fetch_add(&generation, 1);
}
