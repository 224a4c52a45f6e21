-- fence.lua: a fencing token for a hold, taken when its holder asks
-- (rmutex_fence), not at every acquisition.
--
-- KEYS[1] lock hash NAME, KEYS[2] redisson_lock_token:{NAME} (the counter;
-- no TTL)   ARGV[1] owner, ARGV[2] the acquisition's number (the field's
-- value, fair or not), ARGV[3] how many tokens to take (absent: 1; a
-- caching process takes a range for its threads' holds)
-- Returns the (last) token while that hold is in Redis, 0 when it is not:
-- a token is only ever taken by a current holder, so every later holder
-- that asks gets a greater one -- also after a data loss (token.lua).
if redis.replicate_commands then redis.replicate_commands() end
local held = redis.call('hget', KEYS[1], ARGV[1])
if not held or (ARGV[2] ~= '' and held ~= ARGV[2]) then
  return 0
end
--!include token.lua
return token_take(KEYS[2], tonumber(ARGV[3] or '1'))
