-- fair.lua: the fair lock -- a FIFO queue of live waiters, direct hand-off.
--
-- KEYS  1 L  NAME                        the lock hash, shared with the
--                                        non-fair protocol: field <owner> =
--                                        the acquisition's number
--       2 Q  rmutex_fair_queue:{NAME}    zset  <waiter> -> ticket (order)
--       3 A  rmutex_fair_alive:{NAME}    zset  <waiter> -> liveness deadline
--       4 S  rmutex_fair_seq:{NAME}      ticket counter
--       5 T  redisson_lock_token:{NAME}  fencing counter (never expires)
--       6 O  rmutex_owner:{NAME}         owner mark, see below
--       7 N  rmutex_notrecoverable:{NAME}
--       8 C  rmutex_fair_channel:{NAME}  prefix of the grant channels, one per
--                                        process: C:<uuid> gets "<waiter> <token>
--                                        <dead> <ms> <notrec> <queued> <owned>"
--                                        (ms: the grant's life; owned 1: the
--                                        grant is a full hold, see below)
--       9 R  redisson_lock__channel:{NAME}  "0" when the lock is left free
--      10 H  rmutex_fair_lease:{NAME}    hash  <waiter> -> its hold lease ms;
--                                        a full grant's holder -> "g" until
--                                        it lets go (so its confirm, below,
--                                        answers the grant's token)
-- ARGV  1 op: acquire | release | cancel
--       2 owner "<uuid>:<thread>"   3 acquisition id (acquire, cancel: this
--         call's; release: the hold's, so a late release ends no later hold;
--         "0": any hold of the owner)
--       4 hold lease ms  5 waiter lease ms  6 robust "1"  7 try "1"
--       8 "1": mark not recoverable  9 its ms
--      10 the publishing command: publish, or spublish in a cluster
--      11 acquire: the ticket an earlier answer of this call gave it ("0",
--         or absent: none yet)
-- acquire answers {0, token, dead, queued} (queued 1: others wait behind
-- this hold), {1, pttl, ticket, counter} busy (counter: the fencing
-- counter T now, so a later grant's token is above it; trylock: {1, pttl}),
-- {2} not recoverable; release and cancel 1 or 0 (the hold was not there),
-- but a release that made a full grant to a waiter of its caller's own
-- process answers the grant's message instead of 1 (see handed below).
--
-- Lock caching: a process that caches the lock acquires and queues as
-- "<uuid>:0" (no thread has number 0).  A waiter (or trylock) that finds
-- such a holder publishes "2" on R -- a request the holder's multiplexer
-- hears -- and a caching acquirer learns from "queued" that it should give
-- the lock back at its first unlock: a queued waiter is demand.
--
-- A waiter is "<owner>|<acquisition>".  Its ticket (INCR S) fixes its place
-- for the whole call; its liveness deadline (server TIME + waiter lease) is
-- pushed forward by its process's watchdog.  A waiter judged dead while it
-- lives (its process stalled past the deadline: the purge took it out) or
-- whose grant lapsed unconfirmed has lost its entry, not its place: its
-- next call names its ticket (ARGV 11) and is queued at it again, so a
-- stall costs it the hand-offs made while it was out, never a new place at
-- the tail behind everyone (who would then wait as long again, and stall
-- again: a deep queue under load starved its waiters that way).
-- Invariants:
--  * Q and A hold the same members; every member of A whose deadline has
--    passed is dead and may be removed by any call (at most PURGE per call).
--    H has the hold lease of each (it may lack one: then the grant below is
--    always a short one).
--  * The lock is never left free while a live waiter is queued: whoever
--    frees it (release, cancel) or finds it free (acquire) grants it to the
--    first live waiter: the waiter's field is written into L, it leaves the
--    queue, gets a fencing token, and one message on C names it.  The
--    message's PUBLISH says whether the waiter's process heard it (its
--    multiplexer is subscribed there):
--      heard: the grant is a full hold at once -- L's PEXPIRE is the
--        waiter's hold lease (H), the mark confirmed -- and the woken thread
--        owns it on receipt, no further call ("owned" 1);
--      not heard (nobody subscribed: its process is gone or cut off): a
--        short grant, PEXPIRE no longer than the waiter's remaining
--        liveness, that the waiter's next acquire confirms into the full
--        hold lease (confirm below) before its lock call returns, and that
--        lapses with the waiter lease, passing on, when nobody does.
--  * L's field names the acquisition that holds it (a grant writes the
--    waiter's), so a confirm, a release or a cancel acts on that hold only.
--  * The owner mark O names the waiter and says whether its grant is
--    confirmed and whether the hold descends from a holder that lapsed
--    without an unlock (lib/mark.lua has the grammar).  Hand-offs write it;
--    an acquisition with nobody queued writes it for robust handles only.
--  * Every key but T expires: L with its lease, O after two, Q/A/S two
--    waiter leases after the last live waiter's renewal.
-- Every operation is O(log N) in the queue length plus PURGE.  The
-- uncontended pair -- a free lock and nobody queued -- takes the first two
-- branches below: three commands to acquire, four to release, no token
-- (rmutex_fence takes one when asked), no mark for a non-robust handle,
-- no key but the lock's.
if redis.replicate_commands then redis.replicate_commands() end

local L, Q, A, S, T, O, N, C, R, H =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local op, me, acq = ARGV[1], ARGV[2], ARGV[3]
local PUBLISH = ARGV[10]

if op == 'acquire' and ARGV[6] ~= '1' and redis.call('exists', L, Q) == 0 then
  redis.call('hset', L, me, acq)
  redis.call('pexpire', L, ARGV[4])
  return {0, 0, 0, 0}
end
if op == 'release' and ARGV[8] ~= '1' then
  local held = redis.call('hget', L, me)
  if not held or (acq ~= '0' and held ~= acq) then return 0 end
  if redis.call('exists', Q) == 0 then
    redis.call('del', L, O)
    redis.call(PUBLISH, R, '0')
    return 1
  end
end

--!include mark.lua

local member = me .. '|' .. acq
local PURGE = 64

-- Server time (clock()) is read only when a queue is involved.
--!include clock.lua
--!include token.lua


-- A full grant to a waiter of the caller's own process: the message's text,
-- which a release answers instead of 1 (the caller hands it to that thread
-- at once, without waiting for the server's copy).
local handed = false

-- The lock is free: grant it to the first live waiter.  Returns the waiter
-- granted, false when the queue is empty, or 'more' when this call's share
-- of purging (PURGE dead entries, PURGE dead heads) ran out before a live
-- waiter was found: the lock stays free but nobody may take it past the
-- queue; the next call goes on purging.
local function settle()
  -- Q and A are created, emptied and expire together: no Q, nobody queued.
  if redis.call('exists', Q) == 0 then return false end
  local now = clock()
  local dead = redis.call('zrangebyscore', A, '-inf', now, 'limit', 0, PURGE)
  if #dead > 0 then
    redis.call('zrem', A, unpack(dead))
    redis.call('zrem', Q, unpack(dead))
    redis.call('hdel', H, unpack(dead))
  end
  for _ = 1, PURGE do
    local head = redis.call('zrange', Q, 0, 0)[1]
    if not head then return false end
    redis.call('zrem', Q, head)
    local deadline = tonumber(redis.call('zscore', A, head))
    redis.call('zrem', A, head)
    local lease = tonumber(redis.call('hget', H, head))
    redis.call('hdel', H, head)
    if deadline and deadline > now then
      local left = deadline - now
      local dead = mark_died(redis.call('get', O))
      local owner, its = string.match(head, '^(.*)|(.*)$')
      local token = token_take(T, 1)
      -- One message, on the channel of the waiter's process only; it
      -- offers a full hold when the waiter's lease is known.
      owner = owner or head
      local process = string.match(owner, '^(.*):') or owner
      local text = head .. ' ' .. string.format('%.0f', token) .. ' ' .. (dead and 1 or 0) .. ' ' ..
                   (lease or left) .. ' ' .. redis.call('exists', N) .. ' ' ..
                   redis.call('exists', Q) .. ' ' .. (lease and 1 or 0)
      local heard = redis.call(PUBLISH, C .. ':' .. process, text)
      redis.call('hset', L, owner, its or 1)
      if lease and heard > 0 then
        if process == string.match(me, '^(.*):') then handed = text end
        redis.call('pexpire', L, lease)
        redis.call('set', O, mark_make(head, false, dead), 'px', 2 * lease)
        redis.call('hset', H, head, 'g') -- a grant: its look (confirm) gets the token
      else
        redis.call('pexpire', L, left)
        redis.call('set', O, mark_make(head, true, dead), 'px', 2 * left + 1000)
      end
      return head
    end
  end
  if redis.call('zcard', Q) == 0 then return false end
  return 'more'
end

-- Leave the lock to the next live waiter, or announce it free.  Up to four
-- shares of purging: a crowd of dead waiters costs the releaser a little
-- and the live waiter behind them (who continues it) rarely a poll.
local function settle_or_announce()
  local granted = settle()
  for _ = 1, 3 do
    if granted ~= 'more' then break end
    granted = settle()
  end
  if granted == false then redis.call(PUBLISH, R, '0') end
end

-- This acquisition holds L (granted or taken): make it a full hold.  A
-- grant (unconfirmed, or full and found by a look rather than its message)
-- got the counter's last token (only its holder can take another:
-- fence.lua); any other hold takes its token when asked.
local function confirm(hold)
  local mark = redis.call('get', O)
  local dead = mark_dead(mark)
  local granted = mark and mark_names(mark, member) and
    (string.find(mark, '?', 1, true) or redis.call('hget', H, member) == 'g')
  redis.call('pexpire', L, hold)
  redis.call('set', O, mark_make(member, false, dead), 'px', 2 * hold)
  redis.call('zrem', Q, member)
  redis.call('zrem', A, member)
  redis.call('hdel', H, member)
  return {0, granted and tonumber(redis.call('get', T)) or 0, dead and 1 or 0,
          redis.call('exists', Q)}
end

local function keep(key, ms)
  if redis.call('pttl', key) < ms then redis.call('pexpire', key, ms) end
end

if op == 'acquire' then
  local hold, wlease = tonumber(ARGV[4]), tonumber(ARGV[5])
  if ARGV[6] == '1' and redis.call('exists', N) == 1 then
    redis.call('zrem', Q, member)
    redis.call('zrem', A, member)
    redis.call('hdel', H, member)
    if redis.call('hget', L, me) == acq then
      redis.call('del', L)
      settle_or_announce()
    end
    return {2}
  end
  local free = redis.call('exists', L) == 0
  local held = not free and redis.call('hget', L, me)
  if held == acq then return confirm(hold) end
  if held and string.sub(me, -2) ~= ':0' then
    -- A hold of this owner that it has let go of, whose release never
    -- landed (lost in a failover): the client asks only when it holds
    -- nothing, so this is a new hold (its token is taken when asked for).
    -- Not so a process's field ("<uuid>:0", a cache): an abandoned cache
    -- (a thread exited inside) runs out its lease like a thread's hold, so
    -- the process's next acquisition finds it busy and queues.
    redis.call('hset', L, me, acq)
    redis.call('pexpire', L, hold)
    redis.call('set', O, mark_make(member, false, false), 'px', 2 * hold)
    redis.call('zrem', Q, member)
    redis.call('zrem', A, member)
    redis.call('hdel', H, member)
    return {0, 0, 0, redis.call('exists', Q)}
  end
  -- Back after losing its entry: queued at its ticket again, before the
  -- lock is settled (it may be the first live waiter).  A ticket above the
  -- counter is from a queue that has since expired: a new one is taken.
  local ticket = tonumber(ARGV[11])
  if ticket and ticket > 0 and ARGV[7] ~= '1' and not redis.call('zscore', Q, member) and
     ticket <= (tonumber(redis.call('get', S)) or 0) then
    redis.call('zadd', Q, ticket, member)
    redis.call('zadd', A, clock() + wlease, member)
    redis.call('hset', H, member, hold)
  end
  if free then
    local granted = settle()
    if granted == member then return confirm(hold) end
    if granted == false then
      -- Nobody is queued: take it (this acquisition is not queued either:
      -- settle() leaves no queue behind when it returns false).
      local dead = mark_died(redis.call('get', O))
      redis.call('hset', L, me, acq)
      redis.call('pexpire', L, hold)
      redis.call('set', O, mark_make(member, false, dead), 'px', 2 * hold)
      return {0, 0, dead and 1 or 0, 0}
    end
  end
  -- Busy; or free with dead waiters still to purge ('more'): come back at once.
  local pttl = free and redis.call('exists', L) == 0 and 0 or redis.call('pttl', L)
  -- A holder whose field ends in ":0" is a process caching the lock: every
  -- try of a waiter (and a trylock) asks it for the lock, as acquire.lua's
  -- do.  A request lost on the way is made again by the waiter's next poll.
  if pttl ~= 0 then
    for _, f in ipairs(redis.call('hkeys', L)) do
      if string.sub(f, -2) == ':0' then
        redis.call(PUBLISH, R, '2')
        break
      end
    end
  end
  if ARGV[7] == '1' then return {1, pttl} end
  ticket = redis.call('zscore', Q, member)
  if not ticket then
    ticket = redis.call('incr', S)
    redis.call('zadd', Q, ticket, member)
    redis.call('hset', H, member, hold)
  end
  redis.call('zadd', A, clock() + wlease, member)
  keep(Q, 2 * wlease)
  keep(A, 2 * wlease)
  keep(S, 2 * wlease)
  keep(H, 2 * wlease)
  return {1, pttl, tonumber(ticket), tonumber(redis.call('get', T)) or 0}

elseif op == 'release' then
  -- Only the hold of this acquisition: a release the watchdog retries late
  -- must not end a later hold of the same thread (a new hold over the
  -- thread's own field, above).  Acquisition "0" names any hold of the
  -- owner.  A retry that finds the hold gone is the client's to read
  -- (its first try may have done it): no latch key.
  local held = redis.call('hget', L, me)
  if not held or (acq ~= '0' and held ~= acq) then return 0 end
  redis.call('del', L, O)
  redis.call('hdel', H, me .. '|' .. held)
  if ARGV[8] == '1' then redis.call('set', N, '1', 'px', ARGV[9]) end
  settle_or_announce()
  return handed or 1

elseif op == 'cancel' then
  -- The caller gives up (timeout, lost reply, error): leave the queue, and
  -- pass on a hold this acquisition got without the caller knowing.
  redis.call('zrem', Q, member)
  redis.call('zrem', A, member)
  redis.call('hdel', H, member)
  if redis.call('hget', L, me) == acq then
    local mark = redis.call('get', O)
    redis.call('del', L)
    if mark == member then redis.call('del', O) end
    settle_or_announce()
    return 1
  end
  return 0
end
return redis.error_reply('fair.lua: unknown op ' .. tostring(op))
