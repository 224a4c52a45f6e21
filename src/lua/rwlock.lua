-- rwlock.lua: the read-write lock -- readers share, a writer is alone, and
-- a FIFO queue of live waiters so that no writer starves; on Redisson's
-- RReadWriteLock layout, so that a Redisson client on the same name is
-- excluded as a pthread rwlock would be.
--
-- KEYS  1 L  NAME                          Redisson's hash: mode = read|write;
--                                          "<uuid>:<tid>:write" = the writer's
--                                          acquisition; "<uuid>:r" = "1", this
--                                          library's anchor for a process's
--                                          read holds (Redisson's readers
--                                          have "<uuid>:<tid>" = their count)
--       2 R  rmutex_rw_readers:{NAME}      zset <uuid> -> the process's read
--                                          lease deadline (server ms)
--       3 Q  rmutex_rw_queue:{NAME}        zset <waiter> -> ticket (order)
--       4 W  rmutex_rw_writers:{NAME}      zset: the writers of Q, same tickets
--       5 A  rmutex_rw_alive:{NAME}        zset <waiter> -> liveness deadline
--       6 S  rmutex_rw_seq:{NAME}          ticket counter
--       7 O  rmutex_rw_owner:{NAME}        the writer's mark (lib/mark.lua):
--                                          found with no writer, it died
--       8 H  rmutex_rw_holds:{NAME}:<uuid> the caller's process's read holds:
--                                          hash <tid> -> acquisition
--       9 P  {NAME}:<uuid>:r:rwlock_timeout:1  Redisson's timeout key of the
--                                          anchor, so that its read unlock,
--                                          which keeps the hash as long as
--                                          one is alive, keeps ours too
--      10 C  redisson_rwlock:{NAME}        Redisson's channel: "0" read
--                                          unlock, "1" write unlock; and
--                                          "-<id>": the waiter of that id
--                                          may go now (a negative number:
--                                          Redisson's listeners read every
--                                          message as one, and ignore it)
-- ARGV  1 op: rdlock | wrlock | rdunlock | wrunlock | cancel
--       2 owner "<uuid>:<tid>"   3 acquisition ("0" on an unlock: any)
--       4 hold lease ms   5 waiter lease ms
--       6 flags: "t" try, "r" robust, "p" prefer readers, "w" the waiter
--         is a writer (cancel)
--       7 the ticket an earlier answer of this call gave it ("0": none)
--       8 the publishing command: publish, or spublish in a cluster
--       9 the waiter's id (a number the caller picked for this call: the
--         wake-up message names it)
-- rdlock, wrlock answer {0, dead} acquired (dead 1: robust, and the last
-- writer died holding it), {1, pttl, ticket} busy and queued (trylock: {1,
-- pttl}); rdunlock, wrunlock, cancel 1 or 0 (nothing of the caller's was
-- there: a read hold's process lapsed, a lost hold, a waiter already out).
--
-- Who may go.  A waiter is "r|<id>|<owner>|<acquisition>" (or "w|..."); its
-- ticket (INCR S) fixes its place for the whole call, and a call that lost
-- its entry while alive names its ticket again (ARGV 7).
--  * A reader goes when no writer holds and no writer waits ahead of it
--    (W's first ticket is after its own; a newcomer has no ticket: any
--    queued writer holds it back).  With "p" (PTHREAD_RWLOCK_PREFER_READER)
--    it goes whenever no writer holds.  Readers ahead of a writer share the
--    lock together; a holder's re-read never comes here (the client counts
--    it), so it never queues behind a writer.
--  * A writer goes when nobody holds the lock and nobody waits ahead of it.
--  * Nothing is handed over: a waiter that may go takes the lock in its own
--    call, for its full lease -- a stall between a hand-off and its taker
--    cannot lapse a hold.  Whoever makes a waiter able to go -- a release,
--    a cancel, a purge of the dead, a reader that went -- wakes it: one
--    message on its process's channel (readers: every one up to the first
--    writer, at most BATCH a call; each reader that goes wakes the rest).
--  * A writer that gives up (timeout, trylock, death) leaves the queue, and
--    the readers behind it are woken at once.
--  * A hold can also end with nobody releasing it: its lease runs out (a
--    dead holder, a server stalled past it).  So a caller that must wait
--    wakes whoever may go when it purged anybody or found the lock free:
--    a head waiter that polls seldom (not its process's first waiter)
--    would otherwise leave the lock idle until its next look, while the
--    waiters behind it look and wait.
-- Holds.  A process's read holds are one member of R (its lease, renewed
-- by its watchdog once a period for all of them: O(1) per process however
-- many threads read) and one hash H of thread -> acquisition (a retried
-- unlock that finds its thread gone does nothing: idempotent).  A process
-- that dies is reclaimed by the first call that sees its lease past (its
-- anchor, H and P deleted), whatever the other readers do.  The writer's
-- hold is its field, the hash's PEXPIRE its lease; its mark O outlives it
-- by a lease, so the next taker learns that it died (robust: EOWNERDEAD).
-- Every operation is O(log N) in the readers and waiters plus PURGE and
-- BATCH; nothing walks every reader.  Each command a call sends costs
-- Redis time of its own (the pair is several times a mutex's): with no
-- queue, a call asks nothing of Q, A and W but whether Q exists.
-- Redisson's clients see mode and the fields: their readers share with
-- ours, their writer waits for ours and ours for theirs; their releases
-- publish on C, where this library listens too.  What they cannot see is
-- the queue: a Redisson reader does not wait behind our waiting writer.
if redis.replicate_commands then redis.replicate_commands() end

local L, R, Q, W, A, S, O, H, P, C =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local op, me, acq = ARGV[1], ARGV[2], ARGV[3]
local lease, wlease = tonumber(ARGV[4]), tonumber(ARGV[5])
local flags, PUBLISH = ARGV[6], ARGV[8]
local uuid = string.match(me, '^(.*):') or me
local tid = string.sub(me, #uuid + 2)
local PURGE, BATCH = 64, 64

--!include clock.lua
--!include mark.lua

local function flag(f) return string.find(flags, f, 1, true) ~= nil end

-- The hash holds nobody (only mode, or nothing): take it away.
local function drop_if_empty()
  if redis.call('hlen', L) <= 1 then redis.call('del', L) end
end

-- Holders: what is in the hash besides mode.
local function writer_holds() return redis.call('hget', L, 'mode') == 'write' end

-- Processes whose read lease has passed are gone: their holds with them.
local function purge_readers()
  local dead = redis.call('zrangebyscore', R, '-inf', clock(), 'limit', 0, PURGE)
  for _, u in ipairs(dead) do
    redis.call('hdel', L, u .. ':r')
    redis.call('del', string.sub(H, 1, #H - #uuid) .. u,
               string.sub(P, 1, #P - #(uuid .. ':r:rwlock_timeout:1')) .. u .. ':r:rwlock_timeout:1')
  end
  if #dead > 0 then
    redis.call('zrem', R, unpack(dead))
    drop_if_empty()
  end
  return #dead > 0
end

-- Are Redisson's readers in the hash, alive?  Asked only when no reader of
-- ours (R empty) and no writer holds, so that every field but mode is
-- Redisson's, or an anchor left behind.  A reader whose every timeout key
-- has lapsed is dead and goes (Redisson's own read unlock would do that,
-- were one of its readers left to unlock).  Only when such fields exist.
local function foreign_readers()
  if redis.call('hlen', L) <= 1 then return false end
  local alive = false
  local tag = string.find(L, '{', 1, true) and L or ('{' .. L .. '}')
  for _, f in ipairs(redis.call('hkeys', L)) do
    local n = tonumber(redis.call('hget', L, f))
    if f ~= 'mode' and string.sub(f, -2) ~= ':r' and string.sub(f, -6) ~= ':write' and n then
      local live = false
      for i = n, 1, -1 do
        if redis.call('pttl', tag .. ':' .. f .. ':rwlock_timeout:' .. i) > 0 then
          live = true
          break
        end
      end
      if live then alive = true else redis.call('hdel', L, f) end
    end
  end
  drop_if_empty()
  return alive
end

-- Dead waiters leave the queue.  has_queue: Q existed before (else
-- nobody is queued, and the caller asks nothing of Q, A or W).
local has_queue = false
local function purge_waiters()
  has_queue = redis.call('exists', Q) == 1
  if not has_queue then return false end
  local dead = redis.call('zrangebyscore', A, '-inf', clock(), 'limit', 0, PURGE)
  if #dead == 0 then return false end
  redis.call('zrem', A, unpack(dead))
  redis.call('zrem', Q, unpack(dead))
  redis.call('zrem', W, unpack(dead))
  return true
end

local function notify(member)
  redis.call(PUBLISH, C, '-' .. (string.match(member, '^.|(%d+)|') or '0'))
end

local function is_writer(member) return string.sub(member, 1, 1) == 'w' end

-- Wake whoever may go now: the first waiter if it is a writer and nobody
-- holds; else the readers up to the first writer, when no writer holds.
local function wake()
  if redis.call('exists', Q) == 0 or writer_holds() then return end
  local heads = redis.call('zrange', Q, 0, BATCH - 1)
  if #heads == 0 then return end
  if is_writer(heads[1]) then
    if redis.call('exists', L) == 0 then notify(heads[1]) end
    return
  end
  for _, m in ipairs(heads) do
    if is_writer(m) then break end
    notify(m)
  end
end

local tail = '|' .. ARGV[9] .. '|' .. me .. '|' .. acq
local member_r, member_w = 'r' .. tail, 'w' .. tail

-- Out of the queue (it goes, or gives up).
local function unqueue(m)
  local was = redis.call('zrem', Q, m)
  redis.call('zrem', A, m)
  redis.call('zrem', W, m)
  return was
end

-- Busy: queue the caller (unless trylock) and say for how long it may look.
local function busy(m, writer)
  local pttl = redis.call('pttl', L)
  if flag('t') then return {1, pttl} end
  local ticket = redis.call('zscore', Q, m)
  if not ticket then
    ticket = tonumber(ARGV[7]) or 0
    if ticket <= 0 then ticket = redis.call('incr', S) end
    redis.call('zadd', Q, ticket, m)
    if writer then redis.call('zadd', W, ticket, m) end
  end
  redis.call('zadd', A, clock() + wlease, m)
  for _, k in ipairs({Q, W, A, S}) do
    if redis.call('pttl', k) < 2 * wlease then redis.call('pexpire', k, 2 * wlease) end
  end
  return {1, pttl, tonumber(ticket)}
end

-- The last writer's mark on a lock with no writer: it died holding it.
-- Reported once (robust takers), then gone.
local function writer_died()
  local mark = redis.call('get', O)
  if not mark or writer_holds() then return false end
  redis.call('del', O)
  return mark_died(mark)
end

if op == 'rdlock' then
  if redis.call('hget', H, tid) == acq then return {0, 0} end -- asked again: it went
  local purged = purge_waiters()
  purged = purge_readers() or purged
  local may = not writer_holds()
  local mine -- the caller's ticket, when it is queued
  if may and has_queue then mine = tonumber(redis.call('zscore', Q, member_r)) end
  if may and not flag('p') then
    local first = redis.call('zrange', W, 0, 0, 'withscores')
    may = not first[1] or (mine ~= nil and mine < tonumber(first[2]))
  end
  if not may then
    if purged or redis.call('exists', L) == 0 then wake() end
    return busy(member_r, false)
  end
  local dead = writer_died()
  redis.call('hset', H, tid, acq)
  redis.call('pexpire', H, 2 * lease)
  redis.call('hset', L, 'mode', 'read', uuid .. ':r', '1')
  redis.call('zadd', R, 'gt', clock() + lease, uuid)
  if redis.call('pttl', R) < 2 * lease then redis.call('pexpire', R, 2 * lease) end
  redis.call('set', P, '1', 'px', lease)
  if redis.call('pttl', L) < lease then redis.call('pexpire', L, lease) end
  if mine and unqueue(member_r) == 1 then wake() end -- the readers behind go with it
  return {0, (dead and flag('r')) and 1 or 0}
end

if op == 'wrlock' then
  if redis.call('hget', L, me .. ':write') == acq then return {0, 0} end
  local purged = purge_waiters()
  purged = purge_readers() or purged
  local exists = redis.call('exists', L) == 1
  local free = not exists or (not writer_holds() and
               redis.call('zcard', R) == 0 and not foreign_readers())
  local first, mine = {}, nil
  if has_queue then
    first = redis.call('zrange', Q, 0, 0, 'withscores')
    mine = tonumber(redis.call('zscore', Q, member_w))
  end
  local ahead = first[1] ~= nil and first[1] ~= member_w and (mine == nil or tonumber(first[2]) < mine)
  if not free or ahead then
    if purged or redis.call('exists', L) == 0 then wake() end
    return busy(member_w, true)
  end
  local mark = redis.call('get', O)
  local dead = mark_died(mark)
  if exists then redis.call('del', L) end
  redis.call('hset', L, 'mode', 'write', me .. ':write', acq)
  redis.call('pexpire', L, lease)
  if flag('r') then
    redis.call('set', O, mark_make(me .. '|' .. acq, false, false), 'px', 2 * lease)
  elseif mark then
    redis.call('del', O)
  end
  if mine then unqueue(member_w) end
  return {0, (dead and flag('r')) and 1 or 0}
end

if op == 'rdunlock' then
  local held = redis.call('hget', H, tid)
  if not held or (acq ~= '0' and held ~= acq) then return 0 end
  -- The process's reads lapsed (its lease passed, or the hash went with
  -- its anchor: a stall longer than the lease): this read was lost, not
  -- released -- the thread's entry goes all the same.
  local lease_end = tonumber(redis.call('zscore', R, uuid))
  local lost = not lease_end or lease_end <= clock() or redis.call('hexists', L, uuid .. ':r') == 0
  redis.call('hdel', H, tid)
  if redis.call('hlen', H) == 0 then
    redis.call('del', H, P)
    redis.call('hdel', L, uuid .. ':r')
    redis.call('zrem', R, uuid)
  end
  purge_readers()
  if redis.call('zcard', R) == 0 and not writer_holds() and not foreign_readers() then
    redis.call('del', L)
    redis.call(PUBLISH, C, '0')
    wake()
  end
  if lost then return 0 end
  return 1
end

if op == 'wrunlock' then
  local held = redis.call('hget', L, me .. ':write')
  if not held or (acq ~= '0' and held ~= acq) then return 0 end
  redis.call('del', L, O)
  redis.call(PUBLISH, C, '1')
  wake()
  return 1
end

if op == 'cancel' then
  local was = unqueue(flag('w') and member_w or member_r)
  if was == 1 then wake() end -- a writer that gives up lets the readers behind it go
  return was
end

return redis.error_reply('rwlock.lua: unknown op ' .. tostring(op))
