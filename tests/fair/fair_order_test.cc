/* fair_order_test.cc -- FIFO among live waiters, also behind a holder that
 * keeps the lock for 10 waiter leases (which must evict nobody alive).
 *
 * How the order is observed, without MONITOR: every holder, right after it
 * acquired and right before it releases, runs one script on its own
 * connection that appends to a Redis list the owner mark (which names the
 * acquisition: "<uuid>:<thread>|<acquisition>"), the lock hash's fields and
 * the whole queue with its tickets -- one atomic snapshot each time, in
 * lock order.  An observer thread here also reads the queue and the
 * liveness zset every millisecond.  From those:
 *   - a waiter's ticket is its place of first enqueue; a member seen with
 *     two different tickets was re-enqueued;
 *   - whenever the queue was not empty right before a release, the next
 *     acquisition must be by the head of that queue (nobody else is handed
 *     the lock, nobody barges);
 *   - the tickets of the acquisitions, in acquisition order, must increase.
 * Waiter lease 1000 ms, hold lease 2000 ms. */
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "fair_util.h"

namespace {

using namespace rmt;
using namespace fair;

class FairOrder : public FairTest {};

struct Snapshot {
    char kind = '?';
    std::string who, mark;
    unsigned long long fence = 0, counter = 0; /* our token, the counter's value */
    std::vector<std::string> fields;
    std::vector<Entry> queue;
};

bool parse_snapshot(const std::string &s, Snapshot *out)
{
    auto w = words(s);
    if (w.size() < 7)
        return false;
    out->kind = w[0][0];
    out->who = w[1];
    out->mark = w[2];
    out->fence = std::stoull(w[3]);
    out->counter = std::stoull(w[4]);
    size_t i = 5, nf = std::stoul(w[i++]);
    if (w.size() < i + nf + 1)
        return false;
    for (size_t j = 0; j < nf; j++)
        out->fields.push_back(w[i++]);
    size_t nq = std::stoul(w[i++]);
    if (w.size() != i + 2 * nq)
        return false;
    for (size_t j = 0; j < nq; j++, i += 2)
        out->queue.push_back({w[i], std::stoll(w[i + 1])});
    return true;
}

TEST_F(FairOrder, FourProcessesOfTwoThreadsAcquireInTheOrderTheyFirstEnqueued)
{
    constexpr int kProcs = 4, kThreads = 2, kIters = 50, kHoldUs = 8000;
    std::string name = lock_name();
    FairKeys k(name);
    std::string log = "rmt:fairlog:" + std::to_string(getpid());
    redis().cmd({"DEL", log});

    std::vector<std::unique_ptr<FairChild>> kids;
    for (int p = 0; p < kProcs; p++) {
        kids.push_back(std::make_unique<FairChild>(
            std::vector<std::string>{"contend", name, "--threads=" + std::to_string(kThreads),
                                     "--hold-us=" + std::to_string(kHoldUs), "--iters=" + std::to_string(kIters),
                                     "--log=" + log, "--host=" + host(), "--port=" + std::to_string(port())},
            url()));
        ASSERT_TRUE(kids.back()->expect_line("ready", ms(10000)));
    }

    /* The observer: tickets as seen in the queue, and Q/A consistency. */
    std::atomic<bool> stop{false};
    std::map<std::string, std::set<long long>> seen; /* member -> tickets */
    long long inconsistent = 0, polls = 0;
    size_t observer_depth = 0;
    std::thread observer([&] {
        Redis r(host(), port(), password_);
        while (!stop) {
            auto s = read_queue(r, k);
            polls++;
            if (!s.consistent())
                inconsistent++;
            observer_depth = std::max(observer_depth, s.queue.size());
            for (auto &e : s.queue)
                seen[e.member].insert(e.ticket);
            std::this_thread::sleep_for(std::chrono::microseconds(500));
        }
    });

    for (auto &c : kids)
        ASSERT_TRUE(c->send("go"));
    long long total = 0;
    for (auto &c : kids) {
        auto line = c->expect_line("done", ms(60000));
        ASSERT_TRUE(line) << "a contender did not finish";
        EXPECT_EQ(0, num_field(*line, "errors")) << *line;
        EXPECT_EQ(0, num_field(*line, "lost")) << *line;
        total += num_field(*line, "acquisitions");
    }
    stop = true;
    observer.join();
    ASSERT_EQ(kProcs * kThreads * kIters, total);

    Reply lr = redis().cmd({"LRANGE", log, "0", "-1"});
    ASSERT_TRUE(lr && lr->type == REDIS_REPLY_ARRAY);
    std::vector<Snapshot> snaps;
    for (size_t i = 0; i < lr->elements; i++) {
        Snapshot s;
        ASSERT_TRUE(parse_snapshot(std::string(lr->element[i]->str, lr->element[i]->len), &s))
            << lr->element[i]->str;
        snaps.push_back(std::move(s));
    }
    ASSERT_EQ(static_cast<size_t>(2 * total), snaps.size());
    for (auto &s : snaps)
        for (auto &e : s.queue)
            seen[e.member].insert(e.ticket);

    long long reenqueued = 0;
    for (auto &[member, tickets] : seen)
        if (tickets.size() != 1) {
            reenqueued++;
            ADD_FAILURE() << member << " was queued under " << tickets.size() << " tickets";
        }

    long long exclusion = 0, ghosts = 0, succession = 0, order = 0, queued = 0, tokens = 0;
    unsigned long long last_fence = 0;
    size_t depth = observer_depth;
    long long last_ticket = -1;
    std::set<std::string> acquired;
    std::map<std::string, int> per_thread;
    for (size_t i = 0; i + 1 < snaps.size(); i += 2) {
        const Snapshot &a = snaps[i], &r = snaps[i + 1];
        ASSERT_EQ('A', a.kind);
        ASSERT_EQ('R', r.kind);
        std::string member = strip_mark(a.mark);
        /* Exclusion: one field, ours, the mark names us, until the release. */
        if (a.who != r.who || a.fields.size() != 1 || a.fields[0] != owner_of(member) ||
            strip_mark(r.mark) != member || r.fields != a.fields) {
            exclusion++;
            ADD_FAILURE() << "hold " << i / 2 << " by " << a.who << ": mark " << a.mark << " / " << r.mark
                          << ", " << a.fields.size() << " fields";
        }
        /* Each new owner, by hand-off too, has a new token: the counter's. */
        if (a.fence != a.counter || r.fence != a.fence || r.counter != a.counter || a.fence <= last_fence) {
            tokens++;
            ADD_FAILURE() << "hold " << i / 2 << ": token " << a.fence << ", counter " << a.counter << " / "
                          << r.counter << ", previous token " << last_fence;
        }
        last_fence = a.fence;
        per_thread[a.who]++;
        EXPECT_TRUE(acquired.insert(member).second) << member << " acquired twice";
        depth = std::max({depth, a.queue.size(), r.queue.size()});
        for (auto &e : a.queue)
            if (e.member == member) {
                ghosts++;
                ADD_FAILURE() << member << " is still queued while it holds the lock";
            }
        /* The acquisition's ticket, if it ever queued. */
        auto it = seen.find(member);
        if (it != seen.end()) {
            queued++;
            long long t = *it->second.begin();
            if (t <= last_ticket) {
                order++;
                ADD_FAILURE() << "hold " << i / 2 << ": ticket " << t << " acquired after ticket " << last_ticket;
            }
            last_ticket = std::max(last_ticket, t);
            for (auto &e : a.queue)
                if (e.ticket < t) {
                    order++;
                    ADD_FAILURE() << "hold " << i / 2 << " (ticket " << t << ") while " << e.member
                                  << " (ticket " << e.ticket << ") waits ahead of it";
                }
        }
        /* The head of the queue right before a release is the next owner. */
        if (i + 2 < snaps.size() && !r.queue.empty()) {
            std::string next = strip_mark(snaps[i + 2].mark);
            if (next != r.queue.front().member) {
                succession++;
                ADD_FAILURE() << "hold " << i / 2 + 1 << " went to " << next << ", not to the head "
                              << r.queue.front().member << " (ticket " << r.queue.front().ticket << ")";
            }
        }
    }
    fprintf(stderr, "[fair] FIFO: %lld holds, %lld through the queue, deepest queue %zu, %lld observer reads\n",
            total, queued, depth, polls);
    EXPECT_EQ(0, exclusion);
    EXPECT_EQ(0, ghosts);
    EXPECT_EQ(0, tokens) << "holds without a new fencing token";
    EXPECT_EQ(0, succession) << "acquisitions not by the head of the queue";
    EXPECT_EQ(0, order) << "FIFO violations";
    EXPECT_EQ(0, reenqueued) << "re-enqueues";
    EXPECT_EQ(0, inconsistent) << "reads where the queue and the liveness zset disagreed (of " << polls << ")";
    EXPECT_GE(depth, 3u) << "the queue was never 3 deep: the test did not test much";
    EXPECT_GE(queued, total * 3 / 4) << "most acquisitions went through the queue";
    EXPECT_EQ(static_cast<size_t>(kProcs * kThreads), per_thread.size());
    for (auto &[who, n] : per_thread)
        EXPECT_EQ(kIters, n) << who;
    auto end = read_queue(redis(), k);
    EXPECT_TRUE(end.queue.empty() && end.alive.empty()) << "entries left after everybody finished";
    for (auto &c : kids)
        c->send("exit");
    redis().cmd({"DEL", log});
}

/* A holder keeps the lock for 10 waiter leases, its watchdog renewing the
 * hold and each waiter's process renewing its place: nobody alive is
 * evicted or reordered (Redisson's RFairLock evicts live waiters behind a
 * long hold), and on release they acquire in the order they came. */
TEST_F(FairOrder, AHoldOfTenWaiterLeasesNeitherEvictsNorReordersLiveWaiters)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    std::string me = redis().hgetall(name).begin()->first;

