/* servers_test.cc -- what a server that is not quite Redis 7 does to
 * rmutex: one without WAIT (a serverless offering: "unknown command"),
 * asked for replica acknowledgement.  The answer is a clear error at once,
 * on every call, never a hang and never a hold without the
 * acknowledgement asked for.  (Valkey: the valkey: runs of the suites.) */
#include "harness.h"

#include <unistd.h>

using namespace rmt;

namespace {

TEST(NoWait, AskingForReplicasOnAServerWithoutWaitIsAClearErrorAtOnceNotAHang)
{
    /* WAIT renamed away: the server answers it "unknown command". */
    auto server = RedisServer::start({"--rename-command", "WAIT", ""});
    ASSERT_TRUE(server);
    Redis redis("127.0.0.1", server->port());
    std::string name = "rmt:nowait:" + std::to_string(getpid());
    ASSERT_RC(0, rmutex_configure((server->url() + "?replicas=1&wait_timeout=3000").c_str()));
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

} // namespace
