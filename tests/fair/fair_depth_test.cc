/* fair_depth_test.cc -- correctness with 10 000 queued waiters: the order
 * holds, dead waiters are skipped, the scripts stay bounded, nothing is left
 * behind.  How long the
 * scripts take at that depth is the benchmark's business; this checks that
 * the lock still behaves.
 *
 * The 10 000 waiters are made by calling the library's own fair.lua
 * (src/lua/fair.lua as embedded, SCRIPT LOAD) with made-up owners, exactly as 10 000
 * processes would: "acquire" while the lock is held enqueues them, their
 * "release" and "cancel" are what their processes would send.  So every
 * state here is one the scripts produce.  Real waiters (child processes)
 * queue behind them. */
#include <unistd.h>

#include "fair_util.h"

namespace {

using namespace rmt;
using namespace fair;

constexpr int kDepth = 10000;

class FairDepth : public FairTest {
  protected:
    void SetUp() override
    {
        FairTest::SetUp();
        if (HasFatalFailure())
            return;
        Reply r = redis().cmd({"SCRIPT", "LOAD", fair_lua_source()});
        ASSERT_EQ(REDIS_REPLY_STRING, r->type) << r.str();
        sha_ = r.str();
    }

    static std::string fake_owner(int i) { return "fake" + std::to_string(i) + "-0000-4000-8000-000000000000:1"; }
    static std::string fake_member(int i) { return fake_owner(i) + "|1"; }

    /* fair.lua's argument vector for one call by a made-up owner.  Its hold
     * lease is its waiter lease: nobody renews a made-up holder, and a grant
     * it hears (this test's PSUBSCRIBE) is a full hold of that lease. */
    std::vector<std::string> call(const FairKeys &k, const std::string &op, const std::string &owner,
                                  const std::string &acq, unsigned long wlease)
    {
        std::vector<std::string> v = {"EVALSHA", sha_, std::to_string(k.script_keys().size())};
        for (auto &key : k.script_keys())
            v.push_back(key);
        for (const std::string &a : {op, owner, acq, std::to_string(wlease), std::to_string(wlease),
                                     std::string("0"), std::string("0"),
                                     std::string("0"), std::string("86400000"), std::string("publish")})
            v.push_back(a);
        return v;
    }

    /* Pipelined calls; returns how many answered without an error. */
    size_t pipeline(const std::vector<std::vector<std::string>> &calls)
    {
        redisContext *c = redis().ctx();
        size_t ok = 0;
        for (size_t base = 0; base < calls.size(); base += 1000) {
            size_t end = std::min(calls.size(), base + 1000);
            for (size_t i = base; i < end; i++) {
                std::vector<const char *> a;
                std::vector<size_t> l;
                for (auto &s : calls[i]) {
                    a.push_back(s.data());
                    l.push_back(s.size());
                }
                redisAppendCommandArgv(c, static_cast<int>(a.size()), a.data(), l.data());
            }
            for (size_t i = base; i < end; i++) {
                void *raw = nullptr;
                if (redisGetReply(c, &raw) != REDIS_OK || !raw)
                    return ok;
                auto *r = static_cast<redisReply *>(raw);
                if (r->type != REDIS_REPLY_ERROR)
                    ok++;
                else if (ok < 3)
                    ADD_FAILURE() << r->str;
                freeReplyObject(r);
            }
        }
        return ok;
    }

    /* Enqueue kDepth made-up waiters with waiter lease wlease (the lock must
     * be held). */
    void enqueue_fakes(const FairKeys &k, unsigned long wlease)
    {
        std::vector<std::vector<std::string>> calls;
        for (int i = 0; i < kDepth; i++)
            calls.push_back(call(k, "acquire", fake_owner(i), "1", wlease));
        ASSERT_EQ(static_cast<size_t>(kDepth), pipeline(calls));
        auto s = read_queue(redis(), k);
        ASSERT_EQ(static_cast<size_t>(kDepth), s.queue.size());
        ASSERT_TRUE(s.consistent());
        ASSERT_EQ(fake_member(0), s.queue.front().member);
        ASSERT_EQ(fake_member(kDepth - 1), s.queue.back().member);
    }

