--[[
  Finishes closing a lease: stores the sealed state into the profile if one is given and the lease
  is still unexpired now (ADR-0127 d8: a seal that lands after expiry is dropped), marks the lease
  closed, clears the profile's live pointer if it still names this lease, and keeps the record for
  a while so that late calls are answered `lease_expired` rather than `not_found`. Each seal bumps
  the profile's seal generation (warm contexts are keyed by it) and clears any note that
  the state before it would not open: the state is new.

  Input:
    KEYS[1] the lease's record
    KEYS[2] the profile's live-lease pointer
    KEYS[3] the profile's record

    ARGV[1] lease id
    ARGV[2] now (epoch ms)
    ARGV[3] sealed state ('' for none)
    ARGV[4] retention of the closed record (ms)

  Output: {sealed (1|0), close_reason}
]]
local f = redis.call("HMGET", KEYS[1], "state", "expires_at", "close_reason")
if not f[1] then
  return {0, "closed"}
end
local sealed = 0
if ARGV[3] ~= "" and tonumber(f[2]) > tonumber(ARGV[2]) and f[3] == "closed" then
  redis.call("HSET", KEYS[3], "sealed", ARGV[3], "sealed_at", ARGV[2])
  -- The seal generation names this state; a warm context of an older one is never served.
  redis.call("HINCRBY", KEYS[3], "seal_gen", 1)
  redis.call("HDEL", KEYS[3], "seal_fault")
  sealed = 1
end
redis.call("HSET", KEYS[1], "state", "closed", "closed_at", ARGV[2], "sealed", sealed)
if redis.call("GET", KEYS[2]) == ARGV[1] then
  redis.call("DEL", KEYS[2])
end
redis.call("PEXPIRE", KEYS[1], ARGV[4])
return {sealed, f[3] or "closed"}
