-- park.lua: a caching process parks the Redis hold of a cache nobody in it
-- has used for a while, or takes a parked hold back before a local lock
-- through a handle that does not cache (a caching handle's acquire takes
-- it back itself: acquire.lua, ARGV[6]).
--
-- KEYS[1] lock hash NAME             KEYS[2] rmutex_owner:{NAME} (robust)
-- ARGV[1] the process's field "<uuid>:0"   ARGV[2] the acquisition
-- ARGV[3] "park" | "unpark"   ARGV[4] "1" if robust   ARGV[5] lease ms
--
-- A parked hold's field value is "p<acquisition>".  It is still renewed
-- (renew.lua asks only whether the field is there), but it promises that
-- no thread of the process is inside: another process's acquire takes the
-- lock over at once, in its own call (acquire.lua), instead of asking the
-- holder and waiting for its release.  So the process must take a parked
-- hold back (unpark) before any of its threads may use it again.  Parking
-- a robust hold drops its owner mark (nobody holds it: a lapse is not a
-- death) and unparking writes it again.
-- Returns 1, or 0 when the hold is not (or no longer) the process's as
-- asked: taken over, lost, or not parked.
--!include mark.lua
local L, O, me, acq = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local held = redis.call('hget', L, me)
if ARGV[3] == 'park' then
  if held ~= acq then return 0 end
  redis.call('hset', L, me, 'p' .. acq)
  if ARGV[4] == '1' then redis.call('del', O) end
  return 1
end
if held == acq then return 1 end -- a park whose reply was lost may not have run
if held ~= 'p' .. acq then return 0 end
redis.call('hset', L, me, acq)
if ARGV[4] == '1' then
  redis.call('set', O, mark_make(me .. '|' .. acq, false, false), 'px', 2 * tonumber(ARGV[5]))
end
return 1
