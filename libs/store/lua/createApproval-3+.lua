--[[
  Asks the owner's approval for a tool call and parks the run on it, in one step (DESIGN §4.4):
  the execution ends, the run waits `parked` with its lease kept. By the run's owner only. A run
  whose cancel was requested ends `cancelled` instead and the approval is written expired.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    KEYS[3] the run's approvals     ({run:ID}:approvals), one JSON per approval id
    KEYS[4..] the run's other keys   (RunKeys.runOwned; they expire with a cancelled end)

    ARGV[1] the owner token
    ARGV[2] approval id   ARGV[3] invocation id   ARGV[4] tool   ARGV[5] the call's arguments (JSON)
    ARGV[6] now (epoch ms)
    ARGV[7] the retention (ms) of a run that ends cancelled here
    ARGV[8] the approval card (JSON), kept as given for the person deciding
    ARGV[9] a `person` approval's state (JSON: reason, expires_at_ms, holder…), '' for an action's.
            One asked by the model tells `person.requested`; one made by a takeover (a holder
            named) tells `person.taken_over`. Either clears the run's takeover request.

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
local person = ARGV[9] ~= "" and cjson.decode(ARGV[9]) or nil
if person then
  approval.kind = "person"
  approval.person = person
end
redis.call("HSET", KEYS[3], ARGV[2], cjson.encode(approval))
local data = {previous = "running", attempt = tonumber(f[3]), execution = tonumber(f[4])}

if cancelled then
  return endCancelled(now, "cancelled while running", data, tonumber(ARGV[7]))
end

redis.call("HSET", KEYS[1], "status", "parked", "owner", "", "updated_at", now)
emit("approval.requested", now, {approval_id = ARGV[2], invocation_id = ARGV[3], tool = ARGV[4]})
if person then
  redis.call("HDEL", KEYS[1], "person_request")
  if person.holder ~= nil and person.holder ~= cjson.null then
    emit("person.taken_over", now, {approval_id = ARGV[2], holder = person.holder,
      since_ms = person.since_ms, until_ms = person.until_ms})
  else
    emit("person.requested", now, {approval_id = ARGV[2], expires_at_ms = person.expires_at_ms})
  end
end
data.status = "parked"
data.approval_id = ARGV[2]
emit("run.parked", now, data)
return {"ok", "parked", redis.call("HGETALL", KEYS[1])}
