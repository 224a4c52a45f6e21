-- force_unlock.lua: an operator's release of a lock, whoever holds it.
--
-- KEYS[1] lock hash NAME, KEYS[2] redisson_lock__channel:{NAME},
-- KEYS[3] rmutex_owner:{NAME}, KEYS[4] rmutex_notrecoverable:{NAME}
-- ARGV[1] the publishing command: "publish", or "spublish" in a cluster
-- ARGV[2] "" (whoever holds it), or the owner field that must hold it
-- Deletes the lock and the robust marks (not the fencing counter), wakes
-- waiters.  Refuses a lock key that holds something other than a hash.
-- Returns {released, the holder's fields...}: released 1 when the lock was
-- deleted, 0 when it was free or (ARGV[2] given) held by someone else, in
-- which case nothing is touched.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'hash' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE the lock key holds a ' .. t .. ', not a lock')
end
local holders = redis.call('hkeys', KEYS[1])
if ARGV[2] ~= '' and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  table.insert(holders, 1, 0)
  return holders
end
redis.call('del', KEYS[3], KEYS[4])
local n = redis.call('del', KEYS[1])
if n == 1 then
  redis.call(ARGV[1], KEYS[2], '0')
end
table.insert(holders, 1, n)
return holders
