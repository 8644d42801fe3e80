--[[
  Releases a leader lock, only for its holder.

  Input:
    KEYS[1] the lock key

    ARGV[1] the holder's token

  Output:
    1 released
    0 not held by this token
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
