--[[
  Included (`--- @include "includes/end-cancelled.lua"`) by every script that ends a run
  `cancelled`: a cancel of a run that is not running, or a park or wait of a running run whose
  cancel was requested (DESIGN §4.7). The loader in scripts.ts pastes it in place; includes do not
  nest, so those scripts include "includes/emit.lua" and "includes/retain-run.lua" first. They
  all take
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    and, after their own keys, every other key the run owns (they expire with the end)
]]

-- Ends the run `cancelled` at `now` with `message` (owner cleared, cancel flag set) and appends
-- its final event with `data` (the caller's previous status, attempt, execution…). Answers the
-- script's reply {'ok', 'cancelled', fields}. Every key of the run expires `retentionMs` later.
local function endCancelled(now, message, data, retentionMs)
  redis.call("HSET", KEYS[1], "status", "cancelled", "owner", "", "cancel_requested", 1, "updated_at", now,
    "ended_at", now, "error_reason", "cancelled", "error_message", message)
  data.status = "cancelled"
  -- The final event carries the run's error as its view does.
  data.error = {code = "cancelled", message = message, step = cjson.null}
  emit("run.cancelled", now, data)
  retainRunKeys(retentionMs)
  return {"ok", "cancelled", redis.call("HGETALL", KEYS[1])}
end
