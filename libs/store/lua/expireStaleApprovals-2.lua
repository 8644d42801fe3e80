--[[
  Expires the pending approvals of a run that is no longer parked on them (DESIGN §4.4): the run
  ended, was re-queued without a decision, or is gone. A parked run's approvals are left alone.
  The run's status is read in the same step, so an approval is never expired under a run that
  parks on it at that moment. The per-tenant pending index is in another slot: the caller drops
  the settled ids from it after this script.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's approvals     ({run:ID}:approvals), one JSON per approval id

    ARGV[1] now (epoch ms)

  A parked run's pending `person` approval past its time is named, not changed: the caller fails
  the run `person_timeout` (nobody came: PERSON_REQUEST_TIMEOUT_MS) or hands the page back (the
  takeover's time limit), each through its own script.

  Output: { run status ('' when the run is gone), tenant ('' when unknown),
            {approval ids expired now}, {approval ids no longer pending, those included},
            {'' or 'timeout' or 'handback', approval id, holder} }
]]
--- @include "includes/expire-approvals.lua"

local f = redis.call("HMGET", KEYS[1], "status", "tenant")
local status = f[1] or ""
local tenant = f[2] or ""
local expired, settled, approvalTenant = expirePendingApprovals(KEYS[2], tonumber(ARGV[1]), status ~= "parked")
if tenant == "" then tenant = approvalTenant end
local due = {"", "", ""}
if status == "parked" then
  local now = tonumber(ARGV[1])
  local all = redis.call("HGETALL", KEYS[2])
  for i = 1, #all, 2 do
    local approval = cjson.decode(all[i + 1])
    local person = approval.status == "pending" and approval.kind == "person" and approval.person
    if type(person) == "table" then
      if type(person.holder) == "string" then
        if tonumber(person.until_ms or 0) <= now then due = {"handback", all[i], person.holder} end
      elseif tonumber(person.expires_at_ms or 0) <= now then
        due = {"timeout", all[i], ""}
      end
    end
  end
end
return {status, tenant, expired, settled, due}
