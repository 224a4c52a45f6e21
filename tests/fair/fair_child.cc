/* fair_child.cc -- rmutex_fair_child, the other processes of the fair-lock
 * tests.  Like tests/child.cc it never calls rmutex_configure(): RMUTEX_URL
 * in the environment points it at the test's server.  One line per result
 * on stdout, one command per line on stdin.
 *
 *   threads NAME [--robust] [--type=N] [--lease=MS] [--nonfair]
 *       One mutex on NAME (fair unless --nonfair), any number of threads,
 *       numbered by the commands, each running its commands in order:
 *         lock T | trylock T | timedlock T MS | unlock T | consistent T |
 *         condwait T MS (lock, one rcond_timedwait of MS on "NAME:cond"
 *         with its CLOCK_REALTIME deadline, unlock; rc is the wait's)
 *       and, process-wide, "exit" (a normal exit) and "clock" (prints
 *       "clock realtime=<CLOCK_REALTIME seconds>").  Each result is printed as
 *         "<verb> t=T rc=RC fence=F rt=R pubsub=P poll=Q sub=S rcalls=N ms=D detail=..."
 *       where rt/pubsub/poll/sub/rcalls are the process's stats.round_trips,
 *       wakeups_pubsub, wakeups_poll, wakeups_subscribe and renewal_calls during
 *       the call (meaningful when one thread at a time works), ms the call's
 *       duration and fence the token after an acquisition ("none" without).
 *       Prints "ready" first.
 *
 *   contend NAME --threads=N [--hold-us=U] [--iters=I | --duration-ms=D]
 *           [--log=KEY --host=H --port=P] [--out=FILE] [--nonfair]
 *       N threads lock, hold U microseconds, unlock, without pause, I times
 *       each or for D ms.  Prints "ready", starts at a "go" line, prints
 *       "acquired-all ms=T" once every thread has acquired (T ms after
 *       "go"), and ends with "done acquisitions=.. errors=.. contended=..
 *       pubsub=.. poll=.. sub=.. renewals=.. rcalls=.. rrounds=.. lost=.."
 *       (rcalls, rrounds: the watchdog's renewal calls and round trips).
 *       With --log, every hold pushes two records onto
 *       the Redis list KEY, each written by one script so it is one moment
 *       of the lock's state:
 *         "A <pid>:<t> <owner-mark, or <field>|<its value> without one> <our-token>
 *          <token-counter> <nfields> <fields...>
 *          <qlen> <member ticket>..."
 *       right after the acquisition, and the same with "R" right before the
 *       release.  With --out, each hold is a line "t acq_ns rel_ns fence"
 *       (CLOCK_MONOTONIC) in FILE. */
#include <hiredis/hiredis.h>
#include <rmutex.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "child_util.h"

namespace {

using namespace rmtc;

rmutex_stats_t stats_now()
{
    rmutex_stats_t s;
    memset(&s, 0, sizeof s);
    rmutex_stats(&s, sizeof s);
    return s;
}

std::string no_spaces(std::string s)
{
    for (auto &c : s)
        if (c == ' ' || c == '\n')
            c = '_';
    return s;
}

/* ---- threads --------------------------------------------------------- */

struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::vector<std::string>> cmds;
    std::thread t;
};

rmutex_t g_m;
rcond_t g_c;

/* CLOCK_REALTIME now plus the command's MS argument (c[2]). */
struct timespec realtime_after(const std::vector<std::string> &c)
{
    long msec = c.size() > 2 ? atol(c[2].c_str()) : 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ns = static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec + msec * 1000000LL;
    ts.tv_sec = ns / 1000000000LL;
    ts.tv_nsec = ns % 1000000000LL;
    return ts;
}

