-- whois.lua: what the holder registry says of a lock's holder (rmutex
-- status; written by announce.lua).  Read only.
--
-- KEYS[1] rmutex_client:{<process-uuid>}   ARGV[1] the lock key
-- Returns {host, pid, exe, cmd, lib, server ms of the acquisition}; a field
-- the registry lacks is nil (the process does not announce, its entry
-- lapsed, or the hold is newer than its last announcement).
return redis.call('hmget', KEYS[1], 'host', 'pid', 'exe', 'cmd', 'lib', 'held:' .. ARGV[1])
