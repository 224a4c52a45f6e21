/* rwlock_test.cc -- read-write locks (rrwlock_*) against a real Redis:
 * readers share, a writer is alone, the pthread rules answered without a
 * round trip (EDEADLK for an upgrade, EPERM without a hold), a waiting
 * writer holds back the readers that come after it, a writer that gives
 * up lets the readers behind it go, dead readers and writers reclaimed
 * within a lease whatever the others do (one dead among 1 000 live), no
 * writer starved by a stream of readers from three processes, a thread's
 * exit gives its reads back, fork, and every return code of the API. */
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "harness.h"

namespace {

using namespace rmt;

class RwLock : public RedisTest {
  protected:
    RwLock() : RedisTest(false, "lease=1500&waiter_lease=1000") {}

    void init(rrwlock_t *l, const std::string &name, int kind = RRWLOCK_DEFAULT, int robust = 0,
              unsigned long lease = 0)
    {
        rrwlockattr_t a;
        ASSERT_RC(0, rrwlockattr_init(&a));
        ASSERT_RC(0, rrwlockattr_setkind_np(&a, kind));
        ASSERT_RC(0, rrwlockattr_setrobust(&a, robust ? RMUTEX_ROBUST : RMUTEX_STALLED));
        ASSERT_RC(0, rrwlockattr_setlease(&a, lease));
        ASSERT_RC(0, rrwlock_init(l, name.c_str(), &a));
        ASSERT_RC(0, rrwlockattr_destroy(&a));
    }

    /* A process that takes name for reading (r) or writing (w). */
    std::unique_ptr<Child> child(const std::string &name, const char *how,
                                 std::vector<std::string> more = {})
    {
        std::vector<std::string> args{ "rw", name, how };
        args.insert(args.end(), more.begin(), more.end());
        return std::make_unique<Child>(args, url());
    }

