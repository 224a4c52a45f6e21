/* fair_util.cc -- see fair_util.h. */
#include "fair_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char **environ;

#ifndef RMUTEX_FAIR_CHILD
#error "RMUTEX_FAIR_CHILD must name the rmutex_fair_child binary"
#endif
#ifndef RMUTEX_FAIR_SKEW
#error "RMUTEX_FAIR_SKEW must name the clock-skew preload library"
#endif
#ifndef RMUTEX_FAIR_LUA
#error "RMUTEX_FAIR_LUA must name fair.lua as Redis runs it (the build's lua/)"
#endif

namespace fair {

using namespace rmt;

FairKeys::FairKeys(const std::string &name)
{
    /* keys.c: "prefix:{name}" unless the name has its own braces. */
    bool tagged = name.find('{') != std::string::npos;
    auto derive = [&](const char *prefix) {
        return std::string(prefix) + ":" + (tagged ? name : "{" + name + "}");
    };
    lock = name;
    queue = derive("rmutex_fair_queue");
    alive = derive("rmutex_fair_alive");
    seq = derive("rmutex_fair_seq");
    token = derive("redisson_lock_token");
    owner = derive("rmutex_owner");
    notrec = derive("rmutex_notrecoverable");
    fchannel = derive("rmutex_fair_channel");
    channel = derive("redisson_lock__channel");
    lease = derive("rmutex_fair_lease");
}

std::vector<std::string> FairKeys::script_keys() const
{
    return {lock, queue, alive, seq, token, owner, notrec, fchannel, channel, lease};
}

bool QueueState::consistent() const
{
    std::set<std::string> q, a;
    for (auto &e : queue)
        q.insert(e.member);
    for (auto &e : alive)
        a.insert(e.first);
    return q == a;
}

bool QueueState::has(const std::string &member) const { return ticket_of(member) >= 0; }

long long QueueState::ticket_of(const std::string &member) const
{
    for (auto &e : queue)
        if (e.member == member)
            return e.ticket;
    return -1;
}

long long QueueState::deadline_of(const std::string &member) const
{
    for (auto &e : alive)
        if (e.first == member)
            return e.second;
    return -1;
}

QueueState read_queue(Redis &r, const FairKeys &k)
{
    static const char *script =
        "local q = redis.call('zrange', KEYS[1], 0, -1, 'withscores') "
        "local a = redis.call('zrange', KEYS[2], 0, -1, 'withscores') "
        "local t = redis.call('time') "
        "return {q, a, t[1], t[2]}";
    QueueState s;
    Reply rep = r.cmd({"EVAL", script, "2", k.queue, k.alive});
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 4) {
        ADD_FAILURE() << "reading the queue failed: " << rep.str();
        return s;
    }
    auto *q = rep->element[0], *a = rep->element[1];
    for (size_t i = 0; i + 1 < q->elements; i += 2)
        s.queue.push_back({std::string(q->element[i]->str, q->element[i]->len),
                           std::stoll(q->element[i + 1]->str)});
    for (size_t i = 0; i + 1 < a->elements; i += 2)
        s.alive.emplace_back(std::string(a->element[i]->str, a->element[i]->len),
                             std::stoll(a->element[i + 1]->str));
    s.server_ms = std::stoll(rep->element[2]->str) * 1000 + std::stoll(rep->element[3]->str) / 1000;
    return s;
}

FairChild::FairChild(const std::vector<std::string> &args, const std::string &url,
                     const std::vector<std::string> &extra_env)
    : rmt::Child(RMUTEX_FAIR_CHILD, args, url, extra_env)
{
}

std::string owner_of(const std::string &member) { return member.substr(0, member.rfind('|')); }

std::string strip_mark(const std::string &mark)
{
    std::string m = mark;
    while (!m.empty() && (m.back() == '?' || m.back() == '!'))
        m.pop_back();
    return m;
}


std::unique_ptr<FairChild> threads_child(const std::string &name, const std::string &url,
                                         const std::vector<std::string> &opts,
                                         const std::vector<std::string> &env)
{
    std::vector<std::string> args = {"threads", name};
    args.insert(args.end(), opts.begin(), opts.end());
    auto c = std::make_unique<FairChild>(args, url, env);
    if (!c->expect_line("ready", ms(10000))) {
        ADD_FAILURE() << "the fair child did not start";
        return nullptr;
    }
    return c;
}

std::vector<std::string> skew_env(long seconds)
{
    const char *asan = getenv("ASAN_OPTIONS");
    std::string a = asan && *asan ? std::string(asan) + ":" : "";
    return {std::string("LD_PRELOAD=") + RMUTEX_FAIR_SKEW, "RMUTEX_TEST_CLOCK_SKEW_S=" + std::to_string(seconds),
            "ASAN_OPTIONS=" + a + "verify_asan_link_order=0"};
}

long long child_realtime(FairChild &c)
{
    if (!c.send("clock"))
        return -1;
    auto line = c.expect_line("clock", ms(3000));
    return line ? num_field(*line, "realtime") : -1;
}

std::string fair_lua_source()
{
    std::ifstream in(RMUTEX_FAIR_LUA);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_FALSE(ss.str().empty()) << "cannot read " << RMUTEX_FAIR_LUA;
    return ss.str();
}

