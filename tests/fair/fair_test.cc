/* fair_test.cc -- the fair lock's semantics: the keys it writes, return codes, trylock never jumping the queue,
 * direct hand-off (one message, to the head only, owned on receipt by the
 * woken thread), fencing tokens per new owner, robust mutexes, lost holds,
 * fork, and a fair and a non-fair handle on the same name.
 *
 * Every process here runs with lease=2000 (hold lease, renewed by the
 * watchdog) and waiter_lease=1000 (queued waiters' liveness) unless a test
 * says otherwise. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <regex>
#include <thread>

#include "fair_util.h"

namespace {

using namespace rmt;
using namespace fair;

class FairLock : public FairTest {
  protected:
    /* This thread's owner field, found while it holds m alone. */
    std::string my_field(const std::string &name)
    {
        auto h = redis().hgetall(name);
        EXPECT_EQ(1u, h.size());
        return h.empty() ? "" : h.begin()->first;
    }

    std::unique_ptr<FairChild> child(const std::string &name, std::vector<std::string> opts = {},
                                     const std::string &options = "")
    {
        return threads_child(name, options.empty() ? url() : url_with(options), opts);
    }

    /* Tell child thread t to lock and wait for the result line. */
    std::string child_lock(FairChild &c, int t = 0, ms bound = ms(10000)) { return child_do(c, "lock", t, bound); }

    /* Channels subscribed by the pub/sub connections of process pid. */
    long long subscriptions_of(pid_t pid)
    {
        long long n = 0;
        for (auto &c : redis().client_list())
            if (c["name"] == "rmutex:sub:" + std::to_string(pid))
                n += std::stoll(c["sub"]);
        return n;
    }

    std::string child_do(FairChild &c, const std::string &verb, int t = 0, ms bound = ms(10000),
                         const std::string &arg = "")
    {
        EXPECT_TRUE(c.send(verb + " " + std::to_string(t) + (arg.empty() ? "" : " " + arg)));
        auto line = c.expect_line(verb + " t=" + std::to_string(t) + " ", bound);
        EXPECT_TRUE(line) << "child thread " << t << " did not return from " << verb;
        return line ? *line : "";
    }
};

TEST_F(FairLock, UncontendedLockWritesTheSharedLockHashAndNoQueue)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    int fair = -1;
    EXPECT_EQ(0, rmutexattr_getfair(&a, &fair));
    EXPECT_EQ(0, fair) << "not fair by default";
    EXPECT_EQ(0, rmutexattr_setfair(&a, 1));
    EXPECT_EQ(0, rmutexattr_getfair(&a, &fair));
    EXPECT_EQ(1, fair);
    EXPECT_EQ(0, rmutexattr_destroy(&a));

    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto h = redis().hgetall(name);
    ASSERT_EQ(1u, h.size()) << "the fair lock holds the same hash as the non-fair one";
    EXPECT_TRUE(std::regex_match(h.begin()->second, std::regex("^[1-9][0-9]*$")))
        << "the field names the acquisition: " << h.begin()->second;
    EXPECT_FALSE(redis().get(k.owner)) << "an uncontended non-robust hold writes no owner mark";
    long long pttl = redis().pttl(name);
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, kLease);
    uint64_t f1 = 0;
    ASSERT_RC(0, rmutex_fence(&m, &f1));
    EXPECT_EQ(std::to_string(f1), redis().get(k.token).value_or("none"));
    EXPECT_FALSE(redis().exists(k.queue)) << "nobody waited: no queue";
    EXPECT_FALSE(redis().exists(k.alive));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_FALSE(redis().exists(name));
    EXPECT_FALSE(redis().exists(k.owner)) << "a clean unlock deletes the owner mark";

    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t f2 = 0;
    ASSERT_RC(0, rmutex_fence(&m, &f2));
    EXPECT_GT(f2, f1);
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(FairLock, StaticInitializerWithTheFairFlagMakesAFairLock)
{
    static std::string name; /* valid until the first use, as the header asks */
    name = lock_name();
    FairKeys k(name);
    rmutex_t m = RMUTEX_INITIALIZER_NP(name.c_str(), RMUTEX_ERRORCHECK, RMUTEX_FLAG_FAIR);
    auto c = child(name);
    ASSERT_TRUE(c);
    ASSERT_EQ(0, rc_of(child_lock(*c)));
    HolderThread waiter(&m);
    ASSERT_TRUE(wait_queue_size(k, 1)) << "a waiting thread of a RMUTEX_FLAG_FAIR mutex is queued in Redis";
    ASSERT_EQ(0, rc_of(child_do(*c, "unlock")));
    ASSERT_RC(0, waiter.wait_locked(ms(3000)));
    EXPECT_FALSE(redis().exists(k.queue)) << "the queue is gone with its last waiter";
    EXPECT_RC(0, waiter.release());
    /* ERRORCHECK came through the initializer too. */
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(EDEADLK, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(FairLock, ReturnCodesAreThoseOfTheNonFairLock)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name, RMUTEX_ERRORCHECK);
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_RC(EDEADLK, rmutex_lock(&m));
    EXPECT_RC(EBUSY, rmutex_trylock(&m)) << "ERRORCHECK trylock by the owner";
    EXPECT_RC(EINVAL, rmutex_consistent(&m)) << "not robust";
    EXPECT_RC(EBUSY, rmutex_destroy(&m)) << "held";
    {
        Async other([&] { return rmutex_unlock(&m); });
        ASSERT_TRUE(other.wait(ms(3000)));
        EXPECT_RC(EPERM, other.rc()) << "unlock by a thread that does not hold it";
        Async other_try([&] { return rmutex_trylock(&m); });
        ASSERT_TRUE(other_try.wait(ms(3000)));
        EXPECT_RC(EBUSY, other_try.rc());
        Async other_timed([&] {
            struct timespec past = abs_after(CLOCK_REALTIME, -1000);
            return rmutex_timedlock(&m, &past);
        });
        ASSERT_TRUE(other_timed.wait(ms(3000)));
        EXPECT_RC(ETIMEDOUT, other_timed.rc());
        Async other_null([&] { return rmutex_timedlock(&m, nullptr); });
        ASSERT_TRUE(other_null.wait(ms(3000)));
        EXPECT_RC(EINVAL, other_null.rc()) << "NULL abstime when the call would block";
        Async other_clock([&] {
            struct timespec t = abs_after(CLOCK_MONOTONIC, 1000);
            return rmutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, &t);
        });
        ASSERT_TRUE(other_clock.wait(ms(3000)));
        EXPECT_RC(EINVAL, other_clock.rc());
    }
    EXPECT_FALSE(redis().exists(k.queue)) << "failed calls leave no queue entry";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    struct timespec past = abs_after(CLOCK_REALTIME, -1000);
    EXPECT_RC(0, rmutex_timedlock(&m, &past)) << "a free lock is taken whatever the deadline";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(0, rmutex_destroy(&m));

    rmutex_t r;
    init_fair(&r, lock_name("recursive"), RMUTEX_RECURSIVE);
    ASSERT_RC(0, rmutex_lock(&r));
    uint64_t f1 = 0, f2 = 0;
    ASSERT_RC(0, rmutex_fence(&r, &f1));
    ASSERT_RC(0, rmutex_lock(&r));
    ASSERT_RC(0, rmutex_trylock(&r));
    unsigned count = 0;
    EXPECT_RC(0, rmutex_holdcount(&r, &count));
    EXPECT_EQ(3u, count);
    ASSERT_RC(0, rmutex_fence(&r, &f2));
    EXPECT_EQ(f1, f2) << "a recursive relock keeps its token";
    EXPECT_RC(0, rmutex_unlock(&r));
    EXPECT_RC(0, rmutex_unlock(&r));
    EXPECT_TRUE(redis().exists(lock_name("recursive"))) << "still held at depth 1";
    EXPECT_RC(0, rmutex_unlock(&r));
    EXPECT_FALSE(redis().exists(lock_name("recursive")));
    EXPECT_RC(EPERM, rmutex_unlock(&r));
}

