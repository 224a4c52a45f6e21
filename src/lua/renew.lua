-- renew.lua: the watchdog's batch renewal, many leases per call.
--
-- ARGV[1] is the number of entries; each entry then takes its kind from the
-- next ARGV and a fixed number of KEYS and ARGV after it:
--   'h' a robust hold.  KEYS lock, owner-mark; ARGV owner, lease ms.
--       Renewed only while the hash still has the owner's field.  (A fair
--       grant is confirmed by its waiter before it becomes a hold here.)
--   'l' any other hold: KEYS lock; ARGV owner, lease ms.  (No mark named:
--       a key missing on a migrating slot's source would make the whole
--       call TRYAGAIN.)
--   'w' a queued waiter (fair lock: KEYS alive, queue, seq; condition
--       variable: alive, wait, state); ARGV waiter, lease ms.  Its liveness
--       deadline moves to server time + lease while it is queued.  Also a
--       barrier's participant process (KEYS parts, state, arrivals; ARGV
--       its uuid) and a once's runner (KEYS run three times).
--   'v' a read-write lock's queued waiter: the same with a fourth key kept
--       alive (KEYS alive, queue, seq, writers).
--   'r' a process's read holds of a read-write lock (rwlock.lua): KEYS
--       lock, readers, holds, timeout; ARGV the process's uuid, lease ms.
--       Renewed only while the process's read lease has not passed and
--       the lock hash still has its anchor "<uuid>:r" (a lapsed hold is
--       lost, as a mutex's expired field is: a hash that expired meanwhile
--       may be another client's now -- a Redisson writer's -- and must not
--       be kept alive by us): its lease in the readers zset (and that
--       zset's TTL), its holds' hash, Redisson's timeout key of its anchor,
--       and the lock hash's TTL when shorter.
--   's' a process's permits of a semaphore (sem.lua): KEYS leases, lost,
--       value hash; ARGV the process's uuid, lease ms, the semaphore's
--       name (unused here: the watchdog's lost-lock callback names it).  Renewed while its
--       lease has not passed.  Gone (lost) when the server gave its
--       permits back (the lost hash has it) or the semaphore is gone (an
--       unlink, a flush); a process that holds none now, its permits all
--       posted meanwhile, is neither: 1, nothing renewed.
-- Returns one integer per entry: 1 renewed, 0 gone (a hold: lost; a waiter:
-- granted or dequeued).  A key of the wrong type counts as gone instead of
-- failing the batch.
if redis.replicate_commands then redis.replicate_commands() end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local function keep(key, ms)
  if redis.call('pttl', key) < ms then redis.call('pexpire', key, ms) end
end

local out = {}
local k, a = 1, 2
for i = 1, tonumber(ARGV[1]) do
  local kind = ARGV[a]
  out[i] = 0
  if kind == 'h' then
    local lock, mark, me, lease = KEYS[k], KEYS[k + 1], ARGV[a + 1], tonumber(ARGV[a + 2])
    k, a = k + 2, a + 3
    if redis.pcall('hexists', lock, me) == 1 then
      redis.call('pexpire', lock, lease)
      redis.call('pexpire', mark, 2 * lease)
      out[i] = 1
    end
  elseif kind == 'l' then
    local lock, me, lease = KEYS[k], ARGV[a + 1], tonumber(ARGV[a + 2])
    k, a = k + 1, a + 3
    if redis.pcall('hexists', lock, me) == 1 then
      redis.call('pexpire', lock, lease)
      out[i] = 1
    end
  elseif kind == 'w' or kind == 'v' then
    local alive, queue, seq, member, lease =
      KEYS[k], KEYS[k + 1], KEYS[k + 2], ARGV[a + 1], tonumber(ARGV[a + 2])
    local extra = kind == 'v' and KEYS[k + 3]
    k, a = k + (extra and 4 or 3), a + 3
    local score = redis.pcall('zscore', alive, member)
    if type(score) == 'string' then
      redis.call('zadd', alive, now + lease, member)
      keep(alive, 2 * lease)
      keep(queue, 2 * lease)
      keep(seq, 2 * lease)
      if extra then keep(extra, 2 * lease) end
      out[i] = 1
    end
  elseif kind == 'r' then
    local lock, readers, holds, timeout, who, lease =
      KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], ARGV[a + 1], tonumber(ARGV[a + 2])
    k, a = k + 4, a + 3
    local score = redis.pcall('zscore', readers, who)
    local anchored = redis.pcall('hexists', lock, who .. ':r')
    if type(score) == 'string' and tonumber(score) > now and anchored == 1 then
      redis.call('zadd', readers, now + lease, who)
      keep(readers, 2 * lease)
      redis.call('pexpire', holds, 2 * lease)
      redis.call('set', timeout, '1', 'px', lease)
      if redis.call('pttl', lock) < lease then redis.call('pexpire', lock, lease) end
      out[i] = 1
    end
  elseif kind == 's' then
    local leases, lost, sem, who, lease = KEYS[k], KEYS[k + 1], KEYS[k + 2], ARGV[a + 1], tonumber(ARGV[a + 2])
    k, a = k + 3, a + 4
    local score = redis.pcall('zscore', leases, who)
    if type(score) == 'string' and tonumber(score) > now then
      redis.call('zadd', leases, now + lease, who)
      out[i] = 1
    elseif type(score) ~= 'string' and redis.pcall('hexists', lost, who) == 0 and
           redis.pcall('exists', sem) == 1 then
      out[i] = 1
    end
  else
    return redis.error_reply('renew.lua: unknown entry kind ' .. tostring(kind))
  end
end
return out
