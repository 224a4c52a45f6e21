-- announce.lua: who this process is, for `rmutex status` (the holder
-- registry; the watchdog calls it, see registry.c).
--
-- KEYS[1] rmutex_client:{<process-uuid>}   a hash, rewritten whole each call
-- ARGV[1] ms the entry lives (two leases: it lapses with the holds)
-- ARGV[2] n, then n field/value pairs about the process (host, pid, exe,
--         cmd, lib, start)
-- then, to the end, pairs <lock key>, <ms it has been held>: stored as
-- "held:<lock key>" = server ms of the acquisition, so that the reader
-- needs no clock of the writer's.
-- Returns 1.
if redis.replicate_commands then redis.replicate_commands() end
--!include clock.lua
local reg, n = KEYS[1], tonumber(ARGV[2])
local fields = {'announced', clock()}
for i = 3, 2 + 2 * n do
  fields[#fields + 1] = ARGV[i]
end
for i = 3 + 2 * n, #ARGV - 1, 2 do
  fields[#fields + 1] = 'held:' .. ARGV[i]
  fields[#fields + 1] = clock() - tonumber(ARGV[i + 1])
end
redis.call('del', reg)
redis.call('hset', reg, unpack(fields))
redis.call('pexpire', reg, ARGV[1])
return 1
