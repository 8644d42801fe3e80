--[[
  Cancels a run (DESIGN §4.7). A queued, parked or waiting run ends `cancelled` at once and its
  pending approvals expire; a running run gets its cancel flag, which its loop reads before each
  model call and tool call (and a park or wait of a flagged run ends it cancelled), and the run id
  is published on the cancel channel so its worker, wherever it runs, hears it at once (§4.7).

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    KEYS[3] the run's approvals     ({run:ID}:approvals)
    KEYS[4..] the run's other keys   (RunKeys.runOwned; they expire with it)

    ARGV[1] now (epoch ms)
    ARGV[2] the tenant asking (another tenant's run reads as absent)
    ARGV[3] the message recorded with the end
    ARGV[4] the cancel channel (pub/sub)
    ARGV[5] the retention (ms): every key the run owns expires that long after its end

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', 'cancelled' | 'cancel_requested', fields}
    {'not_found' | 'wrong_status', status, {}}
]]
--- @include "includes/emit.lua"
--- @include "includes/expire-approvals.lua"
--- @include "includes/retain-run.lua"
--- @include "includes/end-cancelled.lua"

local f = redis.call("HMGET", KEYS[1], "status", "tenant", "attempt", "execution", "cancel_requested")
if not f[1] or f[2] ~= ARGV[2] then return {"not_found", "", {}} end
local status = f[1]
local now = tonumber(ARGV[1])
local data = {previous = status, attempt = tonumber(f[3]), execution = tonumber(f[4])}

if status == "running" then
  if f[5] ~= "1" then
    redis.call("HSET", KEYS[1], "cancel_requested", 1, "updated_at", now)
    data.status = "running"
    emit("run.cancel_requested", now, data)
    redis.call("PUBLISH", ARGV[4], redis.call("HGET", KEYS[1], "id"))
  end
  return {"ok", "cancel_requested", redis.call("HGETALL", KEYS[1])}
end
if status ~= "queued" and status ~= "parked" and status ~= "waiting_child" and status ~= "waiting_user" then
  return {"wrong_status", status, {}}
end

expirePendingApprovals(KEYS[3], now, true)
return endCancelled(now, ARGV[3], data, tonumber(ARGV[5]))
