--[[
  Ends an execution without ending the run: `running -> parked | waiting_child | waiting_user`,
  by its owner only. The owner is cleared: whoever resumes the run claims it again. A run whose
  cancel was requested ends `cancelled` here instead, so a cancel never waits on an approval.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    KEYS[3..] the run's other keys   (RunKeys.runOwned; they expire with a cancelled end)

    ARGV[1] the owner token
    ARGV[2] the status to move to: parked, waiting_child or waiting_user
    ARGV[3] now (epoch ms)
    ARGV[4] detail for the event (a JSON object)
    ARGV[5] the run waited on ('' for none): a `waiting_child` run names its child here
    ARGV[6] the retention (ms) of a run that ends cancelled here

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', new status, fields}
    {'not_found' | 'wrong_status' | 'not_owner', status, {}}
]]
--- @include "includes/emit.lua"
--- @include "includes/retain-run.lua"
--- @include "includes/end-cancelled.lua"
--- @include "includes/owner-fence.lua"

local f, refused = fenceRunningOwner("attempt", "execution", "cancel_requested")
if refused then return refused end
local target = ARGV[2]
if target ~= "parked" and target ~= "waiting_child" and target ~= "waiting_user" then
  return redis.error_reply("suspendRun: unknown status " .. target)
end
local now = tonumber(ARGV[3])
local data = cjson.decode(ARGV[4])
data.previous = "running"
data.attempt = tonumber(f[3])
data.execution = tonumber(f[4])

if f[5] == "1" then
  return endCancelled(now, "cancelled while running", data, tonumber(ARGV[6]))
end

redis.call("HSET", KEYS[1], "status", target, "owner", "", "updated_at", now, "waiting_on", ARGV[5])
data.status = target
emit(target == "parked" and "run.parked" or "run.waiting", now, data)
return {"ok", target, redis.call("HGETALL", KEYS[1])}
