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

namespace rmt {

/* §2.1: KEYS[1] lock; ARGV[1] lease ms, ARGV[2] owner.  nil = acquired or
 * re-entered, integer = the lock's PTTL. */
inline const char *kAcquire = R"lua(
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
)lua";

/* §2.2: KEYS = lock, channel, unlock latch; ARGV = message (0), lease,
 * owner, publish command, latch ttl.  nil = not ours, 0 = still held
 * (reentrant), 1 = released. */
inline const char *kUnlock = R"lua(
local done = redis.call('get', KEYS[3]);
if done ~= false then
    return tonumber(done);
end;
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil;
end;
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if left > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
    return 0;
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[4], KEYS[2], ARGV[1]);
redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
return 1;
)lua";

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
