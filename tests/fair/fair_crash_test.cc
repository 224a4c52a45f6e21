/* fair_crash_test.cc -- waiters that die, time out or race a grant: kill -9
 * of one queued waiter and of three, the dead one at the head at release, a
 * timedlock timing out in the middle of the queue, and no garbage after
 * every client died.
 *
 * Hold lease 2000 ms, waiter lease 1000 ms.  "Within one waiter lease of the
 * release" is asserted as kWaiterLease + kSlack, kSlack (scaled) covering
 * process scheduling and the poll that notices the lapse; a dead waiter that
 * cost a waiter lease each, or a hold lease, exceeds it. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "fair_util.h"

namespace {

using namespace rmt;
using namespace fair;

class FairCrash : public FairTest {
  protected:
    static ms slack() { return scaled(ms(250)); }

    std::unique_ptr<FairChild> child(const std::string &name, std::vector<std::string> opts = {})
    {
        return threads_child(name, url(), opts);
    }

    void kill9(FairChild &c)
    {
        c.kill(SIGKILL);
        int status = c.wait(ms(5000));
        EXPECT_TRUE(status != -1 && WIFSIGNALED(status)) << "status " << status;
    }

    /* Milliseconds until child c reports "lock t=T", measured from t0; -1 if
     * it does not within bound. */
    long long lock_delay(FairChild &c, Clock::time_point t0, std::string *line, ms bound = ms(5000), int t = 0)
    {
        auto l = c.expect_line("lock t=" + std::to_string(t) + " ", bound);
        if (!l)
            return -1;
        *line = *l;
        return elapsed_ms(t0);
    }
};

TEST_F(FairCrash, AKilledWaiterInTheMiddleDelaysTheNextByAtMostOneWaiterLease)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto l1 = child(name), d = child(name), l2 = child(name);
    ASSERT_TRUE(l1 && d && l2);
    std::string m1 = enqueue(*l1, k, "lock 0"), md = enqueue(*d, k, "lock 0"), m2 = enqueue(*l2, k, "lock 0");
    ASSERT_FALSE(m1.empty() || md.empty() || m2.empty());
    kill9(*d);
    EXPECT_RC(0, rmutex_unlock(&m));
    std::string line;
    ASSERT_GE(lock_delay(*l1, Clock::now(), &line, ms(2000)), 0) << "the live head did not get the lock";
    EXPECT_EQ(0, rc_of(line));
    auto t_rel = Clock::now();
    ASSERT_TRUE(l1->send("unlock 0"));
    long long waited = lock_delay(*l2, t_rel, &line);
    ASSERT_GE(waited, 0) << "the waiter behind the dead one never got the lock";
    EXPECT_EQ(0, rc_of(line)) << line;
    fprintf(stderr, "[fair] behind a dead waiter: %lld ms after the release\n", waited);
    EXPECT_LE(waited, kWaiterLease + slack().count()) << "the dead waiter cost more than one waiter lease";
    auto s = read_queue(redis(), k);
    EXPECT_FALSE(s.has(md) || s.deadline_of(md) >= 0) << "the dead waiter's entry is still there";
    ASSERT_TRUE(l2->send("unlock 0"));
    EXPECT_TRUE(l2->expect_line("unlock t=0 rc=0", ms(2000)));
}

