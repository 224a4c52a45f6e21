/* metrics_test.cc -- the wait-time and hold-time histograms of rmutex_stats,
 * the per-name counters each process publishes in the holder registry, and
 * the commands that read them: `rmutex stats --prom` (checked by a strict
 * parser of Prometheus's text format, written here) and `rmutex top`.
 *
 * Real processes (rmutex_test_child) against the test program's own
 * redis-server, with a 1.5 s lease: the registry's period is 500 ms. */
#include "harness.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <cstddef>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace rmt;

/* The bucket a duration of us microseconds lands in (rmutex.h). */
int bucket_of_us(uint64_t us)
{
    int i = 0;
    while (us) us >>= 1, i++;
    return i < RMUTEX_HISTOGRAM_BUCKETS ? i : RMUTEX_HISTOGRAM_BUCKETS - 1;
}

rmutex_histogram_t minus(const rmutex_histogram_t &a, const rmutex_histogram_t &b)
{
    rmutex_histogram_t d;
    d.count = a.count - b.count;
    d.sum_us = a.sum_us - b.sum_us;
    for (int i = 0; i < RMUTEX_HISTOGRAM_BUCKETS; i++) d.bucket[i] = a.bucket[i] - b.bucket[i];
    return d;
}

std::string buckets_of(const rmutex_histogram_t &h)
{
    std::string s;
    for (int i = 0; i < RMUTEX_HISTOGRAM_BUCKETS; i++)
        if (h.bucket[i]) s += " [" + std::to_string(i) + "]=" + std::to_string(h.bucket[i]);
    return s.empty() ? " none" : s;
}

class Histograms : public RedisTest {
  public:
    Histograms() : RedisTest(false, "lease=1500") {}
};

TEST_F(Histograms, HoldsOf50And200MsLandInTheirLog2Buckets)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    /* A hold counts from its request's send: the process's first request
     * also connects.  Connected first, so that only the holds are timed. */
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    rmutex_stats_t s0 = stats();
    for (int hold_ms : { 50, 200 }) {
        ASSERT_RC(0, rmutex_lock(&m));
        std::this_thread::sleep_for(ms(hold_ms)); /* the hold being measured */
        ASSERT_RC(0, rmutex_unlock(&m));
    }
    rmutex_histogram_t d = minus(stats().hold_time, s0.hold_time);
    EXPECT_EQ(2u, d.count) << buckets_of(d);
    /* 50 ms = 50 000 us: [2^15, 2^16); 200 ms: [2^17, 2^18) -- a late
     * wake-up of up to 15 ms / 60 ms stays in the bucket. */
    EXPECT_EQ(1u, d.bucket[bucket_of_us(50000)]) << buckets_of(d);
    EXPECT_EQ(1u, d.bucket[bucket_of_us(200000)]) << buckets_of(d);
    EXPECT_GE(d.sum_us, 250000u);
    EXPECT_LT(d.sum_us, 250000u + 100000u * (unsigned)scaled(ms(1)).count());
    rmutex_destroy(&m);
}

TEST_F(Histograms, AContendedWaitIsCountedAndAnUncontendedOneIsNot)
{
    rmutex_t m;
    std::string name = lock_name();
    init_mutex(&m, name);
    rmutex_stats_t s0 = stats();
    ASSERT_RC(0, rmutex_lock(&m)); /* uncontended */
    ASSERT_RC(0, rmutex_unlock(&m));
    rmutex_stats_t s1 = stats();
    EXPECT_EQ(s0.uncontended + 1, s1.uncontended);
    EXPECT_EQ(0u, minus(s1.wait_time, s0.wait_time).count);

    /* Another process holds it for 150 ms: this lock waits in Redis. */
    Child other({ "hold", name, "--hold-ms=150" }, url());
    auto l = other.expect_line("held ", ms(5000));
    ASSERT_TRUE(l && field(*l, "rc") == "0");
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    /* Another thread of this process holds it for 150 ms: this lock waits
     * at the process's gate. */
    ASSERT_RC(0, rmutex_lock(&m));
    std::thread t([&] {
        ASSERT_RC(0, rmutex_lock(&m));
        ASSERT_RC(0, rmutex_unlock(&m));
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting > 0; }, ms(5000)));
    std::this_thread::sleep_for(ms(150)); /* the hold the other thread waits out */
    ASSERT_RC(0, rmutex_unlock(&m));
    t.join();
    rmutex_stats_t s2 = stats();
    rmutex_histogram_t d = minus(s2.wait_time, s1.wait_time);
    EXPECT_EQ(2u, d.count) << buckets_of(d);
    EXPECT_EQ(s1.uncontended + 1, s2.uncontended); /* (the holding thread's lock) */
    /* Each waited about 150 ms (at least 100: the hold had begun before). */
    EXPECT_GE(d.sum_us, 2 * 100000u) << buckets_of(d);
    for (int i = 0; i < bucket_of_us(100000); i++) EXPECT_EQ(0u, d.bucket[i]) << buckets_of(d);
    other.wait(ms(5000));
    rmutex_destroy(&m);
}

