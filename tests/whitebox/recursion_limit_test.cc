/* recursion_limit_test.cc -- EAGAIN at RMUTEX_RECURSION_MAX.
 *
 * A white-box test: it links the static library and sets the depth of a
 * hold through depth_hook.c, since reaching 2^31 - 1 levels through the API
 * would take minutes.  Everything it then checks goes through the API, for
 * a non-fair and a fair RECURSIVE mutex: every acquiring call returns
 * EAGAIN at the limit and changes nothing (count, Redis, the next unlock),
 * one level below the limit the relock still succeeds, and the hold then
 * unwinds to a clean release. */
#include <rmutex.h>

#include <cerrno>
#include <ctime>

#include "depth_hook.h"
#include "harness.h"

namespace {

using namespace rmt;

class RecursionLimit : public RedisTest {};

TEST_F(RecursionLimit, OneLevelPastTheLimitIsEagainAndChangesNothing)
{
    for (int fair : {0, 1}) {
        SCOPED_TRACE(fair ? "fair" : "non-fair");
        std::string name = lock_name(fair ? "fair" : "nonfair");
        rmutexattr_t a;
        ASSERT_EQ(0, rmutexattr_init(&a));
        ASSERT_EQ(0, rmutexattr_settype(&a, RMUTEX_RECURSIVE));
        ASSERT_EQ(0, rmutexattr_setfair(&a, fair));
        rmutex_t m;
        ASSERT_RC(0, rmutex_init(&m, name.c_str(), &a));
        ASSERT_EQ(0, rmutexattr_destroy(&a));

        EXPECT_RC(EPERM, rmt_set_depth(&m, 5)) << "the hook refuses a mutex nobody holds";
        ASSERT_RC(0, rmutex_lock(&m));
        auto fields = redis().hgetall(name);
        ASSERT_EQ(1u, fields.size());

        ASSERT_RC(0, rmt_set_depth(&m, RMUTEX_RECURSION_MAX - 1));
        EXPECT_RC(0, rmutex_lock(&m)) << "one level below the limit";
        unsigned count = 0;
        EXPECT_RC(0, rmutex_holdcount(&m, &count));
        EXPECT_EQ(RMUTEX_RECURSION_MAX, count);

        struct timespec rt, mono;
        clock_gettime(CLOCK_REALTIME, &rt);
        clock_gettime(CLOCK_MONOTONIC, &mono);
        rt.tv_sec += 1;
        mono.tv_sec += 1;
        EXPECT_RC(EAGAIN, rmutex_lock(&m));
        EXPECT_RC(EAGAIN, rmutex_trylock(&m));
        EXPECT_RC(EAGAIN, rmutex_timedlock(&m, &rt));
        EXPECT_RC(EAGAIN, rmutex_clocklock(&m, CLOCK_MONOTONIC, &mono));
        EXPECT_FALSE(std::string(rmutex_detail()).empty()) << "the refusal says why";
        EXPECT_RC(0, rmutex_holdcount(&m, &count));
        EXPECT_EQ(RMUTEX_RECURSION_MAX, count) << "a refused lock does not count";
        EXPECT_EQ(fields, redis().hgetall(name)) << "nor does it touch Redis";

        /* Unwind: an inner unlock keeps the hold, the last one releases. */
        EXPECT_RC(0, rmutex_unlock(&m));
        EXPECT_RC(0, rmutex_holdcount(&m, &count));
        EXPECT_EQ(RMUTEX_RECURSION_MAX - 1, count);
        EXPECT_EQ(fields, redis().hgetall(name));
        ASSERT_RC(0, rmt_set_depth(&m, 1));
        EXPECT_RC(0, rmutex_unlock(&m));
        EXPECT_FALSE(redis().exists(name)) << "released in Redis";
        EXPECT_RC(EPERM, rmutex_unlock(&m));
        EXPECT_RC(0, rmutex_destroy(&m));
    }
}

} // namespace
