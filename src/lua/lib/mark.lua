-- mark.lua: the owner mark's grammar, included by the scripts that read or
-- write rmutex_owner:{NAME} (a line "--!include mark.lua" is replaced by this
-- file when the scripts are embedded: cmake/lua_expand.cmake).
--
-- The mark names the acquisition that holds the lock and how:
--   "<owner>|<acquisition>"  a hold
--   then "?"                 a fair grant its waiter has not confirmed yet
--   then "!"                 the hold descends from a holder that lapsed
--                            without an unlock (robust takers: EOWNERDEAD)
-- It lives twice the hold's lease, so it outlives a hold that lapses: a mark
-- found on a free lock means its holder died -- unless it was a grant never
-- confirmed, which passes on only its own "!".

-- The mark of member's hold: confirmed or a pending grant, dead or not.
local function mark_make(member, pending, dead)
  return member .. (pending and '?' or '') .. (dead and '!' or '')
end

-- Does mark say the hold it belongs to descends from a dead holder?
local function mark_dead(mark)
  return mark and string.sub(mark, -1) == '!' or false
end

-- Found on a free lock: did the previous holder die holding it?
local function mark_died(mark)
  if not mark then return false end
  if string.find(mark, '?', 1, true) then return mark_dead(mark) end
  return true
end

-- Is mark about this very acquisition, in any state?
local function mark_names(mark, member)
  return mark == member or mark == member .. '!' or mark == member .. '?' or mark == member .. '?!'
end
