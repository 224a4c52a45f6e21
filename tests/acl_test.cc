/* acl_test.cc -- least privilege.  docs/acl.md gives the Redis ACL rule
 * that rmutex needs and nothing more (tests/acl_rule.h holds the same rule;
 * the "acl:" tests run the core of the suite as that user).  Here: the page
 * says that rule, and a user with less -- no script commands, no key, a
 * command a script calls, no channel -- gets EACCES with a detail that
 * names what was refused, without hanging. */
#include "acl_rule.h"
#include "harness.h"

#include <algorithm>
#include <fstream>
#include <sstream>

using namespace rmt;

namespace {

class Acl : public RedisTest {
  protected:
    Acl() : RedisTest(false, "", false) {}

    /* A user with the documented rule changed by edit, and rmutex configured
     * to use it. */
    void configure_user(const std::string &user, std::vector<std::string> rule)
    {
        std::vector<std::string> cmd = { "ACL", "SETUSER", user, "reset", "on", ">Pw-" + user };
        cmd.insert(cmd.end(), rule.begin(), rule.end());
        ASSERT_EQ("OK", redis().cmd(cmd).str());
        ASSERT_RC(0, rmutex_configure(user_url(user).c_str()));
    }
    std::string user_url(const std::string &user)
    {
        if (server() && server()->tls_port()) /* the harness's TLS mode */
            return "rediss://" + user + ":Pw-" + user + "@" + host() + ":" +
                   std::to_string(server()->tls_port()) + "?" + tls_query();
        return "redis://" + user + ":Pw-" + user + "@" + host() + ":" + std::to_string(port());
    }
    static std::vector<std::string> without(std::vector<std::string> rule,
                                            const std::vector<std::string> &drop)
    {
        for (auto &d : drop) rule.erase(std::remove(rule.begin(), rule.end(), d), rule.end());
        return rule;
    }
    void init(rmutex_t *m, const std::string &name, bool fair = false)
    {
        rmutexattr_t a;
        rmutexattr_init(&a);
        rmutexattr_setfair(&a, fair);
        ASSERT_RC(0, rmutex_init(m, name.c_str(), &a));
    }
};

std::string lower(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(), ::tolower);
    return s;
}

TEST_F(Acl, TheAclPageGivesTheRuleTheTestsRunWith)
{
    std::ifstream f(RMUTEX_ACL_DOC);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string page = ss.str();
    ASSERT_NE(std::string::npos, page.find("ACL SETUSER rmutex on >"))
        << RMUTEX_ACL_DOC << " gives no ACL rule";
    EXPECT_NE(std::string::npos, page.find(acl_rule_line()))
        << "the rule of " << RMUTEX_ACL_DOC << " is not tests/acl_rule.h's:\n" << acl_rule_line();
}

TEST_F(Acl, TheRuleIsEnoughForEveryKindOfCall)
{
    configure_user("full", acl_rule());
    std::string name = lock_name();
    rmutex_t m, f;
    init(&m, name);
    init(&f, lock_name("fair"), true);
    ASSERT_RC(0, rmutex_lock(&m));
    uint64_t token = 0;
    EXPECT_RC(0, rmutex_fence(&m, &token));
    /* A waiter in another process, as the same user, hears the release. */
    Child c({ "trylock", name }, user_url("full"));
    auto l = c.expect_line("trylock", ms(10000));
    ASSERT_TRUE(l);
    EXPECT_EQ(std::to_string(EBUSY), field(*l, "rc"));
    EXPECT_RC(0, rmutex_unlock(&m));
    ASSERT_RC(0, rmutex_lock(&f));
    EXPECT_RC(0, rmutex_unlock(&f));
    EXPECT_RC(0, rmutex_force_unlock(name.c_str()));
    rmutex_destroy(&m);
    rmutex_destroy(&f);
}

TEST_F(Acl, WithoutScriptCommandsEveryLockIsEaccesNamingTheCommand)
{
    configure_user("noscript", without(acl_rule(), { "+evalsha", "+eval" }));
    rmutex_t m;
    init(&m, lock_name());
    EXPECT_RC(EACCES, rmutex_trylock(&m));
    EXPECT_NE(std::string::npos, lower(rmutex_detail()).find("evalsha")) << rmutex_detail();
    EXPECT_NE(std::string::npos, std::string(rmutex_detail()).find("'noscript'"))
        << "the user is not named: " << rmutex_detail();
    EXPECT_RC(EACCES, rmutex_lock(&m));
    EXPECT_FALSE(redis().exists(lock_name()));
    rmutex_destroy(&m);
}