    /* Wait until name's queue has n waiters. */
    bool queued(const std::string &name, long long n)
    {
        return wait_until([&] {
            return redis().cmd({ "ZCARD", "rmutex_rw_queue:{" + name + "}" }).integer() == n;
        }, ms(5000));
    }
};

using Holding = RwHolder; /* (harness/threads.h) */

TEST_F(RwLock, ReadersShareAndAWriterIsAlone)
{
    std::string name = lock_name();
    rrwlock_t a, b;
    init(&a, name);
    init(&b, name);
    ASSERT_RC(0, rrwlock_rdlock(&a));
    Holding other(&b, false); /* another thread reads too */
    ASSERT_RC(0, other.taken(ms(3000)));
    auto far = child(name, "r"); /* and another process */
    ASSERT_TRUE(far->expect_line("held rc=0", ms(3000)));
    EXPECT_EQ("read", redis().cmd({ "HGET", name, "mode" }).str());
    auto w = child(name, "w");
    EXPECT_FALSE(w->poll_line(ms(300))) << "a writer got in while three threads read";
    EXPECT_RC(0, rrwlock_unlock(&a));
    far->write_line("unlock");
    ASSERT_TRUE(far->expect_line("unlocked rc=0", ms(3000)));
    EXPECT_FALSE(w->poll_line(ms(300))) << "a writer got in while a thread still read";
    EXPECT_RC(0, other.release());
    auto held = w->expect_line("held", ms(3000));
    ASSERT_TRUE(held) << "the writer did not get in after the readers left";
    EXPECT_EQ("0", field(*held, "rc"));
    EXPECT_EQ("write", redis().cmd({ "HGET", name, "mode" }).str());
    EXPECT_RC(EBUSY, rrwlock_tryrdlock(&a)) << "a reader got in beside the writer";
    EXPECT_RC(EBUSY, rrwlock_trywrlock(&a));
    w->write_line("unlock");
    ASSERT_TRUE(w->expect_line("unlocked rc=0", ms(3000)));
    EXPECT_RC(0, rrwlock_trywrlock(&a));
    EXPECT_RC(0, rrwlock_unlock(&a));
    EXPECT_FALSE(redis().exists(name)) << "nothing left behind";
    EXPECT_RC(0, rrwlock_destroy(&a));
    EXPECT_RC(0, rrwlock_destroy(&b));
}

TEST_F(RwLock, UpgradeIsEdeadlkAtOnceThroughAnyHandleAndTheWriterCannotRelock)
{
    std::string name = lock_name();
    rrwlock_t a, b;
    init(&a, name);
    init(&b, name);
    ASSERT_RC(0, rrwlock_rdlock(&a));
    auto t0 = Clock::now();
    EXPECT_RC(EDEADLK, rrwlock_wrlock(&b)) << "a read -> write upgrade";
    EXPECT_RC(EDEADLK, rrwlock_wrlock(&a));
    EXPECT_RC(EBUSY, rrwlock_trywrlock(&b));
    struct timespec dl = abs_after(CLOCK_REALTIME, 5000);
    EXPECT_RC(EDEADLK, rrwlock_timedwrlock(&b, &dl));
    EXPECT_LT(elapsed_ms(t0), 500) << "an upgrade waited";
    EXPECT_RC(0, rrwlock_unlock(&a));
    ASSERT_RC(0, rrwlock_wrlock(&a));
    EXPECT_RC(EDEADLK, rrwlock_wrlock(&b)) << "the writer relocks";
    EXPECT_RC(EDEADLK, rrwlock_rdlock(&b)) << "the writer reads (glibc: EDEADLK)";
    EXPECT_RC(EBUSY, rrwlock_tryrdlock(&b));
    EXPECT_RC(0, rrwlock_unlock(&b)) << "the hold is the thread's, whichever handle unlocks";
    EXPECT_RC(EPERM, rrwlock_unlock(&a));
    EXPECT_RC(0, rrwlock_destroy(&a));
    EXPECT_RC(0, rrwlock_destroy(&b));
}

TEST_F(RwLock, AReReadNeverWaitsBehindAWaitingWriterAndCountsLevels)
{
    std::string name = lock_name();
    rrwlock_t l;
    init(&l, name);
    ASSERT_RC(0, rrwlock_rdlock(&l));
    auto w = child(name, "w");
    ASSERT_TRUE(queued(name, 1)) << "the writer did not queue";
    auto t0 = Clock::now();
    for (int i = 0; i < 5; i++) ASSERT_RC(0, rrwlock_rdlock(&l)) << "a re-read waited";
    ASSERT_RC(0, rrwlock_tryrdlock(&l));
    EXPECT_LT(elapsed_ms(t0), 200);
    for (int i = 0; i < 6; i++) {
        EXPECT_RC(0, rrwlock_unlock(&l));
        EXPECT_FALSE(w->poll_line()) << "the writer got in at level " << 6 - i;
    }
    EXPECT_RC(0, rrwlock_unlock(&l));
    ASSERT_TRUE(w->expect_line("held rc=0", ms(3000)));
    EXPECT_RC(EPERM, rrwlock_unlock(&l));
    w->write_line("unlock");
    EXPECT_TRUE(w->expect_line("unlocked rc=0", ms(3000)));
    EXPECT_RC(0, rrwlock_destroy(&l));
}

TEST_F(RwLock, AWaitingWriterHoldsBackReadersThatComeAfterIt)
{
    std::string name = lock_name();
    rrwlock_t l;
    init(&l, name);
    ASSERT_RC(0, rrwlock_rdlock(&l)); /* readers hold */
    auto w = child(name, "w");
    ASSERT_TRUE(queued(name, 1));
    /* A reader that comes after the writer waits, even with readers inside. */
    auto r = child(name, "r");
    ASSERT_TRUE(queued(name, 2)) << "the late reader did not queue behind the writer";
    EXPECT_FALSE(r->poll_line(ms(200))) << "a reader passed a waiting writer";
    rrwlock_t other;
    init(&other, name);
    Async late([&] { return rrwlock_tryrdlock(&other); });
    ASSERT_TRUE(late.wait(ms(3000)));
    EXPECT_RC(EBUSY, late.rc()) << "tryrdlock passed a waiting writer";
    EXPECT_RC(0, rrwlock_unlock(&l));
    ASSERT_TRUE(w->expect_line("held rc=0", ms(3000))) << "the writer was not next";
    EXPECT_FALSE(r->poll_line(ms(200)));
    w->write_line("unlock");
    ASSERT_TRUE(w->expect_line("unlocked rc=0", ms(3000)));
    ASSERT_TRUE(r->expect_line("held rc=0", ms(3000))) << "the reader behind the writer";
    r->write_line("unlock");
    EXPECT_TRUE(r->expect_line("unlocked rc=0", ms(3000)));
    EXPECT_RC(0, rrwlock_destroy(&l));
    EXPECT_RC(0, rrwlock_destroy(&other));
}

TEST_F(RwLock, PreferReaderLetsReadersPassAWaitingWriter)
{
    std::string name = lock_name();
    rrwlock_t l, p;
    init(&l, name);
    init(&p, name, RRWLOCK_PREFER_READER);
    ASSERT_RC(0, rrwlock_rdlock(&l));
    auto w = child(name, "w");
    ASSERT_TRUE(queued(name, 1));
    Async reader([&] {
        int rc = rrwlock_tryrdlock(&p);
        return rc ? rc : rrwlock_unlock(&p);
    });
    ASSERT_TRUE(reader.wait(ms(3000)));
    EXPECT_RC(0, reader.rc()) << "a PREFER_READER reader waited for a waiting writer";
    EXPECT_RC(0, rrwlock_unlock(&l));
    ASSERT_TRUE(w->expect_line("held rc=0", ms(3000)));
    w->write_line("unlock");
    EXPECT_TRUE(w->expect_line("unlocked rc=0", ms(3000)));
    EXPECT_RC(0, rrwlock_destroy(&l));
    EXPECT_RC(0, rrwlock_destroy(&p));
}

TEST_F(RwLock, AWriterThatTimesOutLetsTheReadersBehindItGoAtOnce)
{
    std::string name = lock_name();
    rrwlock_t l, w;
    init(&l, name);
    init(&w, name);
    auto holder = child(name, "r"); /* a reader in another process */
    ASSERT_TRUE(holder->expect_line("held rc=0", ms(3000)));
    Async writer([&] {
        struct timespec dl = abs_after(CLOCK_REALTIME, 800);
        return rrwlock_timedwrlock(&w, &dl);
    });
    ASSERT_TRUE(queued(name, 1));
    Holding reader(&l, false);
    ASSERT_TRUE(queued(name, 2)) << "the reader did not queue behind the writer";
    ASSERT_TRUE(writer.wait(ms(3000)));
    EXPECT_RC(ETIMEDOUT, writer.rc());
    auto gave_up = writer.finished_at();
    ASSERT_RC(0, reader.taken(ms(2000))) << "the reader behind a writer that gave up still waits";
    auto lag = std::chrono::duration_cast<ms>(reader.at() - gave_up).count();
    EXPECT_LT(lag, scaled(ms(300)).count()) << "the reader went " << lag << " ms after the writer gave up";
    EXPECT_RC(0, reader.release());
    holder->write_line("unlock");
    EXPECT_TRUE(holder->expect_line("unlocked rc=0", ms(3000)));
    EXPECT_RC(0, rrwlock_destroy(&l));
    EXPECT_RC(0, rrwlock_destroy(&w));
}

TEST_F(RwLock, ADeadReaderIsReclaimedWithinALeaseWhileOthersKeepReading)
{
    std::string name = lock_name();
    rrwlock_t l, w;
    init(&l, name);
    init(&w, name);
    auto dead = child(name, "r", { "--lease=1000" });
    ASSERT_TRUE(dead->expect_line("held rc=0", ms(3000)));
    dead->kill(SIGKILL);
    dead->wait(ms(3000));
    auto killed = Clock::now();
    /* Live readers keep overlapping (a thread here and other processes). */
    std::atomic<bool> stop{false};
    std::thread reading([&] {
        while (!stop) {
            if (rrwlock_rdlock(&l) == 0) {
                std::this_thread::sleep_for(ms(30));
                rrwlock_unlock(&l);
            }
        }
    });
    auto live = child(name, "r");
    ASSERT_TRUE(live->expect_line("held rc=0", ms(3000)));
    /* The dead reader's hold goes within its lease, with readers inside. */
    ASSERT_TRUE(wait_until([&] {
        return redis().cmd({ "ZCARD", "rmutex_rw_readers:{" + name + "}" }).integer() <= 1;
    }, ms(1000 + 1500))) << "the dead reader is still a reader";
    std::cerr << "[rwlock] the dead reader was reclaimed " << elapsed_ms(killed)
              << " ms after kill -9, readers inside\n";
    stop = true;
    reading.join();
    live->write_line("unlock");
    ASSERT_TRUE(live->expect_line("unlocked rc=0", ms(3000)));
    EXPECT_RC(0, rrwlock_trywrlock(&w)) << "nobody reads: the writer goes";
    EXPECT_RC(0, rrwlock_unlock(&w));
    EXPECT_RC(0, rrwlock_destroy(&l));
    EXPECT_RC(0, rrwlock_destroy(&w));
}

/* Reader processes forked from the test, and what they share with it (an
 * anonymous shared mapping): the readers inside and the reads done, a flag
 * that sends them home, and the number of failed calls.  Each dies with
 * the test process; the destructor sends them home and reaps them. */
class Readers {
  public:
    struct Shared {
        std::atomic<int> inside{0}, failures{0}, go_home{0};
        std::atomic<long> reads{0};
    };
    Readers()
    {
        void *p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        s = p == MAP_FAILED ? nullptr : new (p) Shared;
    }
    ~Readers()
    {
        if (!s) return;
        s->go_home = 1;
        for (pid_t k : kids_) wait_exit(k, ms(10000));
        munmap(s, sizeof(Shared));
    }
    /* A process of `threads` reading threads (64 KiB stacks) on name: each
     * reads for hold_ms, then again at once (hold_ms 0: it reads once and
     * keeps its read), until go_home. */
    void fork_process(const std::string &name, int threads, int hold_ms)
    {
        pid_t parent = getpid(), pid = fork();
        if (pid) {
            kids_.push_back(pid);
            return;
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(5);
        static rrwlock_t l;
        static Shared *sh;
        static int hold;
        sh = s;
        hold = hold_ms;
        if (rrwlock_init(&l, name.c_str(), nullptr)) _exit(3);
        auto body = [](void *) -> void * {
            do {
                if (rrwlock_rdlock(&l)) {
                    sh->failures++;
                    std::this_thread::sleep_for(ms(50));
                    continue;
                }
                sh->inside++;
                sh->reads++;
                do std::this_thread::sleep_for(ms(hold ? hold : 100));
                while (!hold && !sh->go_home);
                sh->inside--;
                if (rrwlock_unlock(&l)) sh->failures++;
            } while (!sh->go_home);
            return nullptr;
        };
        std::vector<pthread_t> ts(threads);
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, 65536);
        for (auto &t : ts)
            if (pthread_create(&t, &a, body, nullptr)) _exit(4);
        for (auto &t : ts) pthread_join(t, nullptr);
        _exit(0);
    }
    /* Send them home; true when every one exited 0. */
    bool go_home()
    {
        s->go_home = 1;
        bool ok = true;
        for (pid_t k : kids_) {
            auto st = wait_exit(k, ms(10000));
            ok = ok && st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
        }
        kids_.clear();
        return ok;
    }
    Shared *s;

