-- barrier.lua: a cyclic barrier -- count members meet, the last to arrive
-- ends the generation, every member of it goes on, exactly one of them as
-- the serial thread; a member process that dies (or stalls past its lease)
-- while a generation is open breaks it for everybody in it.
--
-- KEYS  1 B  rmutex_barrier:{NAME}          hash: count; gen, the open
--                                           generation; o<g> = "d" done or
--                                           "b" broken, and s<g> = the
--                                           arrival that ended it, for the
--                                           last KEEP generations
--       2 P  rmutex_barrier_parts:{NAME}    zset process uuid -> its lease
--                                           deadline (server ms): the
--                                           participants, renewed by their
--                                           watchdogs (renew.lua 'w')
--       3 Z  rmutex_barrier_arrivals:{NAME} zset arrival id -> the
--                                           generation it arrived in (the
--                                           open one and the last KEEP)
--       4 C  rmutex_barrier:{NAME}          the channel: "* <g> d" or
--                                           "* <g> b" when generation g ends
--                                           (a broadcast: every waiter of a
--                                           process wakes)
-- ARGV  1 op: join | leave | arrive | look | withdraw
--       2 the caller's process uuid   3 the arrival id ("<owner>:<seq>",
--       one wait of one thread; the same on every retry of that wait)
--       4 count   5 the participant lease ms   6 publish | spublish
-- Answers:
--   join     {0, count, gen} joined; {1, count} another count is in use
--            (live participants have it)
--   leave    1
--   arrive, look, withdraw:
--            {0, g, serial}  generation g filled (serial 1: this arrival
--                            was the last, RBARRIER_SERIAL_THREAD)
--            {1, g, ms}      waiting in the open generation g; the earliest
--                            participant lease passes in ms (-1: none): look
--                            again then, a death shows at once
--            {2, g}          generation g was broken
--            {3, count}      arrive: another count is in use
--            {4, 0}          the arrival is unknown: the keys went (flushed,
--                            expired) or it is older than KEEP generations
--            {5, g}          withdraw: this withdrawal broke g
-- Every op is idempotent for one arrival id: a retry after a lost reply
-- finds its arrival (in Z, with its generation) and gets the same answer,
-- so no member is counted twice.  Reclaim comes first in every op but
-- leave, on server time: participants whose lease passed leave P, and if
-- the open generation has arrivals it breaks.  A process that arrives is
-- a participant again (a forked child, one reclaimed after a stall).
-- Generation numbers start at the server's clock when B is made, so a
-- barrier made again after its keys went never reuses one a waiter of the
-- old one still holds.  Cost: O(log N) per op plus the reclaimed and the
-- pruned (at most PRUNE arrivals per generation end).
if redis.replicate_commands then redis.replicate_commands() end

local B, P, Z, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, uuid, id = ARGV[1], ARGV[2], ARGV[3]
local count, lease, PUBLISH = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local KEEP, RECLAIM, PRUNE = 8, 64, 1024

--!include clock.lua

local function keep_keys()
  for _, k in ipairs({B, P, Z}) do
    if redis.call('pttl', k) < 3 * lease then redis.call('pexpire', k, 3 * lease) end
  end
end

local function open_gen() return tonumber(redis.call('hget', B, 'gen')) end

local function num(g) return string.format('%d', g) end

local function arrivals(g) return redis.call('zcount', Z, num(g), num(g)) end

-- End generation g: outcome "d" (serial: the arrival that filled it) or
-- "b"; the next one opens; records older than KEEP generations go.
local function finish(g, outcome, serial)
  redis.call('hset', B, 'gen', num(g + 1), 'o' .. num(g), outcome)
  if serial then redis.call('hset', B, 's' .. num(g), serial) end
  redis.call('hdel', B, 'o' .. num(g - KEEP), 's' .. num(g - KEEP))
  local old = redis.call('zrangebyscore', Z, '-inf', num(g - KEEP), 'limit', 0, PRUNE)
  if #old > 0 then redis.call('zrem', Z, unpack(old)) end
  redis.call(PUBLISH, C, '* ' .. num(g) .. ' ' .. outcome)
end

-- Participants whose lease has passed are gone; one gone while the open
-- generation has arrivals breaks it.
local function reclaim()
  local dead = redis.call('zrangebyscore', P, '-inf', clock(), 'limit', 0, RECLAIM)
  if #dead == 0 then return end
  redis.call('zrem', P, unpack(dead))
  local g = open_gen()
  if g and arrivals(g) > 0 then finish(g, 'b') end
end

-- What an arrival of generation g learns.
local function outcome(g)
  local open = open_gen()
  if open and g == open then
    local first = redis.call('zrange', P, 0, 0, 'withscores')
    local ms = first[2] and math.max(0, tonumber(first[2]) - clock()) or -1
    return {1, g, ms}
  end
  local o = redis.call('hget', B, 'o' .. num(g))
  if o == 'd' then
    return {0, g, redis.call('hget', B, 's' .. num(g)) == id and 1 or 0}
  end
  if o == 'b' then return {2, g} end
  return {4, 0}
end

-- A barrier with no state (new, or its keys went): count, a generation
-- from the clock, no stale arrival.
local function make()
  redis.call('del', Z)
  redis.call('hset', B, 'count', count, 'gen', num(clock()))
end

local function participate()
  redis.call('zadd', P, clock() + lease, uuid)
end

if op == 'leave' then
  redis.call('zrem', P, uuid)
  return 1
end

reclaim()

if op == 'join' then
  local stored = tonumber(redis.call('hget', B, 'count'))
  if not stored then
    make()
  elseif stored ~= count then
    if redis.call('zcard', P) > 0 then return {1, stored} end
    redis.call('hset', B, 'count', count) -- nobody alive uses the old one
  end
  participate()
  keep_keys()
  return {0, count, open_gen()}
end

if op == 'arrive' then
  local stored = tonumber(redis.call('hget', B, 'count'))
  if not stored then
    make()
  elseif stored ~= count then
    return {3, stored}
  end
  local mine = redis.call('zscore', Z, id)
  if mine then return outcome(tonumber(mine)) end -- asked again: the same answer
  participate()
  keep_keys()
  local g = open_gen()
  redis.call('zadd', Z, num(g), id)
  if arrivals(g) >= count then
    finish(g, 'd', id)
    return {0, g, 1}
  end
  return outcome(g)
end

if op == 'look' or op == 'withdraw' then
  local mine = redis.call('zscore', Z, id)
  if not mine then return {4, 0} end
  local g = tonumber(mine)
  if op == 'withdraw' and g == open_gen() then
    finish(g, 'b')
    return {5, g}
  end
  return outcome(g)
end

return redis.error_reply('barrier.lua: unknown op ' .. tostring(op))
