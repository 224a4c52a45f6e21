/* config.h -- the RMUTEX_PRELOAD configuration of the preload shim. */
#ifndef RM_SHIM_CONFIG_H
#define RM_SHIM_CONFIG_H

#include <stddef.h>

/* One listed mutex of this program. */
struct rm_shim_entry {
    char *object;           /* library that defines it ("libfoo.so"), NULL: search globally */
    char *symbol;           /* its symbol name */
    char *name;             /* the lock name in Redis (the symbol when not given) */
    int fair;               /* ";fair" */
    int cache;              /* ";cache": rmutexattr_setcache */
    int robust;             /* ";robust" */
    unsigned long lease_ms; /* ";lease=MS", 0: the watchdog-renewed default */
    int cond;               /* ";cond": a pthread_cond_t, made an rcond */
    int rwlock;             /* ";rwlock": a pthread_rwlock_t, made an rrwlock */
    int sem;                /* "/pattern": sem_open names (symbol: the pattern; name: NULL) */
    int once;               /* ";once": a pthread_once_t, once for every process */
};

struct rm_shim_config {
    struct rm_shim_entry *v;
    size_t n;
};

/* Called once per error, with a complete message (no newline). */
typedef void (*rm_shim_errfn)(void *arg, const char *msg);

/* Parse spec and keep the entries of the sections that apply to the
 * program whose executable is exe (its resolved path) and whose argv[0]
 * is argv0 (either may be NULL).  A bad entry or section is reported
 * through err and left out; everything else is kept.  Sections for other
 * programs are not looked at beyond their program list, and never
 * reported.  Returns the number of errors reported (-1: out of memory). */
int rm_shim_config_parse(const char *spec, const char *exe, const char *argv0,
                         struct rm_shim_config *out, rm_shim_errfn err, void *arg);

void rm_shim_config_free(struct rm_shim_config *c);

#endif
