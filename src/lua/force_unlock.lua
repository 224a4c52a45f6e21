-- force_unlock.lua: an operator's release of a lock, whoever holds it.
--
-- KEYS[1] lock hash NAME, KEYS[2] redisson_lock__channel:{NAME},
-- KEYS[3] rmutex_owner:{NAME}, KEYS[4] rmutex_notrecoverable:{NAME}
-- ARGV[1] the publishing command: "publish", or "spublish" in a cluster
-- Deletes the lock and the robust marks (not the fencing counter), wakes
-- waiters.  Refuses a lock key that holds something other than a hash.
-- Returns 1 if a lock was released, 0 if it was free.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'hash' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE the lock key holds a ' .. t .. ', not a lock')
end
redis.call('del', KEYS[3], KEYS[4])
local n = redis.call('del', KEYS[1])
if n == 1 then
  redis.call(ARGV[1], KEYS[2], '0')
end
return n
