/* fixture.cc -- the RedisTest fixture and the errno names of assertions.
 * See harness.h. */
#include "harness.h"
#include "acl_rule.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

namespace rmt {

rmutex_stats_t stats()
{
    rmutex_stats_t s;
    memset(&s, 0, sizeof s);
    int rc = rmutex_stats(&s, sizeof s);
    EXPECT_EQ(0, rc);
    return s;
}

std::string err_name(int code)
{
    static const std::map<int, const char *> names = {
        {0, "0"},
        {EPERM, "EPERM"},
        {ENOENT, "ENOENT"},
        {EINTR, "EINTR"},
        {EAGAIN, "EAGAIN"},
        {ENOMEM, "ENOMEM"},
        {EACCES, "EACCES"},
        {EBUSY, "EBUSY"},
        {EINVAL, "EINVAL"},
        {EROFS, "EROFS"},
        {EDEADLK, "EDEADLK"},
        {ENOSYS, "ENOSYS"},
        {ETIMEDOUT, "ETIMEDOUT"},
        {ENOTSUP, "ENOTSUP"},
        {EOWNERDEAD, "EOWNERDEAD"},
        {ENOTRECOVERABLE, "ENOTRECOVERABLE"},
        {RMUTEX_ENOREPLICAS, "RMUTEX_ENOREPLICAS"},
        {-1, "-1"},
    };
    auto it = names.find(code);
    std::string n = it != names.end() ? it->second : "errno";
    return n + " (" + std::to_string(code) + ")";
}

namespace {
/* redis://[[user]:password@]host[:port][/db] -> host, port, password. */
bool parse_url(const std::string &url, std::string *host, int *port, std::string *password)
{
    const std::string scheme = "redis://";
    if (url.compare(0, scheme.size(), scheme) != 0)
        return false;
    std::string rest = url.substr(scheme.size());
    auto q = rest.find_first_of("/?");
    if (q != std::string::npos)
        rest = rest.substr(0, q);
    auto at = rest.rfind('@');
    if (at != std::string::npos) {
        std::string cred = rest.substr(0, at);
        auto colon = cred.find(':');
        *password = colon == std::string::npos ? cred : cred.substr(colon + 1);
        rest = rest.substr(at + 1);
    }
    auto colon = rest.rfind(':');
    *port = 6379;
    if (colon != std::string::npos) {
        *port = atoi(rest.substr(colon + 1).c_str());
        rest = rest.substr(0, colon);
    }
    *host = rest;
    return !host->empty() && *port > 0;
}
} // namespace

void RedisTest::SetUp()
{
    const char *ext = getenv("RMUTEX_TEST_URL");
    if (!own_server_ && ext && *ext) {
        base_url_ = ext;
        ASSERT_TRUE(parse_url(base_url_, &host_, &port_, &password_)) << "RMUTEX_TEST_URL: " << base_url_;
    } else {
        server_ = RedisServer::start();
        ASSERT_TRUE(server_);
        base_url_ = server_->url();
        host_ = server_->host();
        port_ = server_->port();
        password_ = server_->password();
    }
    redis_ = std::make_unique<Redis>(host_, port_, password_);
    ASSERT_TRUE(redis_->ok()) << redis_->error();
    if (acl_mode()) {
        /* ACL mode: the library (and every child) runs as docs/acl.md's
         * least-privileged user; redis() stays the default user, for the
         * tests' own looks at the server. */
        std::vector<std::string> cmd = {"ACL", "SETUSER", kAclUser, "reset", "on",
                                        std::string(">") + kAclPassword};
        cmd.insert(cmd.end(), acl_rule().begin(), acl_rule().end());
        Reply r = redis_->cmd(cmd);
        ASSERT_EQ("OK", r.str()) << "ACL SETUSER: " << r.str();
        base_url_ = "redis://" + std::string(kAclUser) + ":" + kAclPassword + "@" + host_ + ":" +
                    std::to_string(port_);
        if (server_ && server_->tls_port())
            base_url_ = "rediss://" + std::string(kAclUser) + ":" + kAclPassword + "@" + host_ + ":" +
                        std::to_string(server_->tls_port()) + "?" + tls_query();
    }
    setenv("RMUTEX_URL", url().c_str(), 1);
    if (configure_)
        ASSERT_RC(0, rmutex_configure(url().c_str()));
}

bool RedisTest::acl_mode()
{
    const char *acl = getenv("RMUTEX_TEST_ACL");
    return acl && !strcmp(acl, "1");
}

void RedisTest::TearDown()
{
    /* Each ctest test runs in its own process; this only matters when the
     * binary is run by hand with several tests in one process. */
    rmutex_shutdown();
    /* On a shared server (RMUTEX_TEST_URL), remove what this test left:
     * fencing counters never expire by design. */
    if (!server_ && redis_) {
        std::string pattern = "*" + lock_name("") + "*";
        std::string cursor = "0";
        do {
            Reply r = redis_->cmd({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
            if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
                break;
            cursor = std::string(r->element[0]->str, r->element[0]->len);
            for (size_t i = 0; i < r->element[1]->elements; i++)
                redis_->cmd({"DEL", std::string(r->element[1]->element[i]->str, r->element[1]->element[i]->len)});
        } while (cursor != "0");
    }
}

std::string RedisTest::lock_name(const std::string &suffix)
{
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string("rmt:") + info->test_suite_name() + "." + info->name() + ":" +
           std::to_string(getpid()) + ":" + suffix;
}

std::string RedisTest::url_with(const std::string &options) const
{
    if (options.empty())
        return base_url_;
    return base_url_ + (base_url_.find('?') == std::string::npos ? "?" : "&") + options;
}

std::string RedisTest::url_through(int port) const
{
    std::string u = "redis://" + (password_.empty() ? std::string() : ":" + password_ + "@") +
                    "127.0.0.1:" + std::to_string(port);
    return options_.empty() ? u : u + "?" + options_;
}

void init_mutex(rmutex_t *m, const std::string &name, int type, int robust, unsigned long lease_ms)
{
    rmutexattr_t a;
    ASSERT_EQ(0, rmutexattr_init(&a));
    ASSERT_EQ(0, rmutexattr_settype(&a, type));
    ASSERT_EQ(0, rmutexattr_setrobust(&a, robust));
    ASSERT_EQ(0, rmutexattr_setlease(&a, lease_ms));
    ASSERT_EQ(0, rmutex_init(m, name.c_str(), &a)) << rmutex_detail();
    ASSERT_EQ(0, rmutexattr_destroy(&a));
}

} // namespace rmt
