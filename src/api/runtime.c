/* runtime.c -- shutdown, fork and exit of the library as a whole.
 *
 * The session (net/session.c) starts the library lazily and counts the
 * calls in progress; this file is what the layers above it need at the
 * three moments that concern every module at once:
 *
 * rmutex_shutdown(): refused while a call is in progress or a hold is
 * kept; else the caches nobody is inside are given back, the barriers'
 * participant entries are forgotten (their next wait renews again), the
 * watchdog stops, and the session destroys the endpoint.
 *
 * fork(): this file registers the pthread_atfork handlers, in a
 * constructor, so they exist before any state does.  prepare takes every
 * internal lock in the library's lock order (session, mutex registry,
 * read-write lock and semaphore registries, locks, watchdog, holder
 * registry, barrier registry, multiplexer, pool, and last the way into
 * OpenSSL: tls.c) so the child gets consistent
 * structures; the parent releases them; the child re-initializes them and
 * resets each module: new process UUID, no holds, no threads, no
 * inherited sockets (closed without a byte sent), counters at zero; the
 * locks prepare took are unlocked by the thread that took them, which is
 * the child's only thread (they are plain mutexes, as glibc's own fork
 * handling assumes).  A mutex's own lock is not taken by prepare (that
 * would invert the lock order); the child re-initializes those, since a
 * thread that held one in the parent does not exist in the child.
 * Modules restart lazily, so the child needs no re-initialization by the
 * application.
 *
 * exit(): the session runs the exit hook registered here, which releases
 * the holds the process still has, so other processes need not wait for
 * their leases to run out.
 *
 * The constructor also makes the watchdog the place where releases that
 * could not finish in their caller's time go (call.c's deferrer). */
#include "runtime.h"
#include "cache.h"
#include "call.h"
#include "thread.h"
#include "tls.h"
#include "internal.h"
#include "lock.h"
#include "names.h"
#include "mutex.h"
#include "endpoint.h"
#include "barrier.h"
#include "registry.h"
#include "rwlock.h"
#include "sem.h"
#include "session.h"
#include "sub.h"
#include "watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void at_exit(struct rm_endpoint *ep)
{
    rm_nsec deadline = rm_clock_after(RM_MSEC(1000));
    rm_cache_release_all(ep, deadline, 0);
    rm_mutex_release_all_at_exit(ep);
    rm_rwlock_release_all_at_exit(ep, deadline);
    rm_sem_release_all_at_exit(ep, deadline);
}

static int busy(void) { return atomic_load(&rm_counters.held) != 0; }

int rm_runtime_shutdown(void)
{
    int r;
    struct rm_endpoint *ep = rm_session_stop_begin(busy, &r);
    if (!ep) return r;
    /* Caches nobody is inside (held is 0) are given back first. */
    rm_cache_release_all(ep, rm_call_deadline(), 1);
    rm_barrier_shutdown();
    rm_watchdog_stop();
    rm_session_stop_end();
    return 0;
}

/* ---- fork ---- */

static void fork_prepare(void)
{
    rm_session_atfork(-1);
    rm_mutex_atfork(-1);
    rm_rwlock_atfork(-1);
    rm_sem_atfork(-1);
    rm_lock_atfork(-1);
    rm_watchdog_atfork(-1);
    rm_registry_atfork(-1);
    rm_barrier_atfork(-1);
    struct rm_endpoint *ep = rm_session_endpoint();
    if (ep) rm_endpoint_atfork(ep, -1);
    rm_names_atfork(-1);
    rm_tls_atfork(-1); /* last: see tls.h */
}

static void fork_parent(void)
{
    rm_tls_atfork(0);
    rm_names_atfork(0);
    struct rm_endpoint *ep = rm_session_endpoint();
    if (ep) rm_endpoint_atfork(ep, 0);
    rm_barrier_atfork(0);
    rm_registry_atfork(0);
    rm_watchdog_atfork(0);
    rm_lock_atfork(0);
    rm_sem_atfork(0);
    rm_rwlock_atfork(0);
    rm_mutex_atfork(0);
    rm_session_atfork(0);
}

static void fork_child(void)
{
    rm_thread_atfork_child();
    rm_cache_atfork_child();
    rm_tls_atfork(1);
    rm_names_atfork(1);
    struct rm_endpoint *ep = rm_session_endpoint();
    if (ep) rm_endpoint_atfork(ep, 1);
    rm_barrier_atfork(1);
    rm_registry_atfork(1);
    rm_watchdog_atfork(1);
    rm_lock_atfork(1);
    rm_sem_atfork(1);
    rm_rwlock_atfork(1);
    rm_mutex_atfork(1);
    rm_stats_reset();
    rm_session_atfork(1); /* its lock: taken by the prepare handler, in this thread */
}

__attribute__((constructor)) static void register_hooks(void)
{
    rm_call_set_deferrer(rm_watchdog_defer);
    rm_watchdog_on_hold(rm_registry_hold_added);
    rm_session_on_exit(at_exit);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}
