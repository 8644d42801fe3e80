--[[
  Uses one action of a live task grant of the run (DESIGN §3): a grant of this attempt, before its
  expiry, with actions left; the one expiring first is used. By the run's owner only. One action
  is charged once: an invocation asked again (a call resumed after a crash) answers the grant it
  was charged to, charging nothing more.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    KEYS[3] the run's grants        ({run:ID}:grants)

    ARGV[1] the owner token   ARGV[2] now (epoch ms)   ARGV[3] the invocation charged

  Output: { code, detail, {used, max actions, expires at} }
    {'ok', grant id, {used, max, expires_at}}
    {'no_live_grant', '', {}}
    {'not_found' | 'wrong_status' | 'not_owner', status, {}}
]]
--- @include "includes/emit.lua"
--- @include "includes/owner-fence.lua"

local f, refused = fenceRunningOwner("attempt", "events_cap")
if refused then return refused end

local now = tonumber(ARGV[2])
local attempt = tonumber(f[3])
local best
local grants = redis.call("HVALS", KEYS[3])
for _, value in ipairs(grants) do
  local grant = cjson.decode(value)
  if grant.charged and grant.charged[ARGV[3]] then
    return {"ok", grant.id, {grant.used, grant.max_actions, grant.expires_at}}
  end
end
for _, value in ipairs(grants) do
  local grant = cjson.decode(value)
  if grant.attempt == attempt and grant.used < grant.max_actions and grant.expires_at > now then
    if not best or grant.expires_at < best.expires_at then best = grant end
  end
end
if not best then return {"no_live_grant", "", {}} end

best.used = best.used + 1
-- At most 200 entries (GRANT_MAX_ACTIONS): the grant record stays small.
if not best.charged then best.charged = {} end
best.charged[ARGV[3]] = true
redis.call("HSET", KEYS[3], best.id, cjson.encode(best))
appendToStream(KEYS[2], tonumber(f[4]) or 10000, "grant.used", math.floor(tonumber(now)),
  cjson.encode({grant_id = best.id, used = best.used, max_actions = best.max_actions}))
notifyRunEvents()
return {"ok", best.id, {best.used, best.max_actions, best.expires_at}}
