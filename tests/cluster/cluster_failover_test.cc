/* cluster_failover_test.cc -- rmutex across Redis Cluster failovers
 * (3 primaries + 3 replicas on loopback, node timeout 1 s, started once for
 * the program).
 *
 * Worker processes (forked: the library starts clean in each) lock and
 * unlock names served by one primary while it fails over -- mutexes, or
 * read-write locks read and written; every hold is recorded in shared
 * memory as (lock, fencing token, start, end, written) and a checker
 * proves that no two holds of one lock overlap (but reads with reads) and
 * that no hold was lost.  A failover is declared only where the test runs without
 * replica acknowledgement; with WAIT none may overlap. */
#include "cluster_util.h"
#include "harness.h"
#include "program_env.h"

#include <algorithm>
#include <atomic>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace rmt;

namespace {

Cluster *cluster;

::testing::Environment *const env = ::testing::AddGlobalTestEnvironment(
    new ProgramServers<Cluster>(&cluster, [](Cluster &s) { return s.start(3, 1); }, "a cluster of 3 primaries and 3 replicas"));

int64_t now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the history ---------------------------------------------------------- */

struct Hold {
    int lock;
    uint64_t token;
    int64_t start, end;
    bool write; /* a mutex's hold, or a read-write lock's write */
};

constexpr int kMaxHolds = 200000, kMaxLocks = 16;

/* Shared between the test and its forked workers. */
struct Shared {
    std::atomic<int> stop, nholds, lost, errors, last_error, refused;
    /* Read-write locks: who is inside each, as its holders see it; a
     * reader that sees a writer inside, or a writer anybody else, counts. */
    std::atomic<int> readers[kMaxLocks], writers[kMaxLocks], inside;
    std::atomic<int64_t> first_after[8]; /* per worker: first hold started after `mark` */
    std::atomic<int64_t> mark;
    Hold holds[kMaxHolds];
};

Shared *shared_new()
{
    void *p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : new (p) Shared();
}

void lost_cb(rmutex_t *, const char *, void *arg) { static_cast<Shared *>(arg)->lost++; }

/* One hold of lock k: who else is inside (read-write locks), its token
 * (0: rmutex_fence could not reach the primary -- it may be the one just
 * killed: a hold without a token, not an overlap), ~1 ms, recorded. */
template <class Fence, class Unlock>
void hold(Shared *sh, int id, int k, bool rw, bool write, Fence fence, Unlock unlock)
{
    if (rw) {
        if (write ? sh->writers[k].fetch_add(1) || sh->readers[k].load()
                  : (sh->readers[k].fetch_add(1), sh->writers[k].load() > 0))
            sh->inside++;
    }
    int64_t start = now_ns();
    uint64_t token = 0;
    if (write && fence(&token)) token = 0;
    usleep(1000);
    int64_t end = now_ns();
    if (rw) (write ? sh->writers[k] : sh->readers[k])--;
    int r = unlock();
    if (r) {
        sh->errors++;
        sh->last_error = r;
    }
    int64_t mark = sh->mark;
    int64_t expect = 0;
    if (mark && start > mark) sh->first_after[id].compare_exchange_strong(expect, start);
    int i = sh->nholds++;
    if (i < kMaxHolds) sh->holds[i] = Hold{k, token, start, end, write};
}

/* A worker: lock one of names at random (rw: a read-write lock, written
 * one time in three, else read), hold ~1 ms, unlock, record. */
void work(Shared *sh, int id, const std::string &url, const std::vector<std::string> &names, bool rw)
{
    /* Forked from a test that uses the library already: it goes on with
     * the parent's configuration (the same URL). */
    int c = rmutex_configure(url.c_str());
    if (c && c != EBUSY) _exit(3);
    rmutex_set_lost_callback(lost_cb, sh);
    std::vector<rmutex_t> m(names.size());
    std::vector<rrwlock_t> l(names.size());
    for (size_t i = 0; i < names.size(); i++)
        if (rw ? rrwlock_init(&l[i], names[i].c_str(), nullptr) : rmutex_init(&m[i], names[i].c_str(), nullptr))
            _exit(4);
    unsigned seed = (unsigned)getpid();
    while (!sh->stop) {
        int k = (int)(rand_r(&seed) % names.size());
        bool write = !rw || rand_r(&seed) % 3 == 0;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 3;
        int r = !rw ? rmutex_timedlock(&m[k], &dl) : write ? rrwlock_timedwrlock(&l[k], &dl)
                                                          : rrwlock_timedrdlock(&l[k], &dl);
        if (r == RMUTEX_ENOREPLICAS) { /* a shard in the middle of a failover: not granted */
            sh->refused++;
            continue;
        }
        if (r) {
            sh->errors++;
            sh->last_error = r;
            continue;
        }
        if (rw)
            hold(sh, id, k, rw, write, [&](uint64_t *t) { return rrwlock_fence(&l[k], t); },
                 [&] { return rrwlock_unlock(&l[k]); });
        else
            hold(sh, id, k, rw, write, [&](uint64_t *t) { return rmutex_fence(&m[k], t); },
                 [&] { return rmutex_unlock(&m[k]); });
    }
    _exit(0);
}

struct Workers {
    Shared *sh = shared_new();
    std::vector<pid_t> pids;

