-- sem.lua: a counting semaphore whose taken permits are leased to the
-- process that took them, and come back, on server time, when that lease
-- passes (the process died, or stalled past it).
--
-- KEYS  1 S  rmutex_sem:{NAME}          hash: value = the free permits.  Made
--                                       by the first call that finds the name
--                                       absent (ARGV 3); no expiry: it is state
--       2 L  rmutex_sem_leases:{NAME}   zset <uuid> -> the process's permit
--                                       lease end (server ms)
--       3 N  rmutex_sem_held:{NAME}     hash <uuid> -> permits the process holds
--       4 Q  rmutex_sem_queue:{NAME}    zset <waiter> -> ticket (fair waiters)
--       5 A  rmutex_sem_alive:{NAME}    zset <waiter> -> liveness deadline
--       6 T  rmutex_sem_seq:{NAME}      ticket counter
--       7 X  rmutex_sem_lost:{NAME}     hash <uuid> -> permits the server gave
--                                       back for that process (its lease
--                                       passed); its posts absorb them.  Kept
--                                       a day after the last loss
--       8 G  rmutex_sem_grant:{NAME}     + ":<id>" (ARGV 9): that call's
--                                       grant, kept a minute: a wait or post
--                                       asked again after a lost reply
--                                       learns it went; undo gives it back.
--                                       Deleted by the thread's next call
--                                       once it has the outcome (ARGV 12)
-- ARGV  1 op: wait | post | getvalue | cancel | undo | release | unlink | open | inspect
--       2 the caller's process uuid   3 the initial value (the name is new)
--       4 n (permits)   5 permit lease ms   6 waiter lease ms
--       7 flags: 't' try, 'f' fair, 'c' consume (reclaim off: no lease, no
--         count), 'a' asked again (the last reply was lost)
--       8 the ticket an earlier answer of this call gave it ("0": none)
--       9 the waiter's id   10 the publishing command (publish | spublish)
--      11 the channel (rmutex_sem:{NAME})
--      12 the id of the caller's thread's last wait or post on the name whose
--         outcome it has learnt: its grant key is deleted ("0": none)
-- Answers:
--   wait     {0, value left} taken; {1, ms, ticket} none: look again within
--            ms (when the earliest lease runs out; -1: no lease), ticket >
--            0 when a fair caller was queued
--   post     {0, own, value} / {1, own, value}: 1 when it absorbed permits
--            of a lost lease (EPERM); own: how many of the process's own it
--            gave back; {2, 0, value}: past the maximum (nothing changed)
--   getvalue value;  cancel, undo, release 1 or 0;  unlink keys deleted
--   open     (sem_open; n = 1 create, + 2 exclusive) 0 opened (made with the
--            initial value if new and n says create); 1 it exists (n = 3);
--            2 there is none (n = 0)
--   inspect  (read only; n = holders to show) {value (-1: no semaphore), server
--            ms, fair waiters, processes holding, permits whose lease passed
--            (not given back yet), then per shown process: uuid, permits, lease
--            left ms}
--
-- Accounting.  A wait that takes n adds n to N[uuid] and sets L[uuid] (one
-- lease per process and name, renewed by its watchdog: renew.lua 's').  A
-- post by a process first absorbs what X holds for it (those permits are
-- back already: nothing is added, the post answers 1), then gives back
-- min(n, N[uuid]) of its own, and adds the rest as new permits (a post by
-- a process that holds none: POSIX lets any thread post).  Every call
-- first reclaims: each process whose lease has passed gives its N back to
-- value and into X; dead fair waiters leave the queue; if permits came
-- back, waiters are woken.  So value + sum(N) is what the posts made it,
-- whoever died: a dead process's permits return once, its late posts do
-- not count twice.
-- Wake-ups on channel C: "-<id>" the fair waiter of that id may go now
-- (each head waiter whose need fits the value, in order, stopping at the
-- first that does not: a wait for 3 is not passed by later waits for 1);
-- "0" one non-fair waiter per process may look, "1" every one.  A
-- non-fair waiter that takes and leaves permits free passes the word on.
if redis.replicate_commands then redis.replicate_commands() end

