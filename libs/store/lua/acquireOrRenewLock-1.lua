--[[
  Takes a leader lock, or keeps it for its holder.

  Input:
    KEYS[1] the lock key

    ARGV[1] the holder's token
    ARGV[2] time to live in milliseconds

  Output:
    1 the caller holds the lock (taken now or kept)
    0 another holder has it
]]
local holder = redis.call("GET", KEYS[1])
if holder == false then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  return 1
end
if holder == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return 1
end
return 0
