--[[
  Registers a webhook in its tenant's hash, unless the tenant has its fill of them: the count and
  the write are one step, so two registrations at once cannot pass the cap together.

  Input:
    KEYS[1] the tenant's webhooks        ({ten:TENANT}:webhooks)

    ARGV[1] webhook id   ARGV[2] the record (JSON)   ARGV[3] most webhooks a tenant may hold

  Output: 1 added, 0 the tenant holds the most it may already
]]
if redis.call("HLEN", KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
return 1
