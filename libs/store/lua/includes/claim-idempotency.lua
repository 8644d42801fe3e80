--[[
  Included (`--- @include "includes/claim-idempotency.lua"`) by claimIdempotency-1 (every
  idempotent route), renewIdempotently-2 (the batch renewals' items) and acquireLease-5 (an
  acquire claims its own key), so every route claims, replays and conflicts by the one rule below.
]]

-- The exact idempotency rule (DESIGN §5): the first request with a key claims the record `recordKey`;
-- the same key with the same request hash later replays the stored answer; with a different hash it
-- is a conflict. Answers {'claimed'}, {'replay', status, body}, {'pending'} (the first request is
-- still being answered) or {'conflict'}.
local function claimIdempotencyRecord(recordKey, requestHash, ttlMs)
  local f = redis.call("HMGET", recordKey, "hash", "state", "status", "body")
  if not f[1] then
    redis.call("HSET", recordKey, "hash", requestHash, "state", "pending")
    redis.call("PEXPIRE", recordKey, ttlMs)
    return {"claimed"}
  end
  if f[1] ~= requestHash then
    return {"conflict"}
  end
  if f[2] == "done" then
    return {"replay", f[3], f[4]}
  end
  return {"pending"}
end