void run_command(int idx, const std::vector<std::string> &c)
{
    const std::string &verb = c[0];
    rmutex_stats_t s0 = stats_now();
    auto t0 = std::chrono::steady_clock::now();
    int rc;
    if (verb == "lock") {
        rc = rmutex_lock(&g_m);
    } else if (verb == "trylock") {
        rc = rmutex_trylock(&g_m);
    } else if (verb == "timedlock") {
        struct timespec ts = realtime_after(c);
        rc = rmutex_timedlock(&g_m, &ts);
    } else if (verb == "condwait") {
        struct timespec ts = realtime_after(c);
        rc = rmutex_lock(&g_m);
        if (!rc) {
            rc = rcond_timedwait(&g_c, &g_m, &ts);
            rmutex_unlock(&g_m);
        }
    } else if (verb == "unlock") {
        rc = rmutex_unlock(&g_m);
    } else if (verb == "consistent") {
        rc = rmutex_consistent(&g_m);
    } else {
        say("error unknown verb " + verb);
        return;
    }
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    std::string detail = rc ? no_spaces(rmutex_detail()) : "";
    rmutex_stats_t s1 = stats_now();
    say(verb + " t=" + std::to_string(idx) + " rc=" + std::to_string(rc) + " fence=" + fence_of(&g_m) +
        " rt=" + std::to_string(s1.round_trips - s0.round_trips) +
        " pubsub=" + std::to_string(s1.wakeups_pubsub - s0.wakeups_pubsub) +
        " poll=" + std::to_string(s1.wakeups_poll - s0.wakeups_poll) +
        " sub=" + std::to_string(s1.wakeups_subscribe - s0.wakeups_subscribe) +
        " rcalls=" + std::to_string(s1.renewal_calls - s0.renewal_calls) +
        " ms=" + std::to_string(took) + " detail=" + detail);
}

int cmd_threads(const char *name, int argc, char **argv)
{
    if (!init_from_args(&g_m, name, argc, argv, true))
        return 2;
    if (rcond_init(&g_c, (std::string(name) + ":cond").c_str(), nullptr))
        return 2;
    std::map<int, std::unique_ptr<Worker>> workers;
    say("ready pid=" + std::to_string(getpid()));
    std::string line;
    while (read_line(&line)) {
        auto w = split(line);
        if (w.empty())
            continue;
        if (w[0] == "exit")
            exit(0);
        if (w[0] == "clock") {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            say("clock realtime=" + std::to_string(ts.tv_sec));
            continue;
        }
        if (w.size() < 2) {
            say("error usage");
            continue;
        }
        int idx = atoi(w[1].c_str());
        auto &wk = workers[idx];
        if (!wk) {
            wk = std::make_unique<Worker>();
            Worker *p = wk.get();
            p->t = std::thread([p, idx] {
                for (;;) {
                    std::vector<std::string> c;
                    {
                        std::unique_lock<std::mutex> g(p->mu);
                        p->cv.wait(g, [p] { return !p->cmds.empty(); });
                        c = p->cmds.front();
                        p->cmds.pop_front();
                    }
                    run_command(idx, c);
                }
            });
            p->t.detach();
        }
        std::lock_guard<std::mutex> g(wk->mu);
        wk->cmds.push_back(w);
        wk->cv.notify_all();
    }
    exit(0); /* the parent died */
}

/* ---- contend ----------------------------------------------------------- */

const char *kLogScript =
    "local f = redis.call('hkeys', KEYS[2]) "
    /* A hold taken with nobody queued has no mark: its field's value names
     * the acquisition, so "<owner>|<acquisition>" reads the same. */
    "local mark = redis.call('get', KEYS[1]) or "
    "  (#f == 1 and f[1] .. '|' .. redis.call('hget', KEYS[2], f[1])) or '-' "
    "local q = redis.call('zrange', KEYS[3], 0, -1, 'withscores') "
    "local t = redis.call('get', KEYS[5]) or '0' "
    "local s = ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. mark .. ' ' .. ARGV[3] .. ' ' .. t .. ' ' .. #f "
    "for _, x in ipairs(f) do s = s .. ' ' .. x end "
    "s = s .. ' ' .. (#q / 2) "
    "for _, x in ipairs(q) do s = s .. ' ' .. x end "
    "redis.call('rpush', KEYS[4], s) "
    "return 1";

std::string derived(const char *prefix, const std::string &name)
{
    bool tagged = name.find('{') != std::string::npos;
    return std::string(prefix) + ":" + (tagged ? name : "{" + name + "}");
}

long long now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

struct Hold {
    int t;
    long long acq, rel;
    unsigned long long fence;
};

