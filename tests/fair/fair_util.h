/* fair_util.h -- what the fair-lock tests share.
 *
 *   - FairKeys: the Redis keys of a fair lock NAME (fair.lua's header).
 *   - FairChild: the rmutex_fair_child helper (fair_child.cc), spawned with
 *     RMUTEX_URL in its environment, talked to line by line.  The shared
 *     tests/child.cc has no multi-threaded or timed modes, so the fair
 *     tests bring their own.
 *   - Queue inspection: the queue zset and the liveness zset read in one
 *     atomic script, so an assertion never compares two different moments.
 *   - FairTest: RedisTest with short leases and a few helpers.
 *
 * Every liveness bound goes through scaled() (RMUTEX_TEST_TIME_SCALE). */
#ifndef RMUTEX_FAIR_UTIL_H
#define RMUTEX_FAIR_UTIL_H

#include "harness.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace fair {

using rmt::Clock;
using rmt::ms;

struct FairKeys {
    explicit FairKeys(const std::string &name);
    std::string lock, queue, alive, seq, token, owner, notrec, fchannel, channel, lease;
    /* KEYS 1..10 of fair.lua, in order. */
    std::vector<std::string> script_keys() const;
};

/* One queued waiter: member "<uuid>:<thread>|<acquisition>" and its ticket. */
struct Entry {
    std::string member;
    long long ticket = 0;
};

/* The queue and the liveness zset, read atomically. */
struct QueueState {
    std::vector<Entry> queue;                              /* by ticket */
    std::vector<std::pair<std::string, long long>> alive;  /* member -> deadline (server ms) */
    long long server_ms = 0;                               /* Redis TIME at the read */
    bool consistent() const;                               /* same members in both */
    bool has(const std::string &member) const;
    long long ticket_of(const std::string &member) const;  /* -1 if absent */
    long long deadline_of(const std::string &member) const;
};

QueueState read_queue(rmt::Redis &r, const FairKeys &k);

/* The owner part of a waiter member ("<uuid>:<thread>"). */
std::string owner_of(const std::string &member);
/* A mark without its state suffixes ('?' unconfirmed, '!' owner died). */
std::string strip_mark(const std::string &mark);

/* ---- the helper process ---------------------------------------------- */

class FairChild : public rmt::Child {
  public:
    /* rmutex_fair_child with args. */
    FairChild(const std::vector<std::string> &args, const std::string &url,
              const std::vector<std::string> &extra_env = {});
    bool send(const std::string &line) { return write_line(line); }
};

/* "threads NAME opts..." child, with extra environment entries. */
std::unique_ptr<FairChild> threads_child(const std::string &name, const std::string &url,
                                         const std::vector<std::string> &opts = {},
                                         const std::vector<std::string> &env = {});

/* Environment entries that move a child's wall clock by seconds
 * (skew_preload.c through LD_PRELOAD). */
std::vector<std::string> skew_env(long seconds);

/* The child's CLOCK_REALTIME in seconds (its "clock" command); -1 if it
 * does not answer. */
long long child_realtime(FairChild &c);

/* ---- fair.lua, called directly (the depth test builds its queue with the
 * very script the library runs, so the state is one it can produce) ---- */

std::string fair_lua_source();

/* ---- the fixture ------------------------------------------------------- */

class FairTest : public rmt::RedisTest {
  protected:
    static constexpr int kLease = 2000;       /* hold lease, watchdog-renewed */
    static constexpr int kWaiterLease = 1000; /* queued waiters' liveness */
    explicit FairTest(std::string options = "lease=2000&waiter_lease=1000", bool own = false)
        : RedisTest(own, std::move(options)) {}

    /* Init a fair mutex (asserts). */
    void init_fair(rmutex_t *m, const std::string &name, int type = RMUTEX_NORMAL,
                   int robust = RMUTEX_STALLED, unsigned long lease_ms = 0);

    /* Send "<verb> <t> [arg]" to c and wait until a new member shows up in
     * the queue of k; returns it (empty and a test failure otherwise). */
    std::string enqueue(FairChild &c, const FairKeys &k, const std::string &cmd,
                        ms bound = ms(5000));

    /* Wait until member is in k's queue; returns success. */
    bool wait_queued(const FairKeys &k, const std::string &member, ms bound = ms(5000));
    /* Wait until k's queue holds n members. */
    bool wait_queue_size(const FairKeys &k, size_t n, ms bound = ms(5000));

    /* Every key of Redis whose name contains name, sorted. */
    std::vector<std::string> keys_of(const std::string &name);

    /* Make the server log every command (SLOWLOG at threshold 0), from
     * now on; then the acquire calls of one waiter can be counted. */
    void log_every_command();
    /* fair.lua acquire calls logged for member "<owner>|<acquisition>". */
    int acquire_calls(const std::string &member);
};

/* "rc=16" -> 16; INT32_MIN if missing. */
int rc_of(const std::string &line);
long long num_field(const std::string &line, const std::string &key, long long dflt = -1);

} // namespace fair

#endif
