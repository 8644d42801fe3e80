--[[
  Included (`--- @include "includes/emit.lua"`) by every script that appends to a run's event
  stream; the loader in scripts.ts pastes it in place. Those scripts all take
    KEYS[1] the run's record        ({run:ID}:run; its `events_cap` caps the stream)
    KEYS[2] the run's event stream  ({run:ID}:events)

  Each append also publishes on the run's own shard channel `<prefix>{run:ID}:notify` (issue
  11.10): the API holds one subscriber per process, subscribed to the runs it streams, and reads
  the stream once per notification instead of polling it. The channel carries the run's hash tag,
  so SPUBLISH stays in the slot of the keys this script already holds (Redis Cluster).
]]
local function notifyRunEvents()
  redis.call("SPUBLISH", string.sub(KEYS[2], 1, -string.len(":events") - 1) .. ":notify", "")
end

local function emit(kind, now, data)
  local cap = tonumber(redis.call("HGET", KEYS[1], "events_cap")) or 10000
  redis.call("XADD", KEYS[2], "MAXLEN", cap, "*", "type", kind, "at", now, "data", cjson.encode(data))
  notifyRunEvents()
end