TEST_F(Histograms, ACallerThatKnowsTheOlderSizeGetsThePrefixOnly)
{
    rmutex_t m;
    init_mutex(&m, lock_name());
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    const size_t old_size = offsetof(rmutex_stats_t, uncontended); /* the struct before */
    std::vector<unsigned char> buf(sizeof(rmutex_stats_t), 0xAB);
    ASSERT_RC(0, rmutex_stats(reinterpret_cast<rmutex_stats_t *>(buf.data()), old_size));
    for (size_t i = old_size; i < buf.size(); i++)
        ASSERT_EQ(0xAB, buf[i]) << "byte " << i << " written past the older size";
    rmutex_stats_t now = stats(), old;
    memcpy(&old, buf.data(), old_size);
    EXPECT_GE(old.acquisitions, 1u);
    EXPECT_LE(old.acquisitions, now.acquisitions);
    EXPECT_EQ(now.announcements >= old.announcements, true);
    rmutex_destroy(&m);
}

/* ===================================================================== */
/* A strict parser of Prometheus's text exposition format (0.0.4)         */
/* ===================================================================== */

/* What it found: "" and the samples, or the first error. */
struct Exposition {
    std::string error;
    /* family -> type */
    std::map<std::string, std::string> types;
    /* series (sample name + its labels, sorted) -> value */
    std::map<std::string, double> samples;
    /* per family, the label sets (without le) of its samples */
    std::map<std::string, std::set<std::string>> series_of;
};

bool is_metric_name(const std::string &s)
{
    static const std::regex re("[a-zA-Z_:][a-zA-Z0-9_:]*");
    return std::regex_match(s, re);
}

bool is_label_name(const std::string &s)
{
    static const std::regex re("[a-zA-Z_][a-zA-Z0-9_]*");
    return std::regex_match(s, re) && s.compare(0, 2, "__") != 0;
}

/* A value as Go's ParseFloat takes it in this format: a decimal or
 * exponent float, +Inf, -Inf, NaN. */
bool parse_value(const std::string &s, double *v)
{
    static const std::regex re(R"([+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?)");
    if (s == "+Inf" || s == "Inf") return *v = INFINITY, true;
    if (s == "-Inf") return *v = -INFINITY, true;
    if (s == "NaN") return *v = NAN, true;
    if (!std::regex_match(s, re)) return false;
    *v = std::stod(s);
    return true;
}

/* The family a sample name belongs to, given the TYPE lines so far. */
std::string family_of(const std::string &name, const std::map<std::string, std::string> &types)
{
    for (const char *suffix : { "_bucket", "_sum", "_count" }) {
        size_t n = strlen(suffix);
        if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) {
            std::string base = name.substr(0, name.size() - n);
            auto t = types.find(base);
            if (t != types.end() && (t->second == "histogram" || t->second == "summary"))
                return base;
        }
    }
    return name;
}

