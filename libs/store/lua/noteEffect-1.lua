--[[
  Records how the effect at a lease's last sequence ended, once: only while that sequence is still
  the lease's last and its effect is still `dispatched` (see advanceSequence-1.lua). Kept on a
  closed lease too, so what a call did outlives its page.

  Input:
    KEYS[1] the lease's record

    ARGV[1] the effect's sequence number
    ARGV[2] how it ended: applied | refused | unknown
    ARGV[3] the refusal's code ('' for none)

  Output: 1 when recorded, 0 when the lease has moved on or the effect was recorded already
]]
local f = redis.call("HMGET", KEYS[1], "seq", "effect")
if not f[1] or tonumber(f[1]) ~= tonumber(ARGV[1]) or f[2] ~= "dispatched" then
  return 0
end
redis.call("HSET", KEYS[1], "effect", ARGV[2])
if ARGV[3] ~= "" then
  redis.call("HSET", KEYS[1], "effect_code", ARGV[3])
end
return 1
