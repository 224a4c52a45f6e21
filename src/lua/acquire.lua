-- acquire.lua: take a lock for one owner, wire-compatible with Redisson's RLock.
--
-- KEYS[1] lock hash NAME             field <owner> = 1, PEXPIRE lease
-- KEYS[2] redisson_lock_token:{NAME}  fencing counter (INCR, no TTL)
-- KEYS[3] rmutex_owner:{NAME}         who holds it; PX 2*lease, so it outlives
--                                     a hold that lapses, and the next taker
--                                     learns its owner died (EOWNERDEAD)
-- KEYS[4] rmutex_notrecoverable:{NAME} set when robust state was abandoned
-- ARGV[1] lease in ms, ARGV[2] owner "<uuid>:<thread>", ARGV[3] "1" if robust,
-- ARGV[4] request id of this acquisition (the owner mark names it, see
-- lib/mark.lua, so that a clean-up of an acquisition whose outcome was
-- unknown touches that acquisition only)
--
-- Returns {0, token, dead} acquired (dead = 1: the previous holder's lease
-- ran out without an unlock), {1, pttl} held by somebody else, {2} not
-- recoverable (robust callers only).
--
-- The count in the hash is always 1: recursion is counted by the client.
-- That makes the script idempotent per acquisition: when a reply is lost
-- and the client asks again with the same request id, finding its own
-- field and a mark naming that request means the first call worked, and it
-- is answered with the same token instead of a second count.
--!include mark.lua

local lock, token, owner, notrec = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local lease, me = tonumber(ARGV[1]), ARGV[2]
local mine = me .. '|' .. ARGV[4]

if ARGV[3] == '1' and redis.call('exists', notrec) == 1 then
  return {2}
end

local pttl = redis.call('pttl', lock)
if pttl ~= -2 then
  if redis.call('hexists', lock, me) == 0 then
    return {1, pttl}
  end
  local mark = redis.call('get', owner)
  if mark_names(mark, mine) then
    -- This very acquisition, asked again after a lost reply.
    local dead = mark_dead(mark)
    redis.call('pexpire', lock, lease)
    redis.call('set', owner, mark_make(mine, false, dead), 'px', 2 * lease)
    return {0, tonumber(redis.call('get', token)) or 0, dead and 1 or 0}
  end
  -- A hold of this owner that it has let go of, whose release never
  -- landed (a failover lost it, or a release deferred past its caller):
  -- the client asks only when it holds nothing, so this is a new
  -- acquisition, with a new token.
  redis.call('pexpire', lock, lease)
  redis.call('set', owner, mark_make(mine, false, false), 'px', 2 * lease)
  return {0, redis.call('incr', token), 0}
end

-- Free.  A surviving owner mark means the last holder never unlocked.
local dead = mark_died(redis.call('get', owner))
redis.call('hset', lock, me, 1)
redis.call('pexpire', lock, lease)
redis.call('set', owner, mark_make(mine, false, dead), 'px', 2 * lease)
return {0, redis.call('incr', token), dead and 1 or 0}