  private:
    std::vector<pid_t> kids_;
};

/* Readers of three processes keep coming, each overlapping the others, so
 * that the lock is never free of readers; a writer must still get in within
 * a bound (FIFO: the readers that come after it wait), again and again, and
 * the readers go on after each write. */
TEST_F(RwLock, AWriterIsNotStarvedByAStreamOfReadersFromThreeProcesses)
{
    std::string name = lock_name();
    Readers readers;
    ASSERT_TRUE(readers.s);
    auto *crowd = readers.s;
    for (int p = 0; p < 3; p++) readers.fork_process(name, 4, 20);
    rrwlock_t w;
    init(&w, name);
    ASSERT_TRUE(wait_until([&] { return crowd->reads > 60; }, ms(5000))) << "the readers did not start";
    int64_t worst = 0;
    for (int i = 0; i < 5; i++) {
        long before = crowd->reads;
        ASSERT_TRUE(wait_until([&] { return crowd->reads > before + 20 && crowd->inside > 0; }, ms(3000)))
            << "the readers do not go on after a write";
        auto t0 = Clock::now();
        struct timespec dl = abs_after(CLOCK_REALTIME, scaled(ms(3000)).count());
        int rc = rrwlock_timedwrlock(&w, &dl);
        int64_t took = elapsed_ms(t0);
        ASSERT_RC(0, rc) << "write " << i << ": the writer starved behind readers for " << took << " ms";
        EXPECT_EQ(0, crowd->inside.load()) << "a reader is inside with the writer";
        worst = std::max(worst, took);
        std::this_thread::sleep_for(ms(10)); /* the write itself */
        EXPECT_EQ(0, crowd->inside.load()) << "a reader came in beside the writer";
        ASSERT_RC(0, rrwlock_unlock(&w));
    }
    std::cerr << "[rwlock] the slowest of 5 writers got in " << worst
              << " ms after asking, against readers of 3 processes\n";
    EXPECT_LT(worst, scaled(ms(1000)).count()) << "FIFO: the writer waits for the readers ahead of it only";
    EXPECT_TRUE(readers.go_home()) << "a reader process failed";
    EXPECT_EQ(0, crowd->failures.load());
    EXPECT_RC(0, rrwlock_destroy(&w));
}

/* 1 000 live readers (threads of four processes) and one that is killed
 * (kill -9): its hold goes within its lease while the 1 000 keep reading,
 * and the writer that waits behind them gets in as soon as they leave --
 * it never waits for the dead one (Redisson reclaims a dead reader only
 * when the last live one unlocks). */
TEST_F(RwLock, ADeadReaderAmongAThousandLiveOnesIsReclaimedWithinALease)
{
    std::string name = lock_name(), entries = "rmutex_rw_readers:{" + name + "}";
    Readers readers;
    ASSERT_TRUE(readers.s);
    auto *crowd = readers.s;
    /* (Its lease renewed, as the live ones': a lease of the attributes is
     * a fixed one, which would run out before the crowd has come in.) */
    Child dead({ "rw", name, "r" }, url_with("lease=1000"));
    ASSERT_TRUE(dead.expect_line("held rc=0", ms(3000)));
    for (int p = 0; p < 4; p++) readers.fork_process(name, 250, 0);
    ASSERT_TRUE(wait_until([&] { return crowd->inside == 1000; }, ms(20000)))
        << crowd->inside.load() << " of 1000 readers got in";
    EXPECT_EQ(5, redis().cmd({ "ZCARD", entries }).integer()) << "one reader entry per process";
    rrwlock_t w;
    init(&w, name);
    Holding writer(&w, true);
    ASSERT_TRUE(queued(name, 1)) << "the writer did not queue";
    dead.kill(SIGKILL);
    dead.wait(ms(3000));
    auto killed = Clock::now();
    ASSERT_TRUE(wait_until([&] { return redis().cmd({ "ZCARD", entries }).integer() == 4; }, ms(1000 + 600)))
        << "the dead reader is still a reader " << elapsed_ms(killed) << " ms after kill -9";
    int64_t reclaimed = elapsed_ms(killed);
    EXPECT_EQ(1000, crowd->inside.load()) << "the live readers were disturbed";
    EXPECT_FALSE(writer.done()) << "the writer got in beside 1 000 readers";
    auto released = Clock::now();
    crowd->go_home = 1;
    ASSERT_RC(0, writer.taken(ms(5000))) << "the writer did not get in after the live readers left";
    int64_t in = std::chrono::duration_cast<ms>(writer.at() - released).count();
    std::cerr << "[rwlock] a dead reader among 1000 reclaimed " << reclaimed
              << " ms after kill -9; the writer in " << in << " ms after the 1000 began to leave\n";
    EXPECT_LT(in, scaled(ms(1500)).count()) << "the writer waited longer than the readers' leaving";
    EXPECT_TRUE(readers.go_home()) << "a reader process failed";
    EXPECT_EQ(0, crowd->failures.load());
    EXPECT_RC(0, writer.release());
    EXPECT_RC(0, rrwlock_destroy(&w));
}

TEST_F(RwLock, ARobustLockWhoseWriterDiedIsEownerdeadToTheNextTakerOnce)
{
    std::string name = lock_name();
    rrwlock_t l;
    init(&l, name, RRWLOCK_DEFAULT, 1);
    auto dead = child(name, "w", { "--robust", "--lease=1000" });
    ASSERT_TRUE(dead->expect_line("held rc=0", ms(3000)));
    dead->kill(SIGKILL);
    dead->wait(ms(3000));
    auto t0 = Clock::now();
    EXPECT_RC(EOWNERDEAD, rrwlock_rdlock(&l)) << "the writer's death was not reported";
    EXPECT_LT(elapsed_ms(t0), scaled(ms(1000 + 1500)).count()) << "not within its lease";
    EXPECT_RC(0, rrwlock_unlock(&l));
    EXPECT_RC(0, rrwlock_wrlock(&l)) << "reported once";
    EXPECT_RC(0, rrwlock_unlock(&l));
    EXPECT_RC(0, rrwlock_destroy(&l));
}

TEST_F(RwLock, ReadsAndAWriteHeldLongerThanTheirLeaseAreRenewedOnePerProcess)
{
    std::string name = lock_name(), wname = lock_name("w");
    rrwlock_t l, w;
    init(&l, name);
    init(&w, wname);
    Holding r1(&l, false), r2(&l, false);
    ASSERT_RC(0, r1.taken(ms(3000)));
    ASSERT_RC(0, r2.taken(ms(3000)));
    ASSERT_RC(0, rrwlock_wrlock(&w));
    uint64_t calls = stats().renewal_calls;
    std::this_thread::sleep_for(ms(3500)); /* a span to survive: more than two leases */
    EXPECT_EQ("read", redis().cmd({ "HGET", name, "mode" }).str()) << "the reads lapsed";
    EXPECT_EQ("write", redis().cmd({ "HGET", wname, "mode" }).str()) << "the write lapsed";
    EXPECT_EQ(1, redis().cmd({ "ZCARD", "rmutex_rw_readers:{" + name + "}" }).integer())
        << "two reading threads of one process are one reader in Redis";
    EXPECT_GT(stats().renewal_calls, calls);
    auto other = child(name, "w");
    EXPECT_FALSE(other->poll_line(ms(200)));
    EXPECT_RC(0, r1.release());
    EXPECT_RC(0, r2.release());
    EXPECT_TRUE(other->expect_line("held rc=0", ms(3000)));
    EXPECT_RC(0, rrwlock_unlock(&w));
    EXPECT_RC(0, rrwlock_destroy(&w));
}

/* rrwlock_hold_deadline: a lease ahead of the acquisition for the writer
 * and for each reader (their process's read lease), moving on with the
 * renewals; EPERM to a thread that holds nothing of the lock. */
TEST_F(RwLock, HoldDeadlineIsALeaseAheadForReaderAndWriterAndEpermWithoutAHold)
{
    auto mono_ms = [] {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
    };
    auto left_ms = [&](rrwlock_t *l) -> int64_t {
        struct timespec d;
        int r = rrwlock_hold_deadline(l, &d);
        return r ? -r : (int64_t)d.tv_sec * 1000 + d.tv_nsec / 1000000 - mono_ms();
    };
    std::string name = lock_name();
    rrwlock_t l;
    init(&l, name);
    struct timespec d;
    EXPECT_RC(EPERM, rrwlock_hold_deadline(&l, &d)) << "nothing held";
    EXPECT_RC(EINVAL, rrwlock_hold_deadline(&l, nullptr));
    EXPECT_RC(EINVAL, rrwlock_hold_deadline(nullptr, &d));
    ASSERT_RC(0, rrwlock_rdlock(&l));
    int64_t left = left_ms(&l);
    EXPECT_GT(left, 1500 - scaled(ms(500)).count()) << "the read lease (1.5 s) ahead";
    EXPECT_LE(left, 1500);
    /* Another reading thread of the process shares the read lease. */
    std::thread([&] {
        ASSERT_RC(0, rrwlock_rdlock(&l));
        EXPECT_GT(left_ms(&l), 0);
        EXPECT_RC(0, rrwlock_unlock(&l));
    }).join();
    std::this_thread::sleep_for(ms(2000)); /* longer than the lease: renewed */
    EXPECT_GT(left_ms(&l), 0) << "renewals move it on";
    std::thread([&] { EXPECT_EQ(-EPERM, left_ms(&l)) << "another thread holds nothing"; }).join();
    ASSERT_RC(0, rrwlock_unlock(&l));
    EXPECT_RC(EPERM, rrwlock_hold_deadline(&l, &d)) << "unlocked";
    ASSERT_RC(0, rrwlock_wrlock(&l));
    left = left_ms(&l);
    EXPECT_GT(left, 1500 - scaled(ms(500)).count()) << "the write lease ahead";
    EXPECT_LE(left, 1500);
    ASSERT_RC(0, rrwlock_unlock(&l));
    EXPECT_RC(EPERM, rrwlock_hold_deadline(&l, &d));
    EXPECT_RC(0, rrwlock_destroy(&l));
}

TEST_F(RwLock, AThreadThatExitsReadingGivesItsReadBack)
{
    std::string name = lock_name();
    rrwlock_t l, w;
    init(&l, name);
    init(&w, name);
    std::thread([&] { EXPECT_RC(0, rrwlock_rdlock(&l)); }).join();
    EXPECT_TRUE(wait_until([&] { return rrwlock_trywrlock(&w) == 0; }, ms(2000)))
        << "the exited thread's read was not given back";
    EXPECT_RC(0, rrwlock_unlock(&w));
    EXPECT_RC(0, rrwlock_destroy(&l));
    EXPECT_RC(0, rrwlock_destroy(&w));
}

TEST_F(RwLock, ReadersAndWritersAcrossProcessesNeverOverlap)
{
    /* Writers increment a counter in Redis with a read and a write apart;
     * readers check it does not move while they read. */
    std::string name = lock_name(), key = lock_name("counter");
    const int P = 3, T = 3, N = 30;
    std::vector<pid_t> kids;
    for (int p = 0; p < P; p++) {
        pid_t pid = fork();
        if (pid == 0) {
            rrwlock_t l;
            if (rrwlock_init(&l, name.c_str(), nullptr)) _exit(3);
            std::atomic<int> bad{0};
            std::vector<std::thread> ts;
            for (int t = 0; t < T; t++)
                ts.emplace_back([&, t] {
                    Redis r(host(), port(), password_);
                    for (int i = 0; i < N; i++) {
                        bool write = (i + t) % 3 == 0;
                        if ((write ? rrwlock_wrlock(&l) : rrwlock_rdlock(&l)) != 0) {
                            bad++;
                            continue;
                        }
                        long long v = atoll(r.cmd({ "GET", key }).str().c_str());
                        std::this_thread::sleep_for(ms(1));
                        if (write) r.cmd({ "SET", key, std::to_string(v + 1) });
                        else if (atoll(r.cmd({ "GET", key }).str().c_str()) != v) bad++;
                        if (rrwlock_unlock(&l) != 0) bad++;
                    }
                });
            for (auto &t : ts) t.join();
            _exit(bad ? 1 : 0);
        }
        kids.push_back(pid);
    }
    for (pid_t k : kids) {
        int st = 0;
        ASSERT_EQ(k, waitpid(k, &st, 0));
        EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "a reader saw a writer inside, or a call failed";
    }
    int writes = 0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < N; i++) writes += (i + t) % 3 == 0;
    EXPECT_EQ(std::to_string(P * writes), redis().cmd({ "GET", key }).str()) << "a write was lost";
}