TEST_F(FairCrash, ThreeWaitersKilledTogetherCostOneWaiterLeaseInTotal)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    std::vector<std::unique_ptr<FairChild>> dead;
    std::vector<std::string> dm;
    for (int i = 0; i < 3; i++) {
        dead.push_back(child(name));
        ASSERT_TRUE(dead.back());
        dm.push_back(enqueue(*dead.back(), k, "lock 0"));
        ASSERT_FALSE(dm.back().empty());
    }
    auto live = child(name);
    ASSERT_TRUE(live);
    std::string lm = enqueue(*live, k, "lock 0");
    ASSERT_FALSE(lm.empty());
    for (auto &c : dead)
        c->kill(SIGKILL);
    for (auto &c : dead)
        EXPECT_NE(-1, c->wait(ms(5000)));
    auto t_rel = Clock::now();
    EXPECT_RC(0, rmutex_unlock(&m));
    std::string line;
    long long waited = lock_delay(*live, t_rel, &line, ms(3 * kWaiterLease + 3000));
    ASSERT_GE(waited, 0) << "the live waiter behind three dead ones never got the lock";
    EXPECT_EQ(0, rc_of(line)) << line;
    fprintf(stderr, "[fair] behind three dead waiters: %lld ms after the release\n", waited);
    EXPECT_LE(waited, kWaiterLease + slack().count())
        << "three waiters that died together cost more than one waiter lease";
    auto s = read_queue(redis(), k);
    EXPECT_TRUE(s.queue.empty() && s.alive.empty()) << "dead entries left behind";
    ASSERT_TRUE(live->send("unlock 0"));
    EXPECT_TRUE(live->expect_line("unlock t=0 rc=0", ms(2000)));
}

/* The dead waiter is the head when the lock is released, and its liveness
 * has not run out yet: the release grants it the lock (the script cannot
 * know).  That grant lasts at most the dead waiter's remaining liveness,
 * and it lapsed unconfirmed: the next (robust) waiter gets a plain 0, not
 * EOWNERDEAD. */
TEST_F(FairCrash, AWaiterKilledAtTheHeadDelaysTheNextByAtMostOneWaiterLease)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name, RMUTEX_NORMAL, RMUTEX_ROBUST);
    ASSERT_RC(0, rmutex_lock(&m));
    auto d = child(name, {"--robust"}), l = child(name, {"--robust"});
    ASSERT_TRUE(d && l);
    std::string dm = enqueue(*d, k, "lock 0"), lm = enqueue(*l, k, "lock 0");
    ASSERT_FALSE(dm.empty() || lm.empty());
    kill9(*d);
    auto t_rel = Clock::now();
    EXPECT_RC(0, rmutex_unlock(&m));
    /* The case under test: the lock went to the dead head. */
    auto h = redis().hgetall(name);
    auto mark = redis().get(k.owner);
    bool granted_to_dead = h.size() == 1 && h.begin()->first == owner_of(dm);
    EXPECT_TRUE(granted_to_dead) << "precondition: the release should have granted the dead head "
                                 << "(its liveness had not run out)";
    if (granted_to_dead) {
        EXPECT_EQ(dm + "?", mark.value_or("")) << "an unconfirmed grant";
        EXPECT_LE(redis().pttl(name), kWaiterLease) << "the grant outlives the dead head's waiter lease";
    }
    std::string line;
    long long waited = lock_delay(*l, t_rel, &line, ms(kLease + 3000));
    ASSERT_GE(waited, 0) << "the next waiter never got the lock";
    EXPECT_EQ(0, rc_of(line)) << "a grant that lapsed unconfirmed is not an owner death: " << line;
    fprintf(stderr, "[fair] behind a dead head: %lld ms after the release\n", waited);
    EXPECT_LE(waited, kWaiterLease + slack().count()) << "the dead head cost more than its waiter lease";
    EXPECT_TRUE(read_queue(redis(), k).queue.empty());
    ASSERT_TRUE(l->send("unlock 0"));
    EXPECT_TRUE(l->expect_line("unlock t=0 rc=0", ms(2000)));
}

/* The holder dies; the lock is granted to the head, which has died too
 * (its liveness had not run out yet) and never confirms.  That lapsed grant
 * is no death of its own, but it does not wash out the holder's: the next
 * robust waiter gets EOWNERDEAD. */
