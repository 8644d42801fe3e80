--[[
  Enters a new API key in its tenant's index, unless the tenant holds its fill of live keys: the
  count and the write are one step, so keys made at once on several API replicas cannot pass the
  bound together. A revoked key has left the index, so it does not count.

  Input:
    KEYS[1] the tenant's API keys      (apikey:{ten:TENANT}: key id → the key's SHA-256)

    ARGV[1] key id   ARGV[2] the key's SHA-256   ARGV[3] most live keys a tenant may hold

  Output: 1 entered, 0 the tenant holds the most it may already
]]
if redis.call("HLEN", KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
return 1
