--[[
  One renewal under its idempotency record: the claim of the exact idempotency rule and
  the renewal in one script. The single renew route sends one; a batch of renewals is one pipeline
  of these, one round trip whatever its size. Both keys share the profile's hash tag: one slot per
  call, which is why a batch pipelines many calls instead of sending one script many leases' keys.
  The claim is the rule claimIdempotency-1 runs (its include), and a renewal sent alone and the
  same renewal in a batch are the same call, so they replay each other's answers.

  Input:
    KEYS[1] the idempotency record
    KEYS[2] the lease's record

    ARGV[1] hash of the request (as the single renew route hashes it)
    ARGV[2] idempotency record's time to live (ms)
    ARGV[3] requested expiry (epoch ms)
    ARGV[4] now (epoch ms)
    ARGV[5] step cap (ms)   ARGV[6] lifetime cap (ms)

  Output:
    {'replay', status, body}   the stored answer of the first request with this key
    {'pending'}                the first request is still being answered
    {'conflict'}               the key was used with another request
    {'renewed', expires_at, field, value, ...}   claimed and renewed: the lease record after it
    {'lease_expired', state}   claimed; 'close' in state: the caller must close it unsealed now
    {'not_found'}              claimed; there is no such lease
]]
--- @include "includes/claim-idempotency.lua"
--- @include "includes/renew-lease.lua"

local claim = claimIdempotencyRecord(KEYS[1], ARGV[1], ARGV[2])
if claim[1] ~= "claimed" then
  return claim
end
local renewal = renewLeaseRecord(KEYS[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
if renewal[1] == "renewed" then
  -- The record after the renewal, so the answer needs no second read.
  local fields = redis.call("HGETALL", KEYS[2])
  for _, value in ipairs(fields) do
    renewal[#renewal + 1] = value
  end
end
return renewal
