/* setup.c -- the shim's constructor: read RMUTEX_PRELOAD, find the listed
 * mutexes of this program, make their rmutexes, publish the table.
 *
 * Every process that inherits LD_PRELOAD runs this, including the shells
 * and tools a program execs.  Where RMUTEX_PRELOAD is unset or names other
 * programs, it returns having done nothing but look up the real pthread
 * functions: no Redis connection, no thread, no output, no table (so every
 * mutex takes the fast path).
 *
 * Nothing here talks to Redis: rmutex_init() only checks the name.  The
 * first lock of a listed mutex connects (RMUTEX_URL, as for any librmutex
 * program).  No error stops the program: an entry that cannot be set up is
 * reported in one line and left a plain local mutex -- the user sees that
 * it is not distributed, rather than finding out from lost updates. */
#include "config.h"
#include "shim.h"
#include "symbols.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void outage_from_library(int down, const char *detail, void *arg)
{
    (void)arg;
    rm_shim_outage(down, detail);
}

static void config_error(void *arg, const char *msg)
{
    (void)arg;
    rm_shim_say("RMUTEX_PRELOAD: %s", msg);
}

static void free_mutex(struct rm_shim_mutex *sm)
{
    free(sm->symbol);
    free(sm->name);
    free(sm);
}

/* Make the table entry of e, or say why not and return NULL. */
static struct rm_shim_mutex *set_up(const struct rm_shim_entry *e)
{
    char why[512];
    void *addr;
    if (rm_shim_resolve(e, &addr, why, sizeof why)) {
        rm_shim_say("%s; it stays a process-local mutex", why);
        return NULL;
    }
    struct rm_shim_mutex *sm = calloc(1, sizeof *sm);
    if (!sm) return NULL;
    sm->addr = addr;
    sm->symbol = e->object ? malloc(strlen(e->object) + strlen(e->symbol) + 2) : strdup(e->symbol);
    if (sm->symbol && e->object) {
        strcpy(sm->symbol, e->object);
        strcat(sm->symbol, ":");
        strcat(sm->symbol, e->symbol);
    }
    sm->name = strdup(e->name);
    sm->lease_ms = e->lease_ms;
    sm->cfg_robust = e->robust;
    if (!sm->symbol || !sm->name) {
        free_mutex(sm);
        return NULL;
    }
    /* Not robust yet: see listed.c (robust only once the program makes it so). */
    int r = rm_shim_make_rmutex(sm, 0, e->fair);
    if (r) {
        rm_shim_say("'%s': librmutex refuses the lock name '%s': %s; it stays a process-local mutex",
                    sm->symbol, sm->name, rmutex_detail());
        free_mutex(sm);
        return NULL;
    }
    sm->dm.fair = (unsigned char)e->fair;
    return sm;
}

__attribute__((constructor)) static void rm_shim_start(void)
{
    rm_shim_boot();
    const char *spec = getenv("RMUTEX_PRELOAD");
    if (!spec || !*spec) return;
    int saved = errno;

    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = 0;
    struct rm_shim_config cfg;
    if (rm_shim_config_parse(spec, n > 0 ? exe : NULL, program_invocation_name, &cfg, config_error,
                             NULL) < 0) {
        rm_shim_say("out of memory reading RMUTEX_PRELOAD; no mutex is distributed");
        errno = saved;
        return;
    }
    struct rm_shim_mutex **v = cfg.n ? calloc(cfg.n, sizeof *v) : NULL;
    size_t used = 0;
    for (size_t i = 0; v && i < cfg.n; i++) {
        struct rm_shim_mutex *sm = set_up(&cfg.v[i]);
        if (!sm) continue;
        int dup = 0;
        for (size_t k = 0; k < used; k++)
            if (v[k]->addr == sm->addr) {
                rm_shim_say("'%s' is the same mutex as '%s'; the first entry applies", sm->symbol,
                            v[k]->symbol);
                dup = 1;
            }
        if (dup) {
            rmutex_destroy(&sm->rm);
            free_mutex(sm);
            continue;
        }
        v[used++] = sm;
    }
    if (cfg.n && !v) rm_shim_say("out of memory reading RMUTEX_PRELOAD; no mutex is distributed");
    rm_shim_config_free(&cfg);
    if (used) {
        rmutex_set_lost_callback(rm_shim_lost_callback, NULL);
        /* Outages found by any of the library's threads, also those that
         * begin while a fair lock waits (which is not cut into slices). */
        rmutex_set_outage_callback(outage_from_library, NULL);
    }
    rm_shim_publish(v, used);
    errno = saved;
}
