/* rwlock_redisson_test.cc -- an rrwlock and Redisson's RReadWriteLock on
 * one name, with Redisson's own scripts run by a second client
 * (redisson_rw_client.h): readers share, a writer is alone, either side's
 * release wakes the other's waiters, Redisson's read unlock leaves our
 * readers' hold alone, and a dead Redisson reader does not keep our
 * writer out for ever.  What Redisson cannot do -- wait behind our
 * queued writer -- is shown as it is (docs/rwlock.md). */
#include <thread>

#include "harness.h"
#include "redisson_rw_client.h"

namespace {

using namespace rmt;

class RwRedisson : public RedisTest {
  protected:
    RwRedisson() : RedisTest(false, "lease=3000") {}
    void init(rrwlock_t *l, const std::string &name) { ASSERT_RC(0, rrwlock_init(l, name.c_str(), nullptr)); }
};

TEST_F(RwRedisson, ReadersOfBothShareAndRedissonsReadUnlockLeavesOursAlone)
{
    std::string name = lock_name();
    rrwlock_t l;
    init(&l, name);
    RedissonRwClient java(redis(), "99999999-aaaa-bbbb-cccc-000000000001", 7);
    ASSERT_RC(0, rrwlock_rdlock(&l));
    EXPECT_EQ(-1, java.read(name)) << "Redisson's reader did not share with ours";
    EXPECT_EQ(0, java.read_unlock(name)) << "Redisson's unlock saw nobody left";
    EXPECT_TRUE(redis().exists(name)) << "Redisson's read unlock deleted the hash under our reader";
    EXPECT_GT(redis().pttl(name), 0);
    EXPECT_EQ("read", redis().cmd({ "HGET", name, "mode" }).str());
    EXPECT_GT(java.write(name), 0) << "Redisson's writer got in beside our reader";
    EXPECT_RC(0, rrwlock_unlock(&l));
    EXPECT_EQ(-1, java.write(name)) << "Redisson's writer did not get in once our reader left";
    EXPECT_EQ(1, java.write_unlock(name));
    EXPECT_RC(0, rrwlock_destroy(&l));
}

TEST_F(RwRedisson, OurWriterExcludesRedissonsReadersAndWriterAndTheirReleaseWakesOurs)
{
    std::string name = lock_name();
    rrwlock_t l;
    init(&l, name);
    RedissonRwClient java(redis(), "99999999-aaaa-bbbb-cccc-000000000002", 3);
    ASSERT_RC(0, rrwlock_wrlock(&l));
    EXPECT_GT(java.read(name), 0) << "Redisson's reader got in beside our writer";
    EXPECT_GT(java.write(name), 0) << "Redisson's writer got in beside ours";
    /* Our unlock publishes Redisson's write-unlock message. */
    Redis sub(host(), port(), password_);
    ASSERT_TRUE(sub.cmd({ "SUBSCRIBE", RedissonRwClient::channel(name) }));
    EXPECT_RC(0, rrwlock_unlock(&l));
    auto msg = sub.next_message(ms(2000));
    ASSERT_TRUE(msg) << "nothing published for Redisson's waiters";
    EXPECT_EQ("1", msg->second);
    /* Redisson's writer holds: our reader waits, and is woken by its unlock. */
    ASSERT_EQ(-1, java.write(name));
    Async reader([&] {
        int rc = rrwlock_rdlock(&l);
        return rc ? rc : rrwlock_unlock(&l);
    });
    EXPECT_FALSE(reader.wait(ms(300))) << "our reader got in beside Redisson's writer";
    auto t0 = Clock::now();
    ASSERT_EQ(1, java.write_unlock(name));
    ASSERT_TRUE(reader.wait(ms(1500))) << "Redisson's write unlock did not wake our reader";
    EXPECT_RC(0, reader.rc());
    EXPECT_LT(elapsed_ms(t0), scaled(ms(500)).count()) << "woken by the poll, not by the message";
    EXPECT_RC(0, rrwlock_destroy(&l));
}

TEST_F(RwRedisson, RedissonsLastReadUnlockWakesOurWaitingWriter)
{
    std::string name = lock_name();
    rrwlock_t l;
    init(&l, name);
    RedissonRwClient java(redis(), "99999999-aaaa-bbbb-cccc-000000000003", 5);
    ASSERT_EQ(-1, java.read(name));
    Async writer([&] {
        int rc = rrwlock_wrlock(&l);
        return rc ? rc : rrwlock_unlock(&l);
    });
    EXPECT_FALSE(writer.wait(ms(300))) << "our writer got in beside Redisson's reader";
    auto t0 = Clock::now();
    ASSERT_EQ(1, java.read_unlock(name));
    ASSERT_TRUE(writer.wait(ms(1500))) << "Redisson's read unlock did not wake our writer";
    EXPECT_RC(0, writer.rc());
    EXPECT_LT(elapsed_ms(t0), scaled(ms(500)).count()) << "woken by the poll, not by the message";
    EXPECT_RC(0, rrwlock_destroy(&l));
}

TEST_F(RwRedisson, ADeadRedissonReaderDoesNotKeepOurWriterOutOnceItsTimeoutLapses)
{
    std::string name = lock_name();
    rrwlock_t l;
    init(&l, name);
    RedissonRwClient java(redis(), "99999999-aaaa-bbbb-cccc-000000000004", 9);
    ASSERT_EQ(-1, java.read(name, 600)); /* and never unlocks: its JVM died */
    redis().cmd({ "PEXPIRE", name, "60000" }); /* another live reader kept the hash's TTL up */
    auto t0 = Clock::now();
    Async writer([&] {
        struct timespec dl = abs_after(CLOCK_REALTIME, 5000);
        int rc = rrwlock_timedwrlock(&l, &dl);
        return rc ? rc : rrwlock_unlock(&l);
    });
    ASSERT_TRUE(writer.wait(ms(4000)));
    EXPECT_RC(0, writer.rc()) << "a dead Redisson reader kept our writer out";
    std::cerr << "[rwlock] our writer went " << elapsed_ms(t0)
              << " ms after a Redisson reader with a 600 ms lease died\n";
    EXPECT_RC(0, rrwlock_destroy(&l));
}

/* Our reader's process stalled past its lease: the hash expired, and a
 * Redisson writer took the name.  Our watchdog's next read renewal must
 * find its hold gone -- not renew it, and not stretch the Redisson
 * writer's hash, which must still lapse when that writer dies. */
TEST_F(RwRedisson, ALapsedReadHoldIsNotRenewedIntoARedissonWritersHash)
{
    std::string name = lock_name();
    rrwlock_t l;
    init(&l, name);
    ASSERT_RC(0, rrwlock_rdlock(&l));
    EXPECT_GT(redis().pttl("rmutex_rw_readers:{" + name + "}"), 0) << "the readers' set never expires";
    /* The lapse, as a long stall would leave it (our process entry stays
     * in the readers' set: nobody purged it). */
    redis().cmd({ "DEL", name });
    RedissonRwClient java(redis(), "99999999-aaaa-bbbb-cccc-000000000005", 11);
    ASSERT_EQ(-1, java.write(name, 800)) << "Redisson's writer did not find the name free";
    /* It dies without unlocking; its hash lives 800 ms.  Our renewals come
     * every second (lease 3 s). */
    EXPECT_TRUE(wait_until([&] { return !redis().exists(name); }, scaled(ms(3000))))
        << "our read renewal kept a Redisson writer's hash alive (PTTL " << redis().pttl(name) << ")";
    EXPECT_RC(EPERM, rrwlock_unlock(&l)) << "a read hold that lapsed was still ours";
    EXPECT_RC(0, rrwlock_destroy(&l));
}

TEST_F(RwRedisson, ARedissonReaderDoesNotWaitBehindOurQueuedWriterAsDocumented)
{
    /* Redisson cannot see the queue: this is what a mixed deployment gets. */
    std::string name = lock_name();
    rrwlock_t r, w;
    init(&r, name);
    init(&w, name);
    RedissonRwClient java(redis(), "99999999-aaaa-bbbb-cccc-000000000005", 2);
    ASSERT_RC(0, rrwlock_rdlock(&r));
    Async writer([&] {
        int rc = rrwlock_wrlock(&w);
        return rc ? rc : rrwlock_unlock(&w);
    });
    ASSERT_TRUE(wait_until([&] {
        return redis().cmd({ "ZCARD", "rmutex_rw_writers:{" + name + "}" }).integer() == 1;
    }, ms(3000)));
    EXPECT_EQ(-1, java.read(name)) << "Redisson's reader now waits behind our writer: update docs/rwlock.md";
    EXPECT_EQ(0, java.read_unlock(name));
    EXPECT_RC(0, rrwlock_unlock(&r));
    ASSERT_TRUE(writer.wait(ms(3000)));
    EXPECT_RC(0, writer.rc());
    EXPECT_RC(0, rrwlock_destroy(&r));
    EXPECT_RC(0, rrwlock_destroy(&w));
}

} // namespace