TEST_F(FairCrash, AnOwnerDeathIsStillReportedAfterAGrantToADeadHeadLapsed)
{
    std::string name = lock_name();
    FairKeys k(name);
    auto h = child(name, {"--robust"}), d = child(name, {"--robust"}), l = child(name, {"--robust"});
    ASSERT_TRUE(h && d && l);
    h->send("lock 0");
    auto held = h->expect_line("lock t=0 ", ms(3000));
    ASSERT_TRUE(held);
    ASSERT_EQ(0, rc_of(*held));
    std::string dm = enqueue(*d, k, "lock 0"), lm = enqueue(*l, k, "lock 0");
    ASSERT_FALSE(dm.empty() || lm.empty());
    kill9(*h);
    /* Kill the head shortly before the holder's lease runs out: its place
     * is still alive when the lock is found free, so it is granted. */
    ASSERT_TRUE(wait_until([&] { return redis().pttl(name) < 150; }, ms(kLease + 1000)));
    kill9(*d);
    bool granted_to_dead = wait_until([&] {
        auto hh = redis().hgetall(name);
        return hh.size() == 1 && hh.begin()->first == owner_of(dm);
    }, ms(1000));
    EXPECT_TRUE(granted_to_dead) << "precondition: the free lock should have been granted to the dead head";
    std::string line;
    ASSERT_GE(lock_delay(*l, Clock::now(), &line, ms(kLease + 3000)), 0);
    EXPECT_EQ(EOWNERDEAD, rc_of(line)) << "the holder died; a lapsed grant in between does not make that "
                                          "consistent: "
                                       << line;
    l->send("consistent 0");
    EXPECT_TRUE(l->expect_line("consistent t=0 rc=0", ms(2000)));
    l->send("unlock 0");
    EXPECT_TRUE(l->expect_line("unlock t=0 rc=0", ms(2000)));
}

/* A grant message that never arrives (the waiter's pub/sub connection was
 * dropped just before the release) costs at most the waiter's next look,
 * which finds and confirms the grant before it lapses. */
TEST_F(FairCrash, ALostGrantMessageIsFoundByTheWaitersNextLook)
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
    /* The waiter joins its channel before it queues, but its multiplexer
     * dials on its own thread: wait for the connection. */
    std::vector<long long> ids;
    ASSERT_TRUE(wait_until(
        [&] { return (ids = redis().client_ids("rmutex:sub:" + std::to_string(w->pid()))).size() == 1; },
        ms(3000)));
    ASSERT_TRUE(redis().client_kill_id(ids[0]));
    auto t_rel = Clock::now();
    EXPECT_RC(0, rmutex_unlock(&m));
    std::string line;
    long long waited = lock_delay(*w, t_rel, &line, ms(3000));
    ASSERT_GE(waited, 0) << "the waiter never found its grant";
    EXPECT_EQ(0, rc_of(line)) << line;
    EXPECT_LE(waited, kWaiterLease / 2 + slack().count());
    EXPECT_FALSE(wait_until_unscaled([&] {
        auto hh = redis().hgetall(name);
        return hh.size() != 1 || hh.begin()->first != owner_of(wm);
    }, ms(2 * kWaiterLease))) << "the grant lapsed although its waiter had found it";
    w->send("unlock 0");
    EXPECT_TRUE(w->expect_line("unlock t=0 rc=0", ms(2000)));
}

TEST_F(FairCrash, ATimedlockTimingOutMidQueueLeavesNoEntryAndDelaysNobody)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto l1 = child(name), t = child(name), l2 = child(name);
    ASSERT_TRUE(l1 && t && l2);
    std::string m1 = enqueue(*l1, k, "lock 0");
    std::string mt = enqueue(*t, k, "timedlock 0 800");
    std::string m2 = enqueue(*l2, k, "lock 0");
    ASSERT_FALSE(m1.empty() || mt.empty() || m2.empty());
    auto before = read_queue(redis(), k);
    auto tl = t->expect_line("timedlock t=0 ", ms(3000));
    ASSERT_TRUE(tl);
    EXPECT_EQ(ETIMEDOUT, rc_of(*tl)) << *tl;
    auto s = read_queue(redis(), k);
    EXPECT_FALSE(s.has(mt)) << "the timed-out waiter is still queued";
    EXPECT_LT(s.deadline_of(mt), 0) << "the timed-out waiter still has a liveness entry";
    ASSERT_EQ(2u, s.queue.size());
    EXPECT_EQ(before.ticket_of(m1), s.ticket_of(m1));
    EXPECT_EQ(before.ticket_of(m2), s.ticket_of(m2));

    /* Release now, while a ghost entry (had there been one) would still be
     * alive and be granted first. */
    EXPECT_RC(0, rmutex_unlock(&m));
    std::string line;
    ASSERT_GE(lock_delay(*l1, Clock::now(), &line, ms(2000)), 0);
    EXPECT_EQ(0, rc_of(line));
    auto t_rel = Clock::now();
    ASSERT_TRUE(l1->send("unlock 0"));
    long long waited = lock_delay(*l2, t_rel, &line);
    ASSERT_GE(waited, 0);
    EXPECT_EQ(0, rc_of(line));
    fprintf(stderr, "[fair] behind a timed-out waiter: %lld ms after the release\n", waited);
    EXPECT_LE(waited, slack().count()) << "the waiter behind the timed-out one was delayed";
    EXPECT_EQ(1, num_field(line, "pubsub")) << "handed over directly: " << line;
    ASSERT_TRUE(l2->send("unlock 0"));
    EXPECT_TRUE(l2->expect_line("unlock t=0 rc=0", ms(2000)));
}

