-- release.lua: give a lock back, once, even when the client has to ask twice.
--
-- KEYS[1] lock hash NAME
-- KEYS[2] redisson_lock__channel:{NAME}   gets "0", as Redisson's unlock sends
-- KEYS[3] redisson_unlock_latch:{NAME}:<request-id>  the first answer, kept
--                                         for ARGV[2] ms so a retry of this
--                                         very request gets it again
-- KEYS[4] rmutex_owner:{NAME}
-- KEYS[5] rmutex_notrecoverable:{NAME}
-- ARGV[1] owner, ARGV[2] latch ms, ARGV[3] "1": mark the name not recoverable
-- (an EOWNERDEAD holder unlocking without rmutex_consistent), ARGV[4] ms
-- that mark lives, ARGV[5] "" or the request id of one acquisition: release
-- only if the hold is that acquisition -- an unlock, or the clean-up after an
-- acquire whose reply was lost, that arrives late (retried by the watchdog)
-- must not free a later hold of the same thread, which a failover that lost
-- the release answers over the thread's own field; every acquisition writes
-- the owner mark, so a hold without one is this acquisition's, ARGV[6]
-- the publishing command: "publish", or "spublish" in a cluster (sharded
-- pub/sub, as Redisson uses there)
--
-- Returns 1 released, 0 not held by this owner (its lease ran out, or
-- somebody force-unlocked it).  Only the owner's own field is ever removed,
-- so a retried release can never free somebody else's later hold.
--!include mark.lua

local done = redis.call('get', KEYS[3])
if done then
  return tonumber(done)
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if ARGV[5] ~= '' then
  local mark = redis.call('get', KEYS[4])
  if mark and not mark_names(mark, ARGV[1] .. '|' .. ARGV[5]) then
    return 0
  end
end
redis.call('del', KEYS[1], KEYS[4])
if ARGV[3] == '1' then
  redis.call('set', KEYS[5], '1', 'px', ARGV[4])
end
redis.call(ARGV[6], KEYS[2], '0')
redis.call('set', KEYS[3], '1', 'px', ARGV[2])
return 1
