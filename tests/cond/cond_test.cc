/* cond_test.cc -- condition variables (rcond_*) between threads of one
 * process: arguments, timed waits, signal and broadcast, the ticket rule,
 * the mutex a condition is bound to, the mutex's kinds, destroy, the static
 * initializer, cancellation.  (The
 * tests across processes are cond_procs_test.cc: ThreadSanitizer cannot
 * follow a forked child that starts threads.) */
#include <pthread.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "cond_util.h"

namespace {

using namespace rmt;
using namespace rmt::cond;
/* ---- attributes and arguments ------------------------------------------ */

TEST(CondAttr, ClockIsRealtimeByDefaultAndMonotonicOnRequest)
{
    rcondattr_t a;
    clockid_t clock = -1;
    ASSERT_RC(0, rcondattr_init(&a));
    EXPECT_RC(0, rcondattr_getclock(&a, &clock));
    EXPECT_EQ(CLOCK_REALTIME, clock);
    EXPECT_RC(0, rcondattr_setclock(&a, CLOCK_MONOTONIC));
    EXPECT_RC(0, rcondattr_getclock(&a, &clock));
    EXPECT_EQ(CLOCK_MONOTONIC, clock);
    EXPECT_RC(EINVAL, rcondattr_setclock(&a, CLOCK_PROCESS_CPUTIME_ID));
    EXPECT_RC(EINVAL, rcondattr_getclock(&a, nullptr));
    EXPECT_RC(0, rcondattr_destroy(&a));
    EXPECT_RC(EINVAL, rcondattr_setclock(&a, CLOCK_REALTIME)) << "a destroyed attr";
    EXPECT_RC(EINVAL, rcondattr_init(nullptr));
    rcondattr_t junk;
    memset(&junk, 0x5a, sizeof junk);
    rcond_t c;
    EXPECT_RC(EINVAL, rcond_init(&c, "x", &junk)) << "an attr never initialized";
}

TEST_F(Cond, BadArgumentsAreEinvalAndTouchNothing)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    rcond_t *c = make_cond();
    rcond_t zeroed;
    memset(&zeroed, 0, sizeof zeroed);
    EXPECT_RC(EINVAL, rcond_init(nullptr, "x", nullptr));
    rcond_t bad;
    EXPECT_RC(EINVAL, rcond_init(&bad, nullptr, nullptr));
    EXPECT_RC(EINVAL, rcond_init(&bad, "", nullptr));
    EXPECT_RC(EINVAL, rcond_init(&bad, "a{b", nullptr)) << "braces that split the keys";
    EXPECT_RC(EINVAL, rcond_init(&bad, std::string(RMUTEX_NAME_MAX + 1, 'n').c_str(), nullptr));
    EXPECT_RC(EINVAL, rcond_signal(nullptr));
    EXPECT_RC(EINVAL, rcond_broadcast(&zeroed));
    EXPECT_RC(EINVAL, rcond_wait(nullptr, &m));
    EXPECT_RC(EINVAL, rcond_wait(c, nullptr));
    EXPECT_RC(EINVAL, rcond_destroy(&zeroed));

    ASSERT_RC(0, rmutex_lock(&m));
    struct timespec ts = abs_after(CLOCK_REALTIME, 1000);
    EXPECT_RC(EINVAL, rcond_timedwait(c, &m, nullptr));
    ts.tv_nsec = 1000000000;
    EXPECT_RC(EINVAL, rcond_timedwait(c, &m, &ts));
    ts.tv_nsec = -1;
    EXPECT_RC(EINVAL, rcond_clockwait(c, &m, CLOCK_MONOTONIC, &ts));
    ts = abs_after(CLOCK_MONOTONIC, 1000);
    EXPECT_RC(EINVAL, rcond_clockwait(c, &m, CLOCK_THREAD_CPUTIME_ID, &ts));
    unsigned n = 0;
    EXPECT_RC(0, rmutex_holdcount(&m, &n));
    EXPECT_EQ(1u, n) << "a refused wait let go of the mutex";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_TRUE(none_registered());
    EXPECT_EQ(0u, cond_waits());

    rcond_t d;
    ASSERT_RC(0, rcond_init(&d, cond_name("d").c_str(), nullptr));
    EXPECT_RC(0, rcond_destroy(&d));
    EXPECT_RC(EINVAL, rcond_signal(&d)) << "a destroyed condition";
    EXPECT_RC(EINVAL, rcond_destroy(&d));
}

