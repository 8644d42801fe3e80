--[[
  Appends entries to a running run's transcript, for its owner only: a worker that lost the run
  writes nothing (DESIGN §4).

  Input:
    KEYS[1] the run's record      ({run:ID}:run)
    KEYS[2] the run's transcript  ({run:ID}:transcript)

    ARGV[1] the owner token
    ARGV[2] most entries kept
    ARGV[3..] the entries, in order (JSON each)

  Output: {'ok', length} | {'not_owner', status} | {'too_long', length}
]]
--- @include "includes/owner-fence.lua"

local f, refused = fenceRunningOwner()
if refused then return {"not_owner", f[1] or "missing"} end
local length = redis.call("LLEN", KEYS[2]) + #ARGV - 2
if length > tonumber(ARGV[2]) then
  return {"too_long", length}
end
for i = 3, #ARGV do redis.call("RPUSH", KEYS[2], ARGV[i]) end
return {"ok", length}
