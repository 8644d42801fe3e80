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

--[[
  Appends one event; answers its stream id. The event's time is
  the id's own milliseconds (`<now>-*`), so an entry carries no `at` field. Only when the stream's
  last id is already later than `now` (another process's clock ahead of this one, a test's clock
  set back) is the id Redis's and `at` written beside it; the reader takes `at` when there is one.
]]
local function appendToStream(key, cap, kind, now, dataJson)
  local id = redis.pcall("XADD", key, "MAXLEN", cap, now .. "-*", "type", kind, "data", dataJson)
  if type(id) == "string" then return id end
  return redis.call("XADD", key, "MAXLEN", cap, "*", "type", kind, "at", now, "data", dataJson)
end

--[[
  A run's status events (`run.*`) are also told to its tenant, for the tenant's event stream
  (`GET /v1/events`): published on `<prefix>tenant-runs:<tenant>`, the event itself with the run's
  id. A plain PUBLISH, not SPUBLISH: the tenant's channel is in no slot of this script's keys, and
  PUBLISH names no slot (Redis Cluster carries it to every node). Only status events: a handful a
  run, so a tenant's subscribers are not woken for each step.
]]
local function notifyTenantRuns(id, kind, now, data)
  if string.sub(kind, 1, 4) ~= "run." then return end
  local run = redis.call("HMGET", KEYS[1], "id", "tenant")
  if not run[1] or not run[2] then return end
  local prefix = string.sub(KEYS[1], 1, string.find(KEYS[1], "{run:", 1, true) - 1)
  redis.call("PUBLISH", prefix .. "tenant-runs:" .. run[2],
    cjson.encode({run_id = run[1], id = id, type = kind, at_ms = now, data = data}))
end

local function emit(kind, now, data)
  local cap = tonumber(redis.call("HGET", KEYS[1], "events_cap")) or 10000
  local at = math.floor(tonumber(now))
  local id = appendToStream(KEYS[2], cap, kind, at, cjson.encode(data))
  notifyRunEvents()
  notifyTenantRuns(id, kind, at, data)
end
