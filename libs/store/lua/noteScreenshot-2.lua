--[[
  Notes where one of a run's screenshots is: `pending` when its call answers (only if the name is
  new, so a name is never taken twice), then `stored` or `failed <reason>` once the browser worker
  had it or gave up. The note expires with the run: a run that already ended gives the hash its
  own remaining time (its end script set the expiry of the keys it found, which may not have
  included this one), and a run that is gone takes no note.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's screenshots   ({run:ID}:screenshots)

    ARGV[1] the screenshot's name
    ARGV[2] the state: `pending`, `stored` or `failed <reason>`
    ARGV[3] 0: write it; 1: only a name not yet noted; 2: only a name not yet noted or noted
            `pending` (the run side noted an approval's preview before asking for it)

  Output:
    'ok' | 'exists' (the name was noted already, as ARGV[3] forbids) | 'no_run'
]]
if redis.call("EXISTS", KEYS[1]) == 0 then return "no_run" end
if ARGV[3] == "1" or ARGV[3] == "2" then
  local noted = redis.call("HGET", KEYS[2], ARGV[1])
  if noted and not (ARGV[3] == "2" and noted == "pending") then return "exists" end
  redis.call("HSET", KEYS[2], ARGV[1], ARGV[2])
else
  redis.call("HSET", KEYS[2], ARGV[1], ARGV[2])
end
local ttl = redis.call("PTTL", KEYS[1])
if ttl > 0 then redis.call("PEXPIRE", KEYS[2], ttl) end
return "ok"