    std::string sha_;
};

TEST_F(FairDepth, TenThousandLiveWaitersAheadAreServedInOrderAndRealOnesBehindThem)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t f0 = 0;
    ASSERT_RC(0, rmutex_fence(&m, &f0));
    /* Made-up waiters whose processes keep them alive (a long waiter lease
     * stands in for their watchdogs). */
    enqueue_fakes(k, 600000);
    if (HasFatalFailure())
        return;

    auto r1 = threads_child(name, url()), r2 = threads_child(name, url()), other = threads_child(name, url());
    ASSERT_TRUE(r1 && r2 && other);
    std::string m1 = enqueue(*r1, k, "lock 0"), m2 = enqueue(*r2, k, "lock 0");
    ASSERT_FALSE(m1.empty() || m2.empty());
    auto s = read_queue(redis(), k);
    EXPECT_EQ(kDepth + 1, s.ticket_of(m1)) << "a new waiter's ticket puts it at the tail";
    EXPECT_EQ(kDepth + 2, s.ticket_of(m2));
    EXPECT_EQ(kDepth + 1, redis().cmd({"ZRANK", k.queue, m2}).integer());

    /* No barging with 10 000 queued; trylock does not queue. */
    other->send("trylock 0");
    auto tl = other->expect_line("trylock t=0 ", ms(3000));
    ASSERT_TRUE(tl);
    EXPECT_EQ(EBUSY, rc_of(*tl));
    /* A timed waiter that gives up at the tail leaves no entry. */
    std::string mt = enqueue(*other, k, "timedlock 0 300");
    ASSERT_FALSE(mt.empty());
    auto tt = other->expect_line("timedlock t=0 ", ms(3000));
    ASSERT_TRUE(tt);
    EXPECT_EQ(ETIMEDOUT, rc_of(*tt));
    s = read_queue(redis(), k);
    EXPECT_EQ(static_cast<size_t>(kDepth + 2), s.queue.size());
    EXPECT_FALSE(s.has(mt));
    EXPECT_TRUE(s.consistent());

    Redis sub(host(), port(), password_);
    /* Grants go to one channel per process, rmutex_fair_channel:{NAME}:<uuid>. */
    ASSERT_TRUE(sub.cmd({"PSUBSCRIBE", k.fchannel + ":*"}));

    /* The release grants the head: one message, naming it. */
    auto t0 = Clock::now();
    EXPECT_RC(0, rmutex_unlock(&m));
    fprintf(stderr, "[fair] release with %d queued: %lld ms (client-side, coarse)\n", kDepth + 2,
            static_cast<long long>(elapsed_ms(t0)));
    auto h = redis().hgetall(name);
    ASSERT_EQ(1u, h.size());
    EXPECT_EQ(fake_owner(0), h.begin()->first);
    /* A full hold at once: the grant message reached a subscriber (this
     * test's PSUBSCRIBE: fair.lua counts whoever heard it). */
    EXPECT_EQ(fake_member(0), redis().get(k.owner).value_or(""));
    auto msg = sub.next_message(ms(1000));
    ASSERT_TRUE(msg);
    EXPECT_EQ(fake_member(0), words(msg->second)[0]);
    uint64_t t1 = std::stoull(words(msg->second)[1]);
    EXPECT_GT(t1, f0) << "a new token for the new owner";

    /* Fake 0 releases: fake 1 is next. */
    Reply rel = redis().cmd(call(k, "release", fake_owner(0), "0", 600000));
    EXPECT_EQ(1, rel.integer()) << rel.str();
    EXPECT_EQ(fake_owner(1), redis().hgetall(name).begin()->first);
    msg = sub.next_message(ms(1000));
    ASSERT_TRUE(msg);
    EXPECT_EQ(fake_member(1), words(msg->second)[0]);
    uint64_t t2 = std::stoull(words(msg->second)[1]);
    EXPECT_GT(t2, t1);

    /* The other 9 998 give up (their calls time out: cancel). */
    std::vector<std::vector<std::string>> cancels;
    for (int i = 2; i < kDepth; i++)
        cancels.push_back(call(k, "cancel", fake_owner(i), "1", 600000));
    ASSERT_EQ(cancels.size(), pipeline(cancels));
    s = read_queue(redis(), k);
    ASSERT_EQ(2u, s.queue.size());
    EXPECT_EQ(m1, s.queue[0].member);
    EXPECT_EQ(m2, s.queue[1].member);
    EXPECT_TRUE(s.consistent());
    EXPECT_EQ(fake_owner(1), redis().hgetall(name).begin()->first) << "cancels of others leave the hold alone";

