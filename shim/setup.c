/* setup.c -- the shim's constructor: read RMUTEX_PRELOAD, find the listed
 * mutexes, condition variables and read-write locks of this program, make
 * their rmutexes, rconds and rrwlocks, publish the tables.
 *
 * Every process that inherits LD_PRELOAD runs this, including the shells
 * and tools a program execs.  Where RMUTEX_PRELOAD is unset or names other
 * programs, it returns having done nothing but look up the real pthread
 * functions: no Redis connection, no thread, no output, no table (so every
 * mutex takes the fast path).
 *
 * Nothing here talks to Redis: rmutex_init() only checks the name, and
 * RMUTEX_URL is parsed (rmutex_configure) so that a bad one is said at
 * start, by policy.c's rule (one line; RMUTEX_ON_ERROR=abort ends the
 * program).  The first lock of a listed mutex connects.  An entry of
 * RMUTEX_PRELOAD that cannot be set up is reported in one line and left a
 * plain local mutex -- the user sees that it is not distributed, rather
 * than finding out from lost updates. */
#include "config.h"
#include "policy.h"
#include "shim.h"
#include "symbols.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void outage_from_library(int down, const char *detail, void *arg)
{
    (void)arg;
    if (down) rm_policy_outage(detail);
    else rm_policy_answered();
}

static void config_error(void *arg, const char *msg)
{
    (void)arg;
    rm_say("RMUTEX_PRELOAD: %s", msg);
}

static void free_mutex(struct rm_shim_mutex *sm)
{
    free(sm->symbol);
    free(sm->name);
    free(sm);
}

/* "object:symbol" or "symbol", malloc'd. */
static char *display_name(const struct rm_shim_entry *e)
{
    char *s = e->object ? malloc(strlen(e->object) + strlen(e->symbol) + 2) : strdup(e->symbol);
    if (s && e->object) {
        strcpy(s, e->object);
        strcat(s, ":");
        strcat(s, e->symbol);
    }
    return s;
}

/* The address of e's symbol, or say why not (what: "mutex", "condition
 * variable") and return NULL. */
static void *locate(const struct rm_shim_entry *e, const char *what)
{
    char why[512];
    void *addr;
    if (!rm_shim_resolve(e, &addr, why, sizeof why)) return addr;
    rm_say("%s; it stays a process-local %s", why, what);
    return NULL;
}

/* Make the table entry of a listed condition variable, or say why not. */
static struct rm_shim_cond *set_up_cond(const struct rm_shim_entry *e)
{
    void *addr = locate(e, "condition variable");
    struct rm_shim_cond *sc = addr ? calloc(1, sizeof *sc) : NULL;
    if (!sc) return NULL;
    sc->addr = addr;
    sc->symbol = display_name(e);
    sc->name = strdup(e->name);
    if (sc->symbol && sc->name && !rm_shim_make_rcond(sc, CLOCK_REALTIME)) return sc;
    if (sc->symbol && sc->name)
        rm_say("'%s': librmutex refuses the condition name '%s': %s; it stays a "
                    "process-local condition variable", sc->symbol, sc->name, rmutex_detail());
    free(sc->symbol);
    free(sc->name);
    free(sc);
    return NULL;
}

/* Make the table entry of a listed read-write lock, or say why not. */
static struct rm_shim_rwlock *set_up_rwlock(const struct rm_shim_entry *e)
{
    void *addr = locate(e, "read-write lock");
    struct rm_shim_rwlock *sl = addr ? calloc(1, sizeof *sl) : NULL;
    if (!sl) return NULL;
    sl->addr = addr;
    sl->symbol = display_name(e);
    sl->name = strdup(e->name);
    sl->lease_ms = e->lease_ms;
    if (sl->symbol && sl->name && !rm_shim_rw_make(sl, rm_shim_rw_kind_of(sl->addr))) return sl;
    if (sl->symbol && sl->name)
        rm_say("'%s': librmutex refuses the lock name '%s': %s; it stays a process-local "
               "read-write lock", sl->symbol, sl->name, rmutex_detail());
    free(sl->symbol);
    free(sl->name);
    free(sl);
    return NULL;
}

/* Make the table entry of a listed once control, or say why not. */
static struct rm_shim_once *set_up_once(const struct rm_shim_entry *e)
{
    void *addr = locate(e, "once control");
    struct rm_shim_once *so = addr ? calloc(1, sizeof *so) : NULL;
    if (!so) return NULL;
    so->addr = addr;
    so->symbol = display_name(e);
    char *name = strdup(e->name);
    if (so->symbol && name) {
        ronce_t fresh = RONCE_INIT(name); /* (the name lives as long as the process) */
        so->once = fresh;
        return so;
    }
    free(name);
    free(so->symbol);
    free(so);
    return NULL;
}

