--[[
  Retries a failed run as a new attempt (DESIGN §3): `failed -> queued`, attempt + 1, a new
  execution, usage, result and error cleared, the deadline set afresh from the pinned timeout.

  Retry starts clean: the failed attempt's transcript is kept under its attempt number
  and the new attempt starts a fresh one, seeded with the given entries (the input, and a note of
  the effects earlier attempts dispatched); the loop breaker's state starts afresh too. The ledger
  already keys each call by its attempt, so the old calls stay readable and never meet new ones.

  Input:
    KEYS[1] the run's record              ({run:ID}:run)
    KEYS[2] the run's event stream        ({run:ID}:events)
    KEYS[3] the run's transcript          ({run:ID}:transcript)
    KEYS[4] the failed attempt's archive  ({run:ID}:transcript:a<attempt>)
    KEYS[5] the run loop's state          ({run:ID}:loop)
    KEYS[6..] the run's other keys        (RunKeys.runOwned; kept again, no expiry)

    ARGV[1] now (epoch ms)
    ARGV[2] the tenant asking (another tenant's run reads as absent)
    ARGV[3] the attempt expected to fail over (the note was built from it; 0 for any)
    ARGV[4..] the new transcript's entries (JSON), in order

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', 'queued', fields}
    {'not_found' | 'wrong_status' | 'stale_execution', status, {}}
]]
--- @include "includes/emit.lua"
--- @include "includes/retain-run.lua"

local f = redis.call("HMGET", KEYS[1], "status", "tenant", "timeout_ms", "attempt")
if not f[1] or f[2] ~= ARGV[2] then return {"not_found", "", {}} end
if f[1] ~= "failed" then return {"wrong_status", f[1], {}} end
if tonumber(ARGV[3]) ~= 0 and tonumber(ARGV[3]) ~= tonumber(f[4]) then
  return {"stale_execution", f[1], {}}
end

local now = tonumber(ARGV[1])
if redis.call("EXISTS", KEYS[3]) == 1 then redis.call("RENAME", KEYS[3], KEYS[4]) end
redis.call("DEL", KEYS[5])
for i = 4, #ARGV do redis.call("RPUSH", KEYS[3], ARGV[i]) end

local attempt = redis.call("HINCRBY", KEYS[1], "attempt", 1)
local execution = redis.call("HINCRBY", KEYS[1], "execution", 1)
redis.call("HSET", KEYS[1], "status", "queued", "owner", "", "cancel_requested", 0,
  "steps", 0, "model_calls", 0, "tool_calls", 0, "cost_micro_usd", 0,
  "deadline_at", now + tonumber(f[3]), "updated_at", now, "ended_at", "",
  "result", "", "error_reason", "", "error_message", "", "error_step", "")
-- The failed run's keys were set to expire at its end; a new attempt has no end yet.
keepRunKeys()
emit("run.retried", now, {status = "queued", previous = "failed", attempt = attempt, execution = execution})
return {"ok", "queued", redis.call("HGETALL", KEYS[1])}
