--[[
  Appends an event of the run loop to a running run's stream, by its owner only.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)

    ARGV[1] the owner token   ARGV[2] event type   ARGV[3] data (a JSON object)   ARGV[4] now (epoch ms)

  Output:
    {'ok', stream id}
    {'not_found' | 'wrong_status' | 'not_owner', status}
]]
--- @include "includes/emit.lua"

local f = redis.call("HMGET", KEYS[1], "status", "owner", "events_cap")
if not f[1] then return {"not_found", ""} end
if f[1] ~= "running" then return {"wrong_status", f[1]} end
if f[2] ~= ARGV[1] then return {"not_owner", f[1]} end
local id = appendToStream(KEYS[2], tonumber(f[3]) or 10000, ARGV[2], math.floor(tonumber(ARGV[4])), ARGV[3])
notifyRunEvents()
return {"ok", id}
