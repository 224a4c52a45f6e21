/* internal.h -- what every module of librmutex shares: the thread-local
 * failure detail, the debug log, the process-wide counters and settings,
 * and the internal status codes.
 *
 * Naming: rmutex_* and RMUTEX_* are public; rm_<module>_* are internal
 * functions shared between files (all hidden by the visibility preset);
 * everything file-local is static. */
#ifndef RM_INTERNAL_H
#define RM_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rmutex.h>

#define RM_UNUSED(x) ((void)(x))

/* Internal status of a request to Redis.  0 is success; a positive value is
 * the public errno to return (Redis answered an error that will not go away
 * by retrying: EINVAL for WRONGTYPE, ENOMEM for OOM, EROFS for READONLY,
 * EACCES for NOPERM/NOAUTH, EIO for anything else); the negative values
 * below say what the caller may do next. */
enum {
    RM_E_UNSENT = -1,    /* nothing reached Redis: retrying is safe */
    RM_E_LOST = -2,      /* sent, but the reply was lost: outcome unknown */
    RM_E_TRANSIENT = -3, /* Redis answered LOADING, BUSY, TRYAGAIN...: retry later */
    RM_DEFERRED = -4,    /* a release was handed to the watchdog (call.c) */
    RM_E_REDIRECT = -5,  /* a cluster node answered MOVED or ASK (script.c) */
    RM_E_GONE = -6,      /* an unlock's release found the hold gone: it was lost,
                            and its holder is told (lost-lock callback) before
                            the unlock returns EPERM (call.c, mutex.c) */
};

/* A broken internal invariant: the only abort() in the library. */
#define RM_ASSERT(cond) \
    do { if (!(cond)) rm_log_panic(__FILE__, __LINE__, #cond); } while (0)
_Noreturn void rm_log_panic(const char *file, int line, const char *what);

/* ---- detail.c: per-thread failure detail and the debug log ---- */

/* Set the calling thread's detail string (printf format).  Returns nothing;
 * a string that does not fit is cut. */
void rm_detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* 1 when RMUTEX_DEBUG is set.  rm_log() writes one line to the debug log. */
extern _Atomic int rm_log_enabled;
void rm_log_init(void);
void rm_log_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define rm_log(...) \
    do { \
        if (atomic_load_explicit(&rm_log_enabled, memory_order_acquire)) rm_log_(__VA_ARGS__); \
    } while (0)

/* ---- the public entry points' frame ---- */

/* Every entry point saves errno and disables cancellation (a blocking
 * network wait must not be cancelled half-way; the condition waits enable
 * it again only while they sleep), and restores both on the way out. */
struct rm_entry {
    int saved_errno;
    int cancel_state; /* the caller's */
};
/* Inline: every layer has entry points (inspect.c, cond.c, ...). */
static inline void rm_entry_enter(struct rm_entry *e)
{
    e->saved_errno = errno;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &e->cancel_state);
}

static inline int rm_entry_leave(struct rm_entry *e, int r)
{
    pthread_setcancelstate(e->cancel_state, NULL);
    errno = e->saved_errno;
    return r;
}

/* The version as rmutex_version_string() says it ("0.1.0"). */
#define RM_STR2_(x) #x
#define RM_STR_(x) RM_STR2_(x)
#define RM_VERSION_STRING \
    RM_STR_(RMUTEX_VERSION_MAJOR) "." RM_STR_(RMUTEX_VERSION_MINOR) "." RM_STR_(RMUTEX_VERSION_PATCH)

/* ---- stats.c: counters (relaxed atomics; they order nothing) ---- */

/* A histogram as rmutex_histogram_t has it (its count is the buckets' sum,
 * made when it is read). */
struct rm_histogram {
    _Atomic uint64_t count_unused; /* (rmutex_histogram_t's layout) */
    _Atomic uint64_t sum_us;
    _Atomic uint64_t bucket[RMUTEX_HISTOGRAM_BUCKETS];
};

struct rm_counters {
#define RM_COUNTER(name) _Atomic uint64_t name;
#define RM_HISTOGRAM(name) struct rm_histogram name;
#include "counters.def"
#undef RM_COUNTER
#undef RM_HISTOGRAM
};
extern struct rm_counters rm_counters;
#define RM_COUNT(field) atomic_fetch_add_explicit(&rm_counters.field, 1, memory_order_relaxed)
#define RM_COUNT_ADD(field, n) atomic_fetch_add_explicit(&rm_counters.field, (n), memory_order_relaxed)
#define RM_COUNT_SUB(field, n) atomic_fetch_sub_explicit(&rm_counters.field, (n), memory_order_relaxed)
void rm_stats_reset(void);

/* Add one duration d (ns) to h: two relaxed atomic adds, no lock. */
static inline void rm_stats_record(struct rm_histogram *h, int64_t d)
{
    uint64_t us = d > 0 ? (uint64_t)d / 1000 : 0;
    unsigned i = us ? 64 - (unsigned)__builtin_clzll(us) : 0;
    if (i >= RMUTEX_HISTOGRAM_BUCKETS) i = RMUTEX_HISTOGRAM_BUCKETS - 1;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
}

/* h as rmutex_histogram_t says it, into *out. */
void rm_stats_read(struct rm_histogram *h, rmutex_histogram_t *out);

/* ---- settings (options.c): tunables readable at any time ---- */

#define RM_REPLICAS_AUTO RMUTEX_WAIT_AUTO

/* The longest lease, in ms, anywhere: attributes, URL options, setters
 * (options.def's lease range; options.c checks that they agree). */
#define RM_LEASE_MAX 2147483647UL

/* One field per setting of options.def, which says what each is. */
struct rm_settings {
#define RM_OPTION(name, field, type, min, max, def, unit, text) _Atomic type field;
#include "options.def"
};
extern struct rm_settings rm_settings;
#define RM_SETTING(field) atomic_load_explicit(&rm_settings.field, memory_order_relaxed)

#endif
