-- inspect.lua: what a lock's keys say, read only (rmutex status and wait).
--
-- KEYS  1 L NAME  2 T redisson_lock_token:{NAME}  3 O rmutex_owner:{NAME}
--       4 N rmutex_notrecoverable:{NAME}  5 Q rmutex_fair_queue:{NAME}
--       6 A rmutex_fair_alive:{NAME}
-- ARGV  1 the release channel, 2 "shard": count sharded subscribers
-- Returns {holders (array of owner fields), pttl, fence counter, owner
-- died 0/1, not recoverable 0/1, queue length, {first waiters}, {their
-- liveness left, ms}, subscribers, server time ms, the first holder's field
-- value ("" when free; "p<acquisition>": a process's parked cache)}.
--!include mark.lua
local L, T, O, N, Q, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local t = redis.call('type', L).ok
if t ~= 'hash' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE the lock key holds a ' .. t .. ', not a lock')
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local holders = redis.call('hkeys', L)
local mark = redis.call('get', O)
local died = #holders > 0 and mark_dead(mark) or (#holders == 0 and mark_died(mark))
local first = redis.call('zrange', Q, 0, 4)
local alive = {}
for i, w in ipairs(first) do
  alive[i] = (tonumber(redis.call('zscore', A, w)) or now) - now
end
local sub = redis.call('pubsub', ARGV[2] == 'shard' and 'shardnumsub' or 'numsub', ARGV[1])
local value = #holders > 0 and redis.call('hget', L, holders[1]) or ''
return {holders, redis.call('pttl', L), tonumber(redis.call('get', T)) or 0,
        died and 1 or 0, redis.call('exists', N), redis.call('zcard', Q), first, alive,
        sub[2], now, value}