TEST_F(RwLock, AForkedChildTakesTheLockWithoutReinitialising)
{
    RMT_SKIP_FORK_WITH_THREADS_UNDER_TSAN();
    std::string name = lock_name();
    rrwlock_t l;
    init(&l, name);
    ASSERT_RC(0, rrwlock_rdlock(&l));
    pid_t pid = fork();
    if (pid == 0) {
        /* The parent's read is not the child's: its unlock is EPERM, and
         * it reads and writes on its own. */
        int r = rrwlock_unlock(&l) == EPERM ? 0 : 10;
        if (!r) r = rrwlock_rdlock(&l);
        if (!r) r = rrwlock_unlock(&l);
        _exit(r);
    }
    int st = 0;
    ASSERT_EQ(pid, waitpid(pid, &st, 0));
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
    EXPECT_RC(0, rrwlock_unlock(&l));
    EXPECT_RC(0, rrwlock_destroy(&l));
}

TEST_F(RwLock, EveryReturnCodeOfTheApi)
{
    std::string name = lock_name();
    rrwlock_t l;
    rrwlockattr_t a;
    int v;
    unsigned long lease;
    EXPECT_RC(EINVAL, rrwlockattr_init(nullptr));
    ASSERT_RC(0, rrwlockattr_init(&a));
    EXPECT_RC(0, rrwlockattr_getkind_np(&a, &v));
    EXPECT_EQ(RRWLOCK_DEFAULT, v);
    EXPECT_RC(EINVAL, rrwlockattr_setkind_np(&a, 7));
    EXPECT_RC(EINVAL, rrwlockattr_setrobust(&a, 2));
    EXPECT_RC(0, rrwlockattr_getlease(&a, &lease));
    EXPECT_EQ(0ul, lease);
    EXPECT_RC(EINVAL, rrwlockattr_getkind_np(&a, nullptr));
    EXPECT_RC(0, rrwlockattr_destroy(&a));
    EXPECT_RC(EINVAL, rrwlockattr_setkind_np(&a, 0)) << "destroyed attributes";
    EXPECT_RC(EINVAL, rrwlock_init(&l, name.c_str(), &a));
    EXPECT_RC(EINVAL, rrwlock_init(nullptr, name.c_str(), nullptr));
    EXPECT_RC(EINVAL, rrwlock_init(&l, "", nullptr));
    EXPECT_RC(EINVAL, rrwlock_init(&l, "a{b", nullptr)) << "braces splitting the slots";
    EXPECT_RC(EINVAL, rrwlock_rdlock(nullptr));
    ASSERT_RC(0, rrwlock_init(&l, name.c_str(), nullptr));
    struct timespec bad = { 0, 2000000000L };
    EXPECT_RC(0, rrwlock_timedrdlock(&l, &bad)) << "a bad abstime is judged only when it would wait";
    EXPECT_RC(0, rrwlock_unlock(&l));
    auto other = child(name, "w");
    ASSERT_TRUE(other->expect_line("held rc=0", ms(3000)));
    EXPECT_RC(EINVAL, rrwlock_timedrdlock(&l, &bad));
    EXPECT_RC(EINVAL, rrwlock_clockwrlock(&l, CLOCK_PROCESS_CPUTIME_ID, &bad));
    struct timespec past = abs_after(CLOCK_REALTIME, -1000);
    EXPECT_RC(ETIMEDOUT, rrwlock_timedrdlock(&l, &past));
    struct timespec soon = abs_after(CLOCK_MONOTONIC, 200);
    EXPECT_RC(ETIMEDOUT, rrwlock_clockwrlock(&l, CLOCK_MONOTONIC, &soon));
    EXPECT_NE(std::string::npos, std::string(rmutex_detail()).find("held")) << rmutex_detail();
    EXPECT_RC(EBUSY, rrwlock_tryrdlock(&l));
    EXPECT_RC(EBUSY, rrwlock_trywrlock(&l));
    uint64_t token;
    EXPECT_RC(EPERM, rrwlock_fence(&l, &token)) << "not the writer";
    EXPECT_RC(EPERM, rrwlock_unlock(&l));
    other->write_line("unlock");
    ASSERT_TRUE(other->expect_line("unlocked rc=0", ms(3000)));
    ASSERT_RC(0, rrwlock_wrlock(&l));
    uint64_t t1 = 0, t2 = 0;
    EXPECT_RC(0, rrwlock_fence(&l, &t1));
    EXPECT_RC(0, rrwlock_fence(&l, &t2));
    EXPECT_EQ(t1, t2) << "one hold, one token";
    EXPECT_RC(EINVAL, rrwlock_fence(&l, nullptr));
    EXPECT_RC(EBUSY, rrwlock_destroy(&l)) << "destroyed while held";
    EXPECT_RC(0, rrwlock_unlock(&l));
    ASSERT_RC(0, rrwlock_wrlock(&l));
    uint64_t t3 = 0;
    EXPECT_RC(0, rrwlock_fence(&l, &t3));
    EXPECT_GT(t3, t1) << "a later writer's token is greater";
    EXPECT_RC(0, rrwlock_unlock(&l));
    EXPECT_RC(0, rrwlock_destroy(&l));
    EXPECT_RC(EINVAL, rrwlock_rdlock(&l)) << "used after destroy";
    static rrwlock_t st = RRWLOCK_INITIALIZER("rmt:rw:static");
    EXPECT_RC(0, rrwlock_rdlock(&st));
    EXPECT_RC(0, rrwlock_unlock(&st));
}

