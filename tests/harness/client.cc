/* client.cc -- a raw hiredis client for the tests.  See client.h. */
#include "client.h"

#include <cstdarg>
#include <sstream>

namespace rmt {

Redis::Redis(const std::string &host, int port, const std::string &password)
    : host_(host), password_(password), port_(port)
{
    connect();
}

Redis::~Redis()
{
    if (c_)
        redisFree(c_);
}

void Redis::connect()
{
    if (c_)
        redisFree(c_);
    struct timeval tv = {2, 0};
    c_ = redisConnectWithTimeout(host_.c_str(), port_, tv);
    if (!c_ || c_->err)
        return;
    redisSetTimeout(c_, {10, 0});
    if (!password_.empty()) {
        auto *r = static_cast<redisReply *>(redisCommand(c_, "AUTH %s", password_.c_str()));
        if (r)
            freeReplyObject(r);
    }
}

Reply Redis::cmd(const std::vector<std::string> &argv)
{
    if (!c_ || c_->err)
        connect();
    Reply out;
    if (!c_ || c_->err)
        return out;
    std::vector<const char *> a;
    std::vector<size_t> l;
    for (auto &s : argv) {
        a.push_back(s.data());
        l.push_back(s.size());
    }
    out.r.reset(static_cast<redisReply *>(redisCommandArgv(c_, static_cast<int>(a.size()), a.data(), l.data())));
    return out;
}

Reply Redis::cmdf(const char *fmt, ...)
{
    if (!c_ || c_->err)
        connect();
    Reply out;
    if (!c_ || c_->err)
        return out;
    va_list ap;
    va_start(ap, fmt);
    out.r.reset(static_cast<redisReply *>(redisvCommand(c_, fmt, ap)));
    va_end(ap);
    return out;
}

std::string Redis::type(const std::string &key) { return cmd({"TYPE", key}).str(); }

std::string Redis::lock_value(const std::string &name)
{
    auto h = hgetall(name);
    return h.size() == 1 ? h.begin()->second : "";
}

std::map<std::string, std::string> Redis::hgetall(const std::string &key)
{
    std::map<std::string, std::string> m;
    Reply r = cmd({"HGETALL", key});
    if (r && r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i + 1 < r->elements; i += 2)
            m[std::string(r->element[i]->str, r->element[i]->len)] =
                std::string(r->element[i + 1]->str, r->element[i + 1]->len);
    return m;
}

long long Redis::pttl(const std::string &key) { return cmd({"PTTL", key}).integer(); }

bool Redis::exists(const std::string &key) { return cmd({"EXISTS", key}).integer() == 1; }

std::optional<std::string> Redis::get(const std::string &key)
{
    Reply r = cmd({"GET", key});
    if (!r || r->type != REDIS_REPLY_STRING)
        return std::nullopt;
    return r.str();
}

long long Redis::numsub(const std::string &channel)
{
    Reply r = cmd({"PUBSUB", "NUMSUB", channel});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return -1;
    return r->element[1]->integer;
}

std::vector<std::map<std::string, std::string>> Redis::client_list()
{
    std::vector<std::map<std::string, std::string>> out;
    std::istringstream lines(cmd({"CLIENT", "LIST"}).str());
    std::string line;
    while (std::getline(lines, line)) {
        std::map<std::string, std::string> m;
        std::istringstream toks(line);
        std::string tok;
        while (toks >> tok) {
            auto eq = tok.find('=');
            if (eq != std::string::npos)
                m[tok.substr(0, eq)] = tok.substr(eq + 1);
        }
        if (!m.empty())
            out.push_back(std::move(m));
    }
    return out;
}

std::vector<long long> Redis::client_ids(const std::string &name)
{
    std::vector<long long> ids;
    for (auto &c : client_list())
        if (c["name"] == name)
            ids.push_back(std::stoll(c["id"]));
    return ids;
}

bool Redis::client_kill_id(long long id)
{
    return cmd({"CLIENT", "KILL", "ID", std::to_string(id)}).integer() == 1;
}

std::optional<std::pair<std::string, std::string>> Redis::next_message(ms bound)
{
    if (!c_ || c_->err)
        return std::nullopt;
    auto b = scaled(bound);
    struct timeval tv = {static_cast<time_t>(b.count() / 1000), static_cast<suseconds_t>(b.count() % 1000 * 1000)};
    redisSetTimeout(c_, tv);
    for (;;) {
        void *raw = nullptr;
        if (redisGetReply(c_, &raw) != REDIS_OK || !raw)
            return std::nullopt; /* timed out: this context is now unusable */
        Reply r;
        r.r.reset(static_cast<redisReply *>(raw));
        /* ["message" or, sharded, "smessage", channel, payload]. */
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->str &&
            (std::string(r->element[0]->str) == "message" || std::string(r->element[0]->str) == "smessage"))
            return std::make_pair(std::string(r->element[1]->str, r->element[1]->len),
                                  std::string(r->element[2]->str, r->element[2]->len));
        /* A PSUBSCRIBE's message: ["pmessage", pattern, channel, payload]. */
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 && r->element[0]->str &&
            std::string(r->element[0]->str) == "pmessage")
            return std::make_pair(std::string(r->element[2]->str, r->element[2]->len),
                                  std::string(r->element[3]->str, r->element[3]->len));
    }
}

} // namespace rmt