TEST_F(FairLock, TimedlockThatTimesOutInTheQueueLeavesNoEntry)
{
    std::string name = lock_name();
    FairKeys k(name);
    auto c = child(name);
    ASSERT_TRUE(c);
    ASSERT_EQ(0, rc_of(child_lock(*c)));
    rmutex_t m;
    init_fair(&m, name);
    auto t0 = Clock::now();
    struct timespec dl = abs_after(CLOCK_REALTIME, 600);
    std::atomic<bool> seen{false};
    Async waiter([&] { return rmutex_timedlock(&m, &dl); });
    /* It is queued while it waits... */
    EXPECT_TRUE(wait_until([&] {
        bool q = read_queue(redis(), k).queue.size() == 1;
        if (q)
            seen = true;
        return q || waiter.done();
    }, ms(3000)));
    EXPECT_TRUE(seen) << "the timed waiter was never queued";
    ASSERT_TRUE(waiter.wait(ms(3000)));
    EXPECT_RC(ETIMEDOUT, waiter.rc());
    EXPECT_GE(elapsed_ms(t0), 590) << "never ETIMEDOUT before the deadline";
    /* ...and its entry is gone the moment the call returns. */
    auto s = read_queue(redis(), k);
    EXPECT_TRUE(s.queue.empty()) << "ghost entry " << (s.queue.empty() ? "" : s.queue[0].member);
    EXPECT_TRUE(s.alive.empty());
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    EXPECT_TRUE(read_queue(redis(), k).queue.empty()) << "trylock never queues";
}

/* No barging.  While a waiter is queued nobody else gets the lock first:
 * not a trylock, not a lock, not even when the lock is momentarily free.
 * The lock is left free with fair waiters queued when a non-fair holder
 * releases it (a non-fair release does not know the queue; the waiter
 * finds out by its bounded poll).  The waiter here runs with a long waiter
 * lease and poll, and the non-fair holder with a long lease, so that the
 * waiter does not look again for seconds: whoever comes along in between
 * must hand the lock to it, not take it. */
