--[[
  Adds to a running run's usage, by its owner only (DESIGN §7: usage and cost are recorded after
  each model call and tool call). Cost is integer micro-USD.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)

    ARGV[1] the owner token
    ARGV[2] steps   ARGV[3] model calls   ARGV[4] tool calls   ARGV[5] cost (micro-USD)

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', '', fields}
    {'not_found' | 'wrong_status' | 'not_owner', status, {}}
]]
--- @include "includes/owner-fence.lua"
local _, refused = fenceRunningOwner()
if refused then return refused end
redis.call("HINCRBY", KEYS[1], "steps", ARGV[2])
redis.call("HINCRBY", KEYS[1], "model_calls", ARGV[3])
redis.call("HINCRBY", KEYS[1], "tool_calls", ARGV[4])
redis.call("HINCRBY", KEYS[1], "cost_micro_usd", ARGV[5])
return {"ok", "", redis.call("HGETALL", KEYS[1])}