Exposition parse_exposition(const std::string &text)
{
    Exposition x;
    auto fail = [&](size_t line, const std::string &why) {
        if (x.error.empty()) x.error = "line " + std::to_string(line) + ": " + why;
        return x;
    };
    if (!text.empty() && text.back() != '\n') return fail(0, "no final newline");
    std::set<std::string> helped, done_families;
    std::string current; /* the family whose lines come now */
    /* histogram checks: family + labels -> (le -> count), sum, count */
    std::map<std::string, std::map<double, double>> buckets;
    std::map<std::string, double> counts;
    std::set<std::string> sums;
    size_t no = 0;
    for (size_t at = 0; at < text.size();) {
        size_t nl = text.find('\n', at);
        std::string line = text.substr(at, nl - at);
        at = nl + 1;
        no++;
        if (line.empty()) continue;
        if (line.find('\r') != std::string::npos) return fail(no, "carriage return");
        auto enter = [&](const std::string &family) {
            if (family == current) return true;
            if (done_families.count(family)) return false; /* its lines are not one group */
            if (!current.empty()) done_families.insert(current);
            current = family;
            return true;
        };
        if (line[0] == '#') {
            std::istringstream in(line.substr(1));
            std::string word, name;
            in >> word;
            if (word != "HELP" && word != "TYPE") continue; /* a plain comment */
            if (line.compare(0, 7, "# " + word + " ") != 0) return fail(no, "malformed " + word);
            in >> name;
            if (!is_metric_name(name)) return fail(no, "bad metric name in " + word + ": " + name);
            if (!enter(name)) return fail(no, name + "'s lines are not one group");
            if (word == "HELP") {
                if (!helped.insert(name).second) return fail(no, "second HELP for " + name);
                std::string doc = line.size() > 8 + name.size() ? line.substr(8 + name.size()) : "";
                for (size_t i = 0; i < doc.size(); i++)
                    if (doc[i] == '\\' && (i + 1 == doc.size() || (doc[i + 1] != '\\' && doc[i + 1] != 'n')))
                        return fail(no, "bad escape in HELP");
                    else if (doc[i] == '\\') i++;
                continue;
            }
            std::string type, more;
            in >> type;
            if (in >> more) return fail(no, "junk after TYPE");
            static const std::set<std::string> known{ "counter", "gauge", "histogram", "summary", "untyped" };
            if (!known.count(type)) return fail(no, "unknown type " + type);
            if (x.types.count(name)) return fail(no, "second TYPE for " + name);
            for (const auto &s : x.samples)
                if (family_of(s.first.substr(0, s.first.find('{')), x.types) == name)
                    return fail(no, "TYPE after samples of " + name);
            x.types[name] = type;
            continue;
        }
        /* name{labels} value [timestamp] */
        size_t i = 0;
        while (i < line.size() && line[i] != '{' && line[i] != ' ') i++;
        std::string name = line.substr(0, i);
        if (!is_metric_name(name)) return fail(no, "bad metric name " + name);
        std::map<std::string, std::string> labels;
        if (i < line.size() && line[i] == '{') {
            i++;
            while (i < line.size() && line[i] != '}') {
                size_t eq = line.find('=', i);
                if (eq == std::string::npos) return fail(no, "label without =");
                std::string lname = line.substr(i, eq - i);
                if (!is_label_name(lname)) return fail(no, "bad label name " + lname);
                i = eq + 1;
                if (i >= line.size() || line[i] != '"') return fail(no, "label value not quoted");
                std::string value;
                for (i++; i < line.size() && line[i] != '"'; i++) {
                    if (line[i] != '\\') {
                        value += line[i];
                        continue;
                    }
                    if (++i >= line.size()) return fail(no, "backslash at the end");
                    if (line[i] == '\\') value += '\\';
                    else if (line[i] == '"') value += '"';
                    else if (line[i] == 'n') value += '\n';
                    else return fail(no, std::string("bad escape \\") + line[i]);
                }
                if (i >= line.size()) return fail(no, "unterminated label value");
                i++;
                if (!labels.emplace(lname, value).second) return fail(no, "label " + lname + " twice");
                if (i < line.size() && line[i] == ',') i++;
                else if (i < line.size() && line[i] != '}') return fail(no, "junk after a label");
            }
            if (i >= line.size()) return fail(no, "unterminated label set");
            i++;
        }
        if (i >= line.size() || line[i] != ' ') return fail(no, "no value");
        std::istringstream in(line.substr(i + 1));
        std::string vtext, ts, more;
        in >> vtext;
        double v;
        if (!parse_value(vtext, &v)) return fail(no, "bad value " + vtext);
        if (in >> ts) {
            static const std::regex re("-?[0-9]+");
            if (!std::regex_match(ts, re)) return fail(no, "bad timestamp " + ts);
            if (in >> more) return fail(no, "junk after the timestamp");
        }
        std::string family = family_of(name, x.types);
        auto t = x.types.find(family);
        if (t == x.types.end()) return fail(no, "sample of " + name + " before its TYPE");
        if (!enter(family)) return fail(no, family + "'s lines are not one group");
        std::string key = name + "{", set;
        for (const auto &l : labels) {
            key += l.first + "=" + l.second + ",";
            if (l.first != "le") set += l.first + "=" + l.second + ",";
        }
        key += "}";
        if (!x.samples.emplace(key, v).second) return fail(no, "duplicate series " + key);
        x.series_of[family].insert(set);
        if (t->second == "counter") {
            if (name.size() < 6 || name.compare(name.size() - 6, 6, "_total"))
                return fail(no, "counter " + name + " does not end in _total");
            if (!(v >= 0)) return fail(no, "counter " + name + " negative or NaN");
        } else if (t->second == "histogram") {
            std::string hk = family + "{" + set + "}";
            if (name == family + "_bucket") {
                auto le = labels.find("le");
                double bound;
                if (le == labels.end() || !parse_value(le->second, &bound))
                    return fail(no, "bucket without a valid le");
                if (!buckets[hk].emplace(bound, v).second) return fail(no, "le twice");
            } else if (name == family + "_count") {
                counts[hk] = v;
            } else if (name == family + "_sum") {
                sums.insert(hk);
            } else {
                return fail(no, "histogram sample " + name);
            }
        }
    }
    for (const auto &h : buckets) {
        double last = 0;
        for (const auto &b : h.second) {
            if (b.second < last) return fail(no, h.first + ": buckets not cumulative");
            last = b.second;
        }
        if (!h.second.count(INFINITY)) return fail(no, h.first + ": no le=\"+Inf\"");
        if (!counts.count(h.first)) return fail(no, h.first + ": no _count");
        if (!sums.count(h.first)) return fail(no, h.first + ": no _sum");
        if (h.second.at(INFINITY) != counts.at(h.first)) return fail(no, h.first + ": +Inf != _count");
    }
    for (const auto &c : counts)
        if (!buckets.count(c.first)) return fail(no, c.first + ": _count without buckets");
    return x;
}

