--[[
  Asks the owner's approval for a tool call and parks the run on it, in one step (DESIGN §4.4):
  the execution ends, the run waits `parked` with its lease kept. By the run's owner only. A run
  whose cancel was requested ends `cancelled` instead and the approval is written expired.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    KEYS[3] the run's approvals     ({run:ID}:approvals), one JSON per approval id
    KEYS[4..] the run's other keys   (RunKeys.runOwned; issue 13: they expire with a cancelled end)

    ARGV[1] the owner token
    ARGV[2] approval id   ARGV[3] invocation id   ARGV[4] tool   ARGV[5] the call's arguments (JSON)
    ARGV[6] now (epoch ms)
    ARGV[7] the retention (ms) of a run that ends cancelled here
    ARGV[8] the approval card (JSON; issue 13), kept as given for the person deciding

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', 'parked' | 'cancelled', fields}
    {'not_found' | 'wrong_status' | 'not_owner', status, {}}
]]
--- @include "includes/emit.lua"
--- @include "includes/retain-run.lua"
--- @include "includes/end-cancelled.lua"
--- @include "includes/owner-fence.lua"

local f, refused = fenceRunningOwner("attempt", "execution", "cancel_requested", "tenant", "id")
if refused then return refused end

local now = tonumber(ARGV[6])
local cancelled = f[5] == "1"
local approval = {
  id = ARGV[2], run_id = f[7], tenant = f[6], invocation_id = ARGV[3], tool = ARGV[4],
  arguments = ARGV[5], status = cancelled and "expired" or "pending", created_at = now,
  card = ARGV[8]}
if cancelled then approval.decided_at = now end
redis.call("HSET", KEYS[3], ARGV[2], cjson.encode(approval))
local data = {previous = "running", attempt = tonumber(f[3]), execution = tonumber(f[4])}

if cancelled then
  return endCancelled(now, "cancelled while running", data, tonumber(ARGV[7]))
end

redis.call("HSET", KEYS[1], "status", "parked", "owner", "", "updated_at", now)
emit("approval.requested", now, {approval_id = ARGV[2], invocation_id = ARGV[3], tool = ARGV[4]})
data.status = "parked"
data.approval_id = ARGV[2]
emit("run.parked", now, data)
return {"ok", "parked", redis.call("HGETALL", KEYS[1])}