    void start(int n, const std::string &url, const std::vector<std::string> &names, bool rw = false)
    {
        for (int i = 0; i < n; i++) {
            pid_t p = fork();
            if (p == 0) work(sh, i, url, names, rw);
            pids.push_back(p);
        }
    }
    void stop()
    {
        sh->stop = 1;
        for (pid_t p : pids) {
            int st;
            waitpid(p, &st, 0);
        }
        pids.clear();
    }
    ~Workers()
    {
        if (!pids.empty()) stop();
        munmap(sh, sizeof(Shared));
    }
    /* Holds of one lock that overlap (by time: a write with anything, a
     * read with a write; the writes' tokens must grow too, where they got
     * one). */
    int overlaps()
    {
        int n = std::min<int>(sh->nholds, kMaxHolds), bad = 0;
        std::vector<Hold> h(sh->holds, sh->holds + n);
        std::sort(h.begin(), h.end(), [](const Hold &a, const Hold &b) {
            return a.lock != b.lock ? a.lock < b.lock : a.start < b.start;
        });
        int64_t end_any = 0, end_write = 0;
        uint64_t token = 0;
        for (int i = 0; i < n; i++) {
            const Hold &x = h[i];
            if (i == 0 || x.lock != h[i - 1].lock) end_any = end_write = 0, token = 0;
            if (x.start < end_write || (x.write && (x.start < end_any || (x.token && x.token <= token)))) {
                if (bad++ < 5)
                    std::cerr << "[failover] overlap on lock " << x.lock << ": " << (x.write ? "write" : "read")
                              << " token " << x.token << " [" << x.start / 1000000 << ", " << x.end / 1000000
                              << "] ms after holds up to " << end_any / 1000000 << " (writes " << end_write / 1000000
                              << ", token " << token << ") (mark " << sh->mark / 1000000 << ")\n";
            }
            end_any = std::max(end_any, x.end);
            if (x.write) end_write = std::max(end_write, x.end), token = x.token ? x.token : token;
        }
        return bad;
    }
    std::string progress() const
    {
        return std::to_string(sh->nholds) + " holds, " + std::to_string(sh->refused) + " refused, " +
               std::to_string(sh->errors) + " errors (last " + err_name(sh->last_error) + ")";
    }
    /* Holds recorded that were writes (or mutex holds), and reads. */
    std::pair<int, int> writes_and_reads()
    {
        int n = std::min<int>(sh->nholds, kMaxHolds), w = 0;
        for (int i = 0; i < n; i++) w += sh->holds[i].write;
        return {w, n - w};
    }
};

/* Names whose slots primary i serves. */
std::vector<std::string> names_on(int i, int count, const std::string &tag)
{
    std::vector<std::string> out;
    for (int k = 0; (int)out.size() < count && k < 100000; k++) {
        std::string n = "rmt:fo:" + tag + ":" + std::to_string(getpid()) + ":" + std::to_string(k);
        if (cluster->owner(cluster->slot(n)) == i) out.push_back(n);
    }
    return out;
}

int primary_index(int skip = -1)
{
    for (int i = 0; i < (int)cluster->nodes.size(); i++) {
        if (i == skip || !cluster->nodes[i]->running()) continue;
        Reply role = cluster->client(i).cmd({"ROLE"});
        if (role && std::string(role->element[0]->str) == "master" && cluster->replica_of(i) >= 0) return i;
    }
    return -1;
}

class ClusterFailover : public ::testing::Test {
  protected:
    void TearDown() override
    {
        rmutex_shutdown();
        /* A URL sets only the options it names, and the settings outlive
         * rmutex_shutdown: a test's replica acknowledgement must not reach
         * the next (seen: replicas=auto of the kill -9 test refusing the
         * next test's grants on a primary whose replica was resyncing). */
        EXPECT_RC(0, rmutex_configure(cluster->url("replicas=0&min_replicas=0").c_str()));
        rmutex_shutdown();
        EXPECT_TRUE(cluster->heal()) << "the cluster did not heal";
    }
};

/* Workers on 4 names of a primary with a replica; CLUSTER FAILOVER while
 * they work, with every grant acknowledged by the replica. */
void manual_failover_under_load(bool rw)
{
    int p = primary_index();
    ASSERT_GE(p, 0);
    int r = cluster->replica_of(p);
    auto names = names_on(p, 4, rw ? "manual-rw" : "manual");
    ASSERT_EQ(4u, names.size());
    Workers w;
    w.start(3, cluster->url("lease=3000&replicas=auto&min_replicas=1&wait_timeout=500"), names, rw);
    ASSERT_TRUE(wait_until([&] { return w.sh->nholds > 100; }, ms(10000))) << w.progress();
    int before = w.sh->nholds;
    ASSERT_TRUE(cluster->failover(r));
    w.sh->mark = now_ns();
    ASSERT_TRUE(wait_until([&] { return w.sh->nholds > before + 200; }, ms(10000)))
        << "no progress after the failover: " << w.progress();
    w.stop();
    auto [writes, reads] = w.writes_and_reads();
    std::cerr << "[failover] manual" << (rw ? " (read-write locks)" : "") << ": " << w.sh->nholds << " holds ("
              << writes << " written, " << reads << " read), " << w.sh->refused
              << " refused for too few replica acknowledgements, " << w.sh->errors << " errors (last "
              << w.sh->last_error << ")\n";
    EXPECT_EQ(0, w.overlaps());
    EXPECT_EQ(0, w.sh->inside.load()) << "a reader saw a writer inside, or a writer somebody else";
    EXPECT_EQ(0, w.sh->lost.load());
    EXPECT_EQ(0, w.sh->errors.load()) << "last error " << err_name(w.sh->last_error);
    if (rw) {
        EXPECT_TRUE(writes > 0 && reads > 0);
    }
}

TEST_F(ClusterFailover, AManualFailoverUnderLoadLosesNoHoldAndDoublesNone)
{
    manual_failover_under_load(false);
}

TEST_F(ClusterFailover, AManualFailoverUnderAReadWriteLoadLosesNoHoldAndDoublesNone)
{
    manual_failover_under_load(true);
}

/* A cluster's seeds are only where the map is asked for: after a failover
 * the first one may be a replica, which answers WAIT with an error.  That
 * is no refusal of replica acknowledgement by the cluster. */
TEST_F(ClusterFailover, AReplicaAsTheFirstSeedDoesNotMakeTheUrlRefuseReplicaAcknowledgement)
{
    int p = primary_index();
    ASSERT_GE(p, 0);
    int r = cluster->replica_of(p);
    std::string u = "redis-cluster://127.0.0.1:" + std::to_string(cluster->nodes[r]->port()) + "," +
                    cluster->url("replicas=auto&min_replicas=1&wait_timeout=500").substr(16);
    ASSERT_RC(0, rmutex_configure(u.c_str()));
    rrwlock_t l;
    ASSERT_RC(0, rrwlock_init(&l, names_on(p, 1, "seed")[0].c_str(), nullptr));
    EXPECT_RC(0, rrwlock_wrlock(&l));
    EXPECT_RC(0, rrwlock_unlock(&l));
    EXPECT_RC(0, rrwlock_destroy(&l));
}

TEST_F(ClusterFailover, AFailoverAddsNoNoscriptRoundTripToALockCall)
{
    int p = primary_index();
    ASSERT_GE(p, 0);
    int r = cluster->replica_of(p);
    auto names = names_on(p, 1, "noscript");
    ASSERT_RC(0, rmutex_configure(cluster->url().c_str()));
    rmutex_t m;
    init_mutex(&m, names[0]);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    /* The replica's script cache is empty: Redis does not replicate SCRIPT LOAD. */
    ASSERT_TRUE(cluster->failover(r));
    uint64_t loads = stats().script_loads;
    ASSERT_RC(0, rmutex_lock(&m));
    EXPECT_TRUE(cluster->client(r).exists(names[0])) << "held on the promoted replica";
    ASSERT_RC(0, rmutex_unlock(&m));
    EXPECT_EQ(loads, stats().script_loads) << "the lock call on the new primary met NOSCRIPT";
    EXPECT_RC(0, rmutex_destroy(&m));
}

TEST_F(ClusterFailover, KillingAPrimaryWithAReplicaKeepsAcknowledgedHoldsAndResumesSoonAfterThePromotion)
{
    int p = primary_index();
    ASSERT_GE(p, 0);
    int r = cluster->replica_of(p);
    auto names = names_on(p, 5, "kill");
    ASSERT_EQ(5u, names.size());
    std::string url = cluster->url("lease=6000&replicas=auto&wait_timeout=500");
    ASSERT_RC(0, rmutex_configure(url.c_str()));
    std::atomic<int> lost{0};
    rmutex_set_lost_callback([](rmutex_t *, const char *, void *a) { ++*static_cast<std::atomic<int> *>(a); },
                             &lost);
    rmutex_t held;
    init_mutex(&held, names[0]);
    ASSERT_RC(0, rmutex_lock(&held));
    Workers w;
    w.start(2, url, std::vector<std::string>(names.begin() + 1, names.end()));
    ASSERT_TRUE(wait_until([&] { return w.sh->nholds > 50; }, ms(10000)));
    auto killed = Clock::now();
    cluster->kill9(p);
    ASSERT_TRUE(wait_until([&] {
        Reply role = cluster->client(r).cmd({"ROLE"});
        return role && std::string(role->element[0]->str) == "master";
    }, ms(15000))) << "the replica was not promoted";
    w.sh->mark = now_ns();
    auto promoted = Clock::now();
    ASSERT_TRUE(wait_until([&] { return w.sh->first_after[0] || w.sh->first_after[1]; }, ms(5000)));
    int64_t first = std::min(w.sh->first_after[0] ? w.sh->first_after[0].load() : INT64_MAX,
                             w.sh->first_after[1] ? w.sh->first_after[1].load() : INT64_MAX);
    int64_t resume_ms = (first - w.sh->mark) / 1000000;
    std::cerr << "[failover] kill -9: promoted " << elapsed_ms(killed) - elapsed_ms(promoted)
              << " ms after the kill; first acquisition " << resume_ms << " ms after the promotion\n";
    EXPECT_LT(resume_ms, scaled(ms(1000)).count());
    /* The hold taken before the kill was acknowledged by the replica: it
     * is still ours, renewed on the new primary. */
    EXPECT_TRUE(wait_until([&] { return cluster->client(r).pttl(names[0]) > 0; }, ms(3000)));
    std::this_thread::sleep_for(ms(2500)); /* a renewal on the new primary */
    EXPECT_EQ(0, lost.load());
    EXPECT_RC(0, rmutex_unlock(&held));
    EXPECT_FALSE(cluster->client(r).exists(names[0]));
    w.stop();
    EXPECT_EQ(0, w.overlaps());
    EXPECT_EQ(0, w.sh->lost.load());
    EXPECT_RC(0, rmutex_destroy(&held));
    rmutex_set_lost_callback(nullptr, nullptr);
}

TEST_F(ClusterFailover, APrimaryWithoutAReplicaDyingHangsNoCallAndLosesHoldsOnlyWithTheirLease)
{
    int p = primary_index();
    ASSERT_GE(p, 0);
    int r = cluster->replica_of(p), other = primary_index(p);
    ASSERT_GE(other, 0);
    auto dead = names_on(p, 1, "dead"), alive = names_on(other, 1, "alive");
    ASSERT_RC(0, rmutex_configure(cluster->url("lease=2000&command_timeout=500").c_str()));
    struct Lost {
        std::atomic<int> n{0};
        std::atomic<int64_t> at{0};
    } lost;
    rmutex_set_lost_callback([](rmutex_t *, const char *, void *a) {
        auto *l = static_cast<Lost *>(a);
        l->at = now_ns();
        l->n++;
    }, &lost);
    rmutex_t d, a;
    init_mutex(&d, dead[0]);
    init_mutex(&a, alive[0]);
    ASSERT_RC(0, rmutex_lock(&d)); /* warm: map, connections */
    ASSERT_RC(0, rmutex_unlock(&d));
    ASSERT_RC(0, rmutex_lock(&a));
    int64_t acquired = now_ns();
    cluster->kill9(r);
    cluster->kill9(p);
    /* Every call on the dead primary's slots ends by its deadline. */
    auto t0 = Clock::now();
    EXPECT_RC(EAGAIN, rmutex_trylock(&d));
    EXPECT_LT(elapsed_ms(t0), scaled(ms(1500)).count());
    struct timespec dl = abs_after(CLOCK_REALTIME, 1500);
    t0 = Clock::now();
    EXPECT_RC(ETIMEDOUT, rmutex_timedlock(&d, &dl));
    EXPECT_LT(elapsed_ms(t0), scaled(ms(2500)).count());
    /* The cluster goes down as a whole (full coverage is required): the
     * hold on the healthy primary cannot be renewed; it is reported lost,
     * but not before its lease could have run out. */
    ASSERT_TRUE(wait_until([&] { return lost.n > 0; }, ms(8000)));
    EXPECT_GE((lost.at - acquired) / 1000000, 2000) << "reported lost before its lease was up";
    EXPECT_RC(EPERM, rmutex_unlock(&a));
    EXPECT_RC(0, rmutex_destroy(&d));
    EXPECT_RC(0, rmutex_destroy(&a));
    rmutex_set_lost_callback(nullptr, nullptr);
}

} // namespace