    std::vector<std::unique_ptr<FairChild>> kids;
    for (int p = 0; p < 3; p++) {
        kids.push_back(threads_child(name, url()));
        ASSERT_TRUE(kids.back());
    }
    /* Four waiters in three processes: (process, thread) in arrival order. */
    const std::vector<std::pair<int, int>> order = {{0, 0}, {1, 0}, {2, 0}, {0, 1}};
    std::vector<std::string> members;
    for (auto [p, t] : order) {
        members.push_back(enqueue(*kids[static_cast<size_t>(p)], k, "lock " + std::to_string(t)));
        ASSERT_FALSE(members.back().empty());
    }
    auto first = read_queue(redis(), k);
    ASSERT_EQ(4u, first.queue.size());
    for (size_t i = 0; i < members.size(); i++)
        ASSERT_EQ(members[i], first.queue[i].member) << "queue order is arrival order";
    std::map<std::string, long long> first_deadline;
    for (auto &e : first.alive)
        first_deadline[e.first] = e.second;

    /* Hold for ten waiter leases; stop at the first sign of trouble. */
    std::string trouble;
    long long renewed_min = INT64_MAX;
    auto t0 = Clock::now();
    bool broke = wait_until_unscaled([&] {
        auto s = read_queue(redis(), k);
        if (!s.consistent()) {
            trouble = "queue and liveness zset disagree";
            return true;
        }
        if (s.queue.size() != first.queue.size()) {
            trouble = "a waiter left the queue";
            return true;
        }
        for (size_t i = 0; i < s.queue.size(); i++)
            if (s.queue[i].member != first.queue[i].member || s.queue[i].ticket != first.queue[i].ticket) {
                trouble = "the queue changed: " + s.queue[i].member + " at " + std::to_string(i);
                return true;
            }
        long long least = INT64_MAX;
        for (auto &e : s.alive) {
            if (e.second <= s.server_ms) {
                trouble = e.first + "'s liveness deadline passed while it waited";
                return true;
            }
            least = std::min(least, e.second - first_deadline[e.first]);
        }
        renewed_min = least;
        auto h = redis().hgetall(name);
        if (h.size() != 1 || h.begin()->first != me) {
            trouble = "the holder lost the lock";
            return true;
        }
        for (auto &c : kids)
            if (auto l = c->poll_line()) {
                trouble = "a waiter returned: " + *l;
                return true;
            }
        return false;
    }, ms(10 * kWaiterLease));
    EXPECT_FALSE(broke) << trouble << " after " << elapsed_ms(t0) << " ms of the hold";
    EXPECT_GE(renewed_min, 8 * kWaiterLease) << "every waiter's deadline kept moving forward";
    EXPECT_GT(stats().renewals, 10u) << "the holder's watchdog renewed the hold";

