--[[
  Appends one entry to a running run's transcript, for its owner only: a worker that lost the run
  writes nothing (DESIGN §4).

  Input:
    KEYS[1] the run's record      ({run:ID}:run)
    KEYS[2] the run's transcript  ({run:ID}:transcript)

    ARGV[1] the owner token
    ARGV[2] the entry (JSON)
    ARGV[3] most entries kept

  Output: {'ok', length} | {'not_owner', status}
]]
local f = redis.call("HMGET", KEYS[1], "status", "owner")
if f[1] ~= "running" or f[2] ~= ARGV[1] then
  return {"not_owner", f[1] or "missing"}
end
local length = redis.call("RPUSH", KEYS[2], ARGV[2])
if length > tonumber(ARGV[3]) then
  return {"too_long", length}
end
return {"ok", length}
