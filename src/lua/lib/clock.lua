-- clock.lua: server time, included by the scripts that need it (a line
-- "--!include clock.lua" is replaced by this file when the scripts are
-- embedded: cmake/lua_expand.cmake).
--
-- clock() is Redis TIME in ms, read once per call and only when asked for:
-- the common calls of a script (an uncontended acquire, a broadcast) never
-- need it.  Scripts call redis.replicate_commands() first (TIME is not
-- deterministic).
local server_ms
local function clock()
  if not server_ms then
    local time = redis.call('time')
    server_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  return server_ms
end
