--[[
  Renews a live lease (ADR-0127 d5): at most one step past now, never past the lifetime cap after
  acquire, never shorter than it is. An expired lease is not renewed: it starts closing, unsealed.

  Input:
    KEYS[1] the lease's record

    ARGV[1] requested expiry (epoch ms)
    ARGV[2] now (epoch ms)
    ARGV[3] step cap (ms)   ARGV[4] lifetime cap (ms)

  Output:
    {'renewed', expires_at}
    {'lease_expired', state}   'close' in state: the caller must close it unsealed now
    {'not_found'}
]]
local f = redis.call("HMGET", KEYS[1], "state", "expires_at", "acquired_at")
if not f[1] then
  return {"not_found"}
end
local now = tonumber(ARGV[2])
if f[1] ~= "live" then
  return {"lease_expired", f[1]}
end
if tonumber(f[2]) <= now then
  redis.call("HSET", KEYS[1], "state", "closing", "close_reason", "expired")
  return {"lease_expired", "close"}
end
local granted = math.min(tonumber(ARGV[1]), now + tonumber(ARGV[3]), tonumber(f[3]) + tonumber(ARGV[4]))
local expiresAt = math.max(granted, tonumber(f[2]))
redis.call("HSET", KEYS[1], "expires_at", expiresAt)
return {"renewed", tostring(expiresAt)}
