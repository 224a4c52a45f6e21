/* harness.h -- what every rmutex test needs besides GoogleTest: the one
 * include of a test file.
 *
 *   - harness/timing.h: scaled() bounds (RMUTEX_TEST_TIME_SCALE) and
 *     wait_until(), never a bare sleep.
 *   - harness/server.h: RedisServer, a private redis-server on a free
 *     loopback port; stop/restart on the same port, kill -9.
 *   - harness/client.h: Redis, a raw hiredis client for assertions on the
 *     server's state.
 *   - harness/child.h: Child, the rmutex_test_child helper or a program
 *     under test, talked to line by line; temporary directories, files.
 *   - harness/threads.h: Async and HolderThread, threads that call rmutex.
 *   - here: errno names for assertions, and RedisTest, a fixture that gives
 *     each test a server (its own, or the one named by RMUTEX_TEST_URL when
 *     the test does not need to restart or kill it) and lock names that are
 *     unique to the test.
 */
#ifndef RMUTEX_TEST_HARNESS_H
#define RMUTEX_TEST_HARNESS_H

#include <gtest/gtest.h>

#include "harness/build.h"

/* A test whose fork()ed child goes on using the library (which starts
 * threads in the child) skips itself under ThreadSanitizer: GCC 12's TSan
 * runtime does not hold its allocator's locks across fork(), so a child
 * forked while another thread of the parent was inside malloc deadlocks in
 * its own first malloc (seen: the child's watchdog and multiplexer threads
 * blocked in __tsan::user_alloc_internal, about one fork in twelve).  Such
 * tests run in the normal and ASan stages. */
#define RMT_SKIP_FORK_WITH_THREADS_UNDER_TSAN()                                                        \
    if (!rmt_tsan()) {                                                                                 \
    } else                                                                                             \
        GTEST_SKIP() << "fork() with library threads in the child deadlocks TSan's runtime; runs in the other stages"

/* The same for ASan, whose GCC 12 allocator has the same trouble (a child
 * forked while a parent thread allocates can block in its first malloc:
 * seen in barrier_test's stopped member, the child never arriving; cond's
 * process tests skip for it too): tests whose forked children use the
 * library while the parent's library threads run skip under both
 * sanitizers and run in the normal stage. */
#define RMT_SKIP_FORK_WITH_THREADS_UNDER_SANITIZERS()                                                  \
    if (!rmt_sanitized()) {                                                                            \
    } else                                                                                             \
        GTEST_SKIP() << "fork() with library threads deadlocks the sanitizer's allocator in the child; runs in the normal stage"

/* AddressSanitizer aborts on a pthread_cancel of a thread blocked in a
 * system call (cond_test.cc says why): the tests that cancel such a thread
 * skip under it; the other stages run them. */
#define RMT_SKIP_CANCEL_UNDER_ASAN()                                                                   \
    if (!rmt_asan()) {                                                                                 \
    } else                                                                                             \
        GTEST_SKIP() << "AddressSanitizer cannot follow pthread_cancel of a blocked thread "            \
                        "(cond_test.cc says why); the other stages run this test"

#include <rmutex.h>

#include <memory>
#include <string>

#include "harness/child.h"
#include "harness/client.h"
#include "harness/server.h"
#include "harness/threads.h"
#include "harness/timing.h"

namespace rmt {

/* ---- rmutex conveniences ---------------------------------------------- */

rmutex_stats_t stats();

/* An errno name for readable assertion messages: "EBUSY (16)". */
std::string err_name(int code);

/* A formatter so ASSERT_EQ(EBUSY, rc) prints names: use EXPECT_RC(EBUSY, rc). */
#define EXPECT_RC(expected, actual)                                                   \
    EXPECT_EQ(::rmt::err_name(expected), ::rmt::err_name(actual)) << "detail: " << rmutex_detail()
#define ASSERT_RC(expected, actual)                                                   \
    ASSERT_EQ(::rmt::err_name(expected), ::rmt::err_name(actual)) << "detail: " << rmutex_detail()

/* ---- the fixture ------------------------------------------------------- */

class RedisTest : public ::testing::Test {
  protected:
    /* own_server: this test restarts, kills or reconfigures the server, so
     * it never uses RMUTEX_TEST_URL.  options: appended to the URL given to
     * rmutex_configure() ("lease=1000&poll=10000"); configure: whether
     * SetUp() calls rmutex_configure() at all. */
    explicit RedisTest(bool own_server = false, std::string options = "", bool configure = true)
        : own_server_(own_server), options_(std::move(options)), configure_(configure) {}

    void SetUp() override;
    void TearDown() override;

    /* A lock name unique to this test (and process): "rmt:<Suite>.<Test>:<pid>:suffix". */
    std::string lock_name(const std::string &suffix = "m");

    /* Base URL of the server, without options. */
    std::string base_url() const { return base_url_; }
    /* base_url() + "?" + options (options may be empty). */
    std::string url_with(const std::string &options) const;
    /* The URL rmutex was configured with (base + this test's options). */
    std::string url() const { return url_with(options_); }
    /* The same server and options reached at 127.0.0.1:port instead (a
     * Proxy in front of it, tests/proxy.h): plain TCP, the password. */
    std::string url_through(int port) const;

    Redis &redis() { return *redis_; }
    RedisServer *server() { return server_.get(); }
    /* The ACL mode (RMUTEX_TEST_ACL=1, the `acl:` tests): the library runs
     * as tests/acl_rule.h's user, who is gone after a server restart. */
    static bool acl_mode();
    const std::string &host() const { return host_; }
    int port() const { return port_; }

    bool own_server_;
    std::string options_;
    bool configure_;
    std::unique_ptr<RedisServer> server_;
    std::unique_ptr<Redis> redis_;
    std::string base_url_, host_, password_;
    int port_ = 0;
};

/* Init m on name with the given type/robust/lease; asserts success. */
void init_mutex(rmutex_t *m, const std::string &name, int type = RMUTEX_NORMAL,
                int robust = RMUTEX_STALLED, unsigned long lease_ms = 0);

} // namespace rmt

#endif
