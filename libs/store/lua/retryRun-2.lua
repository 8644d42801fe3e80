--[[
  Retries a failed run as a new attempt (DESIGN §3): `failed -> queued`, attempt + 1, a new
  execution, usage, result and error cleared, the deadline set afresh from the pinned timeout.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)

    ARGV[1] now (epoch ms)
    ARGV[2] the tenant asking (another tenant's run reads as absent)

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', 'queued', fields}
    {'not_found' | 'wrong_status', status, {}}
]]
--- @include "includes/emit.lua"

local f = redis.call("HMGET", KEYS[1], "status", "tenant", "timeout_ms")
if not f[1] or f[2] ~= ARGV[2] then return {"not_found", "", {}} end
if f[1] ~= "failed" then return {"wrong_status", f[1], {}} end

local now = tonumber(ARGV[1])
local attempt = redis.call("HINCRBY", KEYS[1], "attempt", 1)
local execution = redis.call("HINCRBY", KEYS[1], "execution", 1)
redis.call("HSET", KEYS[1], "status", "queued", "owner", "", "cancel_requested", 0,
  "steps", 0, "model_calls", 0, "tool_calls", 0, "cost_micro_usd", 0,
  "deadline_at", now + tonumber(f[3]), "updated_at", now, "ended_at", "",
  "result", "", "error_reason", "", "error_message", "")
emit("run.retried", now, {status = "queued", previous = "failed", attempt = attempt, execution = execution})
return {"ok", "queued", redis.call("HGETALL", KEYS[1])}