int cmd_contend(const char *name_c, int argc, char **argv)
{
    std::string name = name_c;
    int threads = atoi(opt(argc, argv, "--threads", "1").c_str());
    long hold_us = atol(opt(argc, argv, "--hold-us", "0").c_str());
    long iters = atol(opt(argc, argv, "--iters", "0").c_str());
    long duration_ms = atol(opt(argc, argv, "--duration-ms", "0").c_str());
    std::string log = opt(argc, argv, "--log", "");
    std::string host = opt(argc, argv, "--host", "127.0.0.1");
    int port = atoi(opt(argc, argv, "--port", "6379").c_str());
    std::string out = opt(argc, argv, "--out", "");
    std::string owner_key = derived("rmutex_owner", name), queue_key = derived("rmutex_fair_queue", name),
                token_key = derived("redisson_lock_token", name);

    if (!init_from_args(&g_m, name_c, argc, argv, true))
        return 2;
    std::atomic<long> errors{0}, acquisitions{0};
    std::atomic<int> first_holds{0};
    long long go_ns = 0;
    std::vector<std::vector<Hold>> holds(static_cast<size_t>(threads));
    std::mutex go_mu;
    std::condition_variable go_cv;
    bool go = false;
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++) {
        ts.emplace_back([&, t] {
            redisContext *c = nullptr;
            if (!log.empty()) {
                struct timeval tv = {10, 0};
                c = redisConnectWithTimeout(host.c_str(), port, tv);
                if (!c || c->err) {
                    errors++;
                    say("error redis connect");
                    return;
                }
            }
            {
                std::unique_lock<std::mutex> g(go_mu);
                go_cv.wait(g, [&] { return go; });
            }
            std::string me = std::to_string(getpid()) + ":" + std::to_string(t);
            long long end = duration_ms ? now_ns() + duration_ms * 1000000LL : 0;
            auto record = [&](const char *what, unsigned long long fence) {
                auto *r = static_cast<redisReply *>(redisCommand(
                    c, "EVAL %s 5 %s %s %s %s %s %s %s %llu", kLogScript, owner_key.c_str(), name.c_str(),
                    queue_key.c_str(), log.c_str(), token_key.c_str(), what, me.c_str(), fence));
                if (!r || r->type == REDIS_REPLY_ERROR) {
                    errors++;
                    say(std::string("error log ") + (r && r->str ? r->str : "no reply"));
                }
                if (r)
                    freeReplyObject(r);
            };
            bool acquired = false;
            for (long i = 0; end ? now_ns() < end : i < iters; i++) {
                int rc = rmutex_lock(&g_m);
                if (rc != 0) {
                    errors++;
                    say("error lock rc=" + std::to_string(rc) + " detail=" + no_spaces(rmutex_detail()));
                    continue;
                }
                Hold h;
                h.t = t;
                h.acq = now_ns();
                uint64_t f = 0;
                if (rmutex_fence(&g_m, &f) != 0)
                    errors++;
                h.fence = f;
                acquisitions++;
                if (!acquired) {
                    acquired = true;
                    if (++first_holds == threads)
                        say("acquired-all ms=" + std::to_string((h.acq - go_ns) / 1000000));
                }
                if (c)
                    record("A", h.fence);
                if (hold_us > 0)
                    std::this_thread::sleep_for(std::chrono::microseconds(hold_us));
                if (c)
                    record("R", h.fence);
                h.rel = now_ns();
                rc = rmutex_unlock(&g_m);
                if (rc != 0) {
                    errors++;
                    say("error unlock rc=" + std::to_string(rc) + " detail=" + no_spaces(rmutex_detail()));
                }
                holds[static_cast<size_t>(t)].push_back(h);
            }
            if (c)
                redisFree(c);
        });
    }
    say("ready pid=" + std::to_string(getpid()));
    std::string line;
    while (read_line(&line) && line != "go") {
    }
    {
        std::lock_guard<std::mutex> g(go_mu);
        go_ns = now_ns();
        go = true;
        go_cv.notify_all();
    }
    for (auto &t : ts)
        t.join();
    if (!out.empty()) {
        FILE *f = fopen(out.c_str(), "w");
        if (!f) {
            errors++;
        } else {
            for (auto &v : holds)
                for (auto &h : v)
                    fprintf(f, "%d %lld %lld %llu\n", h.t, h.acq, h.rel, h.fence);
            fclose(f);
        }
    }
    rmutex_stats_t s = stats_now();
    say("done acquisitions=" + std::to_string(acquisitions.load()) + " errors=" + std::to_string(errors.load()) +
        " contended=" + std::to_string(s.contended) + " pubsub=" + std::to_string(s.wakeups_pubsub) +
        " poll=" + std::to_string(s.wakeups_poll) + " sub=" + std::to_string(s.wakeups_subscribe) +
        " renewals=" + std::to_string(s.renewals) + " rcalls=" + std::to_string(s.renewal_calls) +
        " rrounds=" + std::to_string(s.renewal_rounds) + " lost=" + std::to_string(s.locks_lost));
    std::string rest;
    while (read_line(&rest) && rest != "exit") {
    }
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "threads") == 0)
        return cmd_threads(argv[2], argc, argv);
    if (argc >= 3 && strcmp(argv[1], "contend") == 0)
        return cmd_contend(argv[2], argc, argv);
    say("error usage: threads|contend NAME ...");
    return 2;
}
