--[[
  The exact idempotency rule (DESIGN §5): the first request with a key claims it; the same key
  with the same body later replays the stored answer; with a different body it is a conflict.

  Input:
    KEYS[1] the idempotency record

    ARGV[1] hash of the request (route and body)
    ARGV[2] time to live (ms)

  Output:
    {'claimed'}
    {'replay', status, body}
    {'pending'}                 the first request is still being answered
    {'conflict'}
]]
local f = redis.call("HMGET", KEYS[1], "hash", "state", "status", "body")
if not f[1] then
  redis.call("HSET", KEYS[1], "hash", ARGV[1], "state", "pending")
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return {"claimed"}
end
if f[1] ~= ARGV[1] then
  return {"conflict"}
end
if f[2] == "done" then
  return {"replay", f[3], f[4]}
end
return {"pending"}
