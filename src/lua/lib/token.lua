-- token.lua: fencing tokens, included by the scripts that hand them out
-- (fence.lua; fair.lua's grant).  The counter T (redisson_lock_token:{NAME})
-- is the one key of a lock without expiry.
--
-- token_take(T, n) takes n tokens and returns the last of them: the counter
-- goes up by n (INCRBY), but never to less than the server's clock in
-- microseconds (TIME).  While Redis keeps its data that is just the
-- counter's order.  When the data is lost -- a restart without
-- persistence, a failover to a replica that missed the last increments --
-- the counter alone would start again from below the tokens already out
-- (a fenced resource would then refuse every writer, or worse, see a token
-- twice); the clock floor puts the next token above them, because the
-- counter keeps pace with the clock: it moves faster only when more than
-- one token a microsecond is taken.  So tokens stay strictly increasing
-- across a data loss as long as the server that answers after it has a
-- clock later than the old one's was at its last token (skew between
-- primary and replica smaller than the time the failover took).  The
-- counter stays an integer that Redisson's RFencedLock can INCR.  Doubles
-- hold the microseconds exactly until the year 2255.  Scripts call
-- redis.replicate_commands() first (TIME is not deterministic).
local function token_take(T, n)
  local time = redis.call('time')
  local floor = tonumber(time[1]) * 1000000 + tonumber(time[2])
  local top = redis.call('incrby', T, n)
  if top < floor then
    top = floor
    redis.call('set', T, string.format('%.0f', top))
  end
  return top
end
