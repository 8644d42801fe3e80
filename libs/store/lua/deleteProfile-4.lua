--[[
  Deletes a profile and its sealed state, unless a run holds its page or waits in its line. The
  check and the delete are one step: a run that takes the profile's turn or lease after it finds
  no profile. Closed lease records and idempotency records expire on their own.

  Input:
    KEYS[1] the profile's record               ({prf:TENANT/ID}:profile)
    KEYS[2] the profile's live-lease pointer   ({prf:TENANT/ID}:live)
    KEYS[3] the profile's line of runs         ({prf:TENANT/ID}:turns)
    KEYS[4] prefix of the profile's lease records ({prf:TENANT/ID}:lease:)

    ARGV[1] tenant

  Output: {'deleted'} | {'not_found'} | {'held', run id}
]]
if redis.call("HGET", KEYS[1], "tenant") ~= ARGV[1] then
  return {"not_found"}
end
local liveId = redis.call("GET", KEYS[2])
if liveId then
  -- A lease past its expiry but not closed yet still counts: its close may seal into the profile.
  local f = redis.call("HMGET", KEYS[4] .. liveId, "state", "run_id")
  if f[1] == "live" or f[1] == "closing" then
    return {"held", f[2] or ""}
  end
end
local first = redis.call("ZRANGE", KEYS[3], 0, 0)[1]
if first then
  return {"held", first}
end
redis.call("DEL", KEYS[1], KEYS[2], KEYS[3])
return {"deleted"}
