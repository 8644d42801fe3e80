--[[
  Records what one due time of a schedule came to, once: the first decision for a due time stands,
  and only it is counted, so a fire processed again (a stalled job, a restart, a clock set back)
  changes nothing. Decisions older than the keep window are trimmed.

  Input:
    KEYS[1] the schedule's record   ({sch:ID}:schedule, hash; counts are its n_<outcome> fields)
    KEYS[2] the schedule's decisions ({sch:ID}:fires, sorted set: due key → when decided, ms)

    ARGV[1] due key   ARGV[2] now, ms   ARGV[3] outcome   ARGV[4] due times missed before it
    ARGV[5] decisions made before this ms are trimmed

  Output: 1 decided now, 0 decided before (nothing counted), -1 no such schedule
]]
if redis.call("EXISTS", KEYS[1]) == 0 then
  return -1
end
if redis.call("ZADD", KEYS[2], "NX", ARGV[2], ARGV[1]) == 0 then
  return 0
end
redis.call("HINCRBY", KEYS[1], "n_" .. ARGV[3], 1)
if tonumber(ARGV[4]) > 0 then
  redis.call("HINCRBY", KEYS[1], "n_missed", ARGV[4])
end
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[5])
return 1