TEST_F(FairLock, TrylockIsEbusyWhileOthersAreQueuedEvenWithTheLockFree)
{
    std::string name = lock_name();
    FairKeys k(name);
    auto nonfair = child(name, {"--nonfair"}, "lease=30000");
    ASSERT_TRUE(nonfair);
    ASSERT_EQ(0, rc_of(child_lock(*nonfair)));
    auto w = child(name, {}, "lease=30000&waiter_lease=20000&poll=20000");
    ASSERT_TRUE(w);
    log_every_command();
    std::string wm = enqueue(*w, k, "lock 0");
    ASSERT_FALSE(wm.empty());
    /* The waiter looks once more when its subscription is confirmed, which
     * can come after the enqueue; only after that look does it stay still
     * for seconds (else it could find the lock free by itself below). */
    ASSERT_TRUE(wait_until([&] { return acquire_calls(wm) >= 2; }, ms(3000)))
        << "the waiter's look after subscribing: " << acquire_calls(wm) << " acquire call(s) seen";

    rmutex_t m;
    init_fair(&m, name);
    EXPECT_RC(EBUSY, rmutex_trylock(&m)) << "held";
    ASSERT_EQ(0, rc_of(child_do(*nonfair, "unlock")));
    /* (An unlock returns 0 also when its release was handed to the
     * watchdog: a loaded machine can take that long.) */
    ASSERT_TRUE(wait_until([&] { return !redis().exists(name); }, ms(2000)))
        << "precondition: the non-fair release left the lock free";
    ASSERT_TRUE(read_queue(redis(), k).has(wm)) << "precondition: the waiter is still queued";

    auto t0 = Clock::now();
    EXPECT_RC(EBUSY, rmutex_trylock(&m)) << "free, but a waiter is queued: no barging";
    auto line = w->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(line) << "the queued waiter was not handed the lock when the newcomer found it free";
    EXPECT_EQ(0, rc_of(*line));
    EXPECT_LT(elapsed_ms(t0), scaled(ms(1000)).count())
        << "the head got the lock by hand-off, not by its own (20 s) poll";
    auto h = redis().hgetall(name);
    ASSERT_EQ(1u, h.size());
    EXPECT_EQ(owner_of(wm), h.begin()->first);
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    ASSERT_EQ(0, rc_of(child_do(*w, "unlock")));
}

TEST_F(FairLock, ANewcomerFindingTheLockFreeQueuesBehindTheWaiters)
{
    std::string name = lock_name();
    FairKeys k(name);
    auto nonfair = child(name, {"--nonfair"}, "lease=30000");
    ASSERT_TRUE(nonfair);
    ASSERT_EQ(0, rc_of(child_lock(*nonfair)));
    auto w = child(name, {}, "lease=30000&waiter_lease=20000&poll=20000");
    ASSERT_TRUE(w);
    std::string wm = enqueue(*w, k, "lock 0");
    ASSERT_FALSE(wm.empty());
    ASSERT_EQ(0, rc_of(child_do(*nonfair, "unlock")));

    rmutex_t m;
    init_fair(&m, name);
    Async newcomer([&] { return rmutex_lock(&m); });
    auto line = w->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(line) << "the newcomer did not hand the free lock to the queued waiter";
    EXPECT_EQ(0, rc_of(*line));
    EXPECT_FALSE(newcomer.done()) << "the newcomer took the lock ahead of a queued waiter";
    EXPECT_TRUE(wait_queue_size(k, 1)) << "the newcomer waits in the queue";
    ASSERT_EQ(0, rc_of(child_do(*w, "unlock")));
    ASSERT_TRUE(newcomer.wait(ms(2000)));
    EXPECT_RC(0, newcomer.rc());
}

/* Decided behaviour: a fair and a non-fair rmutex on the
 * same name exclude each other -- they share the lock hash "NAME", field
 * "<uuid>:<thread>" -- and neither reports the mismatch.  Only fair handles
 * are queued: a fair release hands the lock to the first fair waiter (a
 * non-fair waiter gets it only when no fair waiter is queued), and a
 * non-fair release reaches fair waiters only by their bounded poll
 * (min(poll, waiter_lease / 2)).  Both directions are checked here. */
TEST_F(FairLock, FairAndNonFairHandlesOnOneNameExcludeEachOtherBothWays)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    auto nf = child(name, {"--nonfair"});
    ASSERT_TRUE(nf);

    /* A fair holder excludes a non-fair locker. */
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_EQ(EBUSY, rc_of(child_do(*nf, "trylock")));
    ASSERT_TRUE(nf->send("lock 0"));
    EXPECT_FALSE(nf->poll_line(ms(300))) << "the non-fair locker got in while the fair handle held";
    EXPECT_FALSE(redis().exists(k.queue)) << "a non-fair waiter is not queued";
    EXPECT_RC(0, rmutex_unlock(&m));
    auto line = nf->expect_line("lock t=0 ", ms(3000));
    ASSERT_TRUE(line) << "the non-fair waiter never got the lock after the fair release";
    EXPECT_EQ(0, rc_of(*line));

    /* A non-fair holder excludes a fair locker, which queues. */
    EXPECT_RC(EBUSY, rmutex_trylock(&m));
    Async fairw([&] { return rmutex_lock(&m); });
    ASSERT_TRUE(wait_queue_size(k, 1)) << "the fair waiter queues behind a non-fair holder";
    EXPECT_FALSE(fairw.done());
    auto t0 = Clock::now();
    ASSERT_EQ(0, rc_of(child_do(*nf, "unlock")));
    ASSERT_TRUE(fairw.wait(ms(kWaiterLease / 2 + 1000)))
        << "the fair waiter was not woken within its poll bound after a non-fair release";
    EXPECT_RC(0, fairw.rc());
    EXPECT_LE(elapsed_ms(t0), scaled(ms(kWaiterLease / 2 + 500)).count());
    EXPECT_EQ(EBUSY, rc_of(child_do(*nf, "trylock"))) << "held by the fair waiter's thread";
    EXPECT_FALSE(redis().exists(k.queue));
}

/* Hand-off: the release makes the head the owner for its full hold lease
 * and publishes one message naming it; only that thread, in the one
 * process that has it, wakes, and it owns the lock on receipt: no round
 * trip after the message (a confirmation would cost the hand-off one).
 * Each new owner gets a new fencing token, by hand-off too. */