    /* Fake 1 releases: the first real waiter is handed the lock. */
    rel = redis().cmd(call(k, "release", fake_owner(1), "0", 600000));
    EXPECT_EQ(1, rel.integer());
    auto l1 = r1->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(l1);
    EXPECT_EQ(0, rc_of(*l1));
    EXPECT_EQ(1, num_field(*l1, "pubsub")) << *l1;
    long long t3 = num_field(*l1, "fence");
    EXPECT_GT(t3, static_cast<long long>(t2));
    EXPECT_FALSE(r2->poll_line(ms(100)));
    r1->send("unlock 0");
    ASSERT_TRUE(r1->expect_line("unlock t=0 rc=0", ms(2000)));
    auto l2 = r2->expect_line("lock t=0 ", ms(2000));
    ASSERT_TRUE(l2);
    EXPECT_EQ(0, rc_of(*l2));
    EXPECT_GT(num_field(*l2, "fence"), t3);
    r2->send("unlock 0");
    ASSERT_TRUE(r2->expect_line("unlock t=0 rc=0", ms(2000)));
    s = read_queue(redis(), k);
    EXPECT_TRUE(s.queue.empty() && s.alive.empty());
    EXPECT_FALSE(redis().exists(name));
}

/* 10 000 waiters died together (their liveness has run out) and one live
 * waiter is queued behind them.  Purging is bounded per script call, so the
 * release may not reach the live waiter; then the lock stays free but no
 * fair newcomer may take it past the queue (it queues, or trylock gets
 * EBUSY, and its call purges on), and the live waiter -- whose own waits are
 * bounded by half its waiter lease -- gets it within one waiter lease of
 * the release: waiters that died together cost one lease in total. */
TEST_F(FairDepth, TenThousandDeadWaitersAheadNeitherLetANewcomerBargeNorDelayTheLiveOne)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    enqueue_fakes(k, kWaiterLease);
    if (HasFatalFailure())
        return;
    auto w = threads_child(name, url_with("lease=2000"));
    auto newcomer = threads_child(name, url());
    ASSERT_TRUE(w && newcomer);
    std::string wm = enqueue(*w, k, "lock 0");
    ASSERT_FALSE(wm.empty());
    EXPECT_EQ(kDepth + 1, read_queue(redis(), k).ticket_of(wm));
    /* The made-up waiters die: nobody renews them; wait until every one of
     * their deadlines has passed on the server's clock. */
    ASSERT_TRUE(wait_until([&] {
        auto s = read_queue(redis(), k);
        for (auto &e : s.alive)
            if (e.first != wm && e.second > s.server_ms)
                return false;
        return true;
    }, ms(3 * kWaiterLease)));

    auto t_rel = Clock::now();
    EXPECT_RC(0, rmutex_unlock(&m));
    newcomer->send("trylock 0");
    auto tl = newcomer->expect_line("trylock t=0 ", ms(3000));
    ASSERT_TRUE(tl);
    EXPECT_EQ(EBUSY, rc_of(*tl)) << "a newcomer took the lock ahead of a live queued waiter";
    if (rc_of(*tl) == 0) {
        newcomer->send("unlock 0");
        EXPECT_TRUE(newcomer->expect_line("unlock t=0 rc=0", ms(2000)));
    }
    auto line = w->expect_line("lock t=0 ", ms(10000));
    ASSERT_TRUE(line) << "the live waiter never got the lock";
    long long waited = elapsed_ms(t_rel);
    fprintf(stderr, "[fair] live waiter behind %d dead: %lld ms after the release\n", kDepth, waited);
    EXPECT_EQ(0, rc_of(*line));
    EXPECT_LE(waited, kWaiterLease + scaled(ms(500)).count())
        << "10 000 waiters that died together cost more than one waiter lease";
    auto s = read_queue(redis(), k);
    EXPECT_TRUE(s.consistent());
    EXPECT_FALSE(s.has(wm));
    w->send("unlock 0");
    EXPECT_TRUE(w->expect_line("unlock t=0 rc=0", ms(2000)));
}

} // namespace
