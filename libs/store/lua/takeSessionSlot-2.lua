--[[
  Takes a place for a new MCP session in its tenant's and its key's sets, both scored by each
  place's expiry (epoch ms) and renewed while the session lives: a replica that dies stops renewing,
  and its places lapse. Lapsed places are dropped first; the key's bound is checked before the
  tenant's, so a refusal names the narrower one. Both sets share the tenant's hash tag.

  Input:
    KEYS[1] the tenant's places  ({mcp:TENANT}:sessions)
    KEYS[2] the key's places     ({mcp:TENANT}:key:KEY_ID:sessions)

    ARGV[1] the session id
    ARGV[2] now (epoch ms)
    ARGV[3] the place's expiry (epoch ms)
    ARGV[4] places a tenant may hold
    ARGV[5] places a key may hold
    ARGV[6] the sets' own time to live (ms): as long as a place's

  Output:
    {'ok', ''}
    {'key', the key's soonest expiry}        the key holds its places: nothing taken
    {'tenant', the tenant's soonest expiry}  the tenant holds its places: nothing taken
]]
local now = tonumber(ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now)
if redis.call("ZCARD", KEYS[2]) >= tonumber(ARGV[5]) then
  return {"key", redis.call("ZRANGE", KEYS[2], 0, 0, "WITHSCORES")[2]}
end
if redis.call("ZCARD", KEYS[1]) >= tonumber(ARGV[4]) then
  return {"tenant", redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")[2]}
end
redis.call("ZADD", KEYS[1], ARGV[3], ARGV[1])
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[1])
redis.call("PEXPIRE", KEYS[1], ARGV[6])
redis.call("PEXPIRE", KEYS[2], ARGV[6])
return {"ok", ""}