TEST(PromParser, RejectsWhatTheFormatForbids)
{
    const std::string good =
        "# HELP a_total Things.\n# TYPE a_total counter\na_total{name=\"x\\\\y\\\"z\\n\"} 3\n"
        "# TYPE h histogram\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1.5e-3\nh_count 2\n";
    ASSERT_EQ("", parse_exposition(good).error);
    EXPECT_EQ(1u, parse_exposition(good).samples.count("a_total{name=x\\y\"z\n,}"));
    const std::map<std::string, std::string> broken{
        { "no final newline", "# TYPE a_total counter\na_total 1" },
        { "sample before TYPE", "a_total 1\n# TYPE a_total counter\n" },
        { "no TYPE at all", "a_total 1\n" },
        { "second TYPE", "# TYPE a_total counter\n# TYPE a_total counter\na_total 1\n" },
        { "bad escape", "# TYPE a_total counter\na_total{n=\"a\\tb\"} 1\n" },
        { "unescaped quote", "# TYPE a_total counter\na_total{n=\"a\"b\"} 1\n" },
        { "duplicate series", "# TYPE a_total counter\na_total{n=\"a\"} 1\na_total{n=\"a\"} 2\n" },
        { "bad metric name", "# TYPE 1a_total counter\n1a_total 1\n" },
        { "bad label name", "# TYPE a_total counter\na_total{1n=\"a\"} 1\n" },
        { "reserved label name", "# TYPE a_total counter\na_total{__n=\"a\"} 1\n" },
        { "bad value", "# TYPE a_total counter\na_total 12x\n" },
        { "counter without _total", "# TYPE a counter\na 1\n" },
        { "family in two groups",
          "# TYPE a_total counter\na_total{n=\"1\"} 1\n# TYPE b_total counter\nb_total 1\n"
          "a_total{n=\"2\"} 1\n" },
        { "buckets not cumulative",
          "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
          "h_sum 1\nh_count 2\n" },
        { "+Inf differs from _count",
          "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n" },
        { "no +Inf bucket", "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n" },
        { "unterminated labels", "# TYPE a_total counter\na_total{n=\"a\" 1\n" },
    };
    for (const auto &b : broken)
        EXPECT_NE("", parse_exposition(b.second).error) << "accepted: " << b.first;
}

/* ===================================================================== */
/* rmutex stats --prom and rmutex top against real processes              */
/* ===================================================================== */

const std::string kCli = RMUTEX_CLI;

class Published : public RedisTest {
  public:
    Published() : RedisTest(false, "lease=1500") {}

    /* rmutex ARGS... to its end: its exit code (-1 if it did not end), its
     * stdout into *out. */
    int cli(const std::vector<std::string> &args, std::string *out)
    {
        std::vector<std::string> argv{ kCli };
        argv.insert(argv.end(), args.begin(), args.end());
        return run_to_end(argv, { { "RMUTEX_URL", url() } }, out);
    }

