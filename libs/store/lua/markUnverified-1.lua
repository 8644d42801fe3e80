--[[
  Marks a running run's outcome unverified, by its owner only (ADR-0177: an exhausted acquisition
  leaves "an explicit unverified outcome"). The mark stays whatever the run's end; the error kept is
  the latest such call's: its invocation id, stable code and message (never a secret).

  Input:
    KEYS[1] the run's record        ({run:ID}:run)

    ARGV[1] the owner token
    ARGV[2] the error, JSON {invocation_id, code, message}
    ARGV[3] now (ms)

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', '', fields}
    {'not_found' | 'wrong_status' | 'not_owner', status, {}}
]]
--- @include "includes/owner-fence.lua"
local _, refused = fenceRunningOwner()
if refused then return refused end
redis.call("HSET", KEYS[1], "unverified", "1", "unverified_error", ARGV[2], "updated_at", ARGV[3])
return {"ok", "", redis.call("HGETALL", KEYS[1])}