TEST_F(FairLock, HandOffWakesOnlyTheHeadWhichHoldsWithNoFurtherRoundTrip)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t f0 = 0;
    ASSERT_RC(0, rmutex_fence(&m, &f0));
    auto w1 = child(name), w2 = child(name);
    ASSERT_TRUE(w1 && w2);
    std::string m1 = enqueue(*w1, k, "lock 0"), m2 = enqueue(*w2, k, "lock 0");
    ASSERT_FALSE(m1.empty() || m2.empty());
    long long t2 = read_queue(redis(), k).ticket_of(m2);
    EXPECT_LT(read_queue(redis(), k).ticket_of(m1), t2);

    Redis sub(host(), port(), password_);
    /* Grants go to one channel per process, rmutex_fair_channel:{NAME}:<uuid>. */
    ASSERT_TRUE(sub.cmd({"PSUBSCRIBE", k.fchannel + ":*"}));

    EXPECT_RC(0, rmutex_unlock(&m));
    auto l1 = w1->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(l1);
    EXPECT_EQ(0, rc_of(*l1));
    EXPECT_EQ(1, num_field(*l1, "pubsub")) << *l1;
    /* Round trips of the call: its first attempt (the enqueue) and one per
     * wake-up that was not the grant; none after the grant. */
    EXPECT_EQ(1 + num_field(*l1, "sub") + num_field(*l1, "poll"), num_field(*l1, "rt"))
        << "the woken thread made a round trip after its grant: " << *l1;
    long long f1 = num_field(*l1, "fence");
    EXPECT_GT(f1, static_cast<long long>(f0)) << "a new owner by hand-off gets a new token";

    auto msg = sub.next_message(ms(1000));
    ASSERT_TRUE(msg) << "no grant message";
    auto wds = words(msg->second);
    ASSERT_EQ(7u, wds.size()) << msg->second;
    EXPECT_EQ(m1, wds[0]) << "the message names the head";
    EXPECT_EQ(k.fchannel + ":" + m1.substr(0, m1.find(':')), msg->first)
        << "the grant goes to the head's process only";
    EXPECT_EQ(std::to_string(f1), wds[1]);
    EXPECT_EQ("0", wds[2]);
    EXPECT_EQ(std::to_string(kLease), wds[3]) << "the grant is a full hold lease";
    EXPECT_EQ("0", wds[4]);
    EXPECT_EQ("1", wds[5]) << "the second waiter is still queued";
    EXPECT_EQ("1", wds[6]) << "a grant owned on receipt";

    EXPECT_FALSE(w2->poll_line(ms(200))) << "the second waiter woke on the first one's grant";
    auto s = read_queue(redis(), k);
    EXPECT_EQ(1u, s.queue.size());
    EXPECT_EQ(t2, s.ticket_of(m2)) << "the second waiter keeps its place";
    EXPECT_EQ(owner_of(m1), redis().hgetall(name).begin()->first);

    ASSERT_EQ(0, rc_of(child_do(*w1, "unlock")));
    auto l2 = w2->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(l2);
    EXPECT_EQ(0, rc_of(*l2));
    EXPECT_EQ(1, num_field(*l2, "pubsub")) << *l2;
    EXPECT_EQ(1 + num_field(*l2, "sub") + num_field(*l2, "poll"), num_field(*l2, "rt")) << *l2;
    long long f2 = num_field(*l2, "fence");
    EXPECT_GT(f2, f1);
    auto msg2 = sub.next_message(ms(1000));
    ASSERT_TRUE(msg2);
    EXPECT_EQ(m2, words(msg2->second)[0]);
    EXPECT_EQ(std::to_string(f2), words(msg2->second)[1]);

    ASSERT_EQ(0, rc_of(child_do(*w2, "unlock")));
    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t f3 = 0;
    ASSERT_RC(0, rmutex_fence(&m, &f3));
    EXPECT_GT(static_cast<long long>(f3), f2);
    EXPECT_EQ(std::to_string(f3), redis().get(k.token).value_or(""));
    EXPECT_RC(0, rmutex_unlock(&m));
    /* Exactly one message per hand-off: the free release after w2 hands to
     * nobody and publishes nothing on the fair channel. */
    EXPECT_FALSE(sub.next_message(ms(200))) << "an extra message on the fair channel";
}

TEST_F(FairLock, ThreadsOfOneProcessShareOneSubscriptionAndWakeOneAtATime)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto c = child(name);
    ASSERT_TRUE(c);
    std::vector<std::string> members;
    for (int t = 0; t < 3; t++) {
        members.push_back(enqueue(*c, k, "lock " + std::to_string(t)));
        ASSERT_FALSE(members.back().empty());
    }
    /* (This process subscribed too when it locked, and keeps the channel
     * for the idle time: count the child's.) */
    ASSERT_TRUE(wait_until([&] { return subscriptions_of(c->pid()) == 1; }, ms(3000)))
        << "subscriptions of the child: " << subscriptions_of(c->pid());
    EXPECT_FALSE(wait_until_unscaled([&] { return subscriptions_of(c->pid()) != 1; }, ms(300)))
        << "three waiting threads, one subscription per process and lock";
    std::string child_uuid = members[0].substr(0, members[0].find(':'));
    EXPECT_EQ(1, redis().numsub(k.fchannel + ":" + child_uuid))
        << "one subscription to the child's own grant channel";
    EXPECT_RC(0, rmutex_unlock(&m));
    auto next = c->expect_line("lock t=", ms(2000));
    for (int t = 0; t < 3; t++) {
        std::string tag = "lock t=" + std::to_string(t) + " ";
        ASSERT_TRUE(next) << "no thread acquired after thread " << t - 1 << " released";
        EXPECT_EQ(tag, next->substr(0, tag.size())) << "thread " << t << " was next in the queue";
        EXPECT_EQ(0, rc_of(*next));
        EXPECT_FALSE(c->poll_line(ms(150))) << "another thread woke before this one released";
        EXPECT_EQ(2u - t, read_queue(redis(), k).queue.size());
        /* The next thread's "lock" line and this one's "unlock" reply race
         * each other to the pipe: take them in whichever order they come. */
        ASSERT_TRUE(c->send("unlock " + std::to_string(t)));
        std::optional<std::string> unlocked;
        next.reset();
        while (!unlocked || (t < 2 && !next)) {
            auto line = c->read_line(ms(2000));
            ASSERT_TRUE(line) << "thread " << t << " unlocked: " << bool(unlocked);
            if (line->compare(0, 7, "unlock ") == 0)
                unlocked = line;
            else if (line->compare(0, 7, "lock t=") == 0)
                next = line;
            else
                ADD_FAILURE() << "unexpected line from the child: " << *line;
        }
        EXPECT_EQ(0, rc_of(*unlocked)) << *unlocked;
    }
}

