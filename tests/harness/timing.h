/* timing.h -- the tests' time bounds (part of harness.h).
 *
 * Every liveness bound goes through scaled(): RMUTEX_TEST_TIME_SCALE
 * (default 1) stretches them all for slow builds (sanitizers, valgrind).
 * A test waits for a condition with wait_until(), never with a bare sleep;
 * wait_until_unscaled() is for asserting that something does NOT happen
 * within a precise span. */
#ifndef RMUTEX_TEST_HARNESS_TIMING_H
#define RMUTEX_TEST_HARNESS_TIMING_H

#include <time.h>

#include <chrono>
#include <cstdint>
#include <functional>

namespace rmt {

using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

/* RMUTEX_TEST_TIME_SCALE (default 1). */
double time_scale();

/* d multiplied by the time scale: use it for every liveness bound. */
ms scaled(ms d);

/* Milliseconds elapsed on CLOCK_MONOTONIC since t. */
int64_t elapsed_ms(Clock::time_point t);

/* Poll pred every few milliseconds until it is true or scaled(bound) has
 * passed.  Returns pred's last value. */
bool wait_until(const std::function<bool()> &pred, ms bound);

/* As wait_until, but the bound is not scaled: for tests that assert that
 * something does NOT happen within a precise span. */
bool wait_until_unscaled(const std::function<bool()> &pred, ms bound);

/* An absolute time on clock, offset_ms from now (negative: in the past). */
struct timespec abs_after(clockid_t clock, int64_t offset_ms);

/* now(clock) >= t */
bool reached(clockid_t clock, const struct timespec &t);

} // namespace rmt

#endif