local S, L, N, Q, A, T, X = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local G = KEYS[8] .. ':' .. ARGV[9]
local op, uuid, initial = ARGV[1], ARGV[2], tonumber(ARGV[3])
local n, lease, wlease = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local flags, PUBLISH, C = ARGV[7], ARGV[10], ARGV[11]
local PURGE, BATCH, MAX = 64, 64, 2147483647
local LOST_MS, GRANT_MS = 86400000, 60000

--!include clock.lua

if ARGV[12] and ARGV[12] ~= '0' then redis.call('del', KEYS[8] .. ':' .. ARGV[12]) end

local function flag(f) return string.find(flags, f, 1, true) ~= nil end

local function value()
  local v = redis.call('hget', S, 'value')
  if not v then
    redis.call('hset', S, 'value', initial)
    return initial
  end
  return tonumber(v)
end

-- Processes whose permit lease has passed give their permits back.
local function reclaim()
  local dead = redis.call('zrangebyscore', L, '-inf', clock(), 'limit', 0, PURGE)
  local back = 0
  for _, u in ipairs(dead) do
    local c = tonumber(redis.call('hget', N, u)) or 0
    if c > 0 then
      back = back + c
      redis.call('hincrby', X, u, c)
      redis.call('pexpire', X, LOST_MS)
    end
    redis.call('hdel', N, u)
  end
  if #dead > 0 then redis.call('zrem', L, unpack(dead)) end
  if back > 0 then redis.call('hincrby', S, 'value', back) end
  return back
end

local has_queue = false
local function purge_waiters()
  has_queue = redis.call('exists', Q) == 1
  if not has_queue then return false end
  local dead = redis.call('zrangebyscore', A, '-inf', clock(), 'limit', 0, PURGE)
  if #dead == 0 then return false end
  redis.call('zrem', A, unpack(dead))
  redis.call('zrem', Q, unpack(dead))
  return true
end

local function need_of(member) return tonumber(string.match(member, '^(%d+)|')) or 1 end

-- Tell the fair waiters that may go now, in order, while their needs fit.
local function wake_fair(v)
  if redis.call('exists', Q) == 0 then return end
  for _, m in ipairs(redis.call('zrange', Q, 0, BATCH - 1)) do
    local need = need_of(m)
    if need > v then return end
    v = v - need
    redis.call(PUBLISH, C, '-' .. (string.match(m, '^%d+|(%d+)|') or '0'))
  end
end

-- Permits became free (freed of them): everyone who may use them looks.
local function wake(v, freed)
  if v <= 0 then return end
  wake_fair(v)
  redis.call(PUBLISH, C, freed == 1 and '0' or '1')
end

-- Until when the earliest lease runs out (ms from now), -1: none.
local function earliest()
  local first = redis.call('zrange', L, 0, 0, 'withscores')
  if not first[1] then return -1 end
  local ms = tonumber(first[2]) - clock()
  if ms < 0 then ms = 0 end
  return ms
end

local member = tostring(n) .. '|' .. ARGV[9] .. '|' .. uuid

local function unqueue(m)
  local was = redis.call('zrem', Q, m)
  redis.call('zrem', A, m)
  return was
end

if op == 'open' then
  if redis.call('hexists', S, 'value') == 1 then
    if n == 3 then return 1 end
    return 0
  end
  if n % 2 == 0 then return 2 end
  redis.call('hset', S, 'value', initial)
  return 0
end