/* A release that hands the lock to a thread of its own process wakes that
 * thread itself, with the grant its reply carries (fair.c, hand_over),
 * unless the server's copy of the message got there first (both race:
 * the PUBLISH is written during the script).  Either way the thread owns
 * it on receipt, a confirmed full hold with no round trip after its grant
 * that outlives a stall longer than the waiter lease.  Over twenty
 * hand-offs the releaser wins some; a hand-off to another process goes by
 * pub/sub only. */
TEST_F(FairLock, AReleaseWakesTheThreadOfItsOwnProcessItHandsTheLockTo)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    uint64_t local = 0;
    std::unique_ptr<FairChild> w;
    std::string member;
    for (int round = 0; round < 20; round++) {
        bool last = local > 0 || round == 19;
        SCOPED_TRACE("round " + std::to_string(round));
        ASSERT_RC(0, rmutex_lock(&m));
        std::atomic<int> got{-1}, release{0};
        rmutex_stats_t before{}, after{};
        std::thread b([&] {
            before = stats();
            int r = rmutex_lock(&m);
            after = stats();
            got = r;
            wait_until([&] { return release.load() == 1; }, ms(20000));
            if (!r) rmutex_unlock(&m);
        });
        ASSERT_TRUE(wait_until([&] { return read_queue(redis(), k).queue.size() == 1; }, ms(5000)));
        member = read_queue(redis(), k).queue[0].member;
        std::string uuid = member.substr(0, member.find(':'));
        ASSERT_TRUE(wait_until([&] { return redis().numsub(k.fchannel + ":" + uuid) == 1; },
                               ms(5000)));
        if (last) { /* a waiter in another process, behind the thread */
            w = child(name);
            ASSERT_TRUE(w);
            ASSERT_FALSE(enqueue(*w, k, "lock 0").empty());
        }
        uint64_t local0 = stats().fair_handoffs_local;
        ASSERT_RC(0, rmutex_unlock(&m));
        ASSERT_TRUE(wait_until([&] { return got.load() != -1; }, ms(2000)));
        ASSERT_RC(0, got.load());
        uint64_t here = stats().fair_handoffs_local - local0;
        EXPECT_LE(here, 1u);
        local += here;
        /* Round trips of the process meanwhile: the thread's enqueue, one
         * per wake-up that was not the grant (the subscription's
         * confirmation, a poll), and this thread's release. */
        EXPECT_EQ(2 + (after.wakeups_subscribe - before.wakeups_subscribe) +
                      (after.wakeups_poll - before.wakeups_poll),
                  after.round_trips - before.round_trips)
            << "the woken thread made a round trip after its grant";
        EXPECT_EQ(owner_of(member), redis().hgetall(name).begin()->first);
        EXPECT_EQ(member, redis().get(k.owner).value_or("(none)")) << "not a confirmed grant";
        EXPECT_GT(redis().pttl(name), kWaiterLease) << "not a full hold lease";
        if (!last) {
            release = 1;
            b.join();
            continue;
        }
        /* The hold survives a stall longer than the waiter lease. */
        {
            Redis admin(host(), port(), password_);
            const int pause_ms = kWaiterLease * 3 / 2;
            ASSERT_EQ("OK", admin.cmd({ "CLIENT", "PAUSE", std::to_string(pause_ms) }).str());
            EXPECT_FALSE(w->poll_line(ms(pause_ms + kWaiterLease)))
                << "the other process got the lock while the thread held it";
        }
        EXPECT_EQ(owner_of(member), redis().hgetall(name).begin()->first);
        /* The thread hands on to the other process: not from here (its
         * message, or its own look if that came first: the stall made it
         * poll). */
        uint64_t local1 = stats().fair_handoffs_local;
        release = 1;
        b.join();
        auto l = w->expect_line("lock t=0 ", ms(3000));
        ASSERT_TRUE(l);
        EXPECT_EQ(0, rc_of(*l));
        EXPECT_EQ(local1, stats().fair_handoffs_local);
        EXPECT_EQ(0, rc_of(child_do(*w, "unlock")));
        break;
    }
    EXPECT_GE(local, 1u) << "in twenty hand-offs the releaser never woke the thread itself";
    EXPECT_RC(0, rmutex_destroy(&m));
}

/* A hold got by hand-off is a full hold when rmutex_lock returns: the owner
 * mark has no '?' (confirmed) and the lock's lease is the hold lease, not
 * the remainder of the waiter lease. */