    /* `rmutex stats --prom`, parsed, once pred holds of it (within 10 s). */
    Exposition scrape_until(const std::function<bool(const Exposition &)> &pred, std::string *text)
    {
        Exposition x;
        wait_until([&] {
            std::string out;
            if (cli({ "stats", "--prom" }, &out) != 0) return false;
            x = parse_exposition(out);
            *text = out;
            return !x.error.empty() || pred(x);
        }, ms(10000));
        return x;
    }
};

/* The sample of name's series for lock in process pid, or NaN. */
double sample(const Exposition &x, const std::string &name, const std::string &lock, pid_t pid,
              const std::string &extra = "")
{
    std::string prefix = name + "{" + extra + "host=";
    for (const auto &s : x.samples)
        if (s.first.compare(0, prefix.size(), prefix) == 0 &&
            s.first.find(",name=" + lock + ",pid=" + std::to_string(pid) + ",") != std::string::npos)
            return s.second;
    return NAN;
}

TEST_F(Published, StatsPromFromThreeProcessesPassesTheStrictParser)
{
    std::string a = lock_name("a"), b = lock_name("b"), c = lock_name("c");
    std::string odd = lock_name("q\"uote\\back");
    Child churn_a({ "churn", a, "2", "3000", "2" }, url());
    Child churn_b({ "churn", b, "1", "3000", "5" }, url());
    Child holder({ "hold", c }, url());
    ASSERT_TRUE(churn_a.expect_line("ready", ms(5000)));
    ASSERT_TRUE(churn_b.expect_line("ready", ms(5000)));
    auto l = holder.expect_line("held ", ms(5000));
    ASSERT_TRUE(l && field(*l, "rc") == "0");
    /* This process: the name that needs escaping, and a wait for c. */
    rmutex_t m, mc;
    init_mutex(&m, odd);
    init_mutex(&mc, c);
    ASSERT_RC(0, rmutex_lock(&m));
    ASSERT_RC(0, rmutex_unlock(&m));
    std::thread waiter([&] {
        ASSERT_RC(0, rmutex_lock(&mc));
        ASSERT_RC(0, rmutex_unlock(&mc));
    });
    ASSERT_TRUE(wait_until([] { return stats().waiting > 0; }, ms(5000)));
    holder.write_line("unlock");
    waiter.join();
    /* Held while we read: this process's entry is renewed, not left to
     * lapse two leases after its last publication. */
    ASSERT_RC(0, rmutex_lock(&m));
    std::string text;
    Exposition x = scrape_until([&](const Exposition &e) {
        return sample(e, "rmutex_acquisitions_total", a, churn_a.pid()) > 10 &&
               sample(e, "rmutex_acquisitions_total", b, churn_b.pid()) > 10 &&
               sample(e, "rmutex_hold_seconds_count", c, holder.pid()) >= 1 &&
               sample(e, "rmutex_wait_seconds_count", c, getpid()) >= 1 &&
               sample(e, "rmutex_acquisitions_total", odd, getpid()) >= 1;
    }, &text);
    ASSERT_EQ("", x.error) << text;
    EXPECT_GE(sample(x, "rmutex_contended_acquisitions_total", a, churn_a.pid()), 1) << text;
    EXPECT_GE(sample(x, "rmutex_wait_seconds_count", a, churn_a.pid()), 1) << text;
    EXPECT_EQ(1, sample(x, "rmutex_wait_seconds_count", c, getpid())) << text;
    EXPECT_GE(sample(x, "rmutex_acquisitions_total", odd, getpid()), 1) << text;
    /* The families asked for, each with its TYPE. */
    for (const auto &f : std::map<std::string, std::string>{
             { "rmutex_acquisitions_total", "counter" },
             { "rmutex_contended_acquisitions_total", "counter" },
             { "rmutex_lost_holds_total", "counter" },
             { "rmutex_renewals_total", "counter" },
             { "rmutex_wait_seconds", "histogram" },
             { "rmutex_hold_seconds", "histogram" } })
        EXPECT_EQ(f.second, x.types[f.first]) << f.first;
    /* The escaped name is printed escaped (and parsed back above). */
    EXPECT_NE(std::string::npos, text.find("q\\\"uote\\\\back")) << text;
    ASSERT_RC(0, rmutex_unlock(&m));
    churn_a.wait(ms(10000));
    churn_b.wait(ms(10000));
    rmutex_destroy(&m);
    rmutex_destroy(&mc);
}

