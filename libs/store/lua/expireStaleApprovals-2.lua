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

  Output: { run status ('' when the run is gone), tenant ('' when unknown),
            {approval ids expired now}, {approval ids no longer pending, those included} }
]]
--- @include "includes/expire-approvals.lua"

local f = redis.call("HMGET", KEYS[1], "status", "tenant")
local status = f[1] or ""
local tenant = f[2] or ""
local expired, settled, approvalTenant = expirePendingApprovals(KEYS[2], tonumber(ARGV[1]), status ~= "parked")
if tenant == "" then tenant = approvalTenant end
return {status, tenant, expired, settled}
