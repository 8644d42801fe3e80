--[[
  Creates a profile once within its tenant (ids are unique per tenant, DESIGN §3), and indexes it:
  in its tenant's set of ids, which listing reads alone, and in the set of every profile's
  `tenant/id`, which the lease upkeep and the start-up revocation walk.

  Input:
    KEYS[1] the profile's record          ({prf:TENANT/ID}:profile)
    KEYS[2] the tenant's profile ids      (tenant:TENANT:profiles)
    KEYS[3] every profile's tenant/id     (profiles)

    ARGV[1] id   ARGV[2] tenant   ARGV[3] principal   ARGV[4] allowed origins (JSON)
    ARGV[5] protected (1|0)   ARGV[6] now (epoch ms)
    ARGV[7] frame origins (JSON)   ARGV[8] subresources (any | allowed_origins)

  Output: 1 created, 0 the tenant has a profile with this id already

  The two indexes live in other hash slots than the profile (as the one index did before tenants):
  this script, unlike the lease scripts, is not yet Redis Cluster-safe.
]]
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
redis.call("HSET", KEYS[1], "id", ARGV[1], "tenant", ARGV[2], "principal", ARGV[3], "origins", ARGV[4],
  "protected", ARGV[5], "created_at", ARGV[6], "frame_origins", ARGV[7], "subresources", ARGV[8])
redis.call("SADD", KEYS[2], ARGV[1])
redis.call("SADD", KEYS[3], ARGV[2] .. "/" .. ARGV[1])
return 1
