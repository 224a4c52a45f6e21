/* options_test.cc -- the options as src/base/options.def lists them, as
 * docs/configuration.md's table documents them, and as a URL and the
 * setters take them; and each URL scheme's errors.
 *
 * No Redis: rmutex_configure parses a URL and resolves its hosts (numeric
 * addresses only here), it does not connect.  Each test runs in its own
 * process (ctest), so the settings a URL or setter changes go with it. */
#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"

#include <map>

namespace {

/* One option: a row of the .def file or of the documented table. */
struct Option {
    std::string name, def, range, unit, text;
    bool number = false;
    unsigned long min = 0, max = 0;
};

std::string range_of(unsigned long min, unsigned long max)
{
    return "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

Option number_option(const char *name, unsigned long min, unsigned long max, unsigned long def,
                     const char *unit, const char *text)
{
    return Option{name, std::to_string(def), range_of(min, max), unit, text, true, min, max};
}

/* What the library is built with. */
std::vector<Option> listed()
{
    std::vector<Option> v;
#define RM_OPTION(name, field, type, min, max, def, unit, text) \
    v.push_back(number_option(#name, min, max, def, unit, text));
#define RM_URL_OPTION(name, min, max, def, unit, text) \
    v.push_back(number_option(#name, min, max, def, unit, text));
#define RM_URL_TEXT(name, text) v.push_back(Option{#name, "", "", "", text});
#include "options.def"
    return v;
}

std::string trim(const std::string &s)
{
    size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

const char TABLE_HEAD[] = "| option | default | range | unit | meaning |";

/* The row docs/configuration.md must have for o. */
std::string row_of(const Option &o)
{
    auto cell = [](const std::string &s) { return s.empty() ? std::string(" |") : " " + s + " |"; };
    return "| `" + o.name + "` |" + cell(o.def) + cell(o.range) + cell(o.unit) + cell(o.text);
}

/* docs/configuration.md's table: the rows after TABLE_HEAD and its rule. */
std::vector<Option> documented()
{
    std::ifstream f(RMUTEX_CONFIGURATION_DOC);
    EXPECT_TRUE(f) << "cannot read " << RMUTEX_CONFIGURATION_DOC;
    std::vector<Option> v;
    std::string line;
    while (std::getline(f, line) && line != TABLE_HEAD) {
    }
    EXPECT_EQ(TABLE_HEAD, line) << RMUTEX_CONFIGURATION_DOC << " has no options table";
    std::getline(f, line); /* |---|---|... */
    while (std::getline(f, line) && !line.empty() && line[0] == '|') {
        std::vector<std::string> cells;
        std::stringstream ss(line.substr(1));
        for (std::string c; std::getline(ss, c, '|');) cells.push_back(trim(c));
        if (cells.size() != 5) {
            ADD_FAILURE() << "not 5 cells: " << line;
            continue;
        }
        Option o{cells[0], cells[1], cells[2], cells[3], cells[4]};
        if (o.name.size() > 2 && o.name.front() == '`' && o.name.back() == '`')
            o.name = o.name.substr(1, o.name.size() - 2);
        o.number = sscanf(o.range.c_str(), "[%lu, %lu]", &o.min, &o.max) == 2;
        v.push_back(o);
    }
    return v;
}

const Option *find(const std::vector<Option> &v, const std::string &name)
{
    for (auto &o : v)
        if (o.name == name) return &o;
    return nullptr;
}

/* ---- the .def file and the documented table ---- */

TEST(OptionsDoc, AnOptionOfTheDefFileIsMissingOrDocumentedOtherwise)
{
    auto doc = documented();
    for (auto &o : listed()) {
        const Option *d = find(doc, o.name);
        if (!d) {
            ADD_FAILURE() << "options.def has " << o.name << ", which "
                          << RMUTEX_CONFIGURATION_DOC << " does not document; its row:\n"
                          << row_of(o);
            continue;
        }
        EXPECT_EQ(row_of(o), row_of(*d)) << "the documented row of " << o.name
                                         << " (second) is not options.def's (first)";
    }
}

TEST(OptionsDoc, AnOptionIsDocumentedThatTheDefFileDoesNotHave)
{
    auto def = listed();
    std::vector<std::string> seen;
    for (auto &d : documented()) {
        EXPECT_NE(nullptr, find(def, d.name)) << RMUTEX_CONFIGURATION_DOC << " documents "
                                              << d.name << ", which options.def does not list";
        for (auto &s : seen) EXPECT_NE(s, d.name) << d.name << " is documented twice";
        seen.push_back(d.name);
    }
}

TEST(OptionsDoc, TheTableIsNotInTheDefFilesOrder)
{
    std::string want, got;
    for (auto &o : listed()) want += o.name + " ";
    for (auto &d : documented()) got += d.name + " ";
    EXPECT_EQ(want, got);
}

/* ---- the documented table and what the library takes ---- */

const char BASE[] = "redis://127.0.0.1:1";

int configure(const std::string &url) { return rmutex_configure(url.c_str()); }

TEST(OptionsUrl, ADocumentedRangeIsNotWhatAUrlTakes)
{
    auto doc = documented();
    ASSERT_FALSE(doc.empty());
    for (auto &o : doc) {
        SCOPED_TRACE(o.name);
        if (!o.number) {
            /* A string: TLS's, with TLS only (a file or a directory that can
             * be read; cert with key); or the sentinels' login, which goes
             * together. */
            static const std::map<std::string, std::string> tls_value = {
                { "cacert", RMUTEX_CONFIGURATION_DOC }, { "capath", RMUTEX_DOC_DIR },
                { "cert", RMUTEX_CONFIGURATION_DOC "&key=" RMUTEX_CONFIGURATION_DOC },
                { "key", RMUTEX_CONFIGURATION_DOC "&cert=" RMUTEX_CONFIGURATION_DOC },
                { "sni", "x%41" },
            };
            auto tls = tls_value.find(o.name);
            if (tls != tls_value.end()) {
                EXPECT_RC(0, configure("rediss://127.0.0.1:1?" + o.name + "=" + tls->second));
                EXPECT_RC(EINVAL, configure(std::string(BASE) + "?" + o.name + "=" + tls->second));
                EXPECT_NE(std::string::npos, std::string(rmutex_detail()).find("need TLS")) << rmutex_detail();
                continue;
            }
            EXPECT_RC(0, configure("redis-sentinel://127.0.0.1:1/m?sentinel_user=u&sentinel_password=p&" +
                                   o.name + "=x%41"));
            continue;
        }
        /* insecure: with TLS only. */
        std::string url = (o.name == "insecure" ? "rediss://127.0.0.1:1" : BASE) + ("?" + o.name + "=");
        EXPECT_RC(0, configure(url + std::to_string(o.min)));
        EXPECT_RC(0, configure(url + std::to_string(o.max)));
        EXPECT_RC(EINVAL, configure(url + std::to_string(o.max + 1)));
        EXPECT_NE(std::string::npos, std::string(rmutex_detail()).find(o.name + " must be a number in " + o.range))
            << rmutex_detail();
        if (o.min > 0) {
            EXPECT_RC(EINVAL, configure(url + std::to_string(o.min - 1)));
        }
        EXPECT_RC(EINVAL, configure(url + "x"));
    }
}

TEST(OptionsUrl, AnUndocumentedOptionIsTaken)
{
    EXPECT_RC(EINVAL, configure(std::string(BASE) + "?bogus=1"));
    EXPECT_STREQ("unknown URL option 'bogus'", rmutex_detail());
    EXPECT_RC(EINVAL, configure(std::string(BASE) + "?lease"));
    EXPECT_STREQ("URL option without a value", rmutex_detail());
    EXPECT_RC(0, configure(std::string(BASE) + "?replicas=auto"));
    EXPECT_RC(EINVAL, configure(std::string(BASE) + "?min_replicas=auto"));
}

Option documented_option(const char *name)
{
    auto doc = documented();
    const Option *o = find(doc, name);
    EXPECT_NE(nullptr, o) << name << " is not documented";
    return o ? *o : Option{};
}

TEST(OptionsSetters, ASetterTakesOtherThanTheDocumentedRange)
{
    Option pool = documented_option("pool"), lease = documented_option("lease"),
           minr = documented_option("min_replicas"), rep = documented_option("replicas"),
           wait = documented_option("wait_timeout");
    EXPECT_RC(0, rmutex_set_pool_size((unsigned)pool.min));
    EXPECT_RC(0, rmutex_set_pool_size((unsigned)pool.max));
    EXPECT_RC(EINVAL, rmutex_set_pool_size((unsigned)pool.min - 1));
    EXPECT_RC(EINVAL, rmutex_set_pool_size((unsigned)pool.max + 1));
    EXPECT_RC(0, rmutex_set_default_lease(lease.min));
    EXPECT_RC(0, rmutex_set_default_lease(lease.max));
    EXPECT_RC(EINVAL, rmutex_set_default_lease(lease.min - 1));
    EXPECT_RC(EINVAL, rmutex_set_default_lease(lease.max + 1));
    EXPECT_RC(0, rmutex_set_min_replicas((unsigned)minr.max));
    EXPECT_RC(EINVAL, rmutex_set_min_replicas((unsigned)minr.max + 1));
    EXPECT_RC(0, rmutex_set_min_replicas((unsigned)minr.min));
    /* replicas and wait_timeout together; auto beside the range; no
     * timeout to check when replicas is 0. */
    EXPECT_RC(0, rmutex_set_wait_replicas((unsigned)rep.max, wait.min));
    EXPECT_RC(0, rmutex_set_wait_replicas(RMUTEX_WAIT_AUTO, wait.max));
    EXPECT_RC(EINVAL, rmutex_set_wait_replicas((unsigned)rep.max + 1, wait.min));
    EXPECT_RC(EINVAL, rmutex_set_wait_replicas(1, wait.min - 1));
    EXPECT_RC(EINVAL, rmutex_set_wait_replicas(RMUTEX_WAIT_AUTO, wait.max + 1));
    EXPECT_RC(0, rmutex_set_wait_replicas((unsigned)rep.min, wait.max + 1));
}

/* ---- each scheme's errors ---- */

struct Bad {
    std::string url;
    int code;
    const char *detail; /* a part of the detail */
};

void expect_refused(const std::vector<Bad> &bad)
{
    for (auto &b : bad) {
        SCOPED_TRACE(b.url);
        EXPECT_RC(b.code, configure(b.url));
        EXPECT_NE(std::string::npos, std::string(rmutex_detail()).find(b.detail))
            << "detail: " << rmutex_detail();
    }
}

TEST(UrlScheme, ARedisUrlErrorIsNotEinvalWithItsDetail)
{
    expect_refused({
        {"redis://", EINVAL, "no host"},
        {"redis://127.0.0.1:1/x", EINVAL, "database number"},
        {"redis://127.0.0.1:1/1000001", EINVAL, "database number"},
        {"redis://127.0.0.1:1,127.0.0.1:2", EINVAL, "redis-cluster://"},
        {"redis://127.0.0.1:0", EINVAL, "port"},
        {"redis://[::1", EINVAL, "unterminated"},
        {"redis://[::1]x", EINVAL, "garbage after ]"},
        {"redis://" + std::string(256, 'h') + ":1", EINVAL, "host name too long"},
        {"redis://u:%zz@127.0.0.1", EINVAL, "percent-escape"},
        {std::string(BASE) + "?sentinel_user=a&sentinel_password=b", EINVAL, "redis-sentinel://"},
    });
}

TEST(UrlScheme, AUnixUrlErrorIsNotEinvalWithItsDetail)
{
    expect_refused({
        {"unix://", EINVAL, "absolute socket path"},
        {"unix://tmp/redis.sock", EINVAL, "absolute socket path"},
        {"unix://u:p@tmp/redis.sock", EINVAL, "absolute socket path"},
        {"unix:///" + std::string(107, 's'), EINVAL, "path too long"},
        {"unix://%4@/tmp/redis.sock", EINVAL, "percent-escape"},
        {"unix:///tmp/redis.sock?db=1000001", EINVAL, "db must be a number"},
        {"unix:///tmp/redis.sock?sentinel_user=a&sentinel_password=b", EINVAL, "redis-sentinel://"},
    });
}

TEST(UrlScheme, AClusterUrlErrorIsNotEinvalWithItsDetail)
{
    std::string many = "redis-cluster://127.0.0.1:1";
    for (int i = 2; i <= 17; i++) many += ",127.0.0.1:" + std::to_string(i);
    expect_refused({
        {"redis-cluster://", EINVAL, "no host"},
        {"redis-cluster://127.0.0.1:1/3", EINVAL, "no path"},
        {"redis-cluster://127.0.0.1:1?db=1", EINVAL, "only database 0"},
        {"redis-cluster://127.0.0.1:1,", EINVAL, "ends with a comma"},
        {many, EINVAL, "more than 16 hosts"},
        {"redis-cluster://127.0.0.1:1?refresh=99", EINVAL, "refresh must be a number"},
    });
}

TEST(UrlScheme, ASentinelUrlErrorIsNotEinvalWithItsDetail)
{
    expect_refused({
        {"redis-sentinel://127.0.0.1:1", EINVAL, "/MASTER-NAME"},
        {"redis-sentinel://127.0.0.1:1/", EINVAL, "/MASTER-NAME"},
        {"redis-sentinel://127.0.0.1:1/a/b", EINVAL, "bad master name"},
        {"redis-sentinel://127.0.0.1:1/" + std::string(128, 'm'), EINVAL, "bad master name"},
        {"redis-sentinel:///m", EINVAL, "no host"},
        {"redis-sentinel://127.0.0.1:1/m?sentinel_user=u", EINVAL, "a user but no password"},
        {"redis-sentinel://127.0.0.1:1/m?sentinel_password=%zz", EINVAL, "percent-escape"},
    });
}

TEST(UrlScheme, AnotherSchemeIsNotRefusedWithTheKnownOnes)
{
    expect_refused({
        {"http://127.0.0.1:1", EINVAL, "redis://, rediss://, unix://, redis-cluster:// or redis-sentinel://"},
        {"garbage", EINVAL, "must start with"},
        /* The query is read first, whatever the scheme. */
        {"rediss://127.0.0.1:1?bogus=1", EINVAL, "unknown URL option"},
        {"http://127.0.0.1:1?pool=0", EINVAL, "pool must be a number"},
    });
}

TEST(UrlScheme, AWellFormedUrlOfAnySchemeIsRefused)
{
    for (const std::string &good :
         {std::string("redis://127.0.0.1:1"), std::string("redis://u:p@[::1]:2/3?db=4&pool=2"),
          std::string("redis://secret@127.0.0.1"), std::string("unix:///tmp/no-such.sock?db=2"),
          std::string("unix://u:p%40@/tmp/no-such.sock"),
          std::string("rediss://u:p@127.0.0.1:1/2?sni=redis.example&insecure=1"),
          std::string("redis-cluster://u:p@127.0.0.1:1,[::1]:2/?refresh=100&replicas=auto"),
          std::string("redis-sentinel://127.0.0.1:1,127.0.0.1:2/mymaster?db=3&sentinel_user=s&"
                      "sentinel_password=p%41")}) {
        EXPECT_RC(0, configure(good)) << good;
    }
}

} // namespace
