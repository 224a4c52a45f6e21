/* attr_test.cc -- rmutexattr_*: defaults, round trips and every EINVAL.
 * No Redis: attributes never talk to a server, and neither does
 * rmutex_init(). */
#include <cerrno>
#include <climits>
#include <cstring>

#include "harness.h"

namespace {

using rmt::err_name;

/* An attribute object that was never initialized: all zeros, and all 0xAB. */
rmutexattr_t zeroed_attr()
{
    rmutexattr_t a;
    memset(&a, 0, sizeof a);
    return a;
}

rmutexattr_t garbage_attr()
{
    rmutexattr_t a;
    memset(&a, 0xAB, sizeof a);
    return a;
}

TEST(RmutexAttrInit, GivesNormalStalledNotFairAndWatchdogLease)
{
    rmutexattr_t a = garbage_attr();
    ASSERT_EQ(0, rmutexattr_init(&a));
    int type = -1, robust = -1, fair = -1;
    unsigned long lease = 12345;
    EXPECT_EQ(0, rmutexattr_gettype(&a, &type));
    EXPECT_EQ(RMUTEX_NORMAL, type);
    EXPECT_EQ(RMUTEX_DEFAULT, type);
    EXPECT_EQ(0, rmutexattr_getrobust(&a, &robust));
    EXPECT_EQ(RMUTEX_STALLED, robust);
    EXPECT_EQ(0, rmutexattr_getfair(&a, &fair));
    EXPECT_EQ(0, fair);
    EXPECT_EQ(0, rmutexattr_getlease(&a, &lease));
    EXPECT_EQ(0UL, lease);
    EXPECT_EQ(0, rmutexattr_destroy(&a));
}

TEST(RmutexAttrInit, RejectsNull) { EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_init(nullptr))); }

TEST(RmutexAttrInit, CanInitializeADestroyedAttrAgain)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_settype(&a, RMUTEX_RECURSIVE));
    ASSERT_EQ(0, rmutexattr_destroy(&a));
    ASSERT_EQ(0, rmutexattr_init(&a));
    int type = -1;
    EXPECT_EQ(0, rmutexattr_gettype(&a, &type));
    EXPECT_EQ(RMUTEX_NORMAL, type);
}

TEST(RmutexAttrDestroy, RejectsNullUninitializedAndAlreadyDestroyed)
{
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_destroy(nullptr)));
    rmutexattr_t z = zeroed_attr(), g = garbage_attr();
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_destroy(&z)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_destroy(&g)));
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    EXPECT_EQ(0, rmutexattr_destroy(&a));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_destroy(&a)));
}

TEST(RmutexAttrType, RoundTripsEveryType)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    for (int t : {RMUTEX_RECURSIVE, RMUTEX_ERRORCHECK, RMUTEX_NORMAL, RMUTEX_DEFAULT}) {
        EXPECT_EQ(0, rmutexattr_settype(&a, t));
        int got = -1;
        EXPECT_EQ(0, rmutexattr_gettype(&a, &got));
        EXPECT_EQ(t, got);
    }
}

TEST(RmutexAttrType, RejectsUnknownTypesAndKeepsThePreviousOne)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_settype(&a, RMUTEX_ERRORCHECK));
    /* 3 is glibc's ADAPTIVE_NP, which rmutex does not have; the flags are
     * for RMUTEX_INITIALIZER_NP only. */
    for (int bad : {-1, 3, 4, 99, INT_MAX, INT_MIN, static_cast<int>(RMUTEX_FLAG_ROBUST),
                    static_cast<int>(RMUTEX_FLAG_FAIR), static_cast<int>(RMUTEX_RECURSIVE) | RMUTEX_FLAG_ROBUST})
        EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_settype(&a, bad))) << "type " << bad;
    int got = -1;
    EXPECT_EQ(0, rmutexattr_gettype(&a, &got));
    EXPECT_EQ(RMUTEX_ERRORCHECK, got);
}

