/* shim_config_test.cc -- the RMUTEX_PRELOAD parser (shim/config.c), no
 * Redis and no preloading involved. */
extern "C" {
#include "config.h"
}

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

struct Parsed {
    int rc = 0;
    std::vector<std::string> errors;
    std::vector<rm_shim_entry> v;
    rm_shim_config cfg{};
    ~Parsed() { rm_shim_config_free(&cfg); }
};

void collect(void *arg, const char *msg) { static_cast<Parsed *>(arg)->errors.push_back(msg); }

/* Parse spec for the program /usr/bin/app started as "app". */
std::unique_ptr<Parsed> parse(const char *spec, const char *exe = "/usr/bin/app",
                              const char *argv0 = "app")
{
    auto p = std::make_unique<Parsed>();
    p->rc = rm_shim_config_parse(spec, exe, argv0, &p->cfg, collect, p.get());
    p->v.assign(p->cfg.v, p->cfg.v + p->cfg.n);
    return p;
}

std::string str(const char *s) { return s ? s : "(null)"; }

TEST(ShimConfig, TheIssueExampleGivesAFairAndANonFairLock)
{
    auto p = parse("app: orders_lock=shop:orders;fair, stats_lock");
    ASSERT_EQ(0, p->rc);
    ASSERT_EQ(2u, p->v.size());
    EXPECT_EQ("orders_lock", str(p->v[0].symbol));
    EXPECT_EQ("shop:orders", str(p->v[0].name));
    EXPECT_EQ(1, p->v[0].fair);
    EXPECT_EQ(nullptr, p->v[0].object);
    EXPECT_EQ("stats_lock", str(p->v[1].symbol));
    EXPECT_EQ("stats_lock", str(p->v[1].name));
    EXPECT_EQ(0, p->v[1].fair);
    EXPECT_TRUE(p->errors.empty());
}

TEST(ShimConfig, CondMarksAConditionVariableAndTakesNoOtherOption)
{
    auto p = parse("app: queue_lock=shop:q, queue_cv=shop:nonempty;cond, libq.so:full_cv;cond");
    ASSERT_EQ(0, p->rc) << (p->errors.empty() ? "" : p->errors[0]);
    ASSERT_EQ(3u, p->v.size());
    EXPECT_EQ(0, p->v[0].cond);
    EXPECT_EQ("queue_cv", str(p->v[1].symbol));
    EXPECT_EQ("shop:nonempty", str(p->v[1].name));
    EXPECT_EQ(1, p->v[1].cond);
    EXPECT_EQ("libq.so", str(p->v[2].object));
    EXPECT_EQ(1, p->v[2].cond);

    for (const char *bad : { "app: cv;cond;fair", "app: cv;robust;cond", "app: cv;cond;lease=10" }) {
        auto q = parse(bad);
        EXPECT_EQ(1, q->rc) << bad;
        EXPECT_TRUE(q->v.empty()) << bad;
        ASSERT_EQ(1u, q->errors.size()) << bad;
        EXPECT_NE(std::string::npos, q->errors[0].find("takes no other option")) << q->errors[0];
    }
}

TEST(ShimConfig, RwlockMarksAReadWriteLockAndTakesOnlyALease)
{
    auto p = parse("app: table_rw=shop:table;rwlock, cfg_rw;rwlock;lease=5000");
    ASSERT_EQ(0, p->rc) << (p->errors.empty() ? "" : p->errors[0]);
    ASSERT_EQ(2u, p->v.size());
    EXPECT_EQ(1, p->v[0].rwlock);
    EXPECT_EQ("shop:table", str(p->v[0].name));
    EXPECT_EQ(1, p->v[1].rwlock);
    EXPECT_EQ(5000ul, p->v[1].lease_ms);

    for (const char *bad : { "app: rw;rwlock;fair", "app: rw;robust;rwlock", "app: rw;rwlock;cache",
                             "app: rw;rwlock;cond" }) {
        auto q = parse(bad);
        EXPECT_EQ(1, q->rc) << bad;
        EXPECT_TRUE(q->v.empty()) << bad;
        ASSERT_EQ(1u, q->errors.size()) << bad;
        EXPECT_NE(std::string::npos, q->errors[0].find("takes no other option but lease=")) << q->errors[0];
    }
}

TEST(ShimConfig, CacheIsParsedAndRefusedWithAFixedLease)
{
    auto p = parse("app: counter_lock=jobs;cache, other;robust;cache, queue;cache;fair");
    ASSERT_EQ(0, p->rc) << (p->errors.empty() ? "" : p->errors[0]);
    ASSERT_EQ(3u, p->v.size());
    EXPECT_EQ(1, p->v[0].cache);
    EXPECT_EQ(1, p->v[1].cache);
    EXPECT_EQ(1, p->v[1].robust);
    EXPECT_EQ(1, p->v[2].cache);
    EXPECT_EQ(1, p->v[2].fair);
    for (const char *bad : { "app: m;lease=500;cache", "app: cv;cond;cache" }) {
        auto q = parse(bad);
        EXPECT_EQ(1, q->rc) << bad;
        EXPECT_TRUE(q->v.empty()) << bad;
        ASSERT_EQ(1u, q->errors.size()) << bad;
    }
}

