/* timing.cc -- the tests' time bounds.  See timing.h. */
#include "timing.h"

#include <cstdlib>
#include <thread>

namespace rmt {

double time_scale()
{
    static const double scale = [] {
        const char *s = getenv("RMUTEX_TEST_TIME_SCALE");
        double v = s ? strtod(s, nullptr) : 1.0;
        return v >= 1.0 ? v : 1.0;
    }();
    return scale;
}

ms scaled(ms d) { return ms(static_cast<int64_t>(static_cast<double>(d.count()) * time_scale())); }

int64_t elapsed_ms(Clock::time_point t)
{
    return std::chrono::duration_cast<ms>(Clock::now() - t).count();
}

bool wait_until_unscaled(const std::function<bool()> &pred, ms bound)
{
    auto end = Clock::now() + bound;
    for (;;) {
        if (pred())
            return true;
        if (Clock::now() >= end)
            return pred();
        std::this_thread::sleep_for(ms(3));
    }
}

bool wait_until(const std::function<bool()> &pred, ms bound) { return wait_until_unscaled(pred, scaled(bound)); }

struct timespec abs_after(clockid_t clock, int64_t offset_ms)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    int64_t ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec + offset_ms * 1000000;
    ts.tv_sec = ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    return ts;
}

bool reached(clockid_t clock, const struct timespec &t)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return now.tv_sec > t.tv_sec || (now.tv_sec == t.tv_sec && now.tv_nsec >= t.tv_nsec);
}

} // namespace rmt