TEST_F(Cond, WaitingWithoutHoldingTheMutexIsEperm)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    rcond_t *c = make_cond();
    EXPECT_RC(EPERM, rcond_wait(c, &m));
    struct timespec ts = abs_after(CLOCK_REALTIME, 100);
    EXPECT_RC(EPERM, rcond_timedwait(c, &m, &ts));
    HolderThread other(&m);
    ASSERT_EQ(0, other.wait_locked(ms(5000)));
    EXPECT_RC(EPERM, rcond_wait(c, &m)) << "held by another thread of this process";
    EXPECT_EQ(0, other.release());
    EXPECT_TRUE(none_registered());
}

TEST_F(Cond, SignalAndBroadcastWithNobodyWaitingLeaveNothingBehind)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    rcond_t *c = make_cond();
    EXPECT_RC(0, rcond_signal(c));
    EXPECT_RC(0, rcond_broadcast(c));
    EXPECT_FALSE(redis().exists("rmutex_cond:{" + cond_name("c") + "}"));
    /* A wait that starts now is not woken by them. */
    ASSERT_RC(0, rmutex_lock(&m));
    struct timespec ts = abs_after(CLOCK_REALTIME, 300);
    EXPECT_RC(ETIMEDOUT, rcond_timedwait(c, &m, &ts));
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(0u, stats().cond_signals - base_.cond_signals);
}

/* ---- timed waits --------------------------------------------------------- */

TEST_F(Cond, TimedWaitTimesOutWithTheMutexHeldAndNeverEarly)
{
    rmutex_t m;
    init_mutex(&m, lock_name(), RMUTEX_ERRORCHECK);
    rcondattr_t a;
    ASSERT_RC(0, rcondattr_init(&a));
    ASSERT_RC(0, rcondattr_setclock(&a, CLOCK_MONOTONIC));
    rcond_t *real = make_cond("real");
    rcond_t *mono = make_cond("mono", &a);
    ASSERT_RC(0, rmutex_lock(&m));
    for (int i = 0; i < 3; i++) {
        rcond_t *c = i == 1 ? mono : real;
        clockid_t clock = i == 1 ? CLOCK_MONOTONIC : CLOCK_REALTIME;
        struct timespec ts = abs_after(clock, 400);
        auto t0 = Clock::now();
        int r = i == 2 ? rcond_clockwait(c, &m, CLOCK_MONOTONIC, &(ts = abs_after(CLOCK_MONOTONIC, 400)))
                       : rcond_timedwait(c, &m, &ts);
        int64_t took = elapsed_ms(t0);
        EXPECT_RC(ETIMEDOUT, r) << "case " << i;
        EXPECT_TRUE(reached(i == 0 ? CLOCK_REALTIME : CLOCK_MONOTONIC, ts)) << "returned before the deadline, case " << i;
        EXPECT_GE(took, 395) << "case " << i;
        EXPECT_LT(took, scaled(ms(3000)).count()) << "case " << i;
        EXPECT_RC(EDEADLK, rmutex_lock(&m)) << "the mutex is not held after ETIMEDOUT, case " << i;
    }
    /* A deadline already past: ETIMEDOUT at once, the mutex never let go. */
    struct timespec past = abs_after(CLOCK_REALTIME, -1000);
    uint64_t acq = stats().acquisitions;
    EXPECT_RC(ETIMEDOUT, rcond_timedwait(real, &m, &past));
    past.tv_sec = -1;
    EXPECT_RC(ETIMEDOUT, rcond_timedwait(real, &m, &past));
    EXPECT_EQ(acq, stats().acquisitions) << "a past deadline released and retook the mutex";
    EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(0, registered("real"));
    EXPECT_EQ(0, registered("mono"));
}

/* ---- waking ---------------------------------------------------------------- */

