/* clock.h -- the one clock every figure of the benchmark is read from.
 *
 * CLOCK_MONOTONIC in nanoseconds.  It is the same clock in every process of
 * the machine, so a time taken in one process (an unlock returning) can be
 * subtracted from a time taken in another (the next owner's lock returning):
 * W3 and W5 depend on that. */
#ifndef BENCH_CLOCK_H
#define BENCH_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void sleep_ns(int64_t ns)
{
    if (ns <= 0) return;
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    while (nanosleep(&ts, &ts) != 0) {
    }
}

#endif
