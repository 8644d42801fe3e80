--[[
  Publishes a profile's lease, or answers why not (ADR-0127 d1, d7). Admission has already passed.

  Input:
    KEYS[1] the profile's live-lease pointer   ({prf:TENANT/ID}:live)
    KEYS[2] the new lease's record             ({prf:TENANT/ID}:lease:NEWID)
    KEYS[3] prefix of the profile's lease records ({prf:TENANT/ID}:lease:)

    ARGV[1] new lease id
    ARGV[2] tenant       ARGV[3] principal     ARGV[4] provider reference
    ARGV[5] run id       ARGV[6] attempt
    ARGV[7] requested expiry (epoch ms)
    ARGV[8] now (epoch ms)
    ARGV[9] step cap (ms)   ARGV[10] lifetime cap (ms)

  Output: { status, lease id, ... }
    {'created', id}
    {'reattached', id}          the live lease has this scope: same lease, nothing created
    {'conflict', id, run, attempt}   another scope holds it
    {'expired', id}             the live lease is past its expiry: close it unsealed first, then retry
]]
local liveId = redis.call("GET", KEYS[1])
if liveId then
  local leaseKey = KEYS[3] .. liveId
  local f = redis.call("HMGET", leaseKey, "state", "expires_at", "tenant", "principal", "provider_ref", "run_id", "attempt")
  if f[1] == "live" then
    if tonumber(f[2]) <= tonumber(ARGV[8]) then
      return {"expired", liveId}
    end
    if f[3] == ARGV[2] and f[4] == ARGV[3] and f[5] == ARGV[4] and f[6] == ARGV[5] and f[7] == ARGV[6] then
      return {"reattached", liveId}
    end
    return {"conflict", liveId, f[6], f[7]}
  end
  if f[1] == "closing" then
    -- A close under way; one left behind by a crash is finished by whoever finds it expired.
    if tonumber(f[2]) <= tonumber(ARGV[8]) then
      return {"expired", liveId}
    end
    return {"conflict", liveId, f[6], f[7]}
  end
  -- A pointer to a closed or vanished record is stale.
  redis.call("DEL", KEYS[1])
end

local now = tonumber(ARGV[8])
local expiresAt = math.min(tonumber(ARGV[7]), now + tonumber(ARGV[9]), now + tonumber(ARGV[10]))
redis.call("HSET", KEYS[2],
  "id", ARGV[1], "state", "live",
  "tenant", ARGV[2], "principal", ARGV[3], "provider_ref", ARGV[4], "run_id", ARGV[5], "attempt", ARGV[6],
  "acquired_at", ARGV[8], "expires_at", expiresAt, "seq", 0, "effects", 0, "sealed", 0)
redis.call("SET", KEYS[1], ARGV[1])
return {"created", ARGV[1]}
