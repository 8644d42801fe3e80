--[[
  Claims the request's idempotency key, admits, and publishes a profile's lease in one round trip,
  or answers why not (DESIGN §5, ADR-0127 d1, d7; a reattach is this script and the
  answer's record). The key is claimed first, by the rule claimIdempotency-1.lua includes, so a replay or a
  conflicting body does nothing else. Admission comes next, and nothing is published for a caller
  that may not lease: the profile exists in the scope's tenant, is served by this worker, and is
  not protected against the principal.

  Input:
    KEYS[1] the profile's live-lease pointer   ({prf:TENANT/ID}:live)
    KEYS[2] the new lease's record             ({prf:TENANT/ID}:lease:NEWID)
    KEYS[3] prefix of the profile's lease records ({prf:TENANT/ID}:lease:)
    KEYS[4] the profile's record               ({prf:TENANT/ID}:profile)
    KEYS[5] the request's idempotency record   ({prf:TENANT/ID}:idem:KEY; unused without a hash)

    ARGV[1] new lease id
    ARGV[2] tenant       ARGV[3] principal     ARGV[4] provider reference
    ARGV[5] run id       ARGV[6] attempt
    ARGV[7] requested expiry (epoch ms)
    ARGV[8] now (epoch ms)
    ARGV[9] step cap (ms)   ARGV[10] lifetime cap (ms)
    ARGV[11] whether this worker serves the profile (1|0)
    ARGV[12] hash of the request (route and body); '' when the caller claims no key
    ARGV[13] time to live of the idempotency record (ms)
    ARGV[14..] the profile fields to answer with a created lease

  Output: { status, lease id, ... }
    {'idem_replay', status, body}   the key answered already: nothing else is done
    {'idem_pending'}            the first request with the key is still being answered
    {'idem_conflict'}           the key was used with another request
    {'not_found'}               no such profile (or one of another tenant than the scope's)
    {'not_served'}              the profile is not pinned to this worker
    {'protected'}               protected against this principal
    {'created', id, lease fields (HGETALL), profile fields (ARGV[12..])}
    {'reattached', id, lease fields (HGETALL)}   the live lease has this scope: same lease, nothing created
    {'conflict', id, run, attempt}   another scope holds it
    {'expired', id}             the live lease is past its expiry: close it unsealed first, then retry

  The sealed state is not read here (it may be large): a created lease reads it after publication,
  when no warm context of the current seal version is at hand. Nothing can seal the profile while
  its lease is live, so what it reads then is what this lease starts from.
]]
--- @include "includes/claim-idempotency.lua"

if ARGV[12] ~= "" then
  local claim = claimIdempotencyRecord(KEYS[5], ARGV[12], ARGV[13])
  if claim[1] ~= "claimed" then
    claim[1] = "idem_" .. claim[1]
    return claim
  end
end

local admission = redis.call("HMGET", KEYS[4], "id", "protected", "principal", "tenant")
if not admission[1] or admission[4] ~= ARGV[2] then
  return {"not_found"}
end
if ARGV[11] ~= "1" then
  return {"not_served"}
end
if admission[2] == "1" and admission[3] ~= ARGV[3] then
  return {"protected"}
end

local liveId = redis.call("GET", KEYS[1])
if liveId then
  local leaseKey = KEYS[3] .. liveId
  local f = redis.call("HMGET", leaseKey, "state", "expires_at", "tenant", "principal", "provider_ref", "run_id", "attempt")
  if f[1] == "live" then
    if tonumber(f[2]) <= tonumber(ARGV[8]) then
      return {"expired", liveId}
    end
    if f[3] == ARGV[2] and f[4] == ARGV[3] and f[5] == ARGV[4] and f[6] == ARGV[5] and f[7] == ARGV[6] then
      return {"reattached", liveId, redis.call("HGETALL", leaseKey)}
    end
    return {"conflict", liveId, f[6], f[7]}
  end
  if f[1] == "closing" then
    -- A close under way; one left behind by a crash is finished by whoever finds it expired.
    if tonumber(f[2]) <= tonumber(ARGV[8]) then
      return {"expired", liveId}
    end
    return {"conflict", liveId, f[6], f[7]}
  end
  -- A pointer to a closed or vanished record is stale.
  redis.call("DEL", KEYS[1])
end

local now = tonumber(ARGV[8])
local expiresAt = math.min(tonumber(ARGV[7]), now + tonumber(ARGV[9]), now + tonumber(ARGV[10]))
redis.call("HSET", KEYS[2],
  "id", ARGV[1], "state", "live",
  "tenant", ARGV[2], "principal", ARGV[3], "provider_ref", ARGV[4], "run_id", ARGV[5], "attempt", ARGV[6],
  "acquired_at", ARGV[8], "expires_at", expiresAt, "seq", 0, "effects", 0, "sealed", 0)
redis.call("SET", KEYS[1], ARGV[1])
local profileFields = {}
for i = 14, #ARGV do
  profileFields[#profileFields + 1] = ARGV[i]
end
return {"created", ARGV[1], redis.call("HGETALL", KEYS[2]), redis.call("HMGET", KEYS[4], unpack(profileFields))}
