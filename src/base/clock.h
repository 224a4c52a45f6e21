/* clock.h -- monotonic time for every deadline, lease and backoff.
 *
 * All internal time is rm_nsec: nanoseconds on CLOCK_MONOTONIC.  A distinct
 * type documents that a value is a point on that clock (or a span of it) and
 * never a wall-clock time; the only place CLOCK_REALTIME is read is the
 * conversion of a caller's absolute deadline, once, at entry. */
#ifndef RM_CLOCK_H
#define RM_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

typedef int64_t rm_nsec;

#define RM_FOREVER INT64_MAX
#define RM_MSEC(ms) ((rm_nsec)(ms) * 1000000)
#define RM_USEC(us) ((rm_nsec)(us) * 1000)
#define RM_TO_MSEC(ns) ((ns) / 1000000)

static inline rm_nsec rm_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (rm_nsec)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline rm_nsec rm_clock_now(void) { return rm_clock_ns(CLOCK_MONOTONIC); }

static inline rm_nsec rm_clock_min(rm_nsec a, rm_nsec b) { return a < b ? a : b; }
static inline rm_nsec rm_clock_max(rm_nsec a, rm_nsec b) { return a > b ? a : b; }

/* now + span, saturating at RM_FOREVER. */
static inline rm_nsec rm_clock_after(rm_nsec span)
{
    rm_nsec now = rm_clock_now();
    return span >= RM_FOREVER - now ? RM_FOREVER : now + span;
}

/* Initialize a condition variable that waits on CLOCK_MONOTONIC. */
int rm_clock_cond_init(pthread_cond_t *cv);

/* Wait on cv until signalled or deadline (RM_FOREVER: no limit).  Returns 0
 * or ETIMEDOUT; spurious wake-ups return 0, as pthread_cond_wait. */
int rm_clock_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, rm_nsec deadline);

/* Sleep until deadline, through signals. */
void rm_clock_sleep_until(rm_nsec deadline);

/* A jittered exponential backoff: base * 2^attempt capped at cap, then a
 * random point in [half, full] of it.  rng is the caller's state. */
rm_nsec rm_clock_backoff(unsigned attempt, rm_nsec base, rm_nsec cap, uint32_t *rng);

#endif
