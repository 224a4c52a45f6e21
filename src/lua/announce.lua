-- announce.lua: who this process is, what it holds and what its threads
-- wait for, for `rmutex status` and `rmutex deadlocks` (the holder
-- registry; the watchdog calls it, see registry.c).
--
-- KEYS[1] rmutex_client:{<process-uuid>}   a hash, rewritten whole each call
-- ARGV[1] ms the entry lives (two leases: it lapses with the holds)
-- ARGV[2] n, then n field/value pairs about the process (host, pid, exe,
--         cmd, lib, start)
-- then h, the number of holds, and h pairs <lock key>, <ms it has been
-- held>: stored as "held:<lock key>" = server ms of the acquisition, so
-- that the reader needs no clock of the writer's;
-- then s, the number of counter pairs, and s pairs "stat:<name>", <the
-- name's counters> (registry.c says their form), stored as they are;
-- then, to the end, quadruples <owner id>, <ms it has waited>, <ms left
-- to its deadline, -1: none>, "<kind>|<d or ->|<lock name>": stored as
-- "wait:<owner id>" = "<server ms the wait began>|<kind>|<d or ->|<lock
-- name>" -- the moment already stored for the same wait is kept, so that
-- it never moves and every reader (deadlock.c's choice of which wait gives
-- up) sees the same -- and, for a timed wait, "until:<owner id>" = the
-- server ms of its deadline: past it, readers take the wait for over (a
-- wait that times out needs no call to be taken out).
-- With neither holds nor waits nor counters the entry is deleted.
-- Returns 1.
if redis.replicate_commands then redis.replicate_commands() end
--!include clock.lua
local reg, n = KEYS[1], tonumber(ARGV[2])
local now = clock()
local fields = {'announced', now}
for i = 3, 2 + 2 * n do
  fields[#fields + 1] = ARGV[i]
end
local at = 3 + 2 * n
local holds = tonumber(ARGV[at])
for i = at + 1, at + 2 * holds - 1, 2 do
  fields[#fields + 1] = 'held:' .. ARGV[i]
  fields[#fields + 1] = now - tonumber(ARGV[i + 1])
end
local listed = holds
at = at + 1 + 2 * holds
local stats = tonumber(ARGV[at])
for i = at + 1, at + 2 * stats - 1, 2 do
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = ARGV[i + 1]
end
listed = listed + stats
for i = at + 1 + 2 * stats, #ARGV - 3, 4 do
  local field = 'wait:' .. ARGV[i]
  local since = now - tonumber(ARGV[i + 1])
  local old = redis.call('hget', reg, field)
  if old then
    local bar = string.find(old, '|', 1, true)
    if bar and string.sub(old, bar + 1) == ARGV[i + 3] then
      since = tonumber(string.sub(old, 1, bar - 1))
    end
  end
  fields[#fields + 1] = field
  fields[#fields + 1] = since .. '|' .. ARGV[i + 3]
  local left = tonumber(ARGV[i + 2])
  if left >= 0 then
    fields[#fields + 1] = 'until:' .. ARGV[i]
    fields[#fields + 1] = now + left
  end
  listed = listed + 1
end
redis.call('del', reg)
if listed == 0 then return 1 end
redis.call('hset', reg, unpack(fields))
redis.call('pexpire', reg, ARGV[1])
return 1
