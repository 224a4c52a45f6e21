/* client.h -- a raw hiredis client for the tests' looks at the server
 * (part of harness.h): what a lock's keys hold, who is connected, the
 * messages of a channel.  Never the library's way of talking: the test's
 * own, so that an assertion does not trust what it tests. */
#ifndef RMUTEX_TEST_HARNESS_CLIENT_H
#define RMUTEX_TEST_HARNESS_CLIENT_H

#include "timing.h"

#include <hiredis/hiredis.h>

#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rmt {

struct Reply {
    std::unique_ptr<redisReply, void (*)(void *)> r{nullptr, freeReplyObject};
    explicit operator bool() const { return r != nullptr; }
    redisReply *operator->() const { return r.get(); }
    bool is_nil() const { return r && r->type == REDIS_REPLY_NIL; }
    bool is_error() const { return !r || r->type == REDIS_REPLY_ERROR; }
    long long integer() const { return r && r->type == REDIS_REPLY_INTEGER ? r->integer : INT64_MIN; }
    std::string str() const { return r && r->str ? std::string(r->str, r->len) : std::string(); }
};

class Redis {
  public:
    Redis(const std::string &host, int port, const std::string &password = "");
    ~Redis();
    Redis(const Redis &) = delete;
    Redis &operator=(const Redis &) = delete;

    bool ok() const { return c_ && !c_->err; }
    const char *error() const { return c_ ? c_->errstr : "no context"; }
    redisContext *ctx() { return c_; }

    /* A command from an argument vector (binary-safe).  Reconnects once if
     * the connection had failed before. */
    Reply cmd(const std::vector<std::string> &argv);
    Reply cmdf(const char *fmt, ...);

    std::string type(const std::string &key);
    std::map<std::string, std::string> hgetall(const std::string &key);
    /* The value of the lock hash's only field ("" unless it has exactly
     * one): a cached lock's acquisition, "p<acquisition>" when parked. */
    std::string lock_value(const std::string &name);
    bool parked(const std::string &name) { return lock_value(name).rfind("p", 0) == 0; }
    long long pttl(const std::string &key);
    bool exists(const std::string &key);
    std::optional<std::string> get(const std::string &key);
    long long numsub(const std::string &channel);

    /* CLIENT LIST, one map per connection (id, name, addr, cmd, ...). */
    std::vector<std::map<std::string, std::string>> client_list();
    /* Ids of connections whose name is exactly name. */
    std::vector<long long> client_ids(const std::string &name);
    bool client_kill_id(long long id);

    /* Wait for one pub/sub message (after a SUBSCRIBE done with cmd()).
     * Returns {channel, payload} or nothing when the bound passed. */
    std::optional<std::pair<std::string, std::string>> next_message(ms bound);

  private:
    void connect();
    std::string host_, password_;
    int port_;
    redisContext *c_ = nullptr;
};

} // namespace rmt

#endif
