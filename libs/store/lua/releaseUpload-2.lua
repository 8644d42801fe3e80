--[[
  Lets go of an upload's holders whose runs are gone (their records expired with their retention),
  if they were listed before ARGV[2]: a run listed a moment ago may not be written yet. With no
  holder left the upload expires 7 days after it was made, or now when that is past.

  Input:
    KEYS[1] the upload's record    ({fil:ID}:file)
    KEYS[2] the upload's holders   ({fil:ID}:runs): run id -> when it was listed (ms)

    ARGV[1] now (ms)
    ARGV[2] holders listed before this (ms) may be let go
    ARGV[3] how long an upload lives unheld after it was made (ms)
    ARGV[4..] the run ids found gone

  Output:
    the number of holders left, or -1 when the upload is gone
]]
if redis.call("EXISTS", KEYS[1]) == 0 then
  redis.call("DEL", KEYS[2])
  return -1
end
for i = 4, #ARGV do
  local listed = redis.call("ZSCORE", KEYS[2], ARGV[i])
  if listed and tonumber(listed) < tonumber(ARGV[2]) then redis.call("ZREM", KEYS[2], ARGV[i]) end
end
local left = redis.call("ZCARD", KEYS[2])
if left > 0 then return left end
local expiresAt = tonumber(redis.call("HGET", KEYS[1], "created_at_ms") or "0") + tonumber(ARGV[3])
if expiresAt <= tonumber(ARGV[1]) then
  redis.call("DEL", KEYS[1], KEYS[2])
  return -1
end
redis.call("PEXPIREAT", KEYS[1], expiresAt)
return 0