TEST_F(Acl, WithoutTheLockKeyLockIsEaccesNamingTheKeys)
{
    auto rule = without(acl_rule(), { "~*" });
    rule.insert(rule.begin() + 1, "~other:*");
    configure_user("nokey", rule);
    rmutex_t m;
    init(&m, lock_name());
    EXPECT_RC(EACCES, rmutex_lock(&m));
    EXPECT_NE(std::string::npos, lower(rmutex_detail()).find("key")) << rmutex_detail();
    EXPECT_FALSE(redis().exists(lock_name()));
    rmutex_destroy(&m);
}

TEST_F(Acl, WithoutACommandAScriptCallsTheCallIsEaccesNamingIt)
{
    configure_user("nozadd", without(acl_rule(), { "+zadd" }));
    std::string name = lock_name();
    Child holder({ "hold", name }, url_with(""));
    ASSERT_TRUE(holder.expect_line("held rc=0", ms(10000)));
    rmutex_t f;
    init(&f, name, true);
    /* A fair waiter enqueues itself with ZADD. */
    struct timespec t = abs_after(CLOCK_MONOTONIC, 3000);
    EXPECT_RC(EACCES, rmutex_clocklock(&f, CLOCK_MONOTONIC, &t));
    EXPECT_NE(std::string::npos, lower(rmutex_detail()).find("zadd")) << rmutex_detail();
    holder.write_line("unlock");
    rmutex_destroy(&f);
}

/* A refused login is one answer, whatever the call and however often:
 * EACCES with the same detail -- not "unreachable" (EAGAIN) for a trylock
 * during the backoff after it -- and once the login is fixed on the server
 * it is used, without configuring again. */
TEST_F(Acl, ARefusedLoginIsEaccesOnEveryCallUntilTheServerAcceptsIt)
{
    std::vector<std::string> cmd = { "ACL", "SETUSER", "later", "reset", "on", ">Not-Its-Pw-1" };
    cmd.insert(cmd.end(), acl_rule().begin(), acl_rule().end());
    ASSERT_EQ("OK", redis().cmd(cmd).str());
    ASSERT_RC(0, rmutex_configure(user_url("later").c_str()));
    rmutex_t m;
    init(&m, lock_name());
    std::string first;
    for (int i = 0; i < 4; i++) {
        ASSERT_RC(EACCES, rmutex_trylock(&m)) << "call " << i;
        if (!i) first = rmutex_detail();
        EXPECT_EQ(first, rmutex_detail()) << "call " << i;
    }
    EXPECT_NE(std::string::npos, first.find("refused the login")) << first;
    EXPECT_NE(std::string::npos, first.find("later")) << "the user is not named: " << first;
    struct timespec t = abs_after(CLOCK_REALTIME, 2000);
    EXPECT_RC(EACCES, rmutex_timedlock(&m, &t));
    EXPECT_EQ(first, rmutex_detail());
    EXPECT_RC(EACCES, rmutex_lock(&m));
    EXPECT_EQ(first, rmutex_detail());
    EXPECT_RC(EACCES, rmutex_trylock(&m));
    EXPECT_EQ(first, rmutex_detail());

    ASSERT_EQ("OK", redis().cmd({ "ACL", "SETUSER", "later", ">Pw-later" }).str());
    EXPECT_TRUE(wait_until([&] { return rmutex_trylock(&m) == 0; }, ms(5000))) << rmutex_detail();
    EXPECT_TRUE(redis().exists(lock_name()));
    EXPECT_RC(0, rmutex_unlock(&m));
    rmutex_destroy(&m);
}

/* A refused SUBSCRIBE must not leave a waiter polling in silence: it fails
 * at once with EACCES naming the channel, non-fair and fair alike. */
class AclChannel : public Acl, public ::testing::WithParamInterface<bool> {};

TEST_P(AclChannel, WithoutTheChannelAWaiterFailsLoudAtOnce)
{
    auto rule = without(acl_rule(), { "&redisson_lock__channel:*", "&rmutex_fair_channel:*" });
    configure_user("nochannel", rule);
    std::string name = lock_name();
    Child holder({ "hold", name }, url_with(""));
    ASSERT_TRUE(holder.expect_line("held rc=0", ms(10000)));
    rmutex_t m;
    init(&m, name, GetParam());
    auto t0 = Clock::now();
    EXPECT_RC(EACCES, rmutex_lock(&m));
    EXPECT_LT(elapsed_ms(t0), scaled(ms(1500)).count()) << "the refusal was not reported at once";
    EXPECT_NE(std::string::npos, std::string(rmutex_detail()).find("SUBSCRIBE")) << rmutex_detail();
    EXPECT_NE(std::string::npos, std::string(rmutex_detail()).find("channel")) << rmutex_detail();
    holder.write_line("unlock");
    rmutex_destroy(&m);
}

INSTANTIATE_TEST_SUITE_P(Kinds, AclChannel, ::testing::Values(false, true),
                         [](const auto &i) { return std::string(i.param ? "fair" : "nonfair"); });

} // namespace