TEST(ShimConfig, ObjectRobustAndLeaseAreParsed)
{
    auto p = parse(" app : libfoo.so.1:cache_lock = cache:{user}:1 ; robust ; lease=2500 ");
    ASSERT_EQ(0, p->rc) << (p->errors.empty() ? "" : p->errors[0]);
    ASSERT_EQ(1u, p->v.size());
    EXPECT_EQ("libfoo.so.1", str(p->v[0].object));
    EXPECT_EQ("cache_lock", str(p->v[0].symbol));
    EXPECT_EQ("cache:{user}:1", str(p->v[0].name));
    EXPECT_EQ(1, p->v[0].robust);
    EXPECT_EQ(2500ul, p->v[0].lease_ms);
}

TEST(ShimConfig, PercentEscapesPutSeparatorsIntoNames)
{
    auto p = parse("app: a=x%2Cy%3Bz%7Cw%25%20v");
    ASSERT_EQ(1u, p->v.size());
    EXPECT_EQ("x,y;z|w% v", str(p->v[0].name));
    auto bad = parse("app: a=x%2, b=%00");
    EXPECT_EQ(2, bad->rc);
    EXPECT_TRUE(bad->v.empty());
}

TEST(ShimConfig, OnlySectionsForThisProgramApply)
{
    auto p = parse("other: a | app,tool: b | *pp: c | /usr/bin/*: d | /opt/*: e");
    ASSERT_EQ(0, p->rc);
    std::vector<std::string> got;
    for (auto &e : p->v) got.push_back(e.symbol);
    EXPECT_EQ((std::vector<std::string>{ "b", "c", "d" }), got);
}

TEST(ShimConfig, ArgvZeroAlsoNamesTheProgram)
{
    auto p = parse("alias: a", "/usr/bin/real", "/some/where/alias");
    ASSERT_EQ(1u, p->v.size());
    auto q = parse("alias: a", "/usr/bin/real", "real");
    EXPECT_TRUE(q->v.empty());
}

TEST(ShimConfig, ErrorsInOtherProgramsSectionsAreNotReported)
{
    auto p = parse("other: 9bad;nope, =x | app: ok");
    EXPECT_EQ(0, p->rc);
    EXPECT_TRUE(p->errors.empty());
    ASSERT_EQ(1u, p->v.size());
}

TEST(ShimConfig, BadEntriesAreReportedOneLineEachAndLeftOut)
{
    auto p = parse("app: a;bogus, 9x, b=, c;lease=0, d;lease=abc, e:f:g, good, good, :x");
    std::vector<std::string> got;
    for (auto &e : p->v) got.push_back(e.symbol);
    EXPECT_EQ((std::vector<std::string>{ "good" }), got);
    EXPECT_EQ(8, p->rc);
    ASSERT_EQ(8u, p->errors.size());
    EXPECT_NE(std::string::npos, p->errors[0].find("unknown option 'bogus'")) << p->errors[0];
    EXPECT_NE(std::string::npos, p->errors[1].find("'9x' is not a symbol name")) << p->errors[1];
    EXPECT_NE(std::string::npos, p->errors[2].find("empty lock name")) << p->errors[2];
    EXPECT_NE(std::string::npos, p->errors[3].find("lease must be")) << p->errors[3];
    EXPECT_NE(std::string::npos, p->errors[4].find("lease must be")) << p->errors[4];
    EXPECT_NE(std::string::npos, p->errors[5].find("not a symbol name")) << p->errors[5];
    EXPECT_NE(std::string::npos, p->errors[6].find("listed twice")) << p->errors[6];
    EXPECT_NE(std::string::npos, p->errors[7].find("not a shared object")) << p->errors[7];
}

TEST(ShimConfig, SectionWithoutColonIsReportedEverywhere)
{
    auto p = parse("just_a_symbol | app: a", "/usr/bin/zzz", "zzz");
    EXPECT_EQ(1, p->rc);
    ASSERT_EQ(1u, p->errors.size());
    EXPECT_NE(std::string::npos, p->errors[0].find("no ':'")) << p->errors[0];
    EXPECT_TRUE(p->v.empty());
}

TEST(ShimConfig, EmptyEntriesAndSectionsAreSkipped)
{
    auto p = parse("| app: a, , b, |");
    EXPECT_EQ(0, p->rc);
    EXPECT_EQ(2u, p->v.size());
    auto q = parse("");
    EXPECT_EQ(0, q->rc);
    EXPECT_TRUE(q->v.empty());
}

TEST(ShimConfig, CompilerMadeLocalNamesAreSymbols)
{
    auto p = parse("app: lock.1, x.lto_priv.0=n");
    ASSERT_EQ(2u, p->v.size());
    EXPECT_EQ("lock.1", str(p->v[0].symbol));
    EXPECT_EQ("x.lto_priv.0", str(p->v[1].symbol));
}

} // namespace
