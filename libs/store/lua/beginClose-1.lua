--[[
  Starts closing a lease. Sealing is allowed only while the lease is unexpired (ADR-0127 d8):
  past its expiry it closes unsealed, whoever asks, however late.

  Input:
    KEYS[1] the lease's record

    ARGV[1] now (epoch ms)
    ARGV[2] reason: closed | expired | revoked

  Output:
    {'closing', seal_allowed (1|0)}   the caller now seals (if allowed and wanted) and finishes
    {'in_progress'}                    another close is under way (and the lease is unexpired)
    {'closed', reason, sealed}         already closed
    {'not_found'}
]]
local f = redis.call("HMGET", KEYS[1], "state", "expires_at", "close_reason", "sealed")
if not f[1] then
  return {"not_found"}
end
if f[1] == "closed" then
  return {"closed", f[3] or "closed", f[4] or "0"}
end
-- A close under way stays its closer's while the lease is unexpired; past expiry, or revoked by
-- its own worker after a restart (no close of its can still be running), it is finished unsealed.
if f[1] == "closing" and f[3] ~= "expired" and ARGV[2] ~= "revoked" and tonumber(f[2]) > tonumber(ARGV[1]) then
  return {"in_progress"}
end
local reason = ARGV[2]
local sealAllowed = 1
if tonumber(f[2]) <= tonumber(ARGV[1]) then
  sealAllowed = 0
  if reason == "closed" then
    reason = "expired"
  end
end
if f[1] == "closing" then
  -- A close taken over is never sealed. It keeps `expired` if that is why it began (a failed renew
  -- of an expired lease); a revoke over another revoke, or over a seal its crashed closer began,
  -- stays a revoke.
  sealAllowed = 0
  if f[3] == "expired" then
    reason = "expired"
  end
end
redis.call("HSET", KEYS[1], "state", "closing", "close_reason", reason)
return {"closing", sealAllowed}
