--[[
  Creates a profile once within its tenant (ids are unique per tenant, DESIGN §3). Only the
  profile's own record: the script touches one hash slot (Redis Cluster). Its two
  indexes — the tenant's set of ids, which listing reads alone, and the set of every profile's
  `tenant/id`, which the lease upkeep and the start-up revocation walk — live in other slots and
  are written by the caller *before* this script (intent first): a crash in between leaves at
  most an index entry without a record, which every reader skips.

  Input:
    KEYS[1] the profile's record          ({prf:TENANT/ID}:profile)

    ARGV[1] id   ARGV[2] tenant   ARGV[3] principal   ARGV[4] allowed origins (JSON)
    ARGV[5] protected (1|0)   ARGV[6] now (epoch ms)
    ARGV[7] frame origins (JSON)   ARGV[8] subresources (any | allowed_origins)

  Output: 1 created, 0 the tenant has a profile with this id already
]]
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
redis.call("HSET", KEYS[1], "id", ARGV[1], "tenant", ARGV[2], "principal", ARGV[3], "origins", ARGV[4],
  "protected", ARGV[5], "created_at", ARGV[6], "frame_origins", ARGV[7], "subresources", ARGV[8])
return 1