TEST_F(Published, AThousandNamesInOneProcessMakeAtMostTheBoundPlusOneSeries)
{
    std::vector<rmutex_t> ms_(1000);
    for (size_t i = 0; i < ms_.size(); i++) {
        init_mutex(&ms_[i], lock_name("n" + std::to_string(i)));
        ASSERT_RC(0, rmutex_lock(&ms_[i]));
        ASSERT_RC(0, rmutex_unlock(&ms_[i]));
    }
    /* A process that holds nothing lets its entry lapse two leases (3 s)
     * after its last publication; one scrape and its parse can take longer
     * than that on a loaded machine under ASan.  The last name is held while
     * we read: the entry is renewed every period. */
    ASSERT_RC(0, rmutex_lock(&ms_.back()));
    std::string text, me = ",pid=" + std::to_string(getpid()) + ",";
    auto mine = [&](const Exposition &e) {
        size_t n = 0;
        for (const auto &s : e.series_of.at("rmutex_acquisitions_total"))
            if (s.find(me) != std::string::npos) n++;
        return n;
    };
    auto total = [&](const Exposition &e) {
        double sum = 0;
        for (const auto &s : e.samples)
            if (!s.first.compare(0, 26, "rmutex_acquisitions_total{") && s.first.find(me) != std::string::npos)
                sum += s.second;
        return sum;
    };
    Exposition x = scrape_until([&](const Exposition &e) {
        return e.series_of.count("rmutex_acquisitions_total") && total(e) >= 1001;
    }, &text);
    ASSERT_EQ("", x.error);
    ASSERT_GE(total(x), 1001) << "never published";
    for (const auto &family : x.series_of) {
        size_t n = 0;
        for (const auto &s : family.second)
            if (s.find(me) != std::string::npos) n++;
        EXPECT_LE(n, (size_t)RMUTEX_METRICS_NAMES + 1) << family.first;
    }
    EXPECT_EQ((size_t)RMUTEX_METRICS_NAMES + 1, mine(x));
    /* The rest is one series, name "". */
    EXPECT_GE(sample(x, "rmutex_acquisitions_total", "", getpid()), 1000 - RMUTEX_METRICS_NAMES);
    ASSERT_RC(0, rmutex_unlock(&ms_.back()));
    for (auto &m : ms_) rmutex_destroy(&m);
}

TEST_F(Published, TopShowsTheBusiestLockFirstWithAPlausibleRate)
{
    std::string busy = lock_name("busy"), calm = lock_name("calm");
    Child fast({ "churn", busy, "2", "4000", "2" }, url());
    Child slow({ "churn", calm, "1", "4000", "100" }, url());
    ASSERT_TRUE(fast.expect_line("ready", ms(5000)));
    ASSERT_TRUE(slow.expect_line("ready", ms(5000)));
    std::string text;
    scrape_until([&](const Exposition &e) {
        return sample(e, "rmutex_acquisitions_total", busy, fast.pid()) > 0 &&
               sample(e, "rmutex_acquisitions_total", calm, slow.pid()) > 0;
    }, &text);
    std::string out;
    ASSERT_EQ(0, cli({ "top", "-n", "2" }, &out)) << out;
    /* Two blocks: header, column names, rows, empty line. */
    std::vector<std::vector<std::string>> blocks(1);
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
        if (line.empty()) blocks.emplace_back();
        else blocks.back().push_back(line);
    if (blocks.back().empty()) blocks.pop_back();
    ASSERT_EQ(2u, blocks.size()) << out;
    const auto &last = blocks[1];
    ASSERT_GE(last.size(), 4u) << out;
    EXPECT_EQ(0u, last[0].find("rmutex top")) << out;
    std::istringstream first(last[2]);
    std::string name;
    double rate;
    first >> name >> rate;
    EXPECT_EQ(busy, name) << out;
    auto done = fast.expect_line("done ", ms(10000));
    ASSERT_TRUE(done) << out;
    double real = std::stod(field(*done, "acquisitions")) / 4.0;
    EXPECT_GT(rate, real / 3) << out << "the churn's own rate: " << real << "/s";
    EXPECT_LT(rate, real * 3) << out << "the churn's own rate: " << real << "/s";
    bool calm_after = false;
    for (size_t i = 3; i < last.size(); i++) calm_after |= last[i].find(calm) == 0;
    EXPECT_TRUE(calm_after) << out;
    slow.wait(ms(10000));
}

} // namespace
