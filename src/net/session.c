/* session.c -- the process's session with its Redis deployment.
 *
 * The library starts itself on the first call that needs Redis: it parses
 * the URL (rmutex_configure's, else RMUTEX_URL, else redis://127.0.0.1:6379)
 * and creates the endpoint; the threads (multiplexer, watchdog) start later
 * still, when first needed.  Calls in progress are counted without a lock
 * (an atomic counter and state, Dekker-style with sequentially consistent
 * operations): a shutdown sets the state first and then looks at the
 * count, a call bumps the count first and then looks at the state, so one
 * of the two always sees the other.
 *
 * rmutex_configure parses and does no I/O, but for one look: a URL that
 * asks for replica acknowledgement is refused at once when its server
 * refuses WAIT (ack.c, rm_ack_probe), the settings left as they were.
 *
 * This file is the net layer's top: it knows the endpoint and nothing
 * above it.  What a shutdown, a fork or the process's exit must do to the
 * holds, caches and threads of the layers above is runtime.c's (api/),
 * which calls in here and registers the exit hook. */
#include "session.h"
#include "ack.h"
#include "config.h"
#include "endpoint.h"
#include "internal.h"

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
    void (*on_exit)(struct rm_endpoint *ep);
} se = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void at_exit(void)
{
    struct rm_endpoint *ep;
    if (se.on_exit && atomic_load(&se.state) == RUNNING && !rm_session_enter(&ep)) {
        se.on_exit(ep);
        rm_session_leave();
    }
}

void rm_session_on_exit(void (*fn)(struct rm_endpoint *ep)) { se.on_exit = fn; }

static int start_locked(void)
{
    static int log_ready;
    if (!log_ready) {
        rm_log_init();
        log_ready = 1;
    }
    if (!se.configured) {
        const char *url = getenv("RMUTEX_URL");
        int r = rm_config_parse(url && *url ? url : DEFAULT_URL, &se.svc, 1);
        if (r) return r;
        se.configured = 1;
    }
    /* The endpoint takes a copy: the configuration stays for a restart
     * after a shutdown. */
    struct rm_service copy;
    int r = rm_config_service_copy(&se.svc, &copy);
    if (!r) r = rm_endpoint_create(&copy, &se.ep);
    rm_config_service_free(&copy);
    if (r) {
        rm_detail("out of memory");
        return r;
    }
    if (!se.atexit_done && !atexit(at_exit)) se.atexit_done = 1;
    rm_log("started for %s", se.svc.display);
    atomic_store(&se.state, RUNNING);
    return 0;
}

int rm_session_enter(struct rm_endpoint **ep)
{
    for (;;) {
        atomic_fetch_add(&se.active, 1);
        if (atomic_load(&se.state) == RUNNING) {
            *ep = se.ep;
            return 0;
        }
        atomic_fetch_sub(&se.active, 1);
        pthread_mutex_lock(&se.mu);
        int r = atomic_load(&se.state) == RUNNING ? 0 : start_locked();
        pthread_mutex_unlock(&se.mu);
        if (r) return r;
    }
}

void rm_session_leave(void) { atomic_fetch_sub(&se.active, 1); }

int rm_session_configure(const char *url)
{
    pthread_mutex_lock(&se.mu);
    if (atomic_load(&se.state) != STOPPED) {
        pthread_mutex_unlock(&se.mu);
        rm_detail("rmutex_configure must come before the first use (or after rmutex_shutdown)");
        return EBUSY;
    }
    if (!url) {
        url = getenv("RMUTEX_URL");
        if (!url || !*url) url = DEFAULT_URL;
    }
    struct rm_service svc;
    struct rm_settings before;
    memcpy(&before, &rm_settings, sizeof before);
    int r = rm_config_parse(url, &svc, 1);
    if (!r && (r = rm_ack_probe(&svc))) { /* a server without WAIT: nothing taken */
        memcpy(&rm_settings, &before, sizeof before);
        rm_config_service_free(&svc);
    }
    if (!r) {
        if (se.configured) rm_config_service_free(&se.svc);
        se.svc = svc;
        se.configured = 1;
    }
    pthread_mutex_unlock(&se.mu);
    return r;
}

struct rm_endpoint *rm_session_stop_begin(int (*busy)(void), int *r)
{
    *r = 0;
    pthread_mutex_lock(&se.mu);
    if (atomic_load(&se.state) != RUNNING) {
        pthread_mutex_unlock(&se.mu);
        return NULL;
    }
    atomic_store(&se.state, STOPPING);
    if (atomic_load(&se.active) || (busy && busy())) {
        atomic_store(&se.state, RUNNING);
        pthread_mutex_unlock(&se.mu);
        rm_detail("a thread still holds or waits for a mutex");
        *r = EBUSY;
        return NULL;
    }
    return se.ep; /* se.mu stays taken until rm_session_stop_end */
}

void rm_session_stop_end(void)
{
    rm_endpoint_destroy(se.ep);
    se.ep = NULL;
    atomic_store(&se.state, STOPPED);
    pthread_mutex_unlock(&se.mu);
    rm_log("shut down");
}

struct rm_endpoint *rm_session_endpoint(void) { return se.ep; }

void rm_session_atfork(int who)
{
    if (who < 0) {
        pthread_mutex_lock(&se.mu);
        return;
    }
    if (who == 1) atomic_store(&se.active, 0);
    pthread_mutex_unlock(&se.mu); /* (the child: taken by prepare, in this thread) */
}