TEST_F(Cond, SignalWakesOneWaiterAndBroadcastWakesEveryOne)
{
    Shared s;
    init_mutex(&s.m, lock_name());
    rcond_t *c = make_cond();
    std::atomic<int> woke{0};
    int round = 0;
    std::vector<std::unique_ptr<Async>> waiters;
    for (int i = 0; i < 4; i++)
        waiters.emplace_back(new Async([&] {
            int r = rmutex_lock(&s.m);
            if (r) return r;
            int seen = round;
            while (round == seen && r == 0) r = rcond_wait(c, &s.m);
            woke++;
            return r ? r : rmutex_unlock(&s.m);
        }));
    ASSERT_TRUE(wait_until([&] { return registered() == 4; }, ms(5000)));

    ASSERT_RC(0, rmutex_lock(&s.m));
    round = 1;
    ASSERT_RC(0, rmutex_unlock(&s.m));
    ASSERT_RC(0, rcond_signal(c));
    ASSERT_TRUE(wait_until([&] { return woke == 1; }, ms(3000)));
    EXPECT_FALSE(wait_until_unscaled([&] { return woke > 1; }, ms(kPollMs * 3)))
        << "one signal woke more than one waiter for good";
    /* The others re-waited (their predicate was true, so they left) --
     * round changed for everyone: the ones still waiting see it now. */
    ASSERT_RC(0, rcond_broadcast(c));
    ASSERT_TRUE(wait_until([&] { return woke == 4; }, ms(3000)));
    for (auto &w : waiters) {
        ASSERT_TRUE(w->wait(ms(3000)));
        EXPECT_RC(0, w->rc());
    }
    EXPECT_TRUE(none_registered());
    EXPECT_EQ(1u, stats().cond_broadcasts - base_.cond_broadcasts);
}

TEST_F(Cond, ASignalGivenUnderTheMutexIsNeverMissed)
{
    /* The waiter registers before it lets go of the mutex: a signal by a
     * thread that takes the mutex after that always finds it. */
    Shared s;
    init_mutex(&s.m, lock_name());
    rcond_t *c = make_cond();
    for (int i = 0; i < 20; i++) {
        Async waiter([&] {
            return wait_for(c, &s.m, [&] { return s.value == i + 1; });
        });
        ASSERT_TRUE(wait_until([&] { return registered() == 1; }, ms(5000))) << "round " << i;
        ASSERT_RC(0, rmutex_lock(&s.m));
        s.value = i + 1;
        ASSERT_RC(0, rcond_signal(c));
        ASSERT_RC(0, rmutex_unlock(&s.m));
        /* Well within the poll period: the message, not a poll, woke it. */
        ASSERT_TRUE(waiter.wait(ms(kPollMs - 100))) << "round " << i;
        EXPECT_RC(0, waiter.rc());
    }
    /* Woken by the signal's message, or by the re-check that follows the
     * confirmation of the waiter's subscription when the signal came first
     * (seen under TSan): never by the poll (the bound above). */
    EXPECT_GE(stats().wakeups_pubsub - base_.wakeups_pubsub +
                  (stats().wakeups_subscribe - base_.wakeups_subscribe), 20u);
}

TEST_F(Cond, AWaiterThatStartsAfterASignalReturnedIsNeverTheOneItWoke)
{
    Shared s;
    init_mutex(&s.m, lock_name());
    rcond_t *c = make_cond();
    for (int i = 0; i < 5; i++) {
        std::atomic<int> first_rc{INT32_MIN};
        Async first([&] {
            int r = rmutex_lock(&s.m);
            if (r) return r;
            struct timespec ts = abs_after(CLOCK_REALTIME, 5000);
            first_rc = rcond_timedwait(c, &s.m, &ts);
            return rmutex_unlock(&s.m);
        });
        ASSERT_TRUE(wait_until([&] { return registered() == 1; }, ms(5000)));
        ASSERT_RC(0, rcond_signal(c));
        /* After the signal returned: a second waiter. */
        ASSERT_RC(0, rmutex_lock(&s.m));
        struct timespec ts = abs_after(CLOCK_REALTIME, 600);
        int second = rcond_timedwait(c, &s.m, &ts);
        ASSERT_RC(0, rmutex_unlock(&s.m));
        EXPECT_RC(ETIMEDOUT, second) << "the signal woke a waiter that came after it, round " << i;
        ASSERT_TRUE(first.wait(ms(3000)));
        EXPECT_RC(0, first_rc.load()) << "round " << i;
    }
}

/* ---- the mutex a condition is bound to ---------------------------------------- */

