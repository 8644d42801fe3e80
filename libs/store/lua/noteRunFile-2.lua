--[[
  Notes one of a run's downloads. `reserve` counts its bytes against what the run may keep (the
  per-run limit), before the bytes are written to the artifact store; `note` writes its record
  (stored or cancelled). The hash expires with the run: a run that already ended gives it its own
  remaining time, and a run that is gone takes nothing.

  Input:
    KEYS[1] the run's record   ({run:ID}:run)
    KEYS[2] the run's files    ({run:ID}:files): file id -> record (JSON), `bytes` -> bytes kept

    ARGV[1] `reserve` or `note`
    ARGV[2] the file id
    ARGV[3] reserve: the file's size in bytes; note: the record (JSON)
    ARGV[4] reserve: the run's limit in bytes

  Output:
    'ok' | 'run_limit' (reserve: the run's files would pass its limit) | 'no_run'
]]
if redis.call("EXISTS", KEYS[1]) == 0 then return "no_run" end
if ARGV[1] == "reserve" then
  local kept = tonumber(redis.call("HGET", KEYS[2], "bytes") or "0")
  if kept + tonumber(ARGV[3]) > tonumber(ARGV[4]) then return "run_limit" end
  redis.call("HINCRBY", KEYS[2], "bytes", ARGV[3])
else
  redis.call("HSET", KEYS[2], ARGV[2], ARGV[3])
end
local ttl = redis.call("PTTL", KEYS[1])
if ttl > 0 then redis.call("PEXPIRE", KEYS[2], ttl) end
return "ok"
