--[[
  Stores a new run `queued` (DESIGN §4.1), or answers the run already stored under this id. A run
  submitted with an Idempotency-Key has an id derived from (tenant, session, key), so a duplicate
  submission lands here, finds the first one and creates nothing, however many race.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    KEYS[3] the run's secrets       ({run:ID}:secrets)

    ARGV[1] run id            ARGV[2] tenant          ARGV[3] principal
    ARGV[4] session id        ARGV[5] agent id        ARGV[6] agent version
    ARGV[7] browser profile id ('' for none)          ARGV[8] parent run id ('' for none)
    ARGV[9] input (JSON)      ARGV[10] pinned limits (JSON)
    ARGV[11] timeout (ms): the deadline is now + timeout, again on each retry
    ARGV[12] now (epoch ms)   ARGV[13] hash of the request   ARGV[14] idempotency key ('' for none)
    ARGV[15] the event stream's cap (entries)
    ARGV[16] the run's declared secrets, sealed ('' for none)
    ARGV[17] their names and origins (JSON; '' for none)

  Output: { code, detail, fields of the run record }
    {'created', '', fields}
    {'existing', '', fields}   the same request was stored before: nothing created
    {'conflict', '', {}}       the id is taken by a different request (same key, other body)
]]
--- @include "includes/emit.lua"

if redis.call("EXISTS", KEYS[1]) == 1 then
  local f = redis.call("HMGET", KEYS[1], "tenant", "session_id", "request_hash")
  if f[1] ~= ARGV[2] or f[2] ~= ARGV[4] or f[3] ~= ARGV[13] then
    return {"conflict", "", {}}
  end
  return {"existing", "", redis.call("HGETALL", KEYS[1])}
end

local now = tonumber(ARGV[12])
redis.call("HSET", KEYS[1],
  "id", ARGV[1], "tenant", ARGV[2], "principal", ARGV[3], "session_id", ARGV[4],
  "agent_id", ARGV[5], "agent_version", ARGV[6], "profile_id", ARGV[7], "parent_run_id", ARGV[8],
  "input", ARGV[9], "limits", ARGV[10], "timeout_ms", ARGV[11],
  "status", "queued", "attempt", 1, "execution", 1, "owner", "", "cancel_requested", 0,
  "steps", 0, "model_calls", 0, "tool_calls", 0, "cost_micro_usd", 0,
  "deadline_at", now + tonumber(ARGV[11]), "created_at", now, "updated_at", now, "ended_at", "",
  "result", "", "error_reason", "", "error_message", "",
  "request_hash", ARGV[13], "idempotency_key", ARGV[14], "events_cap", ARGV[15])
-- DESIGN §12: the declared secrets are written with the run, once: a duplicate submission (whose
-- request hash, secrets' digests included, matched above) leaves the first one's as they are.
if ARGV[16] ~= "" then
  redis.call("HSET", KEYS[3], "sealed", ARGV[16], "declared", ARGV[17])
end
-- When it was submitted, to the µs of this server's clock: its place in its profile's line.
local clock = redis.call("TIME")
redis.call("HSET", KEYS[1], "submitted_us", clock[1] .. string.format("%06d", tonumber(clock[2])))
local submitted = {status = "queued", attempt = 1, execution = 1}
local eventId = appendToStream(KEYS[2], tonumber(ARGV[15]), "run.submitted", math.floor(now), cjson.encode(submitted))
notifyRunEvents()
notifyTenantRuns(eventId, "run.submitted", math.floor(now), submitted)
return {"created", "", redis.call("HGETALL", KEYS[1])}
