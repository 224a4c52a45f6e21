-- acquire.lua: take a lock for one owner, wire-compatible with Redisson's RLock.
--
-- KEYS[1] lock hash NAME              field <owner> = the acquisition's
--                                     number, PEXPIRE lease
-- KEYS[2] rmutex_owner:{NAME}         robust handles only: who holds it, PX
--                                     2*lease, so it outlives a hold that
--                                     lapses and the next robust taker
--                                     learns its owner died (EOWNERDEAD)
-- KEYS[3] rmutex_notrecoverable:{NAME} set when robust state was abandoned
-- KEYS[4] redisson_lock__channel:{NAME} gets "2" -- a request for the lock
--                                     -- when the holder is a caching process
-- ARGV[1] lease in ms, ARGV[2] owner "<uuid>:<thread>" ("<uuid>:0": the
-- process, for a cached lock), ARGV[3] "1" if robust, ARGV[4] the
-- acquisition's number (the owner's request id), ARGV[5] the publishing
-- command ("publish" or "spublish"), ARGV[6] (optional; the process only)
-- the acquisition of the process's cache that it parked (park.lua): take
-- that hold back if it is still there
--
-- Returns {0, dead} acquired (dead = 1: robust, and the previous holder's
-- lease ran out without an unlock), {0, 0, 1} the parked hold ARGV[6]
-- taken back (acquisition ARGV[4] was not made), {1, pttl} held by
-- somebody else, {2} not recoverable (robust callers only).
--
-- The common call is three commands (PTTL, HSET, PEXPIRE): nothing is
-- written that the lock does not need.  The field's value names the
-- acquisition -- Redisson keeps a hold count there; rmutex counts
-- recursion in the client and neither reads the other's field -- so a
-- release that arrives late (retried by the watchdog) ends only the hold
-- it was meant for.  The fencing token is taken when asked for
-- (fence.lua), the owner mark only by robust handles.
--
-- Idempotent per acquisition: asked again after a lost reply, the owner
-- finds its own field and is answered "acquired" once more, never a second
-- count.  A field of the owner's from an earlier hold whose release never
-- landed (a failover lost it, a release deferred past its caller) becomes
-- this acquisition: the client asks only when it holds nothing.  Not so a
-- process's field ("<uuid>:0", a cache): only the same acquisition takes
-- it over (not_mine below).
local L, lease, me, acq, back = KEYS[1], ARGV[1], ARGV[2], ARGV[4], ARGV[6]

-- A caching process's next local lock after it parked the cache: if the
-- parked hold is still its own (not taken over meanwhile), it is unparked
-- and renewed here, and the process goes on with the cache it has; if
-- not, this call is the process's new acquisition.  One round trip either
-- way.  (The value "back" itself: a park whose reply was lost may not have
-- run.)
local function take_back()
  local held = redis.call('hget', L, me)
  if held ~= back and held ~= 'p' .. back then return false end
  redis.call('hset', L, me, back)
  redis.call('pexpire', L, lease)
  return true
end

-- Busy.  A holder whose field ends in ":0" is a process caching the lock
-- (rmutexattr_setcache): ask it for the lock.  Its other holders (threads
-- of rmutex, Redisson's) end in their thread's number, never 0.  Unless the
-- process has parked it (park.lua: the value "p<acquisition>", nobody of it
-- inside) and holds nothing else: then this call takes it over at once --
-- the lock is deleted and nil returned, for the caller to take it.
local function busy(pttl)
  local fields = redis.call('hkeys', L)
  for _, f in ipairs(fields) do
    if string.sub(f, -2) == ':0' then
      if #fields == 1 and string.sub(redis.call('hget', L, f), 1, 1) == 'p' then
        redis.call('del', L)
        return nil
      end
      redis.call(ARGV[5], KEYS[4], '2')
      break
    end
  end
  return {1, pttl}
end

-- Is the owner's field there (value held) not this acquisition's to take
-- over?  A thread's field always is (see above).  A process's ("<uuid>:0",
-- a cache) only for this very acquisition asked again: an earlier cache of
-- the process that was abandoned (a thread exited inside it) must run out
-- its lease, as a thread's hold would, not pass to the next local thread.
local function not_mine(held)
  return not held or (string.sub(me, -2) == ':0' and held ~= acq)
end

if ARGV[3] ~= '1' then
  if back and take_back() then return {0, 0, 1} end
  local pttl = redis.call('pttl', L)
  if pttl ~= -2 and not_mine(redis.call('hget', L, me)) then
    local answer = busy(pttl)
    if answer then return answer end
  end
  redis.call('hset', L, me, acq)
  redis.call('pexpire', L, lease)
  return {0, 0}
end

--!include mark.lua
local O, N = KEYS[2], KEYS[3]
if back and take_back() then
  -- A parked robust hold has no owner mark: nobody was inside.
  redis.call('set', O, mark_make(me .. '|' .. back, false, false), 'px', 2 * lease)
  return {0, 0, 1}
end
local mine = me .. '|' .. acq
if redis.call('exists', N) == 1 then
  return {2}
end
local pttl = redis.call('pttl', L)
local dead
if pttl ~= -2 then
  if not_mine(redis.call('hget', L, me)) then
    local answer = busy(pttl)
    if answer then return answer end
    dead = false -- a parked cache, taken over: nobody was inside
  else
    -- Ours: this very acquisition asked again keeps what it was told.
    local mark = redis.call('get', O)
    dead = mark_names(mark, mine) and mark_dead(mark)
  end
else
  -- Free.  A surviving owner mark means the last holder never unlocked.
  dead = mark_died(redis.call('get', O))
end
redis.call('hset', L, me, acq)
redis.call('pexpire', L, lease)
redis.call('set', O, mark_make(mine, false, dead), 'px', 2 * lease)
return {0, dead and 1 or 0}
