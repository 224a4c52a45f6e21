/* threads.h -- threads of the test process that call rmutex (part of
 * harness.h): Async runs a call on a thread of its own and remembers its
 * result and when it returned; HolderThread holds a mutex until told to
 * let go, RwHolder a read-write lock (for reading or writing).  A thread still blocked at the end of a (failed) test ends the
 * process rather than hang it until ctest's timeout. */
#ifndef RMUTEX_TEST_HARNESS_THREADS_H
#define RMUTEX_TEST_HARNESS_THREADS_H

#include "timing.h"

#include <rmutex.h>

#include <functional>
#include <memory>

namespace rmt {

/* Runs fn on its own thread right away; remembers its result and when it
 * returned.  The destructor joins. */
class Async {
  public:
    explicit Async(std::function<int()> fn);
    ~Async();
    Async(const Async &) = delete;
    Async &operator=(const Async &) = delete;
    bool done() const;
    /* Wait up to scaled(bound) for fn to return. */
    bool wait(ms bound) const;
    int rc() const; /* fn's result; INT32_MIN while it runs */
    Clock::time_point finished_at() const;
    void join();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/* A thread of this process that locks m, holds it until release(), then
 * unlocks it. */
class HolderThread {
  public:
    explicit HolderThread(rmutex_t *m);
    ~HolderThread();
    HolderThread(const HolderThread &) = delete;
    HolderThread &operator=(const HolderThread &) = delete;
    /* The lock's result once it returned (within scaled(bound)), else INT32_MIN. */
    int wait_locked(ms bound);
    /* Unlock on the holder thread; returns rmutex_unlock's result. */
    int release();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/* A thread of this process that takes a read-write lock for reading or
 * writing and holds it until release(), then unlocks it on its own
 * thread. */
class RwHolder {
  public:
    RwHolder(rrwlock_t *l, bool write);
    ~RwHolder();
    RwHolder(const RwHolder &) = delete;
    RwHolder &operator=(const RwHolder &) = delete;
    /* The lock call's answer once it came (INT32_MIN if not within scaled(bound)). */
    int taken(ms bound);
    bool done() const;
    Clock::time_point at() const; /* when the lock call returned */
    /* Unlock on the holder thread (if it got the lock): the unlock's answer. */
    int release();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace rmt

#endif
