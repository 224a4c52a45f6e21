/* thread.h -- who is asking: the process's UUID and the thread's number. */
#ifndef RM_THREAD_H
#define RM_THREAD_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"

struct rm_hold;

/* The calling thread as the library sees it.  Thread-local. */
struct rm_thread {
    uint64_t tid;          /* never reused in the process, never 0 */
    unsigned gen;          /* fork generation the fields below belong to */
    char owner[64];        /* "<process-uuid>:<tid>", the Redis hash field */
    size_t owner_len;
    uint64_t seq;          /* numbers this thread's requests */
    uint32_t rng;          /* backoff jitter */
    struct rm_hold *holds; /* this thread's holds (hold.c) */
    int exit_hook;         /* hold.c's thread-exit destructor is armed */
    rm_nsec wait_began;    /* the mutex acquisition in progress waited since then
                              (0: not yet); api.c clears it, wait.c and lock.c set it */
};

/* The calling thread's identity, made on first use and again in a forked
 * child (new process UUID, nothing held). */
struct rm_thread *rm_thread_self(void);

/* The owner field of thread number tid of this process, into buf. */
size_t rm_thread_owner_of(uint64_t tid, char *buf, size_t size);

/* fork(): the child gets a new process UUID and a new generation. */
void rm_thread_atfork_child(void);

#endif
