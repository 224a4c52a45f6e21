-- once.lua: pthread_once across processes -- one runner at a time, done
-- for good once a runner finished.
--
-- KEYS  1 D  rmutex_once:{NAME}      "done", with no TTL, once the routine
--                                    ran to its end (absent: not yet)
--       2 R  rmutex_once_run:{NAME}  zset runner -> its lease deadline
--                                    (server ms): who runs it now, renewed
--                                    by its watchdog (renew.lua 'w')
--       3 C  rmutex_once:{NAME}      the channel: "* done", "* free" (a
--                                    broadcast: every waiter wakes)
-- ARGV  1 op: try | done | abandon | reset
--       2 the runner's id ("<owner>:<seq>", one call)   3 lease ms
--       4 publish | spublish
-- Answers:
--   try      {0} done; {1} the caller runs it now (also when it asks again
--            after a lost reply: it already was the runner); {2, ms}
--            another runs it, its lease passes in ms
--   done     1 (the routine ran: whoever finished it, even a runner whose
--            lease had passed -- a stall -- marks it done)
--   abandon  1 the caller gave its turn up (its thread was cancelled
--            inside the routine), 0 it was not the runner
--   reset    1 the done mark went, 0 there was none
-- A runner whose lease passed (its process died, or stalls) is out at the
-- next try, which makes the caller the runner: exactly once holds unless a
-- runner stalls past its lease, as a mutex's exclusion does.
if redis.replicate_commands then redis.replicate_commands() end

local D, R, C = KEYS[1], KEYS[2], KEYS[3]
local op, me, lease, PUBLISH = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

--!include clock.lua

if op == 'try' then
  if redis.call('get', D) == 'done' then return {0} end
  local dead = redis.call('zrangebyscore', R, '-inf', clock(), 'limit', 0, 64)
  if #dead > 0 then redis.call('zrem', R, unpack(dead)) end
  if redis.call('zscore', R, me) then return {1} end
  local runner = redis.call('zrange', R, 0, 0, 'withscores')
  if runner[1] then return {2, math.max(0, tonumber(runner[2]) - clock())} end
  redis.call('zadd', R, clock() + lease, me)
  redis.call('pexpire', R, 2 * lease)
  return {1}
end

if op == 'done' then
  redis.call('set', D, 'done')
  redis.call('del', R)
  redis.call(PUBLISH, C, '* done')
  return 1
end

if op == 'abandon' then
  if redis.call('zrem', R, me) == 0 then return 0 end
  redis.call(PUBLISH, C, '* free')
  return 1
end

if op == 'reset' then
  if redis.call('get', D) ~= 'done' then return 0 end -- (WRONGTYPE: not ours)
  return redis.call('del', D)
end

return redis.error_reply('once.lua: unknown op ' .. tostring(op))