TEST(RmutexAttrRobust, RoundTripsAndRejectsOtherValues)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    EXPECT_EQ(0, rmutexattr_setrobust(&a, RMUTEX_ROBUST));
    int got = -1;
    EXPECT_EQ(0, rmutexattr_getrobust(&a, &got));
    EXPECT_EQ(RMUTEX_ROBUST, got);
    for (int bad : {-1, 2, 3, 0x100, INT_MAX})
        EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_setrobust(&a, bad))) << "robust " << bad;
    EXPECT_EQ(0, rmutexattr_getrobust(&a, &got));
    EXPECT_EQ(RMUTEX_ROBUST, got);
    EXPECT_EQ(0, rmutexattr_setrobust(&a, RMUTEX_STALLED));
    EXPECT_EQ(0, rmutexattr_getrobust(&a, &got));
    EXPECT_EQ(RMUTEX_STALLED, got);
}

TEST(RmutexAttrFair, RoundTripsAndRejectsOtherValues)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    EXPECT_EQ(0, rmutexattr_setfair(&a, 1));
    int got = -1;
    EXPECT_EQ(0, rmutexattr_getfair(&a, &got));
    EXPECT_EQ(1, got);
    /* "Set or get fairness (0 or 1)": anything else is an unknown value. */
    for (int bad : {-1, 2, 0x200, INT_MAX})
        EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_setfair(&a, bad))) << "fair " << bad;
    EXPECT_EQ(0, rmutexattr_getfair(&a, &got));
    EXPECT_EQ(1, got);
    EXPECT_EQ(0, rmutexattr_setfair(&a, 0));
    EXPECT_EQ(0, rmutexattr_getfair(&a, &got));
    EXPECT_EQ(0, got);
}

TEST(RmutexAttrLease, RoundTripsUpToTwoToTheThirtyOneMinusOne)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    for (unsigned long v : {1UL, 1000UL, 2147483647UL, 0UL}) {
        EXPECT_EQ(0, rmutexattr_setlease(&a, v));
        unsigned long got = 777;
        EXPECT_EQ(0, rmutexattr_getlease(&a, &got));
        EXPECT_EQ(v, got);
    }
}

TEST(RmutexAttrLease, RejectsLeasesAboveTwoToTheThirtyOneMinusOne)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_setlease(&a, 5000));
    for (unsigned long bad : {2147483648UL, 4294967295UL, ULONG_MAX})
        EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_setlease(&a, bad))) << "lease " << bad;
    unsigned long got = 0;
    EXPECT_EQ(0, rmutexattr_getlease(&a, &got));
    EXPECT_EQ(5000UL, got);
}

TEST(RmutexAttrAccessors, RejectNullAttr)
{
    int i;
    unsigned long l;
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_settype(nullptr, RMUTEX_NORMAL)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_gettype(nullptr, &i)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_setrobust(nullptr, RMUTEX_STALLED)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_getrobust(nullptr, &i)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_setfair(nullptr, 0)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_getfair(nullptr, &i)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_setlease(nullptr, 0)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_getlease(nullptr, &l)));
}

TEST(RmutexAttrAccessors, RejectNullOutPointers)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_gettype(&a, nullptr)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_getrobust(&a, nullptr)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_getfair(&a, nullptr)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_getlease(&a, nullptr)));
}

void expect_every_accessor_rejects(rmutexattr_t *a, const char *what)
{
    int i = 0;
    unsigned long l = 0;
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_settype(a, RMUTEX_NORMAL))) << what;
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_gettype(a, &i))) << what;
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_setrobust(a, RMUTEX_STALLED))) << what;
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_getrobust(a, &i))) << what;
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_setfair(a, 0))) << what;
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_getfair(a, &i))) << what;
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_setlease(a, 0))) << what;
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_getlease(a, &l))) << what;
}

TEST(RmutexAttrAccessors, RejectUninitializedAttr)
{
    rmutexattr_t z = zeroed_attr(), g = garbage_attr();
    expect_every_accessor_rejects(&z, "zeroed");
    expect_every_accessor_rejects(&g, "0xAB-filled");
}

TEST(RmutexAttrAccessors, RejectDestroyedAttr)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_destroy(&a));
    expect_every_accessor_rejects(&a, "destroyed");
}

