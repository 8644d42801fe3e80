--[[
  Notes the contract version of the browser tools a running run's execution offers its model, by
  its owner only (a run records the version its tools had). A later execution that
  offers another version notes that one: the field holds the latest.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)

    ARGV[1] the owner token
    ARGV[2] the contract version (`1.3.0`)
    ARGV[3] now (ms)

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', '', fields}
    {'not_found' | 'wrong_status' | 'not_owner', status, {}}
]]
--- @include "includes/owner-fence.lua"
local _, refused = fenceRunningOwner()
if refused then return refused end
redis.call("HSET", KEYS[1], "browser_tools", ARGV[2], "updated_at", ARGV[3])
return {"ok", "", redis.call("HGETALL", KEYS[1])}