TEST_F(Cond, AWaitWithAnotherMutexIsAcceptedOnceEveryWaiterIsUnblocked)
{
    /* The rebinding rule (cond_util.h) with 4 waiters in this process, 50
     * rounds (Cond::rebind_round): the other 3 are released by a broadcast
     * and are still taking m1 back when the first waits with m2. */
    Rebind rb;
    make_rebind(&rb);
    for (long long k = 1; k <= 50 && !HasFailure(); k++) {
        std::vector<std::unique_ptr<Async>> others;
        auto start = [&] {
            for (int i = 0; i < 3; i++)
                others.emplace_back(new Async([&, k] {
                    auto r = connect();
                    return wait_for_key(*r, rb.c, &rb.m1, rb.key, 2 * k);
                }));
        };
        auto done = [&] {
            for (auto &o : others) {
                if (!o->wait(ms(5000))) return false;
                EXPECT_RC(0, o->rc()) << "round " << k;
            }
            return true;
        };
        rebind_round(k, rb, 3, start, done);
    }
}

/* ---- the mutex's kinds ------------------------------------------------------- */

TEST_F(Cond, ARecursiveMutexGetsItsWholeCountBack)
{
    rmutex_t m;
    init_mutex(&m, lock_name(), RMUTEX_RECURSIVE);
    rcond_t *c = make_cond();
    for (int i = 0; i < 3; i++)
        ASSERT_RC(0, rmutex_lock(&m));
    Async other([&] {
        /* Gets in only if the wait let go of every level. */
        int r = rmutex_lock(&m);
        if (r) return r;
        r = rcond_signal(c);
        int u = rmutex_unlock(&m);
        return r ? r : u;
    });
    struct timespec ts = abs_after(CLOCK_REALTIME, 5000);
    EXPECT_RC(0, rcond_timedwait(c, &m, &ts));
    ASSERT_TRUE(other.wait(ms(3000)));
    EXPECT_RC(0, other.rc());
    unsigned n = 0;
    EXPECT_RC(0, rmutex_holdcount(&m, &n));
    EXPECT_EQ(3u, n);
    for (int i = 0; i < 3; i++)
        EXPECT_RC(0, rmutex_unlock(&m));
    EXPECT_RC(EPERM, rmutex_unlock(&m));
}

TEST_F(Cond, AFairMutexIsReenteredThroughItsQueue)
{
    rmutexattr_t a;
    ASSERT_RC(0, rmutexattr_init(&a));
    ASSERT_RC(0, rmutexattr_setfair(&a, 1));
    rmutex_t m;
    ASSERT_RC(0, rmutex_init(&m, lock_name().c_str(), &a));
    rcond_t *c = make_cond();
    int items = 0;
    std::atomic<int> got{0};
    std::vector<std::unique_ptr<Async>> consumers;
    for (int i = 0; i < 3; i++)
        consumers.emplace_back(new Async([&] {
            int r = rmutex_lock(&m);
            while (!r && items == 0) r = rcond_wait(c, &m);
            if (r) return r;
            items--;
            got++;
            return rmutex_unlock(&m);
        }));
    ASSERT_TRUE(wait_until([&] { return registered() == 3; }, ms(5000)));
    ASSERT_RC(0, rmutex_lock(&m));
    items = 3;
    ASSERT_RC(0, rcond_broadcast(c));
    ASSERT_RC(0, rmutex_unlock(&m));
    for (auto &w : consumers) {
        ASSERT_TRUE(w->wait(ms(5000)));
        EXPECT_RC(0, w->rc());
    }
    EXPECT_EQ(3, got.load());
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(Cond, DestroyIsEbusyWhileAThreadOfThisProcessWaits)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    rcond_t *c = make_cond();
    Async waiter([&] { return timed_wait_once(c, &m, 5000); });
    ASSERT_TRUE(wait_until([&] { return registered() == 1; }, ms(5000)));
    EXPECT_RC(EBUSY, rcond_destroy(c));
    EXPECT_RC(EBUSY, rmutex_destroy(&m)) << "a wait uses the mutex";
    ASSERT_RC(0, rcond_signal(c));
    ASSERT_TRUE(waiter.wait(ms(3000)));
    EXPECT_RC(0, waiter.rc());
}