TEST(RmutexAttrAccessors, LeaveErrnoAlone)
{
    rmutexattr_t a;
    int i;
    unsigned long l;
    const int sentinel = 4242;
    auto check = [&](int rc, const char *call) {
        (void)rc;
        EXPECT_EQ(sentinel, errno) << call;
        errno = sentinel;
    };
    errno = sentinel;
    check(rmutexattr_init(nullptr), "init(NULL)");
    check(rmutexattr_init(&a), "init");
    check(rmutexattr_settype(&a, 99), "settype(99)");
    check(rmutexattr_settype(&a, RMUTEX_RECURSIVE), "settype");
    check(rmutexattr_gettype(&a, &i), "gettype");
    check(rmutexattr_gettype(&a, nullptr), "gettype(NULL)");
    check(rmutexattr_setrobust(&a, 7), "setrobust(7)");
    check(rmutexattr_getrobust(&a, &i), "getrobust");
    check(rmutexattr_setfair(&a, 7), "setfair(7)");
    check(rmutexattr_getfair(&a, &i), "getfair");
    check(rmutexattr_setlease(&a, ULONG_MAX), "setlease(max)");
    check(rmutexattr_getlease(&a, &l), "getlease");
    check(rmutexattr_destroy(&a), "destroy");
    check(rmutexattr_destroy(&a), "destroy again");
}

/* rmutex_init() needs no Redis either ("No Redis round trip happens here"),
 * so its attribute checks belong here. */
TEST(RmutexInitAttr, RejectsUninitializedOrDestroyedAttr)
{
    rmutex_t m;
    rmutexattr_t z = zeroed_attr(), g = garbage_attr();
    EXPECT_EQ(err_name(EINVAL), err_name(rmutex_init(&m, "rmt:attr", &z)));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutex_init(&m, "rmt:attr", &g)));
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_destroy(&a));
    EXPECT_EQ(err_name(EINVAL), err_name(rmutex_init(&m, "rmt:attr", &a)));
}

TEST(RmutexInitAttr, AcceptsNullAndInitializedAttrWithoutAServer)
{
    /* Nothing listens on this port: init must not connect anywhere. */
    std::string url = "redis://127.0.0.1:" + std::to_string(rmt::free_port());
    ASSERT_EQ(0, rmutex_configure(url.c_str()));
    rmutex_t m1, m2;
    EXPECT_EQ(0, rmutex_init(&m1, "rmt:attr:null", nullptr)) << rmutex_detail();
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_settype(&a, RMUTEX_RECURSIVE));
    ASSERT_EQ(0, rmutexattr_setrobust(&a, RMUTEX_ROBUST));
    ASSERT_EQ(0, rmutexattr_setlease(&a, 1500));
    EXPECT_EQ(0, rmutex_init(&m2, "rmt:attr:set", &a)) << rmutex_detail();
    /* The attribute object can go away right after init. */
    EXPECT_EQ(0, rmutexattr_destroy(&a));
    unsigned count = 99;
    EXPECT_EQ(0, rmutex_holdcount(&m2, &count));
    EXPECT_EQ(0u, count);
    EXPECT_EQ(0, rmutex_destroy(&m1));
    EXPECT_EQ(0, rmutex_destroy(&m2));
}

TEST(RmutexVersion, MatchesTheHeader)
{
    EXPECT_EQ(static_cast<unsigned>(RMUTEX_VERSION_NUM), rmutex_version());
    std::string expected = std::to_string(RMUTEX_VERSION_MAJOR) + "." + std::to_string(RMUTEX_VERSION_MINOR) +
                           "." + std::to_string(RMUTEX_VERSION_PATCH);
    ASSERT_NE(nullptr, rmutex_version_string());
    EXPECT_EQ(expected, rmutex_version_string());
    EXPECT_TRUE(RMUTEX_AT_LEAST_VERSION(0, 1, 0));
    EXPECT_FALSE(RMUTEX_AT_LEAST_VERSION(RMUTEX_VERSION_MAJOR + 1, 0, 0));
}

TEST(RmutexDetail, IsNeverNull)
{
    ASSERT_NE(nullptr, rmutex_detail());
    EXPECT_EQ(err_name(EINVAL), err_name(rmutexattr_init(nullptr)));
    ASSERT_NE(nullptr, rmutex_detail());
}

} // namespace
