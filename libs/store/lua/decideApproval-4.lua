--[[
  Approves or denies a pending approval (DESIGN §3, §4.4). An approval may carry a task grant,
  bounded to 30 minutes and 200 actions; out of bounds, nothing is written. When no other
  approval of the run is pending, a parked run is re-queued as a new execution in the same step;
  a denial is recorded for the loop to hand to the model as the tool's result.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    KEYS[3] the run's approvals     ({run:ID}:approvals)
    KEYS[4] the run's grants        ({run:ID}:grants), one JSON per grant id

    ARGV[1] approval id   ARGV[2] 'approved' or 'denied'   ARGV[3] the tenant deciding
    ARGV[4] the principal deciding   ARGV[5] reason ('' for none)   ARGV[6] now (epoch ms)
    ARGV[7] grant id ('' for no grant)   ARGV[8] grant duration (ms)   ARGV[9] grant actions
    ARGV[10] longest grant (ms)   ARGV[11] most grant actions
    ARGV[12] the run's principal it must be ('' for any principal of the tenant)
    ARGV[13] a hand-back's holder ('' for an ordinary decision): a `person` approval whose page a
             person holds is decided by that holder's hand-back alone (or once the takeover's
             time is up); an ordinary decision of it is refused `person_in_control`
    ARGV[14] the hand-back's account (JSON: ended_at_ms, inputs, end_url), '' for none

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', 'requeued' | 'decided', fields}
    {'not_found', '', {}}                       no such approval for this tenant (and principal)
    {'already_decided', approval status, {}}
    {'grant_out_of_bounds', '', {}}
    {'wrong_status', run status, {}}            the run has ended
    {'person_in_control', holder, {}}           a person holds the page, and this is not their hand-back
    {'person_not_in_control', '', {}}           a hand-back by someone who holds no takeover of it
]]
--- @include "includes/emit.lua"

local f = redis.call("HMGET", KEYS[1], "status", "tenant", "attempt", "execution", "id", "principal")
if not f[1] or f[2] ~= ARGV[3] then return {"not_found", "", {}} end
if ARGV[12] ~= "" and f[6] ~= ARGV[12] then return {"not_found", "", {}} end
local raw = redis.call("HGET", KEYS[3], ARGV[1])
if not raw then return {"not_found", "", {}} end
local approval = cjson.decode(raw)
if approval.status ~= "pending" then return {"already_decided", approval.status, {}} end

local holder = ARGV[13] or ""
local person = approval.kind == "person" and type(approval.person) == "table" and approval.person or nil
local held = person and type(person.holder) == "string" and person.holder or nil
if holder ~= "" then
  if held ~= holder then return {"person_not_in_control", "", {}} end
elseif held and tonumber(person.until_ms or 0) > tonumber(ARGV[6]) then
  return {"person_in_control", held, {}}
end

local decision = ARGV[2]
if decision ~= "approved" and decision ~= "denied" then
  return redis.error_reply("decideApproval: unknown decision " .. decision)
end
local withGrant = decision == "approved" and ARGV[7] ~= ""
if withGrant then
  local durationMs = tonumber(ARGV[8])
  local actions = tonumber(ARGV[9])
  if not durationMs or durationMs <= 0 or durationMs > tonumber(ARGV[10])
    or not actions or actions < 1 or actions > tonumber(ARGV[11]) or actions % 1 ~= 0 then
    return {"grant_out_of_bounds", "", {}}
  end
end
local status = f[1]
if status == "succeeded" or status == "failed" or status == "cancelled" then
  return {"wrong_status", status, {}}
end

local now = tonumber(ARGV[6])
approval.status = decision
approval.decided_at = now
approval.decided_by = ARGV[4]
if ARGV[5] ~= "" then approval.reason = ARGV[5] end
if withGrant then
  approval.grant_id = ARGV[7]
  redis.call("HSET", KEYS[4], ARGV[7], cjson.encode({
    id = ARGV[7], run_id = f[5], approval_id = ARGV[1], attempt = tonumber(f[3]), created_at = now,
    expires_at = now + tonumber(ARGV[8]), max_actions = tonumber(ARGV[9]), used = 0}))
end
if person and held then
  local account = ARGV[14] ~= "" and cjson.decode(ARGV[14]) or {}
  person.ended_at_ms = account.ended_at_ms or now
  person.inputs = account.inputs or cjson.null
  person.end_url = account.end_url or cjson.null
  emit("person.handed_back", now, {approval_id = ARGV[1], holder = held, since_ms = person.since_ms,
    ended_at_ms = person.ended_at_ms, inputs = person.inputs})
end
redis.call("HSET", KEYS[3], ARGV[1], cjson.encode(approval))
emit("approval." .. decision, now, {approval_id = ARGV[1], invocation_id = approval.invocation_id,
  grant_id = withGrant and ARGV[7] or nil})

local stillPending = false
local approvals = redis.call("HVALS", KEYS[3])
for _, value in ipairs(approvals) do
  if cjson.decode(value).status == "pending" then stillPending = true break end
end
if status ~= "parked" or stillPending then
  return {"ok", "decided", redis.call("HGETALL", KEYS[1])}
end

local execution = redis.call("HINCRBY", KEYS[1], "execution", 1)
redis.call("HSET", KEYS[1], "status", "queued", "updated_at", now)
emit("run.requeued", now, {status = "queued", previous = "parked", approval_id = ARGV[1],
  attempt = tonumber(f[3]), execution = execution})
return {"ok", "requeued", redis.call("HGETALL", KEYS[1])}
