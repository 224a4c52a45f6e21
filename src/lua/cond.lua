-- cond.lua: a condition variable -- registered waiters, tickets, signals
-- that are state.
--
-- KEYS  1 H  rmutex_cond:{C}          hash: seq (last ticket), bcast (every
--                                     ticket below it was released by a
--                                     broadcast), mutex (the mutex of the
--                                     last wait: binds while one is blocked)
--       2 W  rmutex_cond_wait:{C}     zset <waiter> -> ticket while it waits,
--                                     -ticket once a signal picked it
--       3 A  rmutex_cond_alive:{C}    zset <waiter> -> liveness deadline
--       4 P  rmutex_cond_channel:{C}  "s <waiter>": that waiter was
--                                     signalled; "* <bcast>": every ticket
--                                     below bcast was released
-- ARGV  1 op: wait | check | leave | signal | broadcast
--       2 waiter "<owner> <request id>"   3 waiter lease ms
--       4 the mutex's name (wait)         5 "1": pass a signal on (leave)
--       6 the publishing command: publish, or spublish in a cluster
--
-- A waiter registers (wait) before it lets go of its mutex, so whoever
-- takes the mutex after that and signals finds it registered.  Its ticket
-- (HINCRBY seq) orders it; a signal picks the lowest ticket still waiting
-- (score >= bcast) and flips its score negative; a broadcast raises bcast
-- to seq + 1, which releases every ticket issued so far at once: O(1) in
-- the number of waiters.  A waiter is released when its score is negative
-- or below bcast; it finds out by a message or by asking (check), and
-- consumes the release when it leaves.
--
-- The binding (POSIX: a condition is bound to the mutex of its blocked
-- waiters, until the last of them is unblocked).  A waiter is blocked
-- while its ticket is not released: score >= max(bcast, 1) and its lease
-- alive.  A wait with another mutex than H.mutex is refused (EINVAL in
-- cond.c) only while such a waiter exists.  So it is accepted as soon as
-- the last one was signalled or cut by a broadcast, even if they have not
-- left yet (they are taking their mutex back); a waiter whose deadline
-- passed or that was cancelled released no ticket and binds until its
-- leave has run (its release may still come from a signal until then); a
-- dead one binds until its lease runs out (found by the refusing wait
-- itself, beyond PURGE); a waiter whose entry is gone binds nothing.
--
-- Liveness as in the fair lock: A holds each waiter's deadline (server
-- TIME + waiter lease), pushed forward by its process's watchdog
-- (renew.lua, kind 'w', with KEYS A, W, H).  Any call removes up to PURGE
-- dead waiters; a dead waiter's signal is passed on to the next, and so is
-- the signal of one that leaves without using it (cancelled).  Every write
-- keeps all three keys for two waiter leases; when the last waiter leaves
-- they go.
if redis.replicate_commands then redis.replicate_commands() end

local H, W, A, P = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, member, wlease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local PUBLISH = ARGV[6]
local PURGE = 16

-- Server time (clock()), read only when needed (not by broadcast).
--!include clock.lua

local function bcast()
  return tonumber(redis.call('hget', H, 'bcast')) or 0
end

-- Signal the lowest ticket still waiting; 1 if there was one.
local function give()
  local first = redis.call('zrangebyscore', W, math.max(bcast(), 1), '+inf',
                           'withscores', 'limit', 0, 1)
  if #first == 0 then return 0 end
  redis.call('zadd', W, -tonumber(first[2]), first[1])
  redis.call(PUBLISH, P, 's ' .. first[1])
  return 1
end

local function keep(key)
  if redis.call('pttl', key) < 2 * wlease then redis.call('pexpire', key, 2 * wlease) end
end

local function tidy()
  if redis.call('zcard', A) == 0 then
    redis.call('del', H, W, A)
  else
    keep(H); keep(W); keep(A)
  end
end

-- Drop up to PURGE waiters whose lease ran out; pass their signals on.
local function purge()
  local dead = redis.call('zrangebyscore', A, '-inf', clock(), 'limit', 0, PURGE)
  local redo = 0
  for _, m in ipairs(dead) do
    local s = tonumber(redis.call('zscore', W, m))
    if s and s < 0 then redo = redo + 1 end
    redis.call('zrem', W, m)
    redis.call('zrem', A, m)
  end
  for _ = 1, redo do give() end
  if #dead > 0 then tidy() end
end

-- Whether a waiter is blocked (see the binding above).  Waiters whose
-- lease ran out are dropped on the way (a blocked one holds no signal to
-- pass on): each once, so the loop is bounded by the dead it removes.
local function anyone_blocked()
  local cut = math.max(bcast(), 1)
  while true do
    local first = redis.call('zrangebyscore', W, cut, '+inf', 'limit', 0, 1)
    if #first == 0 then return false end
    local deadline = tonumber(redis.call('zscore', A, first[1]))
    if deadline and deadline > clock() then return true end
    redis.call('zrem', W, first[1])
    redis.call('zrem', A, first[1])
  end
end

-- 1 released (signalled, or broadcast), 0 waiting, 2 unknown (its entry
-- is gone: its lease ran out, or the keys were lost).
local function state()
  local s = tonumber(redis.call('zscore', W, member))
  if not s then return 2 end
  if s < 0 or s < bcast() then return 1 end
  return 0
end

-- A broadcast needs neither: a dead waiter it releases costs nothing, and
-- it must stay O(1) (the waiters' own calls purge and tidy).
if op ~= 'broadcast' then purge() end

if op == 'wait' then
  local s = redis.call('zscore', W, member)
  if s then return {0, math.abs(tonumber(s))} end -- a retried wait
  local bound = redis.call('hget', H, 'mutex')
  if bound and bound ~= ARGV[4] and anyone_blocked() then return {1, bound} end
  local ticket = redis.call('hincrby', H, 'seq', 1)
  redis.call('hset', H, 'mutex', ARGV[4])
  redis.call('zadd', W, ticket, member)
  redis.call('zadd', A, clock() + wlease, member)
  tidy()
  return {0, ticket}

elseif op == 'check' then
  return state()

elseif op == 'leave' then
  local st = state()
  local s = tonumber(redis.call('zscore', W, member))
  redis.call('zrem', W, member)
  redis.call('zrem', A, member)
  if ARGV[5] == '1' and s and s < 0 then give() st = 0 end
  tidy()
  return st

elseif op == 'signal' then
  local n = give()
  if n > 0 then tidy() end
  return n

elseif op == 'broadcast' then
  -- Nobody waiting (every ticket is signalled or below bcast): no-op.
  if redis.call('zcount', W, math.max(bcast(), 1), '+inf') == 0 then return 0 end
  local cut = tonumber(redis.call('hget', H, 'seq')) + 1
  redis.call('hset', H, 'bcast', cut) -- (H keeps its TTL: the waiters keep it)
  redis.call(PUBLISH, P, '* ' .. cut)
  return 1
end
return redis.error_reply('cond.lua: unknown op ' .. tostring(op))
