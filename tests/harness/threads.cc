/* threads.cc -- threads of the test process that call rmutex.  See
 * threads.h. */
#include "threads.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
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

struct RwHolder::Impl {
    rrwlock_t *l;
    bool write;
    std::atomic<int> got{INT32_MIN}, unlocked{INT32_MIN};
    std::atomic<bool> go{false};
    std::atomic<int64_t> at{0};
    std::thread t;
    void run()
    {
        int r = write ? rrwlock_wrlock(l) : rrwlock_rdlock(l);
        at = Clock::now().time_since_epoch().count();
        got = r;
        while (!go) std::this_thread::sleep_for(ms(2));
        unlocked = r == 0 || r == EOWNERDEAD ? rrwlock_unlock(l) : 0;
    }
};

RwHolder::RwHolder(rrwlock_t *l, bool write) : impl_(new Impl)
{
    impl_->l = l;
    impl_->write = write;
    impl_->t = std::thread([i = impl_.get()] { i->run(); });
}

RwHolder::~RwHolder()
{
    release();
    impl_->t.join();
}

int RwHolder::taken(ms bound)
{
    wait_until([&] { return impl_->got.load() != INT32_MIN; }, bound);
    return impl_->got.load();
}

bool RwHolder::done() const { return impl_->got.load() != INT32_MIN; }

Clock::time_point RwHolder::at() const { return Clock::time_point(Clock::duration(impl_->at.load())); }

int RwHolder::release()
{
    impl_->go = true;
    wait_until([&] { return impl_->unlocked.load() != INT32_MIN; }, ms(5000));
    return impl_->unlocked.load();
}

} // namespace rmt
