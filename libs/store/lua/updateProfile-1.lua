--[[
  Changes a profile's settings (its origins, frame origins, subresource rule, protection). Only the
  fields given are written. `settings_gen` counts the changes: it is part of the version a warm
  context is kept under, so a context made with the settings before is never handed to a lease
  acquired after the change. A live lease keeps the settings it was acquired with.

  Input:
    KEYS[1] the profile's record          ({prf:TENANT/ID}:profile)

    ARGV[1] tenant   ARGV[2] now (epoch ms)
    ARGV[3..] field, value pairs (origins, frame_origins as JSON; subresources; protected 1|0)

  Output: 1 changed, 0 no such profile in this tenant
]]
if redis.call("HGET", KEYS[1], "tenant") ~= ARGV[1] then
  return 0
end
for i = 3, #ARGV, 2 do
  redis.call("HSET", KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call("HSET", KEYS[1], "updated_at", ARGV[2])
redis.call("HINCRBY", KEYS[1], "settings_gen", 1)
return 1
