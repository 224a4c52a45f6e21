/* redisson_client.h -- a second lock client that speaks Redisson's RLock
 * protocol, for the compatibility tests.
 *
 * It is written from the protocol notes (redisson-lock-design.md section
 * 2), not from rmutex's sources: its own Lua for acquire (2.1), unlock
 * with the request-id latch (2.2) and renewal (2.3), sent through hiredis
 * with EVAL.  Its owner id is "<uuid>:<thread-id>" like Redisson's. */
#ifndef RMUTEX_TEST_REDISSON_CLIENT_H
#define RMUTEX_TEST_REDISSON_CLIENT_H

#include "harness.h"
#include "redisson_scripts.h"

namespace rmt {

/* §2.1 and §2.2: redisson_scripts.h. */
inline const char *kAcquire = REDISSON_ACQUIRE_LUA;
inline const char *kUnlock = REDISSON_UNLOCK_LUA;

/* §2.3 (per lock): KEYS[1] lock; ARGV[1] lease, ARGV[2] owner. */
inline const char *kRenew = R"lua(
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
)lua";

/* Redisson's prefixName: "prefix:{name}", or "prefix:name" when the name
 * already has a '{'. */
inline std::string prefixed(const std::string &prefix, const std::string &name)
{
    return name.find('{') == std::string::npos ? prefix + ":{" + name + "}" : prefix + ":" + name;
}

class RedissonClient {
  public:
    /* publish: the command its unlock publishes with -- "spublish" on a
     * Redis 7 cluster, where Redisson uses sharded pub/sub. */
    RedissonClient(Redis &r, std::string uuid, long thread_id, std::string publish = "publish")
        : r_(r), owner_(std::move(uuid) + ":" + std::to_string(thread_id)), publish_(std::move(publish))
    {
    }
    const std::string &owner() const { return owner_; }

    /* nil -> -1 (acquired), else the PTTL it reported. */
    long long acquire(const std::string &name, long lease_ms)
    {
        Reply rep = r_.cmd({"EVAL", kAcquire, "1", name, std::to_string(lease_ms), owner_});
        EXPECT_FALSE(rep.is_error()) << rep.str();
        return rep.is_nil() ? -1 : rep.integer();
    }

    /* nil -> -1 (not ours), else 0 or 1. */
    long long unlock(const std::string &name, long lease_ms = 30000)
    {
        std::string latch = prefixed("redisson_unlock_latch", name) + ":" + std::to_string(++request_);
        Reply rep = r_.cmd({"EVAL", kUnlock, "3", name, prefixed("redisson_lock__channel", name), latch, "0",
                            std::to_string(lease_ms), owner_, publish_, "5000"});
        EXPECT_FALSE(rep.is_error()) << rep.str();
        if (!rep.is_nil())
            r_.cmd({"DEL", latch});
        return rep.is_nil() ? -1 : rep.integer();
    }

    long long renew(const std::string &name, long lease_ms)
    {
        return r_.cmd({"EVAL", kRenew, "1", name, std::to_string(lease_ms), owner_}).integer();
    }

  private:
    Redis &r_;
    std::string owner_, publish_;
    long request_ = 0;
};

} // namespace rmt

#endif