/* A restart without data wipes the holds: the holders are told (the
 * callback, with no mutex, and the lock's name) and their unlocks are
 * EPERM, never 0.  (Not as the ACL user: the restart forgets it.) */
class RwLockRestart : public RwLock {
  protected:
    RwLockRestart() { own_server_ = true; }
    void SetUp() override
    {
        if (acl_mode()) GTEST_SKIP() << "a restart forgets the ACL user";
        RwLock::SetUp();
    }
};

std::atomic<int> g_rw_lost{0};

TEST_F(RwLockRestart, ReadsAndAWriteWipedByARestartAreLostNotReleased)
{
    g_rw_lost = 0;
    ASSERT_RC(0, rmutex_set_lost_callback([](rmutex_t *m, const char *, void *) {
        if (!m) g_rw_lost++;
    }, nullptr));
    std::string rname = lock_name("r"), wname = lock_name("w");
    rrwlock_t r, w;
    init(&r, rname);
    init(&w, wname);
    ASSERT_RC(0, rrwlock_rdlock(&r));
    ASSERT_RC(0, rrwlock_wrlock(&w));
    server()->stop();
    std::this_thread::sleep_for(ms(300)); /* the outage injected */
    ASSERT_TRUE(server()->restart());
    EXPECT_TRUE(wait_until([] { return g_rw_lost.load() == 2; }, ms(1500)))
        << "the holders were not told (" << g_rw_lost.load() << " of 2)";
    EXPECT_RC(EPERM, rrwlock_unlock(&r));
    EXPECT_RC(EPERM, rrwlock_unlock(&w));
    EXPECT_RC(0, rrwlock_rdlock(&r)) << "usable again";
    EXPECT_RC(0, rrwlock_unlock(&r));
    rmutex_set_lost_callback(nullptr, nullptr);
    EXPECT_RC(0, rrwlock_destroy(&r));
    EXPECT_RC(0, rrwlock_destroy(&w));
}

} // namespace
