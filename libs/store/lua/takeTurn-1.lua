--[[
  A run takes its turn on its profile's page: the runs of one profile use its page one
  after another, in submit order. Puts the run in the profile's line (once; a run already in it
  keeps its place) and answers whether it is first. A run is placed by its submission, but never
  ahead of the first: that run already holds the turn (and may hold the page), so an earlier-
  submitted run claimed after it goes next instead (two runs both held one profile). The first run holds the turn until it is done
  with the page (it ends or waits on a person or a child); the lifecycle then passes the turn.

  Input:
    KEYS[1] the profile's turn line  ({prf:TENANT/ID}:turns), run ids scored by submission (µs)

    ARGV[1] the run id
    ARGV[2] its score: when it was submitted (epoch µs)

  Output:
    {'turn', '', 0}                            the run is first: it goes on
    {'wait', the first run's id, position}     position: how many runs are ahead of it
]]
if not redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  local score = tonumber(ARGV[2])
  local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
  -- The first run holds the turn (it may hold the page): a newcomer claimed after it never goes
  -- ahead of it, though it was submitted earlier.
  if first[1] and score <= tonumber(first[2]) then score = tonumber(first[2]) + 1 end
  redis.call("ZADD", KEYS[1], score, ARGV[1])
end
local rank = redis.call("ZRANK", KEYS[1], ARGV[1])
if rank == 0 then return {"turn", "", 0} end
return {"wait", redis.call("ZRANGE", KEYS[1], 0, 0)[1], rank}
