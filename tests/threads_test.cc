/* threads_test.cc -- many threads of one process on the same rmutex.
 *
 * Overlap is detected with an atomic "inside" counter rather than a plain
 * variable, so that ThreadSanitizer (which cannot see happens-before through
 * Redis) only reports races inside the library. */
#include <atomic>
#include <thread>
#include <vector>

#include "harness.h"

namespace {

using namespace rmt;

class Threads : public RedisTest {};

/* Runs n threads x iters of lock -> check nobody else is inside -> yield ->
 * unlock on m.  Returns the number of overlaps seen. */
long hammer(rmutex_t *m, int n, int iters, std::atomic<long> *errors)
{
    std::atomic<int> inside{0};
    std::atomic<long> overlaps{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < n; t++)
        ts.emplace_back([&] {
            for (int i = 0; i < iters; i++) {
                int rc = rmutex_lock(m);
                if (rc != 0) {
                    (*errors)++;
                    continue;
                }
                if (inside.fetch_add(1) != 0)
                    overlaps++;
                std::this_thread::yield();
                inside.fetch_sub(1);
                if (rmutex_unlock(m) != 0)
                    (*errors)++;
            }
        });
    for (auto &t : ts)
        t.join();
    return overlaps.load();
}

TEST_F(Threads, EightThreadsOnOneMutexNeverOverlap)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name);
    std::atomic<long> errors{0};
    EXPECT_EQ(0, hammer(&m, 8, 200, &errors));
    EXPECT_EQ(0, errors.load());
    EXPECT_FALSE(redis().exists(name));
    EXPECT_EQ(0u, stats().held);
    EXPECT_EQ(0u, stats().waiting);
}

TEST_F(Threads, StaticInitializerRacedByManyThreadsOnFirstUse)
{
    std::string name = lock_name();
    static rmutex_t m; /* storage of static duration, as the initializer is meant for */
    m = RMUTEX_INITIALIZER(name.c_str());
    std::atomic<long> errors{0};
    EXPECT_EQ(0, hammer(&m, 8, 50, &errors));
    EXPECT_EQ(0, errors.load());
    EXPECT_FALSE(redis().exists(name));
}

TEST_F(Threads, TwoHandlesOnOneNameExcludeEachOther)
{
    std::string name = lock_name();
    rmutex_t a, b;
    init_mutex(&a, name);
    init_mutex(&b, name);
    std::atomic<int> inside{0};
    std::atomic<long> overlaps{0}, errors{0};
    auto body = [&](rmutex_t *m) {
        for (int i = 0; i < 200; i++) {
            if (rmutex_lock(m) != 0) {
                errors++;
                continue;
            }
            if (inside.fetch_add(1) != 0)
                overlaps++;
            std::this_thread::yield();
            inside.fetch_sub(1);
            if (rmutex_unlock(m) != 0)
                errors++;
        }
    };
    std::thread t1(body, &a), t2(body, &b), t3(body, &a), t4(body, &b);
    t1.join();
    t2.join();
    t3.join();
    t4.join();
    EXPECT_EQ(0, overlaps.load());
    EXPECT_EQ(0, errors.load());
}

TEST_F(Threads, TimedlockersAndTrylockersMixWithoutOverlap)
{
    std::string name = lock_name();
    rmutex_t m;
    init_mutex(&m, name, RMUTEX_ERRORCHECK);
    std::atomic<int> inside{0};
    std::atomic<long> overlaps{0}, bad{0}, got{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 6; t++)
        ts.emplace_back([&, t] {
            for (int i = 0; i < 100; i++) {
                int rc;
                if (t % 3 == 0) {
                    rc = rmutex_trylock(&m);
                    if (rc == EBUSY)
                        continue;
                } else if (t % 3 == 1) {
                    struct timespec dl = abs_after(CLOCK_REALTIME, 5);
                    rc = rmutex_timedlock(&m, &dl);
                    if (rc == ETIMEDOUT)
                        continue;
                } else {
                    rc = rmutex_lock(&m);
                }
                if (rc != 0) {
                    bad++;
                    continue;
                }
                got++;
                if (inside.fetch_add(1) != 0)
                    overlaps++;
                std::this_thread::yield();
                inside.fetch_sub(1);
                if (rmutex_unlock(&m) != 0)
                    bad++;
            }
        });
    for (auto &t : ts)
        t.join();
    EXPECT_EQ(0, overlaps.load());
    EXPECT_EQ(0, bad.load());
    EXPECT_GE(got.load(), 200) << "the two lock() threads alone take 200 holds";
    EXPECT_FALSE(redis().exists(name));
}

TEST_F(Threads, ManyMutexesHeldAtOnceByManyThreads)
{
    constexpr int kMutexes = 16;
    std::vector<rmutex_t> mutexes(kMutexes);
    for (int i = 0; i < kMutexes; i++)
        init_mutex(&mutexes[static_cast<size_t>(i)], lock_name("m" + std::to_string(i)));
    std::atomic<long> errors{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
        ts.emplace_back([&, t] {
            for (int round = 0; round < 20; round++) {
                /* Lock in index order (no deadlock), a different subset each time. */
                std::vector<int> mine;
                for (int i = 0; i < kMutexes; i++)
                    if ((i + t + round) % 3 == 0)
                        mine.push_back(i);
                for (int i : mine)
                    if (rmutex_lock(&mutexes[static_cast<size_t>(i)]) != 0)
                        errors++;
                for (auto it = mine.rbegin(); it != mine.rend(); ++it)
                    if (rmutex_unlock(&mutexes[static_cast<size_t>(*it)]) != 0)
                        errors++;
            }
        });
    for (auto &t : ts)
        t.join();
    EXPECT_EQ(0, errors.load());
    for (int i = 0; i < kMutexes; i++)
        EXPECT_FALSE(redis().exists(lock_name("m" + std::to_string(i))));
}

} // namespace
