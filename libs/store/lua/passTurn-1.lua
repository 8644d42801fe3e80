--[[
  A run leaves its profile's line: it is done with the page (it ended, or waits on a
  person or a child), or it ended while waiting. Answers the run now first, if any, so the caller
  wakes it when it waits; leaving a line one is not in is a no-op (a follow-up done again).

  Input:
    KEYS[1] the profile's turn line  ({prf:TENANT/ID}:turns)

    ARGV[1] the run id

  Output: { the first run's id, or '' when the line is empty, how many runs are in the line }
]]
redis.call("ZREM", KEYS[1], ARGV[1])
local first = redis.call("ZRANGE", KEYS[1], 0, 0)[1] or ""
return {first, redis.call("ZCARD", KEYS[1])}