TEST_F(FairLock, AHandedOffHoldHasTheFullLeaseWhenLockReturns)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto w = child(name);
    ASSERT_TRUE(w);
    std::string wm = enqueue(*w, k, "lock 0");
    ASSERT_FALSE(wm.empty());
    EXPECT_RC(0, rmutex_unlock(&m));
    auto line = w->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(line);
    ASSERT_EQ(0, rc_of(*line));
    EXPECT_EQ(wm, redis().get(k.owner).value_or("(none)")) << "the grant was not confirmed";
    EXPECT_GT(redis().pttl(name), kWaiterLease) << "the lease is still the grant's";
    /* Held well past the grant's own expiry. */
    EXPECT_FALSE(wait_until_unscaled([&] { return !redis().exists(name); }, ms(2 * kLease)))
        << "the hold by hand-off was lost";
    EXPECT_EQ(0, rc_of(child_do(*w, "unlock")));
}

/* Redis stalls (CLIENT PAUSE) longer than the waiter lease right after a
 * hand-off returned.  The new holder's hold must survive it -- the
 * next waiter gets the lock only when the holder unlocks -- where a grant
 * owned on receipt lapsed with the waiter lease and passed on, two threads
 * then being in the critical section. */
TEST_F(FairLock, AStallLongerThanTheWaiterLeaseRightAfterAHandOffKeepsTheHold)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto w1 = child(name), w2 = child(name);
    ASSERT_TRUE(w1 && w2);
    ASSERT_FALSE(enqueue(*w1, k, "lock 0").empty());
    ASSERT_FALSE(enqueue(*w2, k, "lock 0").empty());
    EXPECT_RC(0, rmutex_unlock(&m));
    auto l1 = w1->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(l1);
    ASSERT_EQ(0, rc_of(*l1));
    {
        Redis admin(host(), port(), password_);
        const int pause_ms = kWaiterLease * 3 / 2;
        ASSERT_EQ("OK", admin.cmd({ "CLIENT", "PAUSE", std::to_string(pause_ms) }).str());
        EXPECT_FALSE(w2->poll_line(ms(pause_ms + kWaiterLease)))
            << "the second waiter got the lock while the first held it";
    }
    EXPECT_TRUE(redis().exists(name));
    ASSERT_EQ(0, rc_of(child_do(*w1, "unlock")));
    auto l2 = w2->expect_line("lock t=0 ", ms(3000));
    ASSERT_TRUE(l2);
    EXPECT_EQ(0, rc_of(*l2));
    EXPECT_EQ(0, rc_of(child_do(*w2, "unlock")));
}

/* A grant message older than the waiter's last look -- one held up while
 * its process was stopped, naming a grant that has lapsed since, and that
 * look found the lock busy -- must not make the waiter an owner on
 * receipt: its token is no newer than the fencing counter that look saw.
 * (Here the stale message is published by hand while this process holds
 * the lock.)  Were it owned, two threads would hold the lock at once. */
TEST_F(FairLock, AStaleGrantMessageDoesNotMakeTheWaiterAnOwner)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto w = child(name);
    ASSERT_TRUE(w);
    log_every_command();
    std::string wm = enqueue(*w, k, "lock 0");
    ASSERT_FALSE(wm.empty());
    /* Its look after subscribing, so that the message below is heard. */
    ASSERT_TRUE(wait_until([&] { return acquire_calls(wm) >= 2; }, ms(3000)));
    ASSERT_TRUE(wait_until([&] { return subscriptions_of(w->pid()) == 1; }, ms(3000)));
    std::string counter = redis().get(k.token).value_or("0");
    Reply heard = redis().cmd({"PUBLISH", k.fchannel + ":" + wm.substr(0, wm.find(':')),
                               wm + " " + counter + " 0 " + std::to_string(kLease) + " 0 0 1"});
    ASSERT_EQ(1, heard.integer()) << "precondition: the waiter's process hears its channel";
    EXPECT_FALSE(w->poll_line(ms(kWaiterLease)))
        << "the waiter took a stale grant message for a hold while this process holds the lock";
    EXPECT_EQ(0u, redis().hgetall(name).count(owner_of(wm))) << "the waiter's field is in the lock hash";
    EXPECT_RC(0, rmutex_unlock(&m));
    auto line = w->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(line);
    EXPECT_EQ(0, rc_of(*line));
    EXPECT_EQ(0, rc_of(child_do(*w, "unlock")));
}

/* A mutex with a fixed lease (rmutexattr_setlease, nobody renews it) keeps
 * the lock for that lease, whether it found the lock free or was handed it. */
TEST_F(FairLock, AFixedLeaseHoldGotByHandOffKeepsItsLease)
{
    constexpr int kFixed = 6000;
    std::string name = lock_name();
    FairKeys k(name);
    auto c = child(name);
    ASSERT_TRUE(c);
    ASSERT_EQ(0, rc_of(child_lock(*c)));
    rmutex_t m;
    init_fair(&m, name, RMUTEX_NORMAL, RMUTEX_STALLED, kFixed);
    HolderThread holder(&m);
    ASSERT_TRUE(wait_queue_size(k, 1));
    ASSERT_EQ(0, rc_of(child_do(*c, "unlock")));
    ASSERT_RC(0, holder.wait_locked(ms(2000)));
    auto t0 = Clock::now();
    /* 2.5 waiter leases: a grant left unconfirmed would have lapsed. */
    bool lost = wait_until_unscaled([&] { return !redis().exists(name); }, ms(kWaiterLease * 5 / 2));
    EXPECT_FALSE(lost) << "the fixed " << kFixed << " ms lease hold, got by hand-off, vanished after "
                       << elapsed_ms(t0) << " ms (mark " << redis().get(k.owner).value_or("(none)") << ")";
    EXPECT_RC(0, holder.release()) << "unlock within the fixed lease";
}