/* ---- the fixture ------------------------------------------------------- */

void FairTest::init_fair(rmutex_t *m, const std::string &name, int type, int robust, unsigned long lease_ms)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_settype(&a, type));
    ASSERT_EQ(0, rmutexattr_setrobust(&a, robust));
    ASSERT_EQ(0, rmutexattr_setlease(&a, lease_ms));
    ASSERT_EQ(0, rmutexattr_setfair(&a, 1));
    ASSERT_EQ(0, rmutex_init(m, name.c_str(), &a)) << rmutex_detail();
    ASSERT_EQ(0, rmutexattr_destroy(&a));
}

/* The newest members of the queue (the highest tickets): a new waiter's
 * entry is among them.  Reading only these keeps the poll cheap with 10 000
 * waiters queued, so that even a short-lived entry (a timedlock that gives
 * up) is seen on a slow machine. */
static std::set<std::string> newest_members(Redis &r, const FairKeys &k)
{
    std::set<std::string> out;
    Reply rep = r.cmd({"ZRANGE", k.queue, "-16", "-1"});
    if (rep && rep->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < rep->elements; i++)
            out.insert(std::string(rep->element[i]->str, rep->element[i]->len));
    return out;
}

std::string FairTest::enqueue(FairChild &c, const FairKeys &k, const std::string &cmd, ms bound)
{
    std::set<std::string> before = newest_members(redis(), k);
    if (!c.send(cmd)) {
        ADD_FAILURE() << "cannot talk to the child";
        return "";
    }
    std::string found;
    bool ok = wait_until(
        [&] {
            for (auto &m : newest_members(redis(), k))
                if (!before.count(m)) {
                    found = m;
                    return true;
                }
            return false;
        },
        bound);
    if (!ok)
        ADD_FAILURE() << "no new queue entry after \"" << cmd << "\"";
    return found;
}

bool FairTest::wait_queued(const FairKeys &k, const std::string &member, ms bound)
{
    return wait_until([&] { return read_queue(redis(), k).has(member); }, bound);
}

bool FairTest::wait_queue_size(const FairKeys &k, size_t n, ms bound)
{
    return wait_until([&] { return read_queue(redis(), k).queue.size() == n; }, bound);
}

std::vector<std::string> FairTest::keys_of(const std::string &name)
{
    std::vector<std::string> out;
    std::string cursor = "0";
    do {
        Reply r = redis().cmd({"SCAN", cursor, "MATCH", "*" + name + "*", "COUNT", "1000"});
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
            break;
        cursor = std::string(r->element[0]->str, r->element[0]->len);
        for (size_t i = 0; i < r->element[1]->elements; i++)
            out.emplace_back(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
    } while (cursor != "0");
    std::sort(out.begin(), out.end());
    return out;
}

void FairTest::log_every_command()
{
    EXPECT_FALSE(redis().cmd({"CONFIG", "SET", "slowlog-max-len", "100000"}).is_error());
    EXPECT_FALSE(redis().cmd({"CONFIG", "SET", "slowlog-log-slower-than", "0"}).is_error());
    EXPECT_FALSE(redis().cmd({"SLOWLOG", "RESET"}).is_error());
}

int FairTest::acquire_calls(const std::string &member)
{
    size_t bar = member.find('|');
    std::string owner = member.substr(0, bar), acq = bar == std::string::npos ? "" : member.substr(bar + 1);
    Reply r = redis().cmd({"SLOWLOG", "GET", "-1"});
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return -1;
    int n = 0;
    /* Entry: id, time, duration, argv, client address, client name. */
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 4 || e->element[3]->type != REDIS_REPLY_ARRAY)
            continue;
        const redisReply *argv = e->element[3];
        std::vector<std::string> a;
        for (size_t j = 0; j < argv->elements; j++)
            a.emplace_back(argv->element[j]->str ? argv->element[j]->str : "");
        /* EVALSHA sha 10 K1..K10 op owner acquisition ...  Only a call that
         * ran: its script's own commands (lower case, as fair.lua spells
         * them) are logged just before it, newest first; an EVALSHA
         * refused with NOSCRIPT (the client then sends the body) has none. */
        const redisReply *prev = i + 1 < r->elements ? r->element[i + 1] : nullptr;
        bool ran = prev && prev->type == REDIS_REPLY_ARRAY && prev->elements >= 4 &&
                   prev->element[3]->type == REDIS_REPLY_ARRAY && prev->element[3]->elements > 0 &&
                   prev->element[3]->element[0]->str && islower(prev->element[3]->element[0]->str[0]);
        size_t op = 3 + FairKeys("x").script_keys().size();
        if (a.size() > op + 2 && (a[0] == "EVALSHA" || a[0] == "EVAL") && a[op] == "acquire" &&
            a[op + 1] == owner && a[op + 2] == acq && ran)
            n++;
    }
    return n;
}

int rc_of(const std::string &line)
{
    std::string v = field(line, "rc");
    return v.empty() ? INT32_MIN : atoi(v.c_str());
}

long long num_field(const std::string &line, const std::string &key, long long dflt)
{
    std::string v = field(line, key);
    return v.empty() ? dflt : atoll(v.c_str());
}

} // namespace fair