TEST_F(Cond, TheStaticInitializerCreatesTheStateOnFirstUse)
{
    std::string name = cond_name("c");
    rcond_t c = RCOND_INITIALIZER(name.c_str());
    rmutex_t m;
    init_mutex(&m, lock_name());
    Async waiter([&] { return wait_for(&c, &m, [] { return true; }) ; });
    ASSERT_TRUE(waiter.wait(ms(3000)));
    int value = 0;
    Async waiter2([&] { return wait_for(&c, &m, [&] { return value == 1; }); });
    ASSERT_TRUE(wait_until([&] { return registered() == 1; }, ms(5000)));
    ASSERT_RC(0, rmutex_lock(&m));
    value = 1;
    ASSERT_RC(0, rcond_signal(&c));
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_TRUE(waiter2.wait(ms(3000)));
    EXPECT_RC(0, waiter2.rc());
    EXPECT_RC(0, rcond_destroy(&c));
}

/* ---- cancellation ----------------------------------------------------------------- */

struct CancelArg {
    CancelArg(rcond_t *cond, rmutex_t *mutex) : c(cond), m(mutex) {}
    rcond_t *c;
    rmutex_t *m;
    std::atomic<int> registered{0};
    std::atomic<unsigned> held_in_cleanup{99};
    std::atomic<int> unlock_in_cleanup{-1};
    std::atomic<int> returned{0}; /* waits that returned 0 (a signal used) */
};

void cleanup_check(void *p)
{
    auto *a = static_cast<CancelArg *>(p);
    unsigned n = 0;
    rmutex_holdcount(a->m, &n);
    a->held_in_cleanup = n;
    a->unlock_in_cleanup = rmutex_unlock(a->m);
}

void *cancellable_waiter(void *p)
{
    auto *a = static_cast<CancelArg *>(p);
    if (rmutex_lock(a->m)) return nullptr;
    pthread_cleanup_push(cleanup_check, a);
    for (;;)
        if (!rcond_wait(a->c, a->m)) a->returned++;
    pthread_cleanup_pop(0);
    return nullptr;
}

TEST_F(Cond, ACancelledWaitRunsItsCleanupWithTheMutexHeldAndPassesItsSignalOn)
{
    if (rmt_asan()) {
        /* ASan aborts on any pthread_cancel of a thread blocked in a system
         * call (a false report from its sigaltstack interceptor as the
         * cancellation unwinds, a known bug of the sanitizer's); TSan and the
         * plain build run this test. */
        GTEST_SKIP() << "AddressSanitizer cannot follow pthread_cancel of a blocked thread";
    }
    rmutex_t m;
    init_mutex(&m, lock_name());
    rcond_t *c = make_cond();
    for (int i = 0; i < 3; i++) {
        CancelArg a(c, &m);
        pthread_t t;
        ASSERT_EQ(0, pthread_create(&t, nullptr, cancellable_waiter, &a));
        ASSERT_TRUE(wait_until([&] { return registered() == 1; }, ms(5000)));
        /* A second waiter, after the first (a higher ticket). */
        int done = 0;
        Async other([&] { return wait_for(c, &m, [&] { return done == 1; }); });
        ASSERT_TRUE(wait_until([&] { return registered() == 2; }, ms(5000)));
        ASSERT_RC(0, rmutex_lock(&m));
        done = 1;
        /* Cancel the first waiter (the lowest ticket), then signal.  If
         * the cancellation is acted on in its wait (nearly always), it must
         * not use the signal: its cleanup leaves the condition in a round
         * trip that usually lands after the signal picked it (and passes
         * the signal on), else before (and the signal picks the other);
         * either way the other waiter must wake.  But pthread_cancel is
         * asynchronous: on a loaded machine the signal's message (here
         * delivered by this very thread, cond.c's hand_over) can wake the
         * first waiter before it acts on the cancel; then its wait returns
         * 0 -- the signal is used, as POSIX allows -- and the cancel takes
         * effect at its next wait.  Then one more signal must wake the
         * other.  Never may the signal be lost to both. */
        pthread_cancel(t);
        ASSERT_RC(0, rcond_signal(c));
        ASSERT_RC(0, rmutex_unlock(&m));
        void *ret = nullptr;
        ASSERT_EQ(0, pthread_join(t, &ret));
        EXPECT_EQ(PTHREAD_CANCELED, ret);
        EXPECT_EQ(1u, a.held_in_cleanup.load()) << "round " << i;
        EXPECT_RC(0, a.unlock_in_cleanup.load());
        ASSERT_LE(a.returned.load(), 1) << "one signal woke the first waiter twice";
        if (a.returned.load() == 1) {
            std::printf("[ note ] round %d: the first waiter used the signal before its cancel\n", i);
            ASSERT_RC(0, rmutex_lock(&m));
            ASSERT_RC(0, rcond_signal(c));
            ASSERT_RC(0, rmutex_unlock(&m));
        }
        ASSERT_TRUE(other.wait(ms(kWaiterLeaseMs + kPollMs + 2000))) << "the signal was swallowed, round " << i;
        EXPECT_RC(0, other.rc());
        EXPECT_TRUE(none_registered());
    }
}


