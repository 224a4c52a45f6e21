/* redisson_rw_client.h -- a second client speaking Redisson's
 * RReadWriteLock protocol, as its protocol notes describe the scripts
 * (rwlock-semaphore.md section 1: read acquire 1.2, read unlock 1.3, write
 * acquire 1.4, write unlock 1.5; the unlock latch left out), for the
 * interoperation tests.  One client is one Redisson thread. */
#ifndef RMUTEX_TEST_REDISSON_RW_CLIENT_H
#define RMUTEX_TEST_REDISSON_RW_CLIENT_H

#include "harness.h"

namespace rmt {

/* KEYS lock, timeout-key base "{L}:<owner>:rwlock_timeout"; ARGV lease,
 * owner, owner's write field.  nil: acquired; else the lock's PTTL. */
inline const char *kRedissonReadAcquire = R"lua(
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1)
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. n, 1)
  redis.call('pexpire', KEYS[2] .. ':' .. n, ARGV[1])
  local left = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1])
)lua";

/* KEYS lock, channel, timeout-key base, "{L}" suffix base; ARGV "0", owner,
 * publish command.  nil: not held; 0: others still hold; 1: released. */
inline const char *kRedissonReadUnlock = R"lua(
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[3], KEYS[2], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
local n = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if n == 0 then redis.call('hdel', KEYS[1], ARGV[2]) end
redis.call('del', KEYS[3] .. ':' .. (n + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
    local count = tonumber(redis.call('hget', KEYS[1], f))
    if type(count) == 'number' then
      for i = count, 1, -1 do
        longest = math.max(longest, redis.call('pttl', KEYS[4] .. ':' .. f .. ':rwlock_timeout:' .. i))
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    return 0
  end
  if mode == 'write' then return 0 end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1
)lua";

/* KEYS lock; ARGV lease, write field.  nil: acquired; else the PTTL. */
inline const char *kRedissonWriteAcquire = R"lua(
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
)lua";

/* KEYS lock, channel; ARGV "1", lease, write field, publish command. */
inline const char *kRedissonWriteUnlock = R"lua(
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[4], KEYS[2], ARGV[1])
  return nil
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
  redis.call(ARGV[4], KEYS[2], ARGV[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
return 1
)lua";

class RedissonRwClient {
  public:
    RedissonRwClient(Redis &r, std::string uuid, long thread_id)
        : r_(r), owner_(std::move(uuid) + ":" + std::to_string(thread_id))
    {
    }

    /* Redisson's suffixName: "{name}" or the name with its own tag. */
    static std::string tag(const std::string &name)
    {
        return name.find('{') == std::string::npos ? "{" + name + "}" : name;
    }
    std::string timeout_base(const std::string &name) const
    {
        return tag(name) + ":" + owner_ + ":rwlock_timeout";
    }
    static std::string channel(const std::string &name) { return "redisson_rwlock:" + tag(name); }

    /* -1 acquired, else the PTTL it answered. */
    long long read(const std::string &name, long lease = 30000)
    {
        Reply rep = r_.cmd({ "EVAL", kRedissonReadAcquire, "2", name, timeout_base(name),
                             std::to_string(lease), owner_, owner_ + ":write" });
        EXPECT_FALSE(rep.is_error()) << rep.str();
        return rep.is_nil() ? -1 : rep.integer();
    }
    long long read_unlock(const std::string &name)
    {
        Reply rep = r_.cmd({ "EVAL", kRedissonReadUnlock, "4", name, channel(name), timeout_base(name),
                             tag(name), "0", owner_, "publish" });
        EXPECT_FALSE(rep.is_error()) << rep.str();
        return rep.is_nil() ? -1 : rep.integer();
    }
    long long write(const std::string &name, long lease = 30000)
    {
        Reply rep = r_.cmd({ "EVAL", kRedissonWriteAcquire, "1", name, std::to_string(lease),
                             owner_ + ":write" });
        EXPECT_FALSE(rep.is_error()) << rep.str();
        return rep.is_nil() ? -1 : rep.integer();
    }
    long long write_unlock(const std::string &name, long lease = 30000)
    {
        Reply rep = r_.cmd({ "EVAL", kRedissonWriteUnlock, "2", name, channel(name), "1",
                             std::to_string(lease), owner_ + ":write", "publish" });
        EXPECT_FALSE(rep.is_error()) << rep.str();
        return rep.is_nil() ? -1 : rep.integer();
    }

  private:
    Redis &r_;
    std::string owner_;
};

} // namespace rmt

#endif
