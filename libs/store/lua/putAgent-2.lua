--[[
  Creates an agent, or gives an existing one a new version. A version is the SHA-256 of the
  definition's canonical JSON (DESIGN §3) and is immutable: a version already stored is kept as
  it is, so the same content always answers the same version.

  Input:
    KEYS[1] the agent's record     ({agt:ID}:agent)
    KEYS[2] the agent's versions   ({agt:ID}:versions), one canonical JSON per version

    ARGV[1] agent id   ARGV[2] tenant   ARGV[3] version   ARGV[4] definition (canonical JSON)
    ARGV[5] now (epoch ms)   ARGV[6] 'create' (the agent must be new), 'update' (it must exist)
    or 'upsert' (either: a tenant's default agent, made on first use)

  Output: {code}
    {'created'} {'updated'} {'unchanged'}   the latest version already was this one
    {'exists'}      create: the id is taken
    {'not_found'}   update: no such agent for this tenant
]]
local tenant = redis.call("HGET", KEYS[1], "tenant")
if ARGV[6] == "create" or (ARGV[6] == "upsert" and not tenant) then
  if tenant then return {"exists"} end
  redis.call("HSET", KEYS[1], "id", ARGV[1], "tenant", ARGV[2], "latest_version", ARGV[3],
    "created_at", ARGV[5], "updated_at", ARGV[5])
  redis.call("HSETNX", KEYS[2], ARGV[3], ARGV[4])
  return {"created"}
end
if not tenant or tenant ~= ARGV[2] then return {"not_found"} end
redis.call("HSETNX", KEYS[2], ARGV[3], ARGV[4])
if redis.call("HGET", KEYS[1], "latest_version") == ARGV[3] then return {"unchanged"} end
redis.call("HSET", KEYS[1], "latest_version", ARGV[3], "updated_at", ARGV[5])
return {"updated"}
