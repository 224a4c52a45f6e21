/* child.cc -- rmutex_test_child, the other process of the cross-process tests.
 *
 * It never calls rmutex_configure(): the library finds the server through
 * RMUTEX_URL in the environment, which is how the parent points it at the
 * test's redis-server.  Results go to stdout, one line each, flushed at once;
 * commands come from stdin, one line each.
 *
 *   hold NAME [--robust] [--fair] [--type=N] [--lease=MS] [--hold-ms=MS]
 *       Lock NAME and print "held rc=<rc> fence=<token>" (and "lost NAME"
 *       whenever the lost-lock callback runs).  With --hold-ms,
 *       unlock after that many ms; otherwise obey stdin:
 *         "unlock" -> unlock, print "unlocked rc=<rc>"
 *         "lock"   -> lock again, print "held rc=<rc> fence=<token>"
 *         "exit"   -> exit(0) while still holding (a normal exit)
 *       and at end of stdin (the parent died) exit(0).  Crash tests kill it
 *       with SIGKILL while it waits.
 *   trylock NAME [--robust]
 *       Print "trylock rc=<rc>", unlock if it got it, exit.
 *   rw NAME r|w [--robust] [--lease=MS] [--prefer-reader] [--hold-ms=MS]
 *       The read-write lock NAME for reading (r) or writing (w), as hold.
 *   chain FIRST SECOND [hold's options, --detect]
 *       Lock FIRST, print "first rc=<rc> pid=<pid>"; at a "go" line lock
 *       SECOND (same options) and print "second rc=<rc> detail=<detail>";
 *       "exit" or end of stdin: exit(0).  Two of them make a deadlock.
 *   churn NAME THREADS MS HOLD_MS [hold's options]
 *       THREADS threads lock, hold HOLD_MS ms, unlock NAME for MS ms; print
 *       "ready" first and "done acquisitions=<n> errors=<n>" at the end.
 *   forklock NAME
 *       In this new process: lock NAME -- its first connections, and the
 *       watchdog's thread starting to dial its own -- and fork() 0-2 ms
 *       later (by the pid: somewhere in that dial);
 *       the forked child locks NAME-child (its own first connection) and
 *       exits with that rc.  Print "forklock rc=<rc> child=<rc>", or
 *       child=hung when it has not exited within 5 s (then it is killed).
 *   counter NAME HOST PORT KEY THREADS ITERS [--nolock] [--password=PW]
 *       THREADS threads each do ITERS times, under NAME (unless --nolock):
 *       GET KEY -> sched_yield() -> SET KEY value+1, on their own hiredis
 *       connection.  Then print "done errors=<n> contended=<n>
 *       acquisitions=<n> wakeups_pubsub=<n> wakeups_poll=<n>".
 */
#include <hiredis/hiredis.h>
#include <rmutex.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "child_util.h"

namespace {

using namespace rmtc;

int cmd_hold(const char *name, int argc, char **argv)
{
    static rmutex_t m;
    if (!init_from_args(&m, name, argc, argv, false))
        return 2;
    rmutex_set_lost_callback([](rmutex_t *, const char *lost, void *) { say(std::string("lost ") + lost); },
                             nullptr);
    int rc = rmutex_lock(&m);
    if (rc == EOWNERDEAD && flag(argc, argv, "--consistent"))
        rmutex_consistent(&m);
    say("held rc=" + std::to_string(rc) + " fence=" + fence_of(&m) + " pid=" + std::to_string(getpid()));
    std::string hold_ms = opt(argc, argv, "--hold-ms", "");
    if (!hold_ms.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(atoi(hold_ms.c_str())));
        say("unlocked rc=" + std::to_string(rmutex_unlock(&m)));
        return 0;
    }
    std::string line;
    while (read_line(&line)) {
        if (line == "unlock") {
            say("unlocked rc=" + std::to_string(rmutex_unlock(&m)));
        } else if (line == "lock") {
            rc = rmutex_lock(&m);
            say("held rc=" + std::to_string(rc) + " fence=" + fence_of(&m));
        } else if (line == "exit") {
            exit(0);
        }
    }
    exit(0);
}

