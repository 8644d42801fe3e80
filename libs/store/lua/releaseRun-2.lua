--[[
  Hands a running run back by its owner: `running -> queued` at the same execution,
  owner cleared, so the next claim of that execution's job takes it over at once. Used when a
  worker stops (the drain bound passed) and when an execution meets a retryable fault (a lost
  Redis connection, a browser worker restarting). The run's lease is kept: it still needs its
  page, and the next execution reattaches to it. `handbacks` counts these, so re-executions stay
  bounded; past `max` the run is refused and the caller fails it.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)

    ARGV[1] the owner token
    ARGV[2] now (epoch ms)
    ARGV[3] detail for the event (a JSON object; its `waiting_for`, if any, is kept on the run)
    ARGV[4] the most hand-backs allowed (0 for no bound: a shutdown is never the run's fault)

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', hand-backs so far (a number, as text), fields}
    {'not_found' | 'wrong_status', status, {}}
    {'not_owner', 'running', {}}
    {'stale_execution', 'running', {}}   the bound was reached; nothing changed
]]
--- @include "includes/emit.lua"

local f = redis.call("HMGET", KEYS[1], "status", "owner", "attempt", "execution", "handbacks")
if not f[1] then return {"not_found", "", {}} end
if f[1] ~= "running" then return {"wrong_status", f[1], {}} end
if f[2] ~= ARGV[1] then return {"not_owner", "running", {}} end
local max = tonumber(ARGV[4])
local handbacks = tonumber(f[5]) or 0
if max > 0 and handbacks >= max then return {"stale_execution", "running", {}} end

local now = tonumber(ARGV[2])
local data = cjson.decode(ARGV[3])
-- What the queued run waits for, shown on its view until its next claim ("browser_worker").
local waiting_for = type(data.waiting_for) == "string" and data.waiting_for or ""
redis.call("HSET", KEYS[1], "status", "queued", "owner", "", "updated_at", now, "handbacks", handbacks + 1,
  "waiting_for", waiting_for)
data.status = "queued"
data.previous = "running"
data.attempt = tonumber(f[3])
data.execution = tonumber(f[4])
data.handbacks = handbacks + 1
emit("run.requeued", now, data)
return {"ok", tostring(handbacks + 1), redis.call("HGETALL", KEYS[1])}
