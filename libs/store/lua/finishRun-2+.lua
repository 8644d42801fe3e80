--[[
  Ends a running run by its owner: `running -> succeeded` with its result, `-> failed` with a
  stable reason (DESIGN §8), or `-> cancelled` when the loop obeys a cancel request.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    KEYS[3..] the run's other keys   (RunKeys.runOwned; they expire with it)

    ARGV[1] the owner token
    ARGV[2] the end: succeeded, failed or cancelled
    ARGV[3] the result (JSON; '' unless succeeded)
    ARGV[4] the error code ('' when succeeded): a failure reason or the ending tool's own code
    ARGV[5] the error message
    ARGV[6] now (epoch ms)
    ARGV[7] the step the error happened at ('' when none is known)
    ARGV[8] the retention (ms): every key the run owns expires that long after its end

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', end, fields}
    {'not_found' | 'wrong_status' | 'not_owner', status, {}}
]]
--- @include "includes/emit.lua"
--- @include "includes/owner-fence.lua"
--- @include "includes/retain-run.lua"

local f, refused = fenceRunningOwner("attempt", "execution")
if refused then return refused end
local outcome = ARGV[2]
if outcome ~= "succeeded" and outcome ~= "failed" and outcome ~= "cancelled" then
  return redis.error_reply("finishRun: unknown end " .. outcome)
end

local now = tonumber(ARGV[6])
redis.call("HSET", KEYS[1], "status", outcome, "owner", "", "updated_at", now, "ended_at", now,
  "result", ARGV[3], "error_reason", ARGV[4], "error_message", ARGV[5], "error_step", ARGV[7] or "")
local data = {status = outcome, previous = "running", attempt = tonumber(f[3]), execution = tonumber(f[4])}
-- The final event carries the run's error as its view does, {code, message, step}.
if ARGV[4] ~= "" then
  data.error = {code = ARGV[4], message = ARGV[5], step = tonumber(ARGV[7] or "") or cjson.null}
end
emit("run." .. outcome, now, data)
retainRunKeys(tonumber(ARGV[8]))
return {"ok", outcome, redis.call("HGETALL", KEYS[1])}
