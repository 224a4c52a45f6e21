-- renew.lua: the watchdog's batch renewal, many leases per call.
--
-- ARGV[1] is the number of entries; each entry then takes its kind from the
-- next ARGV and a fixed number of KEYS and ARGV after it:
--   'h' a hold: KEYS lock, owner-mark; ARGV owner, lease ms.
--       Renewed only while the hash still has the owner's field.
-- Returns one integer per entry: 1 renewed, 0 gone (the hold is lost).
-- A key of the wrong type counts as gone instead of failing the batch.
local out = {}
local k, a = 1, 2
for i = 1, tonumber(ARGV[1]) do
  local kind = ARGV[a]
  if kind == 'h' then
    local lock, mark, me, lease = KEYS[k], KEYS[k + 1], ARGV[a + 1], tonumber(ARGV[a + 2])
    k, a = k + 2, a + 3
    if redis.pcall('hexists', lock, me) == 1 then
      redis.call('pexpire', lock, lease)
      redis.call('pexpire', mark, 2 * lease)
      out[i] = 1
    else
      out[i] = 0
    end
  else
    return redis.error_reply('rmutex renew: unknown entry kind ' .. tostring(kind))
  end
end
return out
