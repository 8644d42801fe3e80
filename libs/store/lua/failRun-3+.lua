--[[
  The sweeper's end for a run (DESIGN §4.6): a run whose worker died past the retry limit
  (`reclaimed`) or that outlived its deadline (`deadline_exceeded`) fails from any status that is
  not an end, whoever owns it; the owner is cleared so a zombie worker can write nothing more.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    KEYS[3] the run's approvals     ({run:ID}:approvals)
    KEYS[4..] the run's other keys   (RunKeys.runOwned; they expire with it)

    ARGV[1] the failure reason
    ARGV[2] the execution expected (0 for any): a run that has moved on is left alone
    ARGV[3] now (epoch ms)
    ARGV[4] the failure message
    ARGV[5] the step the run failed at ('' when the caller does not know it)
    ARGV[6] the retention (ms): every key the run owns expires that long after its end

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', 'failed', fields}
    {'not_found' | 'wrong_status' | 'stale_execution', status, {}}
]]
--- @include "includes/emit.lua"
--- @include "includes/expire-approvals.lua"
--- @include "includes/retain-run.lua"

local f = redis.call("HMGET", KEYS[1], "status", "attempt", "execution")
if not f[1] then return {"not_found", "", {}} end
local status = f[1]
if status == "succeeded" or status == "failed" or status == "cancelled" then
  return {"wrong_status", status, {}}
end
if tonumber(ARGV[2]) ~= 0 and tonumber(ARGV[2]) ~= tonumber(f[3]) then
  return {"stale_execution", status, {}}
end

local now = tonumber(ARGV[3])
redis.call("HSET", KEYS[1], "status", "failed", "owner", "", "updated_at", now, "ended_at", now,
  "error_reason", ARGV[1], "error_message", ARGV[4], "error_step", ARGV[5] or "")
expirePendingApprovals(KEYS[3], now, true)
-- The final event carries the run's error as its view does (the sweeper knows no step).
emit("run.failed", now, {status = "failed", previous = status,
  error = {code = ARGV[1], message = ARGV[4], step = tonumber(ARGV[5] or "") or cjson.null},
  attempt = tonumber(f[2]), execution = tonumber(f[3])})
retainRunKeys(tonumber(ARGV[6]))
return {"ok", "failed", redis.call("HGETALL", KEYS[1])}