int cmd_trylock(const char *name, int argc, char **argv)
{
    rmutex_t m;
    if (!init_from_args(&m, name, argc, argv, false))
        return 2;
    int rc = rmutex_trylock(&m);
    say("trylock rc=" + std::to_string(rc));
    if (rc == 0 || rc == EOWNERDEAD)
        rmutex_unlock(&m);
    return 0;
}

int cmd_forklock(const char *name)
{
    rmutex_t m, own;
    std::string child_name = std::string(name) + "-child";
    if (rmutex_init(&m, name, nullptr) || rmutex_init(&own, child_name.c_str(), nullptr))
        return 2;
    int rc = rmutex_lock(&m);
    /* Somewhere in the watchdog's first dial, which starts now: a delay of
     * 0-2 ms, different in each process. */
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<unsigned>(getpid()) * 7919u % 2000u));
    pid_t pid = fork();
    if (pid == 0) {
        int r = rmutex_lock(&own);
        if (!r) r = rmutex_unlock(&own);
        _exit(r);
    }
    std::string child = "fork-failed";
    if (pid > 0) {
        child = "hung";
        int status = 0;
        for (int i = 0; i < 500; i++) {
            if (waitpid(pid, &status, WNOHANG) == pid) {
                child = WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : "killed";
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (child == "hung") {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
    }
    say("forklock rc=" + std::to_string(rc) + " child=" + child);
    if (!rc) rmutex_unlock(&m);
    return 0;
}

int cmd_counter(int argc, char **argv)
{
    if (argc < 8) {
        say("error usage");
        return 2;
    }
    const char *name = argv[2];
    std::string host = argv[3];
    int port = atoi(argv[4]);
    std::string key = argv[5];
    int threads = atoi(argv[6]);
    int iters = atoi(argv[7]);
    bool nolock = flag(argc, argv, "--nolock");
    std::string password = opt(argc, argv, "--password", "");

    static rmutex_t m;
    if (!init_from_args(&m, name, argc, argv, false))
        return 2;
    std::atomic<long> errors{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++) {
        ts.emplace_back([&] {
            struct timeval tv = {10, 0};
            redisContext *c = redisConnectWithTimeout(host.c_str(), port, tv);
            if (!c || c->err) {
                errors++;
                return;
            }
            if (!password.empty())
                freeReplyObject(redisCommand(c, "AUTH %s", password.c_str()));
            for (int i = 0; i < iters; i++) {
                if (!nolock) {
                    int rc = rmutex_lock(&m);
                    if (rc != 0) {
                        errors++;
                        continue;
                    }
                }
                auto *r = static_cast<redisReply *>(redisCommand(c, "GET %s", key.c_str()));
                long v = r && r->type == REDIS_REPLY_STRING ? atol(r->str) : 0;
                if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL))
                    errors++;
                if (r)
                    freeReplyObject(r);
                sched_yield();
                r = static_cast<redisReply *>(redisCommand(c, "SET %s %ld", key.c_str(), v + 1));
                if (!r || r->type == REDIS_REPLY_ERROR)
                    errors++;
                if (r)
                    freeReplyObject(r);
                if (!nolock && rmutex_unlock(&m) != 0)
                    errors++;
            }
            redisFree(c);
        });
    }
    for (auto &t : ts)
        t.join();
    rmutex_stats_t s;
    memset(&s, 0, sizeof s);
    rmutex_stats(&s, sizeof s);
    say("done errors=" + std::to_string(errors.load()) + " contended=" + std::to_string(s.contended) +
        " acquisitions=" + std::to_string(s.acquisitions) + " wakeups_pubsub=" + std::to_string(s.wakeups_pubsub) +
        " wakeups_poll=" + std::to_string(s.wakeups_poll));
    return 0;
}

/* rw NAME r|w [--robust] [--lease=MS] [--prefer-reader] [--hold-ms=MS]: take
 * the read-write lock NAME for reading or writing, print "held rc=<rc>
 * fence=<token>" (the token for a writer, "none" for a reader), then as
 * hold. */