/* ---- wait morphing: a signal hands the free mutex to its waiter ---------------- */

/* A waiter that locks m (depth times), waits once on c, and reports how
 * many round trips this process made during its wait and the count it
 * held the mutex with on return; it unlocks every level (once keep is
 * false, if it was set). */
struct OneWait {
    rcond_t *c;
    rmutex_t *m;
    unsigned depth = 1;
    std::atomic<bool> keep{false};
    std::atomic<uint64_t> trips{0};
    std::atomic<unsigned> held{0};
    int run()
    {
        for (unsigned i = 0; i < depth; i++)
            if (int r = rmutex_lock(m)) return r;
        uint64_t before = stats().round_trips;
        int r = rcond_wait(c, m);
        trips = stats().round_trips - before;
        unsigned n = 0;
        rmutex_holdcount(m, &n);
        held = n;
        wait_until([&] { return !keep; }, ms(5000));
        for (unsigned i = 0; i < n; i++)
            if (int u = rmutex_unlock(m)) return r ? r : u;
        return r;
    }
};

/* One round: ow waits, and this thread signals once the wait let go of
 * the mutex (so that the signal finds it free); ow's result.  The first
 * round of a process also loads the scripts (more round trips). */
static int free_signal_round(Cond *t, OneWait &ow, const std::string &mname)
{
    Async waiter([&] { return ow.run(); });
    if (!t->ready_to_hand_over(mname)) return -1;
    int rc = rcond_signal(ow.c); /* not holding the mutex */
    if (rc) return rc;
    if (!waiter.wait(ms(5000))) return -2;
    return waiter.rc();
}

/* ow started, in its wait, its mutex free and the process listening. */
static std::unique_ptr<Async> start_waiting(Cond *t, OneWait &ow, const std::string &mname)
{
    auto waiter = std::make_unique<Async>([&ow] { return ow.run(); });
    EXPECT_TRUE(t->ready_to_hand_over(mname));
    return waiter;
}

TEST_F(Cond, ASignalHandsAFreeMutexToItsWaiterWithNoRoundTripAfterTheWakeUp)
{
    std::string mname = lock_name("m");
    rmutex_t m;
    init_mutex(&m, mname);
    OneWait ow{make_cond(), &m};
    ASSERT_RC(0, free_signal_round(this, ow, mname)); /* the scripts loaded */
    ASSERT_TRUE(wait_until([&] { return registered() == 0; }, ms(1000)));
    ASSERT_RC(0, free_signal_round(this, ow, mname));
    EXPECT_EQ(1u, ow.held.load());
    /* The wait's own register and release, and this thread's signal:
     * nothing after the wake-up (a retake would be one more). */
    EXPECT_EQ(3u, ow.trips.load()) << "the waiter made a round trip after its wake-up";
    EXPECT_TRUE(wait_until([&] { return registered() == 0; }, ms(1000)));
}

/* A signal that picks a waiter of its own process gets the message it
 * published in its reply and wakes that thread itself (cond.c,
 * hand_over), unless the multiplexer read the server's copy first (they
 * race).  Both kinds of message: "s <waiter> g" (the mutex free at the
 * signal, handed over) and "s <waiter>" (held: the waiter retakes it after
 * the unlock).  Over twenty signals of each kind the signaller wins some;
 * every wait returns 0 holding the mutex once. */
