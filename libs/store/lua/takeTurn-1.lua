--[[
  A run takes its turn on its profile's page (issue 12): the runs of one profile use its page one
  after another, in submit order. Puts the run in the profile's line (once; a run already in it
  keeps its place) and answers whether it is first. The first run holds the turn until it is done
  with the page (it ends or waits on a person or a child); the lifecycle then passes the turn.

  Input:
    KEYS[1] the profile's turn line  ({prf:TENANT/ID}:turns), run ids scored by submission (µs)

    ARGV[1] the run id
    ARGV[2] its score: when it was submitted (epoch µs)

  Output:
    {'turn', '', 0}                            the run is first: it goes on
    {'wait', the first run's id, position}     position: how many runs are ahead of it
]]
redis.call("ZADD", KEYS[1], "NX", ARGV[2], ARGV[1])
local rank = redis.call("ZRANK", KEYS[1], ARGV[1])
if rank == 0 then return {"turn", "", 0} end
return {"wait", redis.call("ZRANGE", KEYS[1], 0, 0)[1], rank}