    EXPECT_RC(0, rmutex_unlock(&m));
    for (size_t i = 0; i < order.size(); i++) {
        auto [p, t] = order[i];
        FairChild &c = *kids[static_cast<size_t>(p)];
        auto line = c.expect_line("lock t=" + std::to_string(t) + " ", ms(2000));
        ASSERT_TRUE(line) << "waiter " << i << " (" << members[i] << ") did not get the lock next";
        EXPECT_EQ(0, rc_of(*line)) << *line;
        if (i < 3) { /* each process's first waiter: its call spanned the whole hold */
            EXPECT_GE(num_field(*line, "rcalls"), 10 * 3 * 6 / 10)
                << "its process's watchdog renewed the place (every waiter lease / 3): " << *line;
        }
        auto h = redis().hgetall(name);
        ASSERT_EQ(1u, h.size());
        EXPECT_EQ(owner_of(members[i]), h.begin()->first);
        for (auto &other : kids)
            if (auto l = other->poll_line(ms(50)))
                ADD_FAILURE() << "waiter " << i << " holds, yet another returned: " << *l;
        c.send("unlock " + std::to_string(t));
        ASSERT_TRUE(c.expect_line("unlock t=" + std::to_string(t) + " rc=0", ms(2000)));
    }
    auto end = read_queue(redis(), k);
    EXPECT_TRUE(end.queue.empty() && end.alive.empty());
}

