/* say.c -- everything the shim ever prints.
 *
 * The shim lives inside somebody else's program, so it is silent unless
 * something is wrong that the user must hear about:
 *
 *   - at start, one line per configuration error (a malformed entry, a
 *     listed symbol that does not exist, a lock name librmutex refuses);
 *   - one line when Redis turns out to be unreachable while a listed mutex
 *     needs it (then nothing until it has answered again, and never more
 *     than one such line per RATE_S seconds);
 *   - one line when a hold of a listed mutex is found lost (its lease ran
 *     out or Redis lost it): mutual exclusion may have been broken then.
 *
 * Lines go straight to file descriptor 2 with write(2), in one call each,
 * so they are not interleaved with the program's stdio buffers and do not
 * take stdio's locks.  errno is kept. */
#include "shim.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RATE_S 10

void rm_shim_say(const char *fmt, ...)
{
    int saved = errno;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "rmutex preload[%s %d]: ", program_invocation_short_name,
                     (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof buf) n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof buf - 1) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    for (size_t off = 0; off < (size_t)n;) {
        ssize_t w = write(STDERR_FILENO, buf + off, (size_t)n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    errno = saved;
}

static int down;          /* an outage has been reported and not ended */
static int64_t last_line; /* CLOCK_MONOTONIC seconds of the last outage line */

void rm_shim_outage(int is_down, const char *detail)
{
    if (!is_down) {
        if (__atomic_load_n(&down, __ATOMIC_RELAXED)) __atomic_store_n(&down, 0, __ATOMIC_RELAXED);
        return;
    }
    if (__atomic_exchange_n(&down, 1, __ATOMIC_RELAXED)) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec, last = __atomic_load_n(&last_line, __ATOMIC_RELAXED);
    if (last && now - last < RATE_S) return;
    if (!__atomic_compare_exchange_n(&last_line, &last, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;
    rm_shim_say("Redis is unreachable (%s); listed mutexes wait until it answers again",
                detail && *detail ? detail : "no detail");
}

static struct rm_shim_mutex *of_rmutex(rmutex_t *rm)
{
    return (struct rm_shim_mutex *)((char *)rm - offsetof(struct rm_shim_mutex, rm));
}

void rm_shim_lost_at_unlock(rmutex_t *rm)
{
    struct rm_shim_mutex *sm = of_rmutex(rm);
    /* With a watchdog lease the callback below has said it already. */
    if (sm->lease_ms)
        rm_shim_say("the hold of '%s' (%s) had run out before it was unlocked: its lease of %lu ms "
                    "was too short, another process may have held it meanwhile",
                    sm->name, sm->symbol, sm->lease_ms);
}

void rm_shim_lost_callback(rmutex_t *m, const char *name, void *arg)
{
    (void)m;
    (void)arg;
    rm_shim_say("the hold of '%s' was lost while held (lease expired or Redis lost it); another "
                "process may enter it before this one unlocks", name);
}
