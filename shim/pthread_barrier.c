/* pthread_barrier.c -- pthread_barrier_t and pthread_once_t under
 * <rmutex/pthread.h>.
 *
 * A rmutex_pthread_barrier_t is an rbarrier (rm_barrier_), or glibc's
 * barrier (rm_local_) when it has no name every process would agree on:
 * pthread_barrier_init names one in a symbol by the symbol; a heap or
 * stack one stays process-local and the process says so once (as a
 * semaphore: two barriers made at one call site are not one barrier).
 * rmutex_pthread_barrier_init_named names one.
 *
 * A barrier's wait is not an acquisition, but a ported program does not
 * check it either: Redis trouble is said (policy.c) and the arrival asked
 * again until Redis takes it (librmutex waits through an outage itself;
 * what comes back is a refusal, made before any arrival).  A generation
 * broken by a dead member returns EOWNERDEAD -- pthread_barrier_wait has no
 * code for it, and waiting for ever for a member that will not come is
 * the hang the barrier exists to avoid -- and the process says so once.
 *
 * A rmutex_pthread_once_t is glibc's pthread_once_t unless it is named
 * (RMUTEX_PTHREAD_ONCE_INIT_NAMED): a once-routine usually initializes its
 * own process's memory, which each process needs done (rmutex/pthread.h).
 * A named one is a ronce, asked again through Redis trouble as above. */
#define RMUTEX_PTHREAD_NO_MACROS
#include <rmutex/pthread.h>

#include "dmutex.h"
#include "policy.h"
#include "say.h"
#include "symname.h"
#include "take.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int local_barrier(const rmutex_pthread_barrier_t *b)
{
    return __atomic_load_n(&b->rm_local_only_, __ATOMIC_ACQUIRE) != 0;
}

int rmutex_pthread_barrier_init_named(rmutex_pthread_barrier_t *b, const char *name, unsigned count)
{
    if (!b || !name) return EINVAL;
    /* It joins the barrier's participants in Redis: trouble waited through. */
    rm_policy_uses(RM_POLICY_BARRIERS);
    rm_take_ns pause = 0;
    int r;
    while ((r = rbarrier_init(&b->rm_barrier_, name, count, NULL)) && r != EINVAL && r != ENOMEM)
        rm_take_ask_again(r, &pause);
    if (!r) __atomic_store_n(&b->rm_local_only_, 0, __ATOMIC_RELEASE);
    return r;
}

int rmutex_pthread_barrier_init(rmutex_pthread_barrier_t *b, const pthread_barrierattr_t *attr,
                                unsigned count)
{
    if (!b) return EINVAL;
    int pshared = PTHREAD_PROCESS_PRIVATE;
    if (attr) pthread_barrierattr_getpshared(attr, &pshared);
    if (pshared == PTHREAD_PROCESS_SHARED) return ENOTSUP; /* as the mutex: rmutex/pthread.h */
    char *name = rm_symbol_name_of(b);
    if (name) {
        int r = rmutex_pthread_barrier_init_named(b, name, count);
        free(name);
        return r;
    }
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        rm_say("the pthread_barrier_t at %p is in no symbol (heap or stack memory): it and any "
               "like it are process-local barriers; name them with "
               "rmutex_pthread_barrier_init_named (docs/porting.md)", (void *)b);
    memset(&b->rm_barrier_, 0, sizeof b->rm_barrier_);
    int r = pthread_barrier_init(&b->rm_local_, attr, count);
    if (!r) __atomic_store_n(&b->rm_local_only_, 1, __ATOMIC_RELEASE);
    return r;
}

int rmutex_pthread_barrier_destroy(rmutex_pthread_barrier_t *b)
{
    if (!b) return EINVAL;
    return local_barrier(b) ? pthread_barrier_destroy(&b->rm_local_) : rbarrier_destroy(&b->rm_barrier_);
}

int rmutex_pthread_barrier_wait(rmutex_pthread_barrier_t *b)
{
    if (!b) return EINVAL;
    if (local_barrier(b)) return pthread_barrier_wait(&b->rm_local_);
    rm_policy_uses(RM_POLICY_BARRIERS);
    rm_take_ns pause = 0;
    int was = rm_dm_inside_set(1), r;
    while ((r = rbarrier_wait(&b->rm_barrier_)) && r != RBARRIER_SERIAL_THREAD && r != EOWNERDEAD &&
           r != EINVAL)
        rm_take_ask_again(r, &pause);
    rm_dm_inside_set(was);
    if (r == 0 || r == RBARRIER_SERIAL_THREAD || r == EOWNERDEAD) rm_policy_answered();
    if (r == EOWNERDEAD) {
        static int said;
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            rm_say("pthread_barrier_wait of %s: a member died while the others waited; this "
                   "generation is broken and its waiters return EOWNERDEAD (said once)",
                   b->rm_barrier_.rm_name_ ? b->rm_barrier_.rm_name_ : "a barrier");
    }
    return r == RBARRIER_SERIAL_THREAD ? PTHREAD_BARRIER_SERIAL_THREAD : r;
}

int rmutex_pthread_once(rmutex_pthread_once_t *once, void (*routine)(void))
{
    if (!once || !routine) return EINVAL;
    if (!once->rm_once_.rm_name_) return pthread_once(&once->rm_local_, routine);
    rm_take_ns pause = 0;
    int r;
    while ((r = ronce(&once->rm_once_, routine)) && r != EINVAL && r != EDEADLK)
        rm_take_ask_again(r, &pause);
    if (!r) rm_policy_answered();
    return r;
}