/* Waiters whose process stops past their waiter lease are taken for dead
 * -- the script cannot tell -- and purged, and the lock passes to the
 * next.  When the process runs again they come back to the places their
 * tickets gave them, ahead of the waiters who queued after them, and are
 * served next; they are not sent to the tail.  The process's second waiter
 * (which looks on its own only every other poll period) is back as soon as
 * the first: its watchdog's renewal finds it gone and wakes it.  (Once, in
 * a deep queue under load, waiters whose renewals came late were purged
 * and queued again at the tail, time after time, and waited tens of
 * seconds.) */
TEST_F(FairOrder, WaitersStoppedPastTheirLeaseAreServedBeforeThoseWhoQueuedAfterThem)
{
    std::string name = lock_name();
    FairKeys k(name);
    rmutex_t m;
    init_fair(&m, name);
    ASSERT_RC(0, rmutex_lock(&m));
    auto x = threads_child(name, url()), y = threads_child(name, url()), z = threads_child(name, url());
    ASSERT_TRUE(x && y && z);
    std::string x0 = enqueue(*x, k, "lock 0"), x1 = enqueue(*x, k, "lock 1");
    std::string my = enqueue(*y, k, "lock 0"), mz = enqueue(*z, k, "lock 0");
    ASSERT_FALSE(x0.empty() || x1.empty() || my.empty() || mz.empty());
    auto before = read_queue(redis(), k);

    /* Its watchdog stops with it: wait until both deadlines have passed on
     * the server's clock, then release: the purge takes them, y is granted. */
    x->kill(SIGSTOP);
    bool lapsed = wait_until([&] {
        auto s = read_queue(redis(), k);
        for (auto &mx : {x0, x1}) {
            long long d = s.deadline_of(mx);
            if (d < 0 || d > s.server_ms)
                return false;
        }
        return true;
    }, ms(3 * kWaiterLease));
    EXPECT_RC(0, rmutex_unlock(&m));
    auto ly = y->expect_line("lock t=0 ", ms(3000));
    auto after = read_queue(redis(), k);
    x->kill(SIGCONT);
    auto t_cont = Clock::now();
    ASSERT_TRUE(lapsed) << "precondition: the stopped waiters' deadlines pass";
    ASSERT_TRUE(ly) << "the waiter behind the stopped ones did not get the lock";
    EXPECT_EQ(0, rc_of(*ly)) << *ly;
    ASSERT_FALSE(after.has(x0) || after.has(x1)) << "precondition: the stopped waiters were purged as dead";

    ASSERT_TRUE(wait_queued(k, x0, ms(kWaiterLease))) << "the first waiter did not queue again once it ran";
    ASSERT_TRUE(wait_queued(k, x1, ms(kWaiterLease))) << "the second waiter did not queue again within a waiter lease";
    fprintf(stderr, "[fair] both stopped waiters queued again %lld ms after SIGCONT\n",
            static_cast<long long>(elapsed_ms(t_cont)));
    auto s = read_queue(redis(), k);
    EXPECT_EQ(before.ticket_of(x0), s.ticket_of(x0)) << "it came back with a new ticket";
    EXPECT_EQ(before.ticket_of(x1), s.ticket_of(x1)) << "it came back with a new ticket";
    ASSERT_EQ(3u, s.queue.size());
    EXPECT_EQ(x0, s.queue[0].member) << "the queue is not x0 x1 z again";
    EXPECT_EQ(x1, s.queue[1].member);
    ASSERT_TRUE(y->send("unlock 0"));
    ASSERT_TRUE(y->expect_line("unlock t=0 rc=0", ms(2000)));
    /* (x's second thread may print its lock line before the first prints
     * its unlock line: both are kept.) */
    std::optional<std::string> next_lock;
    for (int t = 0; t < 2; t++) {
        std::string tn = std::to_string(t);
        auto l = next_lock ? next_lock : x->expect_line("lock t=" + tn + " ", ms(3000));
        next_lock.reset();
        EXPECT_FALSE(z->poll_line(ms(50))) << "the waiter that queued after them got the lock first";
        ASSERT_TRUE(l) << "the lock went past waiter " << tn << " that came back";
        EXPECT_EQ(0, l->rfind("lock t=" + tn + " ", 0)) << *l;
        EXPECT_EQ(0, rc_of(*l)) << *l;
        ASSERT_TRUE(x->send("unlock " + tn));
        for (bool unlocked = false; !unlocked;) {
            auto line = x->read_line(ms(2000));
            ASSERT_TRUE(line) << "no unlock line from waiter " << tn;
            if (line->rfind("unlock t=" + tn + " ", 0) == 0) {
                EXPECT_EQ(0, line->rfind("unlock t=" + tn + " rc=0", 0)) << *line;
                unlocked = true;
            } else if (line->rfind("lock t=", 0) == 0) {
                next_lock = line;
            }
        }
    }
    auto lz = z->expect_line("lock t=0 ", ms(3000));
    ASSERT_TRUE(lz);
    EXPECT_EQ(0, rc_of(*lz)) << *lz;
    ASSERT_TRUE(z->send("unlock 0"));
    ASSERT_TRUE(z->expect_line("unlock t=0 rc=0", ms(2000)));
    auto end = read_queue(redis(), k);
    EXPECT_TRUE(end.queue.empty() && end.alive.empty());
}

} // namespace