TEST_F(Cond, ASignalWakesAWaiterOfItsOwnProcessItself)
{
    std::string mname = lock_name("m");
    rmutex_t m;
    init_mutex(&m, mname);
    OneWait ow{make_cond(), &m};
    ASSERT_RC(0, free_signal_round(this, ow, mname)); /* the scripts loaded */
    uint64_t handed = 0, plain = 0;
    for (int round = 0; round < 20 && !handed; round++) {
        ASSERT_TRUE(none_registered());
        uint64_t local0 = stats().cond_signals_local;
        ASSERT_RC(0, free_signal_round(this, ow, mname)) << "round " << round;
        EXPECT_EQ(1u, ow.held.load());
        uint64_t here = stats().cond_signals_local - local0;
        EXPECT_LE(here, 1u);
        handed += here;
    }
    EXPECT_GE(handed, 1u) << "in twenty signals handing the mutex over, none woke its waiter itself";
    for (int round = 0; round < 20 && !plain; round++) {
        ASSERT_TRUE(none_registered());
        auto waiter = start_waiting(this, ow, mname);
        ASSERT_RC(0, rmutex_lock(&m));
        uint64_t local0 = stats().cond_signals_local;
        ASSERT_RC(0, rcond_signal(ow.c));
        uint64_t here = stats().cond_signals_local - local0;
        ASSERT_RC(0, rmutex_unlock(&m));
        ASSERT_TRUE(waiter->wait(ms(5000))) << "round " << round;
        EXPECT_RC(0, waiter->rc());
        EXPECT_EQ(1u, ow.held.load());
        EXPECT_LE(here, 1u);
        plain += here;
    }
    EXPECT_GE(plain, 1u) << "in twenty plain signals, none woke its waiter itself";
    EXPECT_TRUE(none_registered());
}

/* A grant is written with the waiter's full hold lease when the signal
 * runs, which may be long after the wait registered: the waiter's hold
 * must count from a moment it knows to be before the grant (its last
 * look that found it still waiting), not from its registration, or a wait
 * longer than the lease would hand over a hold already "expired" here,
 * which the watchdog then reports lost. */
TEST_F(Cond, AWaiterHandedTheMutexAfterWaitingLongerThanTheLeaseKeepsItPastAnotherLease)
{
    std::string mname = lock_name("m");
    rmutex_t m;
    init_mutex(&m, mname);
    rcond_t *c = make_cond();
    uint64_t lost = stats().locks_lost;
    std::atomic<long long> left_ms{-1000000};
    Async waiter([&] {
        int r = rmutex_lock(&m);
        if (r) return 100 + r;
        if ((r = rcond_wait(c, &m))) return 200 + r;
        struct timespec dl, now;
        if ((r = rmutex_hold_deadline(&m, &dl))) return 300 + r;
        clock_gettime(CLOCK_MONOTONIC, &now);
        left_ms = (dl.tv_sec - now.tv_sec) * 1000 + (dl.tv_nsec - now.tv_nsec) / 1000000;
        /* Held longer than the 2 s lease: renewed, not lost. */
        std::this_thread::sleep_for(ms(2500));
        return rmutex_unlock(&m);
    });
    ASSERT_TRUE(ready_to_hand_over(mname));
    std::this_thread::sleep_for(ms(2500)); /* the wait outlasts the hold lease */
    auto before = stats().round_trips;
    ASSERT_RC(0, rcond_signal(c));
    ASSERT_TRUE(wait_until([&] { return redis().exists(mname); }, ms(2000))) << "nobody holds it";
    ASSERT_TRUE(waiter.wait(ms(10000)));
    EXPECT_RC(0, waiter.rc()) << "the hold handed over was lost (EPERM at the unlock)";
    /* Its deadline as the wait returned: most of a lease ahead (a grant
     * counted from the registration would be 0.5 s in the past). */
    EXPECT_GT(left_ms.load(), 2000 / 3) << "the hold handed over counts from the registration";
    EXPECT_EQ(lost, stats().locks_lost) << "the hold handed over was reported lost";
    EXPECT_GE(stats().round_trips - before, 2u);
}

TEST_F(Cond, AMutexHeldAtTheSignalIsNeverHandedOverAndGoesToTheWaiterAfterTheUnlock)
{
    std::string mname = lock_name("m");
    rmutex_t m;
    init_mutex(&m, mname);
    OneWait ow{make_cond(), &m};
    auto waiter = start_waiting(this, ow, mname);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rcond_signal(ow.c));
    /* One owner: the signal did not write the waiter's field beside ours. */
    EXPECT_EQ(1u, redis().hgetall(mname).size()) << "the signal made a second owner";
    EXPECT_FALSE(waiter->done());
    ASSERT_RC(0, rmutex_unlock(&m));
    ASSERT_TRUE(waiter->wait(ms(5000)));
    EXPECT_RC(0, waiter->rc());
    EXPECT_EQ(1u, ow.held.load());
    EXPECT_TRUE(none_registered());
}

