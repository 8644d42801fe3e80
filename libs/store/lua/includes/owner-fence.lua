--[[
  Included (`--- @include "includes/owner-fence.lua"`) by every script that changes a running run
  for its owner only; the loader in scripts.ts pastes it in place. Those scripts all take
    KEYS[1] the run's record        ({run:ID}:run)
    ARGV[1] the owner token
  and answer a refusal as {code, status, {}}, or in their own shape from the fields it returns.
]]

-- The record's status, owner and then the fields named; with them, the refusal when there is no
-- such run, it is not running, or ARGV[1] is not its owner's token (owner fencing), else nil.
local function fenceRunningOwner(...)
  local f = redis.call("HMGET", KEYS[1], "status", "owner", ...)
  if not f[1] then return f, {"not_found", "", {}} end
  if f[1] ~= "running" then return f, {"wrong_status", f[1], {}} end
  if f[2] ~= ARGV[1] then return f, {"not_owner", f[1], {}} end
  return f, nil
end