namespace {

/* Queue deadlines come from Redis TIME only ("What must hold" 3): clients
 * whose wall clocks are an hour ahead or behind (LD_PRELOAD shim) hold and
 * wait beside a normal one for several waiter leases; nobody is evicted or
 * reordered, every deadline is the server's time plus the waiter lease, and
 * they acquire in the order they came. */
TEST_F(FairOrder, ClientsWithSkewedClocksNeitherEvictNorAreEvicted)
{
    std::string name = lock_name();
    FairKeys k(name);
    auto ahead = threads_child(name, url(), {}, skew_env(3600));
    auto behind = threads_child(name, url(), {}, skew_env(-3600));
    auto normal = threads_child(name, url());
    ASSERT_TRUE(ahead && behind && normal);
    /* The shim works: the children's wall clocks are off by an hour. */
    long long now = static_cast<long long>(time(nullptr));
    for (auto [c, skew] : {std::pair<FairChild *, long long>{ahead.get(), 3600}, {behind.get(), -3600}}) {
        long long realtime = child_realtime(*c);
        ASSERT_NE(-1, realtime) << "the child did not answer \"clock\"";
        EXPECT_NEAR(static_cast<double>(now + skew), static_cast<double>(realtime), 10.0)
            << "precondition: the clock-skew shim is not in effect";
    }
    /* The clock ahead holds; the one behind, a normal one, and the one ahead
     * again (second thread, timed, with a deadline on its own clock) wait. */
    ahead->send("lock 0");
    auto held = ahead->expect_line("lock t=0 ", ms(3000));
    ASSERT_TRUE(held);
    ASSERT_EQ(0, rc_of(*held));
    std::vector<std::pair<FairChild *, int>> order = {{behind.get(), 0}, {normal.get(), 0}, {ahead.get(), 1}};
    std::vector<std::string> members;
    members.push_back(enqueue(*behind, k, "lock 0"));
    members.push_back(enqueue(*normal, k, "lock 0"));
    members.push_back(enqueue(*ahead, k, "timedlock 1 60000"));
    for (auto &mb : members)
        ASSERT_FALSE(mb.empty());
    auto first = read_queue(redis(), k);
    std::string trouble;
    bool broke = wait_until_unscaled([&] {
        auto s = read_queue(redis(), k);
        if (s.queue.size() != 3 || !s.consistent()) {
            trouble = "the queue lost an entry";
            return true;
        }
        for (size_t i = 0; i < 3; i++) {
            if (s.queue[i].member != members[i] || s.queue[i].ticket != first.queue[i].ticket) {
                trouble = "the queue changed";
                return true;
            }
            long long d = s.deadline_of(members[i]);
            if (d <= s.server_ms || d > s.server_ms + kWaiterLease) {
                trouble = members[i] + "'s deadline " + std::to_string(d) + " is not within a waiter lease of " +
                          "the server's time " + std::to_string(s.server_ms);
                return true;
            }
        }
        for (FairChild *c : {behind.get(), normal.get(), ahead.get()})
            if (auto l = c->poll_line()) {
                trouble = "a waiter returned: " + *l;
                return true;
            }
        return false;
    }, ms(4 * kWaiterLease));
    EXPECT_FALSE(broke) << trouble;
    ahead->send("unlock 0");
    ASSERT_TRUE(ahead->expect_line("unlock t=0 rc=0", ms(2000)));
    for (size_t i = 0; i < order.size(); i++) {
        auto [c, t] = order[i];
        std::string verb = i == 2 ? "timedlock" : "lock";
        auto line = c->expect_line(verb + " t=" + std::to_string(t) + " ", ms(2000));
        ASSERT_TRUE(line) << "waiter " << i << " did not get the lock next";
        EXPECT_EQ(0, rc_of(*line)) << *line;
        EXPECT_EQ(owner_of(members[i]), redis().hgetall(name).begin()->first);
        c->send("unlock " + std::to_string(t));
        ASSERT_TRUE(c->expect_line("unlock t=" + std::to_string(t) + " rc=0", ms(2000)));
    }
}

} // namespace