/* A timedlock whose deadline falls about when the lock is handed to it:
 * whatever it returns, the lock is not leaked -- if it returns ETIMEDOUT,
 * the grant it may have got is passed on at once to the next waiter.  The
 * release is scheduled around the waiter's deadline to hit the race. */
TEST_F(FairCrash, ATimeoutRacingAGrantPassesTheLockOn)
{
    constexpr int kRounds = 12, kTimeout = 300;
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    auto t = child(name), l = child(name);
    ASSERT_TRUE(t && l);
    int got = 0, timed_out = 0;
    for (int i = 0; i < kRounds; i++) {
        ASSERT_RC(0, rmutex_lock(&m));
        auto t_start = Clock::now();
        std::string mt = enqueue(*t, k, "timedlock 0 " + std::to_string(kTimeout));
        std::string ml = enqueue(*l, k, "lock 0");
        ASSERT_FALSE(mt.empty() || ml.empty());
        /* Scheduling the release against the deadline (-3 .. +3 ms), not
         * waiting for a condition. */
        std::this_thread::sleep_until(t_start + ms(kTimeout) + std::chrono::microseconds(-3000 + i * 500));
        EXPECT_RC(0, rmutex_unlock(&m));
        auto tl = t->expect_line("timedlock t=0 ", ms(3000));
        ASSERT_TRUE(tl);
        int rc = rc_of(*tl);
        ASSERT_TRUE(rc == 0 || rc == ETIMEDOUT) << *tl;
        std::string line;
        if (rc == 0) {
            got++;
            auto h = redis().hgetall(name);
            ASSERT_EQ(1u, h.size());
            EXPECT_EQ(owner_of(mt), h.begin()->first);
            EXPECT_FALSE(l->poll_line(ms(20)));
            ASSERT_TRUE(t->send("unlock 0"));
            EXPECT_TRUE(t->expect_line("unlock t=0 rc=0", ms(2000)));
            ASSERT_GE(lock_delay(*l, Clock::now(), &line, ms(2000)), 0);
        } else {
            timed_out++;
            auto h = redis().hgetall(name);
            EXPECT_FALSE(h.size() == 1 && h.begin()->first == owner_of(mt))
                << "round " << i << ": the timed-out waiter's grant was leaked";
            long long waited = lock_delay(*l, Clock::now(), &line, ms(3000));
            ASSERT_GE(waited, 0) << "round " << i;
            EXPECT_LE(waited, slack().count()) << "round " << i << ": the grant was not passed on at once";
        }
        EXPECT_EQ(0, rc_of(line)) << line;
        ASSERT_TRUE(l->send("unlock 0"));
        EXPECT_TRUE(l->expect_line("unlock t=0 rc=0", ms(2000)));
        auto s = read_queue(redis(), k);
        EXPECT_TRUE(s.queue.empty() && s.alive.empty()) << "round " << i << ": entries left";
    }
    fprintf(stderr, "[fair] timeout race: %d acquired, %d timed out\n", got, timed_out);
}

/* Every key of a fair lock but the fencing counter expires: two leases
 * after the last of its clients died, Redis holds nothing else of it. */
