/* clock.c -- monotonic waits and backoff; see clock.h. */
#include "clock.h"

#include <errno.h>

int rm_clock_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    int r = pthread_condattr_init(&a);
    if (r) return r;
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    r = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return r;
}

static struct timespec to_timespec(rm_nsec t)
{
    struct timespec ts = { (time_t)(t / 1000000000), (long)(t % 1000000000) };
    return ts;
}

int rm_clock_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, rm_nsec deadline)
{
    if (deadline == RM_FOREVER) return pthread_cond_wait(cv, mu);
    if (rm_clock_now() >= deadline) return ETIMEDOUT;
    struct timespec ts = to_timespec(deadline);
    int r = pthread_cond_timedwait(cv, mu, &ts);
    return r == ETIMEDOUT ? ETIMEDOUT : 0;
}

void rm_clock_sleep_until(rm_nsec deadline)
{
    struct timespec ts = to_timespec(deadline);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s ? *s : 0x9e3779b9u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

rm_nsec rm_clock_backoff(unsigned attempt, rm_nsec base, rm_nsec cap, uint32_t *rng)
{
    rm_nsec d = base;
    while (attempt-- && d < cap) d *= 2;
    if (d > cap) d = cap;
    rm_nsec half = d / 2;
    return half + (rm_nsec)(xorshift(rng) % (uint64_t)(half + 1));
}