TEST_F(FairLock, RobustWaiterGetsEownerdeadWhenTheHolderDies)
{
    std::string name = lock_name();
    FairKeys k(name);
    auto h = child(name, {"--robust"});
    ASSERT_TRUE(h);
    ASSERT_EQ(0, rc_of(child_lock(*h)));
    rmutex_t m;
    init_fair(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    Async w([&] {
        int rc = rmutex_lock(&m);
        if (rc == EOWNERDEAD) {
            int c = rmutex_consistent(&m);
            if (c)
                return 1000 + c;
        }
        if (rc == 0 || rc == EOWNERDEAD) {
            int u = rmutex_unlock(&m);
            if (u)
                return 2000 + u;
        }
        return rc;
    });
    ASSERT_TRUE(wait_queue_size(k, 1));
    long long pttl = redis().pttl(name);
    h->kill(SIGKILL);
    ASSERT_NE(-1, h->wait(ms(5000)));
    auto t0 = Clock::now();
    ASSERT_TRUE(w.wait(ms(kLease + 2000)));
    EXPECT_RC(EOWNERDEAD, w.rc());
    EXPECT_LE(elapsed_ms(t0), pttl + scaled(ms(500)).count()) << "the queued waiter noticed the death late";
    EXPECT_RC(0, rmutex_lock(&m)) << "consistent, then a clean unlock";
    EXPECT_RC(0, rmutex_unlock(&m));
}

TEST_F(FairLock, UnlockWithoutConsistentMakesQueuedRobustWaitersNotRecoverable)
{
    std::string name = lock_name();
    FairKeys k(name);
    auto h = child(name, {"--robust"});
    ASSERT_TRUE(h);
    ASSERT_EQ(0, rc_of(child_lock(*h)));
    rmutex_t m;
    init_fair(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    HolderThread a(&m);
    ASSERT_TRUE(wait_queue_size(k, 1));
    auto b = child(name, {"--robust"}), c = child(name);
    ASSERT_TRUE(b && c);
    std::string bm = enqueue(*b, k, "lock 0"), cm = enqueue(*c, k, "lock 0");
    ASSERT_FALSE(bm.empty() || cm.empty());
    h->kill(SIGKILL);
    ASSERT_NE(-1, h->wait(ms(5000)));
    ASSERT_RC(EOWNERDEAD, a.wait_locked(ms(kLease + 2000)));
    EXPECT_FALSE(b->poll_line(ms(0)));
    EXPECT_RC(0, a.release()) << "as glibc: the unlock succeeds, the name becomes not recoverable";
    EXPECT_TRUE(redis().exists(k.notrec));
    auto lb = b->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(lb);
    EXPECT_EQ(ENOTRECOVERABLE, rc_of(*lb)) << *lb;
    auto lc = c->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(lc) << "the robust waiter's refusal did not pass the lock on";
    EXPECT_EQ(0, rc_of(*lc)) << "a non-robust handle still locks: " << *lc;
    auto s = read_queue(redis(), k);
    EXPECT_TRUE(s.queue.empty() && s.alive.empty()) << "no entry left by the refused waiter";
    ASSERT_EQ(0, rc_of(child_do(*c, "unlock")));
    EXPECT_RC(ENOTRECOVERABLE, rmutex_trylock(&m));
    EXPECT_RC(ENOTRECOVERABLE, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
    EXPECT_RC(0, rmutex_lock(&m));
    EXPECT_RC(0, rmutex_unlock(&m));
}

std::atomic<int> g_lost{0};
void on_lost(rmutex_t *, const char *, void *) { g_lost++; }

TEST_F(FairLock, ALostHoldIsReportedAndItsUnlockReleasesNobodyElses)
{
    std::string name = lock_name();
    FairKeys k(name);
    g_lost = 0;
    rmutex_set_lost_callback(on_lost, nullptr);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto w = child(name);
    ASSERT_TRUE(w);
    std::string wm = enqueue(*w, k, "lock 0");
    ASSERT_FALSE(wm.empty());
    ASSERT_EQ(1, redis().cmd({"DEL", name}).integer());
    auto t0 = Clock::now();
    EXPECT_TRUE(wait_until([&] { return g_lost.load() == 1; }, ms(kLease / 3 + 1000)))
        << "lost-lock callback not called within lease/3 + 1 s";
    auto line = w->expect_line("lock t=0 ", ms(kWaiterLease + 1000));
    ASSERT_TRUE(line) << "the queued waiter did not get the lock that was deleted";
    EXPECT_EQ(0, rc_of(*line));
    EXPECT_LE(elapsed_ms(t0), scaled(ms(kWaiterLease / 2 + 500)).count());
    EXPECT_RC(EPERM, rmutex_unlock(&m));
    auto hh = redis().hgetall(name);
    ASSERT_EQ(1u, hh.size()) << "the EPERM unlock released somebody else's hold";
    EXPECT_EQ(owner_of(wm), hh.begin()->first);
    ASSERT_EQ(0, rc_of(child_do(*w, "unlock")));
    rmutex_set_lost_callback(nullptr, nullptr);
}

TEST_F(FairLock, DestroyWhileAThreadIsQueuedIsEbusy)
{
    std::string name = lock_name();
    FairKeys k(name);
    auto c = child(name);
    ASSERT_TRUE(c);
    ASSERT_EQ(0, rc_of(child_lock(*c)));
    rmutex_t m;
    init_fair(&m, name);
    HolderThread w(&m);
    ASSERT_TRUE(wait_queue_size(k, 1));
    EXPECT_RC(EBUSY, rmutex_destroy(&m));
    ASSERT_EQ(0, rc_of(child_do(*c, "unlock")));
    ASSERT_RC(0, w.wait_locked(ms(2000)));
    EXPECT_RC(0, w.release());
    EXPECT_RC(0, rmutex_destroy(&m));
}

/* A waiter whose connections are all dropped keeps its place (no
 * re-enqueue at the tail) and still gets the lock by hand-off. */
TEST_F(FairLock, DroppedConnectionsKeepTheWaitersPlace)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto w1 = child(name), w2 = child(name);
    ASSERT_TRUE(w1 && w2);
    std::string m1 = enqueue(*w1, k, "lock 0"), m2 = enqueue(*w2, k, "lock 0");
    ASSERT_FALSE(m1.empty() || m2.empty());
    long long t1 = read_queue(redis(), k).ticket_of(m1);
    int killed = 0;
    for (const char *role : {"cmd", "sub", "wd"})
        for (long long id : redis().client_ids(std::string("rmutex:") + role + ":" + std::to_string(w1->pid())))
            killed += redis().client_kill_id(id);
    EXPECT_GE(killed, 2) << "the waiter's command and subscription connections";
    /* Give it time to notice and reconnect (its subscription comes back). */
    EXPECT_TRUE(wait_until([&] { return subscriptions_of(w1->pid()) == 1; }, ms(3000)))
        << "the waiter did not subscribe again";
    EXPECT_FALSE(wait_until_unscaled([&] {
        auto s = read_queue(redis(), k);
        return s.ticket_of(m1) != t1 || !s.consistent() || s.queue.size() != 2;
    }, ms(2 * kWaiterLease))) << "the waiter lost or changed its place";
    EXPECT_RC(0, rmutex_unlock(&m));
    auto l1 = w1->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(l1);
    EXPECT_EQ(0, rc_of(*l1));
    EXPECT_FALSE(w2->poll_line(ms(100)));
    ASSERT_EQ(0, rc_of(child_do(*w1, "unlock")));
    auto l2 = w2->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(l2);
    EXPECT_EQ(0, rc_of(*l2));
    ASSERT_EQ(0, rc_of(child_do(*w2, "unlock")));
}

/* A process that exits normally while holding releases its holds at exit;
 * for a fair lock that release hands the lock to the next waiter at once
 * (here the hold lease is 30 s: waiting for it would be obvious). */
TEST_F(FairLock, ANormalExitHandsTheLockToTheNextWaiterPromptly)
{
    std::string name = lock_name();
    FairKeys k(name);
    auto h = child(name, {"--robust"}, "lease=30000&waiter_lease=1000");
    ASSERT_TRUE(h);
    ASSERT_EQ(0, rc_of(child_lock(*h)));
    ASSERT_GT(redis().pttl(name), 20000);
    rmutex_t m;
    init_fair(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    HolderThread w(&m);
    ASSERT_TRUE(wait_queue_size(k, 1));
    auto t0 = Clock::now();
    ASSERT_TRUE(h->send("exit"));
    ASSERT_RC(0, w.wait_locked(ms(3000))) << "a clean exit is no owner death, and hands over";
    EXPECT_LE(elapsed_ms(t0), scaled(ms(500)).count());
    EXPECT_RC(0, w.release());
}

/* fork() without exec: the child has its own identity, holds nothing of the
 * parent's, and queues behind the parent like any other process. */
struct ForkReport {
    int trylock_rc, unlock_rc, lock_rc, fence_rc, unlock2_rc;
    uint64_t fence;
};

TEST_F(FairLock, AForkedChildQueuesWithItsOwnIdentity)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_TSAN();
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name, RMUTEX_ERRORCHECK);
    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t pf = 0;
    ASSERT_RC(0, rmutex_fence(&m, &pf));
    std::string parent_owner = my_field(name);
    int up[2];
    ASSERT_EQ(0, pipe(up));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(up[0]);
        ForkReport r;
        memset(&r, 0, sizeof r);
        r.trylock_rc = rmutex_trylock(&m);
        r.unlock_rc = rmutex_unlock(&m);
        r.lock_rc = rmutex_lock(&m);
        r.fence_rc = rmutex_fence(&m, &r.fence);
        r.unlock2_rc = rmutex_unlock(&m);
        ssize_t n = write(up[1], &r, sizeof r);
        (void)n;
        _exit(0);
    }
    close(up[1]);
    ASSERT_TRUE(wait_queue_size(k, 1)) << "the forked child queues";
    std::string cm = read_queue(redis(), k).queue[0].member;
    EXPECT_NE(parent_owner.substr(0, parent_owner.rfind(':')), cm.substr(0, cm.rfind(':')))
        << "the child has a new identity";
    EXPECT_EQ(parent_owner, my_field(name)) << "the child's unlock did not release the parent's hold";
    EXPECT_RC(0, rmutex_unlock(&m));
    ForkReport r;
    memset(&r, 0xff, sizeof r);
    size_t got = 0;
    ASSERT_TRUE(wait_until([&] {
        struct pollfd p = {up[0], POLLIN, 0};
        if (poll(&p, 1, 0) != 1)
            return false;
        ssize_t n = read(up[0], reinterpret_cast<char *>(&r) + got, sizeof r - got);
        if (n > 0)
            got += static_cast<size_t>(n);
        return got == sizeof r || n == 0;
    }, ms(5000))) << "the forked child did not report";
    close(up[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_EQ(sizeof r, got);
    EXPECT_RC(EBUSY, r.trylock_rc);
    EXPECT_RC(EPERM, r.unlock_rc);
    EXPECT_RC(0, r.lock_rc);
    EXPECT_RC(0, r.fence_rc);
    EXPECT_GT(r.fence, pf);
    EXPECT_RC(0, r.unlock2_rc);
    EXPECT_FALSE(redis().exists(name));
}

} // namespace