if op == 'inspect' then
  local v = redis.call('hget', S, 'value')
  local now = clock()
  local out = {v and tonumber(v) or -1, now, redis.call('zcard', Q), redis.call('zcard', L), 0}
  for _, u in ipairs(redis.call('zrangebyscore', L, '-inf', now, 'limit', 0, PURGE)) do
    out[5] = out[5] + (tonumber(redis.call('hget', N, u)) or 0)
  end
  local shown = redis.call('zrange', L, 0, n - 1, 'withscores')
  for i = 1, #shown, 2 do
    out[#out + 1] = shown[i]
    out[#out + 1] = tonumber(redis.call('hget', N, shown[i])) or 0
    out[#out + 1] = tonumber(shown[i + 1]) - now
  end
  return out
end

if op == 'unlink' then
  return redis.call('del', S, L, N, Q, A, T, X)
end

local back = reclaim()
local purged = purge_waiters()
local v = value()

if op == 'wait' then
  if flag('a') and redis.call('exists', G) == 1 then return {0, v} end -- it went
  local may = v >= n
  local mine
  if has_queue then mine = redis.call('zscore', Q, member) end
  if may and flag('f') and has_queue then
    local first = redis.call('zrange', Q, 0, 0)
    may = first[1] == nil or first[1] == member
  end
  if not may then
    if back > 0 or purged then wake(v, back) end
    local ms = earliest()
    if flag('t') or not flag('f') then return {1, ms, 0} end
    local ticket = mine
    if not ticket then
      ticket = tonumber(ARGV[8]) or 0
      if ticket <= 0 then ticket = redis.call('incr', T) end
      redis.call('zadd', Q, ticket, member)
    end
    redis.call('zadd', A, clock() + wlease, member)
    for _, k in ipairs({Q, A, T}) do
      if redis.call('pttl', k) < 2 * wlease then redis.call('pexpire', k, 2 * wlease) end
    end
    return {1, ms, tonumber(ticket)}
  end
  v = v - n
  redis.call('hset', S, 'value', v)
  if not flag('c') then
    redis.call('hincrby', N, uuid, n)
    redis.call('zadd', L, 'gt', clock() + lease, uuid)
  end
  redis.call('set', G, n, 'px', GRANT_MS)
  if mine then unqueue(member) end
  if v > 0 and (mine or back > 0 or purged) then wake_fair(v) end
  if v > 0 and not flag('f') then redis.call(PUBLISH, C, '0') end -- the next one looks
  return {0, v}
end

if op == 'post' then
  if flag('a') then -- asked again: it may have gone
    local done = redis.call('get', G)
    local s1, o1 = string.match(done or '', '^p(%d),(%d+)$')
    if s1 then return {tonumber(s1), tonumber(o1), v} end
  end
  local lost = tonumber(redis.call('hget', X, uuid)) or 0
  local absorbed = math.min(n, lost)
  local rest = n - absorbed
  if v + rest > MAX then return {2, 0, v} end
  if absorbed > 0 then
    if absorbed == lost then redis.call('hdel', X, uuid) else redis.call('hincrby', X, uuid, -absorbed) end
  end
  local held = tonumber(redis.call('hget', N, uuid)) or 0
  local own = math.min(rest, held)
  if own > 0 then
    if own == held then
      redis.call('hdel', N, uuid)
      redis.call('zrem', L, uuid)
    else
      redis.call('hincrby', N, uuid, -own)
    end
  end
  if rest > 0 then
    v = v + rest
    redis.call('hset', S, 'value', v)
  end
  if rest > 0 or back > 0 or purged then wake(v, rest + back) end
  local status = absorbed > 0 and 1 or 0
  redis.call('set', G, 'p' .. status .. ',' .. own, 'px', GRANT_MS)
  return {status, own, v}
end

if op == 'getvalue' then
  if back > 0 or purged then wake(v, back) end
  return v
end

if op == 'cancel' then
  local was = unqueue(member)
  if was == 1 or back > 0 or purged then wake_fair(v) end
  return was
end

if op == 'undo' then -- a wait whose reply was lost, given up: give back what it took
  local got = tonumber(redis.call('get', G))
  if not got then return 0 end
  redis.call('del', G)
  if not flag('c') then
    local held = tonumber(redis.call('hget', N, uuid)) or 0
    if held <= got then
      redis.call('hdel', N, uuid)
      redis.call('zrem', L, uuid)
    else
      redis.call('hincrby', N, uuid, -got)
    end
    if held < got then got = held end -- (the rest was reclaimed with its lease)
  end
  v = v + got
  redis.call('hset', S, 'value', v)
  wake(v, got)
  return 1
end

if op == 'release' then -- the process exits: every permit it holds goes back
  local held = tonumber(redis.call('hget', N, uuid)) or 0
  redis.call('hdel', N, uuid)
  redis.call('zrem', L, uuid)
  if held <= 0 then return 0 end
  v = v + held
  redis.call('hset', S, 'value', v)
  wake(v, held)
  return 1
end

return redis.error_reply('sem.lua: unknown op ' .. tostring(op))
