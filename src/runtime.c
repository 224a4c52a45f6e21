/* runtime.c -- start, stop, fork and exit of the library as a whole.
 *
 * The library starts itself on the first call that needs Redis: it parses
 * the URL (rmutex_configure's, else RMUTEX_URL, else redis://127.0.0.1:6379)
 * and creates the endpoint; the threads (multiplexer, watchdog) start later
 * still, when first needed.  Calls in progress are counted without a lock
 * (an atomic counter and state, Dekker-style with sequentially consistent
 * operations): rmutex_shutdown() sets the state first and then looks at the
 * count, a call bumps the count first and then looks at the state, so one
 * of the two always sees the other.
 *
 * fork(): this file registers the pthread_atfork handlers, in a
 * constructor, so they exist before any state does.  prepare takes every
 * internal lock in the library's lock order (runtime, mutex registry,
 * watchdog, multiplexer, pool) so the child gets consistent structures;
 * the parent releases them; the child re-initializes them and resets each
 * module: new process UUID, no holds, no threads, no inherited sockets
 * (closed without a byte sent), counters at zero; the locks prepare took
 * are unlocked by the thread that took them, which is the child's only
 * thread (they are plain mutexes, as glibc's own fork handling assumes).
 * A mutex's own lock is not taken by prepare (that would invert the lock
 * order); the child re-initializes those, since a thread that held one in
 * the parent does not exist in the child.  Modules restart lazily, so the
 * child needs no re-initialization by the application.
 *
 * exit(): an atexit handler releases the holds the process still has, so
 * other processes need not wait for their leases to run out. */
#include "runtime.h"
#include "cache.h"
#include "call.h"
#include "thread.h"
#include "internal.h"
#include "lock.h"
#include "mutex.h"
#include "endpoint.h"
#include "sub.h"
#include "watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_URL "redis://127.0.0.1:6379"

enum { STOPPED, RUNNING, STOPPING };

static struct {
    pthread_mutex_t mu;
    _Atomic int state;
    _Atomic int active;
    int configured;
    int atexit_done;
    struct rm_service svc;
    struct rm_endpoint *ep;
} rt = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void at_exit(void)
{
    struct rm_endpoint *ep;
    if (atomic_load(&rt.state) == RUNNING && !rm_runtime_enter(&ep)) {
        rm_cache_release_all(ep, rm_clock_after(RM_MSEC(1000)), 0);
        rm_mutex_release_all_at_exit(ep);
        rm_runtime_leave();
    }
}

static int start_locked(void)
{
    static int log_ready;
    if (!log_ready) {
        rm_log_init();
        rm_call_set_deferrer(rm_watchdog_defer);
        log_ready = 1;
    }
    if (!rt.configured) {
        const char *url = getenv("RMUTEX_URL");
        int r = rm_config_parse(url && *url ? url : DEFAULT_URL, &rt.svc, 1);
        if (r) return r;
        rt.configured = 1;
    }
    /* The endpoint takes a copy: the configuration stays for a restart
     * after rmutex_shutdown. */
    struct rm_service copy;
    int r = rm_config_service_copy(&rt.svc, &copy);
    if (!r) r = rm_endpoint_create(&copy, &rt.ep);
    rm_config_service_free(&copy);
    if (r) {
        rm_detail("out of memory");
        return r;
    }
    if (!rt.atexit_done && !atexit(at_exit)) rt.atexit_done = 1;
    rm_log("started for %s", rt.svc.display);
    atomic_store(&rt.state, RUNNING);
    return 0;
}

int rm_runtime_enter(struct rm_endpoint **ep)
{
    for (;;) {
        atomic_fetch_add(&rt.active, 1);
        if (atomic_load(&rt.state) == RUNNING) {
            *ep = rt.ep;
            return 0;
        }
        atomic_fetch_sub(&rt.active, 1);
        pthread_mutex_lock(&rt.mu);
        int r = atomic_load(&rt.state) == RUNNING ? 0 : start_locked();
        pthread_mutex_unlock(&rt.mu);
        if (r) return r;
    }
}

void rm_runtime_leave(void) { atomic_fetch_sub(&rt.active, 1); }

/* Called by the public wrapper with errno saved. */
int rm_runtime_configure(const char *url)
{
    pthread_mutex_lock(&rt.mu);
    if (atomic_load(&rt.state) != STOPPED) {
        pthread_mutex_unlock(&rt.mu);
        rm_detail("rmutex_configure must come before the first use (or after rmutex_shutdown)");
        return EBUSY;
    }
    if (!url) {
        url = getenv("RMUTEX_URL");
        if (!url || !*url) url = DEFAULT_URL;
    }
    struct rm_service svc;
    int r = rm_config_parse(url, &svc, 1);
    if (!r) {
        if (rt.configured) rm_config_service_free(&rt.svc);
        rt.svc = svc;
        rt.configured = 1;
    }
    pthread_mutex_unlock(&rt.mu);
    return r;
}

int rm_runtime_shutdown(void)
{
    pthread_mutex_lock(&rt.mu);
    if (atomic_load(&rt.state) != RUNNING) {
        pthread_mutex_unlock(&rt.mu);
        return 0;
    }
    atomic_store(&rt.state, STOPPING);
    if (atomic_load(&rt.active) || atomic_load(&rm_counters.held)) {
        atomic_store(&rt.state, RUNNING);
        pthread_mutex_unlock(&rt.mu);
        rm_detail("a thread still holds or waits for a mutex");
        return EBUSY;
    }
    /* Caches nobody is inside (held is 0) are given back first. */
    rm_cache_release_all(rt.ep, rm_call_deadline(), 1);
    rm_watchdog_stop();
    rm_endpoint_destroy(rt.ep);
    rt.ep = NULL;
    atomic_store(&rt.state, STOPPED);
    pthread_mutex_unlock(&rt.mu);
    rm_log("shut down");
    return 0;
}

/* ---- fork ---- */

static void fork_prepare(void)
{
    pthread_mutex_lock(&rt.mu);
    rm_mutex_atfork(-1);
    rm_lock_atfork(-1);
    rm_watchdog_atfork(-1);
    if (rt.ep) rm_endpoint_atfork(rt.ep, -1);
}

static void fork_parent(void)
{
    if (rt.ep) rm_endpoint_atfork(rt.ep, 0);
    rm_watchdog_atfork(0);
    rm_lock_atfork(0);
    rm_mutex_atfork(0);
    pthread_mutex_unlock(&rt.mu);
}

static void fork_child(void)
{
    rm_thread_atfork_child();
    rm_cache_atfork_child();
    if (rt.ep) rm_endpoint_atfork(rt.ep, 1);
    rm_watchdog_atfork(1);
    rm_lock_atfork(1);
    rm_mutex_atfork(1);
    rm_stats_reset();
    atomic_store(&rt.active, 0);
    pthread_mutex_unlock(&rt.mu); /* taken by the prepare handler, in this thread */
}

__attribute__((constructor)) static void register_fork_handlers(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}
