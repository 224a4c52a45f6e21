-- release.lua: give a lock back.
--
-- KEYS[1] lock hash NAME
-- KEYS[2] redisson_lock__channel:{NAME}   gets "0", as Redisson's unlock sends
-- KEYS[3] rmutex_owner:{NAME}             (robust holds: deleted with the lock)
-- KEYS[4] rmutex_notrecoverable:{NAME}
-- ARGV[1] owner, ARGV[2] "1": mark the name not recoverable (an EOWNERDEAD
-- holder unlocking without rmutex_consistent), ARGV[3] ms that mark lives,
-- ARGV[4] the acquisition's number ("" or "0": any hold of the owner) --
-- release only that hold: an unlock, or the clean-up after an acquire whose
-- reply was lost, that arrives late (retried by the watchdog) must not free
-- a later hold of the same thread, ARGV[5] the publishing command:
-- "publish", or "spublish" in a cluster (sharded pub/sub, as Redisson uses
-- there), ARGV[6] "1": robust (drop the owner mark too).  A cache's hold
-- parked by its process (park.lua: value "p<acquisition>") is that
-- acquisition's too.
--
-- Returns 1 released, 0 not held by this acquisition (its lease ran out,
-- somebody force-unlocked it, or an earlier try of this very release
-- did it: the client, which knows whether it retried, tells those apart).
-- Only the owner's own field is ever looked at, so a retried release can
-- never free somebody else's hold.
local held = redis.call('hget', KEYS[1], ARGV[1])
if not held or (ARGV[4] ~= '' and ARGV[4] ~= '0' and held ~= ARGV[4] and held ~= 'p' .. ARGV[4]) then
  return 0
end
if ARGV[6] == '1' then
  redis.call('del', KEYS[1], KEYS[3])
else
  redis.call('del', KEYS[1])
end
if ARGV[2] == '1' then
  redis.call('set', KEYS[4], '1', 'px', ARGV[3])
end
redis.call(ARGV[5], KEYS[2], '0')
return 1