TEST_F(FairCrash, NothingButTheFencingCounterIsLeftTwoLeasesAfterAllClientsDied)
{
    std::string name = lock_name();
    FairKeys k(name);
    /* Some history: holds released (unlock latches), a robust holder, a
     * queue with waiters of several kinds, and a timed waiter. */
    auto h = child(name, {"--robust"});
    ASSERT_TRUE(h);
    for (int i = 0; i < 3; i++) {
        ASSERT_TRUE(h->send("lock 0"));
        ASSERT_TRUE(h->expect_line("lock t=0 rc=0", ms(3000)));
        ASSERT_TRUE(h->send("unlock 0"));
        ASSERT_TRUE(h->expect_line("unlock t=0 rc=0", ms(3000)));
    }
    ASSERT_TRUE(h->send("lock 0"));
    ASSERT_TRUE(h->expect_line("lock t=0 rc=0", ms(3000)));
    auto w1 = child(name), w2 = child(name), w3 = child(name, {"--robust"});
    ASSERT_TRUE(w1 && w2 && w3);
    ASSERT_FALSE(enqueue(*w1, k, "lock 0").empty());
    ASSERT_FALSE(enqueue(*w2, k, "lock 0").empty());
    ASSERT_FALSE(enqueue(*w2, k, "lock 1").empty());
    ASSERT_FALSE(enqueue(*w3, k, "timedlock 0 60000").empty());
    ASSERT_TRUE(redis().exists(k.queue) && redis().exists(k.alive) && redis().exists(k.seq));
    for (FairChild *c : {h.get(), w1.get(), w2.get(), w3.get()})
        c->kill(SIGKILL);
    for (FairChild *c : {h.get(), w1.get(), w2.get(), w3.get()})
        EXPECT_NE(-1, c->wait(ms(5000)));
    auto t_dead = Clock::now();
    std::vector<std::string> left;
    bool clean = wait_until([&] {
        left = keys_of(name);
        return left == std::vector<std::string>{k.token};
    }, ms(2 * kLease + 250));
    std::string all;
    for (auto &key : left)
        all += " " + key + " (pttl " + std::to_string(redis().pttl(key)) + ")";
    EXPECT_TRUE(clean) << elapsed_ms(t_dead) << " ms after the last client died, left:" << all;
    fprintf(stderr, "[fair] clean %lld ms after the last client died\n", static_cast<long long>(elapsed_ms(t_dead)));
    EXPECT_EQ(-1, redis().pttl(k.token)) << "the fencing counter never expires";
}

/* The same, when the last thing that happened was a release that granted
 * the lock to a waiter that had died. */
TEST_F(FairCrash, NothingIsLeftEitherAfterAGrantToADeadWaiter)
{
    std::string name = lock_name();
    FairKeys k(name);
    auto h = child(name);
    ASSERT_TRUE(h);
    ASSERT_TRUE(h->send("lock 0"));
    ASSERT_TRUE(h->expect_line("lock t=0 rc=0", ms(3000)));
    auto w1 = child(name), w2 = child(name);
    ASSERT_TRUE(w1 && w2);
    std::string m1 = enqueue(*w1, k, "lock 0");
    ASSERT_FALSE(m1.empty() || enqueue(*w2, k, "lock 0").empty());
    kill9(*w1);
    kill9(*w2);
    ASSERT_TRUE(h->send("unlock 0"));
    ASSERT_TRUE(h->expect_line("unlock t=0 rc=0", ms(3000)));
    EXPECT_EQ(owner_of(m1), redis().hgetall(name).begin()->first) << "precondition: granted to the dead head";
    kill9(*h);
    auto t_dead = Clock::now();
    std::vector<std::string> left;
    bool clean = wait_until([&] {
        left = keys_of(name);
        return left == std::vector<std::string>{k.token};
    }, ms(2 * kLease + 250));
    std::string all;
    for (auto &key : left)
        all += " " + key + " (pttl " + std::to_string(redis().pttl(key)) + ")";
    EXPECT_TRUE(clean) << elapsed_ms(t_dead) << " ms after the last client died, left:" << all;
}

} // namespace
