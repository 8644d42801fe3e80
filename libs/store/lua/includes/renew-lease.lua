--[[
  Included (`--- @include "includes/renew-lease.lua"`) by renewIdempotently-2, the one renew script
  (a renewal under its idempotency record: the single renew route sends one, the batch route many
  in one pipeline). The loader in scripts.ts pastes it in.
]]

-- Renews the lease record `leaseKey` (ADR-0127 d5): at most one step past now, never past the
-- lifetime cap after acquire, never shorter than it is. An expired lease is not renewed: it starts
-- closing, unsealed. Answers {'renewed', expires_at}, {'lease_expired', state} ('close' in state:
-- the caller must close it unsealed now) or {'not_found'}.
local function renewLeaseRecord(leaseKey, requested, nowArg, stepMs, lifetimeMs)
  local f = redis.call("HMGET", leaseKey, "state", "expires_at", "acquired_at")
  if not f[1] then
    return {"not_found"}
  end
  local now = tonumber(nowArg)
  if f[1] ~= "live" then
    return {"lease_expired", f[1]}
  end
  if tonumber(f[2]) <= now then
    redis.call("HSET", leaseKey, "state", "closing", "close_reason", "expired")
    return {"lease_expired", "close"}
  end
  local granted = math.min(tonumber(requested), now + tonumber(stepMs), tonumber(f[3]) + tonumber(lifetimeMs))
  local expiresAt = math.max(granted, tonumber(f[2]))
  redis.call("HSET", leaseKey, "expires_at", expiresAt)
  return {"renewed", tostring(expiresAt)}
end
