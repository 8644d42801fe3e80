--[[
  Notes why a profile's sealed state did not open on a browser worker, or clears the note once it
  opens. A profile that does not exist is left so: the note never makes a record of its own.

  Input:
    KEYS[1] the profile's record

    ARGV[1] the fault, JSON {code, message, worker_id, at_ms}; '' clears it

  Output: 1 when the profile exists, else 0
]]
if redis.call("EXISTS", KEYS[1]) == 0 then
  return 0
end
if ARGV[1] == "" then
  redis.call("HDEL", KEYS[1], "seal_fault")
else
  redis.call("HSET", KEYS[1], "seal_fault", ARGV[1])
end
return 1
