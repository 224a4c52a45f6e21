/* skew_preload.c -- LD_PRELOAD shim that moves a process's wall clock by
 * RMUTEX_TEST_CLOCK_SKEW_S seconds (CLOCK_REALTIME and its coarse variant,
 * gettimeofday, time).  CLOCK_MONOTONIC is left alone.  The fair-lock tests
 * use it to check that queue deadlines come from Redis only: a client with
 * a skewed clock neither evicts nor is evicted.
 *
 * With RMUTEX_TEST_CLOCK_STEP_FILE and RMUTEX_TEST_CLOCK_STEP_S the clock
 * also steps by that many seconds at the moment the file comes to exist, as
 * settimeofday() or an NTP step would move it under a running program.  The
 * clock-step tests use it to check that a timed wait, once begun, ignores
 * wall-clock steps (its deadline is on CLOCK_MONOTONIC). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long skew(void)
{
    const char *s = getenv("RMUTEX_TEST_CLOCK_SKEW_S");
    long off = s ? atol(s) : 0;
    const char *file = getenv("RMUTEX_TEST_CLOCK_STEP_FILE");
    const char *step = getenv("RMUTEX_TEST_CLOCK_STEP_S");
    if (file && step && access(file, F_OK) == 0)
        off += atol(step);
    return off;
}

__attribute__((visibility("default"))) int clock_gettime(clockid_t c, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int r = real(c, ts);
    if (r == 0 && ts && (c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE))
        ts->tv_sec += skew();
    return r;
}

__attribute__((visibility("default"))) int gettimeofday(struct timeval *tv, void *tz)
{
    static int (*real)(struct timeval *, void *);
    if (!real)
        real = (int (*)(struct timeval *, void *))dlsym(RTLD_NEXT, "gettimeofday");
    int r = real(tv, tz);
    if (r == 0 && tv)
        tv->tv_sec += skew();
    return r;
}

__attribute__((visibility("default"))) time_t time(time_t *t)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t)
        *t = ts.tv_sec;
    return ts.tv_sec;
}
