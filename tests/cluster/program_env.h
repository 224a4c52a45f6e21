/* program_env.h -- servers started once for a whole test program (a
 * cluster, a Sentinel set: seconds to start, so not once per test), and
 * lock names unique to the running test. */
#ifndef RMUTEX_TEST_PROGRAM_ENV_H
#define RMUTEX_TEST_PROGRAM_ENV_H

#include "harness.h"

#include <functional>
#include <iostream>
#include <sys/wait.h>
#include <unistd.h>

namespace rmt {

/* A GoogleTest environment that creates a T, starts it and publishes it in
 * *where for the program's tests; deletes it at the end. */
template <class T> class ProgramServers : public ::testing::Environment {
  public:
    ProgramServers(T **where, std::function<bool(T &)> start, std::string what)
        : where_(where), start_(std::move(start)), what_(std::move(what)) {}
    void SetUp() override
    {
        *where_ = new T;
        auto t0 = Clock::now();
        ASSERT_TRUE(start_(**where_)) << what_ << " did not come up";
        std::cerr << "[servers] " << what_ << " ready in " << elapsed_ms(t0) << " ms\n";
    }
    void TearDown() override
    {
        delete *where_;
        *where_ = nullptr;
    }

  private:
    T **where_;
    std::function<bool(T &)> start_;
    std::string what_;
};

/* "rmt:<test>:<pid>:<suffix>", a lock name of the running test's own. */
inline std::string test_lock_name(const std::string &suffix)
{
    const auto *t = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string("rmt:") + t->name() + ":" + std::to_string(getpid()) + ":" + suffix;
}

/* Lock and unlock name, fork, and have the child trylock and unlock it
 * without any re-initialisation; its exit status (the calls' result). */
inline int fork_and_lock_in_child(const std::string &name)
{
    rmutex_t m;
    if (rmutex_init(&m, name.c_str(), nullptr) || rmutex_lock(&m) || rmutex_unlock(&m)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        /* The parent's holds, connections and threads are not the child's. */
        int r = rmutex_trylock(&m);
        if (!r) r = rmutex_unlock(&m);
        _exit(r);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    int parent = rmutex_trylock(&m);
    if (!parent) parent = rmutex_unlock(&m);
    rmutex_destroy(&m);
    return WEXITSTATUS(st) ? WEXITSTATUS(st) : parent;
}

} // namespace rmt

#endif
