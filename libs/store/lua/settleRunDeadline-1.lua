--[[
  Moves or removes a run's entry in the deadline index, only if it still carries the score the
  sweep read (DESIGN §4: the sweeper fails runs past their deadline). A retry that wrote a newer
  deadline in between wins: its entry is left as it is.

  Input:
    KEYS[1] the deadline index      ({deadlines}:runs), run id scored by deadline (epoch ms)

    ARGV[1] the run id
    ARGV[2] the score the sweep read (epoch ms)
    ARGV[3] the new score (epoch ms), or '' to remove the entry

  Output:
    1 moved or removed
    0 left alone: the entry is gone or carries another score
]]
local score = redis.call("ZSCORE", KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == "" then
  redis.call("ZREM", KEYS[1], ARGV[1])
else
  redis.call("ZADD", KEYS[1], "XX", tonumber(ARGV[3]), ARGV[1])
end
return 1
