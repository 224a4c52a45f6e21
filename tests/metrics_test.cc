/* metrics_test.cc -- the wait-time and hold-time histograms of rmutex_stats,
 * the per-name counters each process publishes in the holder registry, and
 * the commands that read them: `rmutex stats --prom` (checked by a strict
 * parser of Prometheus's text format, written here) and `rmutex top`.
 *
 * Real processes (rmutex_test_child) against the test program's own
 * redis-server, with a 1.5 s lease: the registry's period is 500 ms. */
#include "harness.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace rmt;

/* The bucket a duration of us microseconds lands in (rmutex.h). */
int bucket_of_us(uint64_t us)
{
    int i = 0;
    while (us) us >>= 1, i++;
    return i < RMUTEX_HISTOGRAM_BUCKETS ? i : RMUTEX_HISTOGRAM_BUCKETS - 1;
}

rmutex_histogram_t minus(const rmutex_histogram_t &a, const rmutex_histogram_t &b)
{
    rmutex_histogram_t d;
    d.count = a.count - b.count;
    d.sum_us = a.sum_us - b.sum_us;
    for (int i = 0; i < RMUTEX_HISTOGRAM_BUCKETS; i++) d.bucket[i] = a.bucket[i] - b.bucket[i];
    return d;
}

std::string buckets_of(const rmutex_histogram_t &h)
{
    std::string s;
    for (int i = 0; i < RMUTEX_HISTOGRAM_BUCKETS; i++)
        if (h.bucket[i]) s += " [" + std::to_string(i) + "]=" + std::to_string(h.bucket[i]);
    return s.empty() ? " none" : s;
}

class Histograms : public RedisTest {
  public:
    Histograms() : RedisTest(false, "lease=1500") {}
};

TEST_F(Histograms, HoldsOf50And200MsLandInTheirLog2Buckets)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    rmutex_stats_t s0 = stats();
    for (int hold_ms : { 50, 200 }) {
        ASSERT_RC(0, rmutex_lock(&m));
        std::this_thread::sleep_for(ms(hold_ms)); /* the hold being measured */
        ASSERT_RC(0, rmutex_unlock(&m));
    }
    rmutex_histogram_t d = minus(stats().hold_time, s0.hold_time);
    EXPECT_EQ(2u, d.count) << buckets_of(d);
    /* 50 ms = 50 000 us: [2^15, 2^16); 200 ms: [2^17, 2^18) -- a late
     * wake-up of up to 15 ms / 60 ms stays in the bucket. */
    EXPECT_EQ(1u, d.bucket[bucket_of_us(50000)]) << buckets_of(d);
    EXPECT_EQ(1u, d.bucket[bucket_of_us(200000)]) << buckets_of(d);
    EXPECT_GE(d.sum_us, 250000u);
    EXPECT_LT(d.sum_us, 250000u + 100000u * (unsigned)scaled(ms(1)).count());
    rmutex_destroy(&m);
}

TEST_F(Histograms, AContendedWaitIsCountedAndAnUncontendedOneIsNot)
{
    rmutex_t m;
    std::string name = lock_name();
    init_mutex(&m, name);
    rmutex_stats_t s0 = stats();
    ASSERT_RC(0, rmutex_lock(&m)); /* uncontended */
    ASSERT_RC(0, rmutex_unlock(&m));
    rmutex_stats_t s1 = stats();
    EXPECT_EQ(s0.uncontended + 1, s1.uncontended);
    EXPECT_EQ(0u, minus(s1.wait_time, s0.wait_time).count);

    /* Another process holds it for 150 ms: this lock waits in Redis. */
    Child other({ "hold", name, "--hold-ms=150" }, url());
    auto l = other.expect_line("held ", ms(5000));
    ASSERT_TRUE(l && field(*l, "rc") == "0");
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    /* Another thread of this process holds it for 150 ms: this lock waits
     * at the process's gate. */
    ASSERT_RC(0, rmutex_lock(&m));
    std::thread t([&] {
        ASSERT_RC(0, rmutex_lock(&m));
        ASSERT_RC(0, rmutex_unlock(&m));
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting > 0; }, ms(5000)));
    std::this_thread::sleep_for(ms(150)); /* the hold the other thread waits out */
    ASSERT_RC(0, rmutex_unlock(&m));
    t.join();
    rmutex_stats_t s2 = stats();
    rmutex_histogram_t d = minus(s2.wait_time, s1.wait_time);
    EXPECT_EQ(2u, d.count) << buckets_of(d);
    EXPECT_EQ(s1.uncontended + 1, s2.uncontended); /* (the holding thread's lock) */
    /* Each waited about 150 ms (at least 100: the hold had begun before). */
    EXPECT_GE(d.sum_us, 2 * 100000u) << buckets_of(d);
    for (int i = 0; i < bucket_of_us(100000); i++) EXPECT_EQ(0u, d.bucket[i]) << buckets_of(d);
    other.wait(ms(5000));
    rmutex_destroy(&m);
}

TEST_F(Histograms, ACallerThatKnowsTheOlderSizeGetsThePrefixOnly)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    const size_t old_size = offsetof(rmutex_stats_t, uncontended); /* the struct before */
    std::vector<unsigned char> buf(sizeof(rmutex_stats_t), 0xAB);
    ASSERT_RC(0, rmutex_stats(reinterpret_cast<rmutex_stats_t *>(buf.data()), old_size));
    for (size_t i = old_size; i < buf.size(); i++)
        ASSERT_EQ(0xAB, buf[i]) << "byte " << i << " written past the older size";
    rmutex_stats_t now = stats(), old;
    memcpy(&old, buf.data(), old_size);
    EXPECT_GE(old.acquisitions, 1u);
    EXPECT_LE(old.acquisitions, now.acquisitions);
    EXPECT_EQ(now.announcements >= old.announcements, true);
    rmutex_destroy(&m);
}

} // namespace
