/* semlisted.c -- the interposers' bodies for semaphores that the program
 * opens by a name RMUTEX_PRELOAD lists ("/jobs*").
 *
 * DESIGN
 * ------
 * Named POSIX semaphores already have names, so no symbol table is
 * needed: sem_open of a name that matches a listed pattern (fnmatch) is
 * semopen.c's, an rsem of that name without its slash (dsem.c), and every
 * other sem_open, and every unnamed semaphore (sem_init), is glibc's.
 *
 * The sem_t pointers the program gets back for listed names live in an
 * arena of this file, mapped once at start when a pattern is listed, so
 * that sem_wait, sem_post and the rest tell them from glibc's with the
 * same one-compare fast path as listed mutexes (shim.h): an address in
 * [arena, arena + span) is ours.  The arena holds ARENA_SEMS semaphores
 * open at once (a free list); one more open of a listed name is ENOSPC,
 * said once.
 *
 * glibc's functions are found with dlsym(RTLD_NEXT) at their first use. */
#include "shim.h"
#include "dsem.h"
#include "semopen.h"
#include "take.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ARENA_SEMS 4096

uintptr_t rm_shim_sem_lo, rm_shim_sem_span;

static struct {
    struct rm_shim_sempattern *v;
    size_t n;
} patterns;

static struct {
    pthread_mutex_t mu;
    rmutex_pthread_sem_t *base;
    size_t used;                 /* slots handed out at least once */
    rmutex_pthread_sem_t *free;  /* given back: chained through rm_sem_.rm_state_ */
    int full_said;
} arena = { .mu = PTHREAD_MUTEX_INITIALIZER };

static rmutex_pthread_sem_t *arena_alloc(void)
{
    pthread_mutex_lock(&arena.mu);
    rmutex_pthread_sem_t *s = arena.free;
    if (s) arena.free = s->rm_sem_.rm_state_;
    else if (arena.used < ARENA_SEMS) s = &arena.base[arena.used++];
    int say_full = !s && !arena.full_said;
    arena.full_said |= say_full;
    pthread_mutex_unlock(&arena.mu);
    if (say_full)
        rm_say("more than %d listed semaphores open at once: sem_open says ENOSPC", ARENA_SEMS);
    if (s) memset(s, 0, sizeof *s);
    return s;
}

static void arena_release(rmutex_pthread_sem_t *s)
{
    pthread_mutex_lock(&arena.mu);
    s->rm_sem_.rm_state_ = arena.free;
    arena.free = s;
    pthread_mutex_unlock(&arena.mu);
}

static const struct rm_semopen_mem in_arena = { arena_alloc, arena_release };

int rm_shim_publish_sems(struct rm_shim_sempattern *v, size_t n)
{
    if (!n) return 0;
    size_t bytes = ARENA_SEMS * sizeof(rmutex_pthread_sem_t);
    void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return errno;
    arena.base = base;
    patterns.v = v;
    patterns.n = n;
    __atomic_store_n(&rm_shim_sem_lo, (uintptr_t)base, __ATOMIC_RELAXED);
    __atomic_store_n(&rm_shim_sem_span, (uintptr_t)bytes, __ATOMIC_RELEASE);
    return 0;
}

/* The listed pattern name matches, or NULL. */
static const struct rm_shim_sempattern *listed(const char *name)
{
    if (!name || !__atomic_load_n(&rm_shim_sem_span, __ATOMIC_ACQUIRE)) return NULL;
    for (size_t i = 0; i < patterns.n; i++)
        if (!fnmatch(patterns.v[i].pattern, name, 0)) return &patterns.v[i];
    return NULL;
}

/* glibc's function called name, found at the first use. */
static void *real(void **slot, const char *name)
{
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    return fn;
}
typedef int (*sem_fn)(sem_t *);
typedef int (*sem_timed_fn)(sem_t *, const struct timespec *);
typedef int (*sem_clock_fn)(sem_t *, clockid_t, const struct timespec *);
typedef int (*sem_value_fn)(sem_t *, int *);
typedef int (*sem_name_fn)(const char *);
typedef sem_t *(*sem_open_fn)(const char *, int, ...);

/* fn_: glibc's name, of type; ENOSYS when there is none. */
#define REAL(type, name)                                            \
    static void *slot_;                                             \
    type fn_ = (type)real(&slot_, name);                            \
    if (!fn_) {                                                     \
        errno = ENOSYS;                                             \
        return -1;                                                  \
    }

int rm_shim_sem_real_wait(sem_t *s, int mode, clockid_t clock, const struct timespec *abs)
{
    switch (mode) {
    case RM_DM_TRY: {
        REAL(sem_fn, "sem_trywait")
        return fn_(s);
    }
    case RM_DM_FOREVER: {
        REAL(sem_fn, "sem_wait")
        return fn_(s);
    }
    default: {
        if (clock == CLOCK_REALTIME) {
            REAL(sem_timed_fn, "sem_timedwait")
            return fn_(s, abs);
        }
        REAL(sem_clock_fn, "sem_clockwait")
        return fn_(s, clock, abs);
    }
    }
}

int rm_shim_sem_real_post(sem_t *s)
{
    REAL(sem_fn, "sem_post")
    return fn_(s);
}

int rm_shim_sem_real_getvalue(sem_t *s, int *v)
{
    REAL(sem_value_fn, "sem_getvalue")
    return fn_(s, v);
}

int rm_shim_sem_real_close(sem_t *s)
{
    REAL(sem_fn, "sem_close")
    return fn_(s);
}

int rm_shim_sem_real_unlink(const char *name)
{
    REAL(sem_name_fn, "sem_unlink")
    return fn_(name);
}

sem_t *rm_shim_sem_open(const char *name, int oflag, unsigned mode, unsigned value)
{
    const struct rm_shim_sempattern *p = listed(name);
    if (!p) {
        static void *slot;
        sem_open_fn fn = (sem_open_fn)real(&slot, "sem_open");
        if (!fn) {
            errno = ENOSYS;
            return SEM_FAILED;
        }
        return oflag & O_CREAT ? fn(name, oflag, (mode_t)mode, value) : fn(name, oflag);
    }
    rsemattr_t a;
    rsemattr_init(&a);
    rsemattr_setfair(&a, p->fair);
    rsemattr_setlease(&a, p->lease_ms);
    rmutex_pthread_sem_t *s = rm_semopen(name, oflag, value, &a, &in_arena);
    rsemattr_destroy(&a);
    if (!s && errno == ENOMEM && !arena.free && arena.used == ARENA_SEMS) errno = ENOSPC;
    return (sem_t *)(void *)s;
}

static rsem_t *ours(sem_t *s) { return &((rmutex_pthread_sem_t *)(void *)s)->rm_sem_; }

/* POSIX's convention: 0, or -1 and errno. */
static int posix(int r)
{
    if (!r) return 0;
    errno = r;
    return -1;
}

int rm_shim_sem_wait(sem_t *s, int mode, clockid_t clock, const struct timespec *abs)
{
    return posix(rm_ds_wait(ours(s), mode, clock, abs));
}

int rm_shim_sem_post(sem_t *s)
{
    return posix(rm_ds_post(ours(s)));
}

int rm_shim_sem_getvalue(sem_t *s, int *value)
{
    return posix(rm_ds_getvalue(ours(s), value));
}

int rm_shim_sem_close(sem_t *s)
{
    return posix(rm_semclose((rmutex_pthread_sem_t *)(void *)s, &in_arena));
}

int rm_shim_sem_unlink(const char *name)
{
    if (!listed(name)) return rm_shim_sem_real_unlink(name);
    return posix(rm_semunlink(name));
}
