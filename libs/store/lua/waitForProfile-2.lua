--[[
  A claimed run whose profile another run still needs waits its turn:
  `running -> queued` by its owner, `waiting_for` set to 'profile', owner cleared. The execution
  ends here without a new job: the run that passes the turn wakes this one (`wakeRun`). A run whose
  cancel was requested is refused, so its execution goes on and ends it `cancelled` at once.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)

    ARGV[1] the owner token
    ARGV[2] now (epoch ms)
    ARGV[3] the run that holds the profile's turn
    ARGV[4] how many runs are ahead of this one

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', 'queued', fields}
    {'not_found' | 'wrong_status' | 'not_owner', status, {}}
    {'cancel_requested', 'running', {}}
]]
--- @include "includes/emit.lua"
--- @include "includes/owner-fence.lua"

local f, refused = fenceRunningOwner("attempt", "execution", "cancel_requested")
if refused then return refused end
if f[5] == "1" then return {"cancel_requested", "running", {}} end
local now = tonumber(ARGV[2])
redis.call("HSET", KEYS[1], "status", "queued", "owner", "", "updated_at", now, "waiting_for", "profile")
emit("run.waiting", now, {
  status = "queued", previous = "running", waiting_for = "profile", holder_run_id = ARGV[3],
  ahead = tonumber(ARGV[4]), attempt = tonumber(f[3]), execution = tonumber(f[4]),
})
return {"ok", "queued", redis.call("HGETALL", KEYS[1])}
