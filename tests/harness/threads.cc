/* threads.cc -- threads of the test process that call rmutex.  See
 * threads.h. */
#include "threads.h"

#include <unistd.h>

#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <thread>

namespace rmt {

struct Async::Impl {
    mutable std::mutex mu;
    mutable std::condition_variable cv;
    bool done = false;
    int rc = INT32_MIN;
    Clock::time_point at;
    std::thread t;
};

Async::Async(std::function<int()> fn) : impl_(new Impl)
{
    Impl *i = impl_.get();
    i->t = std::thread([i, fn = std::move(fn)] {
        int rc = fn();
        std::lock_guard<std::mutex> g(i->mu);
        i->rc = rc;
        i->at = Clock::now();
        i->done = true;
        i->cv.notify_all();
    });
}

Async::~Async()
{
    /* A thread still blocked in an rmutex call at the end of a test (which
     * has failed by then) would hang the process until ctest's timeout, or
     * outlive the stack it works on: end the process instead. */
    if (!wait(ms(20000))) {
        fprintf(stderr, "[harness] a thread is still blocked in an rmutex call; exiting\n");
        fflush(stderr);
        _exit(1);
    }
    join();
}

void Async::join()
{
    if (impl_->t.joinable())
        impl_->t.join();
}

bool Async::done() const
{
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->done;
}

bool Async::wait(ms bound) const
{
    std::unique_lock<std::mutex> g(impl_->mu);
    return impl_->cv.wait_for(g, scaled(bound), [this] { return impl_->done; });
}

int Async::rc() const
{
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->rc;
}

Clock::time_point Async::finished_at() const
{
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->at;
}

struct HolderThread::Impl {
    std::mutex mu;
    std::condition_variable cv;
    int lock_rc = INT32_MIN, unlock_rc = INT32_MIN;
    bool release = false;
    std::thread t;
};

HolderThread::HolderThread(rmutex_t *m) : impl_(new Impl)
{
    Impl *i = impl_.get();
    i->t = std::thread([i, m] {
        int rc = rmutex_lock(m);
        std::unique_lock<std::mutex> g(i->mu);
        i->lock_rc = rc;
        i->cv.notify_all();
        i->cv.wait(g, [i] { return i->release; });
        g.unlock();
        int u = rmutex_unlock(m);
        g.lock();
        i->unlock_rc = u;
    });
}

HolderThread::~HolderThread()
{
    if (!impl_->t.joinable())
        return;
    if (wait_locked(ms(20000)) == INT32_MIN) {
        fprintf(stderr, "[harness] a holder thread is still blocked in rmutex_lock; exiting\n");
        fflush(stderr);
        _exit(1);
    }
    release();
}

int HolderThread::wait_locked(ms bound)
{
    std::unique_lock<std::mutex> g(impl_->mu);
    impl_->cv.wait_for(g, scaled(bound), [this] { return impl_->lock_rc != INT32_MIN; });
    return impl_->lock_rc;
}

int HolderThread::release()
{
    {
        std::lock_guard<std::mutex> g(impl_->mu);
        impl_->release = true;
        impl_->cv.notify_all();
    }
    impl_->t.join();
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->unlock_rc;
}

} // namespace rmt
