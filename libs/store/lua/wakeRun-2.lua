--[[
  Wakes a run that waited its turn on its profile: `queued (waiting_for 'profile') ->
  queued` as a new execution (a new job id), `waiting_for` cleared. Refused for any other run, so
  a wake carried out twice (by the run passing the turn and by the waiter's own re-check, or a
  sweep) adds one execution only.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)

    ARGV[1] now (epoch ms)

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', 'queued', fields}
    {'not_found' | 'wrong_status', status, {}}
]]
--- @include "includes/emit.lua"

local f = redis.call("HMGET", KEYS[1], "status", "waiting_for", "attempt")
if not f[1] then return {"not_found", "", {}} end
if f[1] ~= "queued" or f[2] ~= "profile" then return {"wrong_status", f[1], {}} end
local now = tonumber(ARGV[1])
local execution = redis.call("HINCRBY", KEYS[1], "execution", 1)
redis.call("HSET", KEYS[1], "waiting_for", "", "updated_at", now)
emit("run.requeued", now, {
  status = "queued", previous = "queued", woken_by = "profile", attempt = tonumber(f[3]), execution = execution,
})
return {"ok", "queued", redis.call("HGETALL", KEYS[1])}