int cmd_rw(const char *name, int argc, char **argv)
{
    static rrwlock_t l;
    rrwlockattr_t a;
    rrwlockattr_init(&a);
    rrwlockattr_setrobust(&a, flag(argc, argv, "--robust") ? RMUTEX_ROBUST : RMUTEX_STALLED);
    rrwlockattr_setlease(&a, strtoul(opt(argc, argv, "--lease", "0").c_str(), nullptr, 10));
    if (flag(argc, argv, "--prefer-reader")) rrwlockattr_setkind_np(&a, RRWLOCK_PREFER_READER);
    int rc = rrwlock_init(&l, name, &a);
    rrwlockattr_destroy(&a);
    if (rc != 0) {
        say("error init rc=" + std::to_string(rc) + " detail=" + rmutex_detail());
        return 2;
    }
    rmutex_set_lost_callback([](rmutex_t *, const char *lost, void *) { say(std::string("lost ") + lost); },
                             nullptr);
    bool writer = argc > 3 && std::string(argv[3]) == "w";
    auto take = [&] {
        int r = writer ? rrwlock_wrlock(&l) : rrwlock_rdlock(&l);
        uint64_t t = 0;
        std::string fence = writer && (r == 0 || r == EOWNERDEAD) && rrwlock_fence(&l, &t) == 0
                                ? std::to_string(t) : "none";
        say("held rc=" + std::to_string(r) + " fence=" + fence + " pid=" + std::to_string(getpid()));
    };
    take();
    std::string hold_ms = opt(argc, argv, "--hold-ms", "");
    if (!hold_ms.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(atoi(hold_ms.c_str())));
        say("unlocked rc=" + std::to_string(rrwlock_unlock(&l)));
        return 0;
    }
    std::string line;
    while (read_line(&line)) {
        if (line == "unlock") say("unlocked rc=" + std::to_string(rrwlock_unlock(&l)));
        else if (line == "lock") take();
        else if (line == "exit") exit(0);
    }
    exit(0);
}

int cmd_chain(const char *first, const char *second, int argc, char **argv)
{
    static rmutex_t a, b;
    if (!init_from_args(&a, first, argc, argv, false) || !init_from_args(&b, second, argc, argv, false))
        return 2;
    say("first rc=" + std::to_string(rmutex_lock(&a)) + " pid=" + std::to_string(getpid()));
    std::string line;
    while (read_line(&line)) {
        if (line == "go") {
            int rc = rmutex_lock(&b);
            say("second rc=" + std::to_string(rc) + " detail=" + rmutex_detail());
        } else if (line == "exit") {
            exit(0);
        }
    }
    exit(0);
}

int cmd_churn(const char *name, int argc, char **argv)
{
    static rmutex_t m;
    if (!init_from_args(&m, name, argc, argv, false)) return 2;
    int threads = atoi(argv[3]), hold_ms = atoi(argv[5]);
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(atoi(argv[4]));
    std::atomic<long> acquisitions{ 0 }, errors{ 0 };
    say("ready");
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++)
        ts.emplace_back([&] {
            while (std::chrono::steady_clock::now() < until) {
                if (rmutex_lock(&m) != 0) {
                    errors++;
                    continue;
                }
                acquisitions++;
                std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
                if (rmutex_unlock(&m) != 0) errors++;
            }
        });
    for (auto &t : ts) t.join();
    say("done acquisitions=" + std::to_string(acquisitions.load()) + " errors=" + std::to_string(errors.load()));
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "hold") == 0)
        return cmd_hold(argv[2], argc, argv);
    if (argc >= 3 && strcmp(argv[1], "trylock") == 0)
        return cmd_trylock(argv[2], argc, argv);
    if (argc >= 3 && strcmp(argv[1], "forklock") == 0)
        return cmd_forklock(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "counter") == 0)
        return cmd_counter(argc, argv);
    if (argc >= 4 && strcmp(argv[1], "rw") == 0)
        return cmd_rw(argv[2], argc, argv);
    if (argc >= 4 && strcmp(argv[1], "chain") == 0)
        return cmd_chain(argv[2], argv[3], argc, argv);
    if (argc >= 6 && strcmp(argv[1], "churn") == 0)
        return cmd_churn(argv[2], argc, argv);
    say("error usage: hold|trylock|counter ...");
    return 2;
}
