-- inspect.lua: what a lock's keys say, read only (rmutex status and wait):
-- a mutex's, or a read-write lock's (rwlock.lua's layout).
--
-- KEYS  1 L NAME  2 T redisson_lock_token:{NAME}  3 O rmutex_owner:{NAME}
--       4 N rmutex_notrecoverable:{NAME}  5 Q rmutex_fair_queue:{NAME}
--       6 A rmutex_fair_alive:{NAME}
--       the read-write lock's: 7 RR rmutex_rw_readers:{NAME}
--       8 RQ rmutex_rw_queue:{NAME}  9 RW rmutex_rw_writers:{NAME}
--       10 RA rmutex_rw_alive:{NAME}  11 RO rmutex_rw_owner:{NAME}
--       12 RS rmutex_rw_seq:{NAME}
-- ARGV  1 the release channel, 2 "shard": count sharded subscribers,
--       3 the read-write lock's channel, 4 rmutex_rw_holds:{NAME} (+ ":<uuid>":
--       a process's read holds), 5 how many readers to describe
-- Returns {holders (array of owner fields), pttl, fence counter, owner
-- died 0/1, not recoverable 0/1, queue length, {first waiters}, {their
-- liveness left, ms}, subscribers, server time ms, the first holder's field
-- value ("" when free; "p<acquisition>": a process's parked cache), rw}.
-- rw is 0 for a mutex.  A read-write lock -- the hash has a mode, or its
-- readers, queue, sequence or writer's mark exist (a free one with none of
-- them left looks like a free mutex: nothing tells them apart) -- answers
-- the same array in its terms (holders: the writer, or the readers
-- described; the queue: its waiters as rwlock.lua names them,
-- "r|<id>|<owner>|<acquisition>" or "w|..."; the channel: its own) and rw =
-- {mode ("read", "write", "free"), the writer's owner id or "", readers
-- (live processes of ours plus Redisson's reading threads), {their owner
-- ids}, {their reading threads}, {their lease left, ms}, writers queued}.
-- A process is described by its lowest reading thread; only readers whose
-- lease has not passed count (the next lock call reclaims the others).
-- It walks the hash's fields and each described process's holds: for
-- operators, not for hot paths.
--!include mark.lua
local L, T, O, N, Q, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local RR, RQ, RW, RA, RO, RS = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local t = redis.call('type', L).ok
if t ~= 'hash' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE the lock key holds a ' .. t .. ', not a lock')
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local fence = tonumber(redis.call('get', T)) or 0

-- The first waiters of queue (alive: their liveness deadlines) and how
-- long each has left.
local function waiters(queue, alive)
  local first = redis.call('zrange', queue, 0, 4)
  local left = {}
  for i, w in ipairs(first) do
    left[i] = (tonumber(redis.call('zscore', alive, w)) or now) - now
  end
  return first, left
end

local function subscribers(channel)
  return redis.call('pubsub', ARGV[2] == 'shard' and 'shardnumsub' or 'numsub', channel)[2]
end

local mode = redis.call('hget', L, 'mode')
if not mode and redis.call('exists', RR, RQ, RO, RS) == 0 then
  local holders = redis.call('hkeys', L)
  local mark = redis.call('get', O)
  local died = #holders > 0 and mark_dead(mark) or (#holders == 0 and mark_died(mark))
  local first, alive = waiters(Q, A)
  local value = #holders > 0 and redis.call('hget', L, holders[1]) or ''
  return {holders, redis.call('pttl', L), fence, died and 1 or 0, redis.call('exists', N),
          redis.call('zcard', Q), first, alive, subscribers(ARGV[1]), now, value, 0}
end

-- A read-write lock.
mode = mode or 'free'
local writer, foreign = '', {}
if mode ~= 'free' then
  for _, f in ipairs(redis.call('hkeys', L)) do
    if string.sub(f, -6) == ':write' then
      writer = string.sub(f, 1, -7)
    elseif f ~= 'mode' and string.sub(f, -2) ~= ':r' then
      foreign[#foreign + 1] = f -- a Redisson reader: "<uuid>:<thread>" = its count
    end
  end
end
local show = tonumber(ARGV[5])
local owners, holds, left = {}, {}, {}
local live = redis.call('zrangebyscore', RR, '(' .. now, '+inf', 'withscores', 'limit', 0, show)
for i = 1, #live, 2 do
  local uuid = live[i]
  local lowest
  local tids = redis.call('hkeys', ARGV[4] .. ':' .. uuid)
  for _, tid in ipairs(tids) do
    if not lowest or (tonumber(tid) or 0) < (tonumber(lowest) or 0) then lowest = tid end
  end
  owners[#owners + 1] = uuid .. ':' .. (lowest or '0')
  holds[#holds + 1] = #tids
  left[#left + 1] = tonumber(live[i + 1]) - now
end
-- Redisson's readers: their lease is their newest timeout key's.
local tag = string.find(L, '{', 1, true) and L or ('{' .. L .. '}')
for _, f in ipairs(foreign) do
  if #owners >= show then break end
  local count = tonumber(redis.call('hget', L, f)) or 0
  local pttl = -1
  for i = count, 1, -1 do
    pttl = redis.call('pttl', tag .. ':' .. f .. ':rwlock_timeout:' .. i)
    if pttl > 0 then break end
  end
  owners[#owners + 1] = f
  holds[#holds + 1] = count
  left[#left + 1] = pttl
end
local readers = redis.call('zcount', RR, '(' .. now, '+inf') + #foreign
local mark = redis.call('get', RO)
local died = writer ~= '' and mark_dead(mark) or (writer == '' and mark_died(mark))
local first, alive = waiters(RQ, RA)
return {writer ~= '' and {writer} or owners, redis.call('pttl', L), fence, died and 1 or 0, 0,
        redis.call('zcard', RQ), first, alive, subscribers(ARGV[3]), now, '',
        {mode, writer, readers, owners, holds, left, redis.call('zcard', RW)}}
