--[[
  Stores the run loop's own state beside the run (the loop breaker's snapshot: digests only, never
  an evidence key: ADR-0130 d7), by the run's owner only: a worker that lost the run writes nothing.

  Input:
    KEYS[1] the run's record      ({run:ID}:run)
    KEYS[2] the run's loop state  ({run:ID}:loop)

    ARGV[1] the owner token
    ARGV[2] the state (JSON)

  Output: {'ok'} | {'not_owner', status}
]]
--- @include "includes/owner-fence.lua"

local f, refused = fenceRunningOwner()
if refused then return {"not_owner", f[1] or "missing"} end
redis.call("SET", KEYS[2], ARGV[2])
return {"ok"}
