-- cond.lua: a condition variable -- registered waiters, tickets, signals
-- that are state.
--
-- KEYS  1 H  rmutex_cond:{C}          hash: seq (last ticket), bcast (every
--                                     ticket below it was released by a
--                                     broadcast), mutex (the mutex of the
--                                     last wait: binds while one is blocked),
--                                     and "g <waiter>" -> "<lock key>\n<hold
--                                     lease ms>" while a waiter that can be
--                                     handed its mutex waits, "g" once a
--                                     signal did (in H: the watchdog keeps
--                                     H alive with the waiters' leases)
--       2 W  rmutex_cond_wait:{C}     zset <waiter> -> ticket while it waits,
--                                     -ticket once a signal picked it
--       3 A  rmutex_cond_alive:{C}    zset <waiter> -> liveness deadline
--       4 P  rmutex_cond_channel:{C}  "s <waiter>": that waiter was
--                                     signalled; "s <waiter> g": signalled
--                                     and handed its mutex (below); "*
--                                     <bcast>": every ticket below bcast
--                                     was released
-- ARGV  1 op: wait | check | leave | signal | broadcast
--       2 waiter "<owner> <request id>" (signal: the caller's "<owner>")
--       3 waiter lease ms
--       4 the mutex's name (wait)         5 "1": pass a signal on (leave)
--       6 the publishing command: publish, or spublish in a cluster
--       7 wait: the mutex's hold lease in ms when a signal may hand it
--         over, else empty
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
-- Wait morphing: a signal that finds the picked waiter's mutex free takes
-- it for that waiter in the same script -- the hold exactly as acquire.lua
-- writes it for that owner (the field "<owner>" = its request id, the
-- acquisition's number; PEXPIRE its hold lease) -- and publishes
-- "s <waiter> g": the waiter owns the mutex on receipt, with no round trip
-- after its wake-up.  Only a waiter whose client registered terms in H: a
-- non-fair, uncached, non-robust mutex whose lock key Redis can reach from
-- here.  That key is not in KEYS (only H knows it); in a cluster this is
-- sound only because the waiter's client registers terms only when the
-- lock key hashes to the condition's slot (cond.c).  No grant when the
-- lock key exists (a grant never makes two owners), nor when the PUBLISH
-- reached nobody (the waiter's process is gone or polling): then the plain
-- signal.  A granted waiter is signalled as any other (its score
-- negative: unblocked) and H says "g", so that its check or leave, if it
-- comes (the message unread: a deadline, a cancel, a poll), answers 3,
-- granted: the mutex is its own (a cancelled one still passes its
-- signal on, which finds the mutex held: a plain one).
-- Its client does not wait for that leave (the watchdog sends it).  A
-- granted waiter that died is purged as any dead waiter, its signal
-- passed on: no wake-up is lost, and the mutex it was handed is free
-- again within one hold lease (nobody renews it), as a dead holder's is.
-- A broadcast grants nothing (it stays O(1)).
--
-- Liveness as in the fair lock: A holds each waiter's deadline (server
-- TIME + waiter lease), pushed forward by its process's watchdog
-- (renew.lua, kind 'w', with KEYS A, W, H).  Any call removes up to PURGE
-- dead waiters; a dead waiter's signal is passed on to the next, and so is
-- the signal of one that leaves without using it (cancelled).  A wait and
-- a leave keep all three keys for two waiter leases, and so does every
-- waiter's renewal; a signal and a broadcast change no waiter's presence
-- and leave that to them (a signal runs before its message is delivered:
-- every command in it is in every signal -> wake-up).  When the last
-- waiter leaves the keys go.
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

-- Hand waiter m its mutex (terms from H) if it is free and the message
-- reaches a subscriber; true if it did (the caller marks it signalled).
local function grant(m, terms)
  local lock, lease = string.match(terms, '^(.*)\n(%d+)$')
  if not lock or redis.call('exists', lock) == 1 then return false end
  if redis.call(PUBLISH, P, 's ' .. m .. ' g') == 0 then return false end
  local owner, acq = string.match(m, '^(.*) (%d+)$')
  redis.call('hset', lock, owner, acq)
  redis.call('pexpire', lock, lease)
  redis.call('hset', H, 'g ' .. m, 'g')
  return true
end

-- Signal the lowest ticket still waiting; 1 if there was one -- or, when
-- here is the process of that waiter (here: a signal's caller's uuid) and
-- the message reached a subscriber, the message's text: the caller wakes
-- that thread itself, without waiting for its own copy (cond.c).
local function give(here)
  local first = redis.call('zrangebyscore', W, math.max(bcast(), 1), '+inf',
                           'withscores', 'limit', 0, 1)
  if #first == 0 then return 0 end
  local m = first[1]
  redis.call('zadd', W, -tonumber(first[2]), m)
  local terms = redis.call('hget', H, 'g ' .. m)
  local text = 's ' .. m .. ' g'
  if not (terms and grant(m, terms)) then
    text = 's ' .. m
    if redis.call(PUBLISH, P, text) == 0 then return 1 end
  end
  if here and string.match(m, '^(.*):') == here then return text end
  return 1
end

-- Forget waiter m.
local function drop(m)
  redis.call('zrem', W, m)
  redis.call('zrem', A, m)
  redis.call('hdel', H, 'g ' .. m)
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
    drop(m)
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
    drop(first[1])
  end
end

-- 1 released (signalled, or broadcast), 0 waiting, 2 unknown (its entry
-- is gone: its lease ran out, or the keys were lost), 3 granted: released
-- and handed its mutex.
local function state()
  local s = tonumber(redis.call('zscore', W, member))
  if not s then return 2 end
  if s < 0 and redis.call('hget', H, 'g ' .. member) == 'g' then return 3 end
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
  if ARGV[7] ~= '' then redis.call('hset', H, 'g ' .. member, ARGV[4] .. '\n' .. ARGV[7]) end
  tidy()
  return {0, ticket}

elseif op == 'check' then
  return state()

elseif op == 'leave' then
  local st = state()
  local s = tonumber(redis.call('zscore', W, member))
  drop(member)
  if ARGV[5] == '1' and s and s < 0 then
    give()
    if st ~= 3 then st = 0 end
  end
  tidy()
  return st

elseif op == 'signal' then
  return give(string.match(member, '^(.*):'))

elseif op == 'broadcast' then
  -- Nobody waiting (every ticket is signalled or below bcast): no-op.
  if redis.call('zcount', W, math.max(bcast(), 1), '+inf') == 0 then return 0 end
  local cut = tonumber(redis.call('hget', H, 'seq')) + 1
  redis.call('hset', H, 'bcast', cut) -- (H keeps its TTL: the waiters keep it)
  redis.call(PUBLISH, P, '* ' .. cut)
  return 1
end
return redis.error_reply('cond.lua: unknown op ' .. tostring(op))
