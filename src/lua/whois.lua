-- whois.lua: what the holder registry says of a lock's holder (rmutex
-- status; written by announce.lua).  Read only.
--
-- KEYS[1] rmutex_client:{<process-uuid>}   ARGV[1] the lock key
-- ARGV[2] (optional) a thread's owner id: its wait is asked for too
-- Returns {host, pid, exe, cmd, lib, server ms of the acquisition}, and
-- with ARGV[2] that thread's wait ("<server ms>|<kind>|<d or ->|<lock>")
-- and server time in ms; a field the registry lacks is nil (the process
-- does not announce, its entry lapsed, or the hold is newer than its last
-- announcement).  A timed wait whose deadline ("until:<owner>") has
-- passed is over (its process takes it out at its next write): nil.
local r = redis.call('hmget', KEYS[1], 'host', 'pid', 'exe', 'cmd', 'lib', 'held:' .. ARGV[1])
if ARGV[2] then
  local w = redis.call('hmget', KEYS[1], 'wait:' .. ARGV[2], 'until:' .. ARGV[2])
  local t = redis.call('time')
  r[8] = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if w[2] and tonumber(w[2]) <= r[8] then w[1] = false end
  r[7] = w[1]
end
return r