TEST_F(Cond, ARecursiveMutexHandedOverByASignalHasItsCountOfTwoBack)
{
    std::string mname = lock_name("m");
    rmutex_t m;
    init_mutex(&m, mname, RMUTEX_RECURSIVE);
    OneWait ow{make_cond(), &m, 2};
    ASSERT_RC(0, free_signal_round(this, ow, mname)); /* the scripts loaded */
    ASSERT_TRUE(wait_until([&] { return registered() == 0; }, ms(1000)));
    EXPECT_RC(0, free_signal_round(this, ow, mname)) << "two unlocks after the wait";
    EXPECT_EQ(2u, ow.held.load());
    EXPECT_EQ(3u, ow.trips.load()) << "the waiter made a round trip after its wake-up";
    EXPECT_FALSE(redis().exists(mname)) << "the second unlock did not let go of it";
}

TEST_F(Cond, AWaiterThatWaitedLongerThanTwoWaiterLeasesIsStillHandedTheMutex)
{
    /* The condition's keys live two waiter leases past their last write;
     * what a signal needs to hand the mutex over must live as long as the
     * waiter does (the watchdog renews its lease). */
    std::string mname = lock_name("m");
    rmutex_t m;
    init_mutex(&m, mname);
    OneWait ow{make_cond(), &m};
    ow.keep = true; /* until the test looked at the mutex */
    auto waiter = start_waiting(this, ow, mname);
    auto later = Clock::now() + ms(3 * kWaiterLeaseMs);
    ASSERT_TRUE(wait_until([&] { return Clock::now() > later; }, ms(4 * kWaiterLeaseMs)));
    ASSERT_RC(0, rcond_signal(ow.c));
    EXPECT_EQ(1u, redis().hgetall(mname).size()) << "the signal did not hand the free mutex over";
    ow.keep = false;
    ASSERT_TRUE(waiter->wait(ms(5000)));
    EXPECT_RC(0, waiter->rc());
    EXPECT_EQ(1u, ow.held.load());
}

TEST_F(CondProxied, ACancelledWaiterHandedTheMutexUnwindsHoldingItAndPassesItsSignalOn)
{
    if (rmt_asan()) GTEST_SKIP() << "AddressSanitizer cannot follow pthread_cancel of a blocked thread";
    std::string mname = lock_name("m");
    rmutex_t m;
    init_mutex(&m, mname);
    rcond_t *c = make_cond();
    CancelArg a(c, &m);
    pthread_t t;
    ASSERT_EQ(0, pthread_create(&t, nullptr, cancellable_waiter, &a));
    ASSERT_TRUE(wait_until([&] { return registered() == 1; }, ms(5000)));
    /* A second waiter keeps the process on the channel. */
    std::atomic<int> done{0};
    Async other([&] { return wait_for(c, &m, [&] { return done == 1; }); });
    ASSERT_TRUE(ready_to_hand_over(mname, 2));
    done = 1; /* (read under m by the other, which is in its wait) */
    /* The cancelled waiter's leave held back: the signal picks it, finds
     * its mutex free and hands it over; then the leave gets through. */
    proxy_->stall_requests(is_leave);
    pthread_cancel(t);
    ASSERT_TRUE(wait_until([&] { return proxy_->count(is_leave) >= 1; }, ms(5000)));
    ASSERT_RC(0, rcond_signal(c));
    EXPECT_TRUE(redis().exists(mname)) << "the signal did not take the free mutex for its waiter";
    proxy_->disarm();
    proxy_->close_all(); /* the held-back leave is lost: asked again */
    void *ret = nullptr;
    ASSERT_EQ(0, pthread_join(t, &ret));
    EXPECT_EQ(PTHREAD_CANCELED, ret);
    EXPECT_EQ(1u, a.held_in_cleanup.load()) << "the cleanup handler did not find the mutex held";
    EXPECT_RC(0, a.unlock_in_cleanup.load());
    ASSERT_TRUE(other.wait(ms(kWaiterLeaseMs + kPollMs + 2000))) << "the signal was swallowed";
    EXPECT_RC(0, other.rc());
    EXPECT_TRUE(none_registered());
}


} // namespace