/* Make the table entry of e, or say why not and return NULL. */
static struct rm_shim_mutex *set_up(const struct rm_shim_entry *e)
{
    void *addr = locate(e, "mutex");
    struct rm_shim_mutex *sm = addr ? calloc(1, sizeof *sm) : NULL;
    if (!sm) return NULL;
    sm->addr = addr;
    sm->symbol = display_name(e);
    sm->name = strdup(e->name);
    sm->lease_ms = e->lease_ms;
    sm->cfg_robust = e->robust;
    sm->cache = e->cache;
    if (!sm->symbol || !sm->name) {
        free_mutex(sm);
        return NULL;
    }
    /* Not robust yet: see listed.c (robust only once the program makes it so). */
    int r = rm_shim_make_rmutex(sm, 0, e->fair);
    if (r) {
        rm_say("'%s': librmutex refuses the lock name '%s': %s; it stays a process-local mutex",
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
    rm_say_as("preload");
    const char *spec = getenv("RMUTEX_PRELOAD");
    if (!spec || !*spec) return;
    int saved = errno;

    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = 0;
    struct rm_shim_config cfg;
    if (rm_shim_config_parse(spec, n > 0 ? exe : NULL, program_invocation_name, &cfg, config_error,
                             NULL) < 0) {
        rm_say("out of memory reading RMUTEX_PRELOAD; no mutex is distributed");
        errno = saved;
        return;
    }
    struct rm_shim_mutex **v = cfg.n ? calloc(cfg.n, sizeof *v) : NULL;
    struct rm_shim_cond **cv = cfg.n ? calloc(cfg.n, sizeof *cv) : NULL;
    struct rm_shim_rwlock **rv = cfg.n ? calloc(cfg.n, sizeof *rv) : NULL;
    struct rm_shim_sempattern *sv = cfg.n ? calloc(cfg.n, sizeof *sv) : NULL;
    struct rm_shim_once **ov = cfg.n ? calloc(cfg.n, sizeof *ov) : NULL;
    size_t used = 0, conds = 0, rws = 0, sems = 0, onces = 0;
    for (size_t i = 0; v && cv && rv && sv && ov && i < cfg.n; i++) {
        if (cfg.v[i].once) {
            struct rm_shim_once *so = set_up_once(&cfg.v[i]);
            if (so) ov[onces++] = so;
            continue;
        }
        if (cfg.v[i].sem) { /* a sem_open pattern: the names are the program's own */
            sv[sems] = (struct rm_shim_sempattern){ cfg.v[i].symbol, cfg.v[i].fair, cfg.v[i].lease_ms };
            cfg.v[i].symbol = NULL;
            sems++;
            continue;
        }
        if (cfg.v[i].rwlock) {
            struct rm_shim_rwlock *sl = set_up_rwlock(&cfg.v[i]);
            if (sl) rv[rws++] = sl;
            continue;
        }
        if (cfg.v[i].cond) {
            struct rm_shim_cond *sc = set_up_cond(&cfg.v[i]);
            if (sc) cv[conds++] = sc;
            continue;
        }
        struct rm_shim_mutex *sm = set_up(&cfg.v[i]);
        if (!sm) continue;
        int dup = 0;
        for (size_t k = 0; k < used; k++)
            if (v[k]->addr == sm->addr) {
                rm_say("'%s' is the same mutex as '%s'; the first entry applies", sm->symbol,
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
    if (cfg.n && (!v || !cv || !rv || !sv || !ov))
        rm_say("out of memory reading RMUTEX_PRELOAD; no mutex is distributed");
    rm_shim_config_free(&cfg);
    if (used || rws || sems) {
        rmutex_set_lost_callback(rm_shim_lost_callback, NULL);
        /* Outages found by any of the library's threads, also those that
         * begin while a fair lock waits (which is not cut into slices). */
        rmutex_set_outage_callback(outage_from_library, NULL);
    }
    rm_policy_uses((used || conds ? RM_POLICY_MUTEXES : 0) | (rws ? RM_POLICY_RWLOCKS : 0) |
                   (sems ? RM_POLICY_SEMAPHORES : 0));
    if (used || conds || rws || sems || onces) {
        /* RMUTEX_URL is read now, so that a bad one is said at start (and,
         * with RMUTEX_ON_ERROR=abort, ends the program before main); every
         * lock would find it refused anyway (policy.c).  A resolver that
         * failed for the moment is asked again at the first lock. */
        int r = rmutex_configure(NULL);
        if (r && r != EAGAIN && r != ENOMEM) rm_policy_error(r, rmutex_detail());
    }
    int e = sems ? rm_shim_publish_sems(sv, sems) : 0;
    if (e) {
        rm_say("cannot map the listed semaphores' memory (%s): sem_open names stay glibc's",
               strerror(e));
        for (size_t i = 0; i < sems; i++) free(sv[i].pattern);
        free(sv);
    } else if (!sems) {
        free(sv);
    }
    rm_shim_publish_onces(ov, onces);
    rm_shim_publish_conds(cv, conds);
    rm_shim_publish_rwlocks(rv, rws);
    rm_shim_publish(v, used);
    errno = saved;
}
