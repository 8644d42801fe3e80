--[[
  Included (`--- @include "includes/expire-approvals.lua"`) by every script that expires a run's
  pending approvals (a run that ends or is no longer parked on them: DESIGN §4.4); the loader in
  scripts.ts pastes it in place. The approvals hash is the run's own ({run:ID}:approvals, one JSON
  per approval id), so it is in the slot of the run's other keys.
]]

-- Reads every approval of the run; with `expirePending`, each pending one becomes `expired` at
-- `now`. Answers the ids expired by this call, the ids no longer pending (those included), and
-- the tenant the first approval names ('' when none does).
local function expirePendingApprovals(approvalsKey, now, expirePending)
  local expired = {}
  local settled = {}
  local tenant = ""
  local approvals = redis.call("HGETALL", approvalsKey)
  for i = 1, #approvals, 2 do
    local approval = cjson.decode(approvals[i + 1])
    if tenant == "" and type(approval.tenant) == "string" then tenant = approval.tenant end
    if approval.status == "pending" then
      if expirePending then
        approval.status = "expired"
        approval.decided_at = now
        redis.call("HSET", approvalsKey, approvals[i], cjson.encode(approval))
        expired[#expired + 1] = approvals[i]
        settled[#settled + 1] = approvals[i]
      end
    else
      settled[#settled + 1] = approvals[i]
    end
  end
  return expired, settled, tenant
end
