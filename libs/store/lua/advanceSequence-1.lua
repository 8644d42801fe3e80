--[[
  Fences an effect on a lease: the action's sequence number must be exactly the next one. Called
  right before the effect is dispatched; advancing the sequence and counting the effect are one step.

  Input:
    KEYS[1] the lease's record

    ARGV[1] the action's sequence number
    ARGV[2] now (epoch ms)
    ARGV[3] 1 to advance, 0 to check only, 'skip' to advance without an effect (a hand-over's
            call that never reached this lease: a late copy of it is refused from now on)
    ARGV[4] the dispatch's own id ('' or absent for none): an advance sent again with the same id
            after its answer was lost (a Redis outage) is told it landed, not refused

  The lease keeps the state of the effect at its last sequence in `effect` (`dispatched` from
  here, then what noteEffect-1.lua records; `skipped` for a skip), so the run's next owner can
  learn what became of a call it was handed without an answer.

  Output:
    {'ok', sequence}                 (the new sequence when advanced)
    {'sequence_mismatch', current}
    {'lease_expired', state}
    {'not_found'}
]]
local f = redis.call("HMGET", KEYS[1], "state", "expires_at", "seq", "dispatch")
if not f[1] then
  return {"not_found"}
end
if f[1] ~= "live" or tonumber(f[2]) <= tonumber(ARGV[2]) then
  return {"lease_expired", f[1]}
end
local dispatch = ARGV[4] or ""
if ARGV[3] == "1" and dispatch ~= "" and f[4] == dispatch and tonumber(f[3]) == tonumber(ARGV[1]) then
  return {"ok", f[3]}
end
if tonumber(f[3]) + 1 ~= tonumber(ARGV[1]) then
  return {"sequence_mismatch", f[3]}
end
if ARGV[3] == "1" then
  redis.call("HINCRBY", KEYS[1], "effects", 1)
  redis.call("HSET", KEYS[1], "effect", "dispatched")
  redis.call("HDEL", KEYS[1], "effect_code")
  if dispatch ~= "" then
    redis.call("HSET", KEYS[1], "dispatch", dispatch)
  else
    redis.call("HDEL", KEYS[1], "dispatch")
  end
  return {"ok", tostring(redis.call("HINCRBY", KEYS[1], "seq", 1))}
end
if ARGV[3] == "skip" then
  redis.call("HSET", KEYS[1], "effect", "skipped")
  redis.call("HDEL", KEYS[1], "effect_code", "dispatch")
  return {"ok", tostring(redis.call("HINCRBY", KEYS[1], "seq", 1))}
end
return {"ok", f[3]}
