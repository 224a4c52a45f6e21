/* servers_test.cc -- what a server that is not quite Redis 7 does to
 * rmutex: one without WAIT (a serverless offering: "unknown command"),
 * asked for replica acknowledgement.  The answer is a clear error at
 * rmutex_configure, and at once on every call when asked for later (the
 * setter), never a hang and never a hold without the
 * acknowledgement asked for.  (Valkey: the valkey: runs of the suites.) */
#include "harness.h"

#include <unistd.h>

using namespace rmt;

namespace {

TEST(NoWait, AskingForReplicasOnAServerWithoutWaitIsAClearErrorAtConfigureAndAtOnceNotAHang)
{
    /* WAIT renamed away: the server answers it "unknown command". */
    auto server = RedisServer::start({"--rename-command", "WAIT", ""});
    ASSERT_TRUE(server);
    Redis redis("127.0.0.1", server->port());
    std::string name = "rmt:nowait:" + std::to_string(getpid());
    /* At configure: refused there and then, and nothing of the URL taken. */
    for (const char *opts : { "?replicas=1&wait_timeout=3000", "?min_replicas=1&pool=3" }) {
        EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_configure((server->url() + opts).c_str())) << opts;
        EXPECT_NE(nullptr, strstr(rmutex_detail(), "refused WAIT")) << rmutex_detail();
        EXPECT_NE(nullptr, strstr(rmutex_detail(), "unknown command")) << rmutex_detail();
    }
    /* replicas=auto asks nothing of a server without replicas. */
    ASSERT_RC(0, rmutex_configure((server->url() + "?replicas=auto").c_str())) << rmutex_detail();
    ASSERT_RC(0, rmutex_configure(server->url().c_str())) << rmutex_detail();
    /* Asked for later (the setter): every acquisition is given back, at once. */
    ASSERT_RC(0, rmutex_set_wait_replicas(1, 3000));
    rmutex_t m;
    init_mutex(&m, name);
    for (int i = 0; i < 2; i++) {
        auto t0 = Clock::now();
        EXPECT_RC(RMUTEX_ENOREPLICAS, rmutex_lock(&m));
        EXPECT_LT(elapsed_ms(t0), scaled(ms(1500)).count()) << "waited as for a WAIT";
        EXPECT_NE(nullptr, strstr(rmutex_detail(), "refused WAIT")) << rmutex_detail();
        EXPECT_NE(nullptr, strstr(rmutex_detail(), "unknown command")) << rmutex_detail();
    }
    EXPECT_FALSE(redis.exists(name)) << "a hold without the acknowledgement asked for";
    ASSERT_RC(0, rmutex_set_wait_replicas(0, 0));
    EXPECT_RC(0, rmutex_lock(&m)) << "without the option it works";
    EXPECT_RC(0, rmutex_unlock(&m));
    rmutex_destroy(&m);
    rmutex_shutdown();
}

TEST(NoWait, AServerWithWaitIsNotRefusedAtConfigureNorOneThatIsDown)
{
    auto server = RedisServer::start({});
    ASSERT_TRUE(server);
    EXPECT_RC(0, rmutex_configure((server->url() + "?replicas=1&min_replicas=1").c_str()))
        << rmutex_detail();
    /* Nothing listens there: the library starts lazily, as without the option. */
    EXPECT_RC(0, rmutex_configure("redis://127.0.0.1:1?replicas=1&connect_timeout=200"))
        << rmutex_detail();
    EXPECT_RC(0, rmutex_configure(server->url().c_str()));
}

} // namespace
