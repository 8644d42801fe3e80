--[[
  Creates a profile once.

  Input:
    KEYS[1] the profile's record
    KEYS[2] the set of all profile ids

    ARGV[1] id   ARGV[2] tenant   ARGV[3] principal   ARGV[4] allowed origins (JSON)
    ARGV[5] protected (1|0)   ARGV[6] now (epoch ms)

  Output: 1 created, 0 the id is taken
]]
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
redis.call("HSET", KEYS[1], "id", ARGV[1], "tenant", ARGV[2], "principal", ARGV[3], "origins", ARGV[4],
  "protected", ARGV[5], "created_at", ARGV[6])
redis.call("SADD", KEYS[2], ARGV[1])
return 1
