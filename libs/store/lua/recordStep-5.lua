--[[
  Writes one step record of a run and appends its event, in one step: the step and its
  `step.started` / `step.ended` event are never apart. A new step id goes to the end of the run's
  step order, and its place there is its `seq`; a step written again keeps its `seq` and its first
  `started_at_ms`. An ended step is final: a later write of it changes nothing (a call replayed by
  a resumed execution keeps the record its first execution wrote, screenshot and duration included).

  Each step says so once: `step.started` when it is first written, `step.ended` when it ends, and
  `step.resumed` when a later execution runs it again (a call let through by its approval). The
  mark of a call parked on its approval says nothing (`approval.requested` says it).

  Written by the run's owner while it runs (a worker that lost the run writes nothing), except the
  mark of a call parked on its approval: the park has cleared the owner, so that write is let in
  only while the run is `parked` on that very approval, still pending, of that invocation.

  Input:
    KEYS[1] the run's record      ({run:ID}:run)
    KEYS[2] the run's event stream ({run:ID}:events)
    KEYS[3] the run's steps       ({run:ID}:steps), step id → JSON
    KEYS[4] the run's step order  ({run:ID}:step-order), step ids as they started
    KEYS[5] the run's approvals   ({run:ID}:approvals), read for the parked mark only

    ARGV[1] the owner token       ARGV[2] step id
    ARGV[3] status: started | waiting_approval | ended
    ARGV[4] started at (epoch ms), used when the step is new
    ARGV[5] the rest of the record (JSON object or packed, without seq, started_at_ms and status)
    ARGV[6] 1: write only a step not yet recorded
    ARGV[7] approval id, ARGV[8] invocation id (the parked mark's fence; '' otherwise)
    ARGV[9] the event's data (flat JSON object: step id, tool, outcome code, screenshot)
    ARGV[10] now (epoch ms)

  Output: {'ok', seq} | {'unchanged', seq} | {'not_found' | 'wrong_status' | 'not_owner', status}

  A stored record is a line `<seq> <started_at_ms> <status>` and then the rest as the caller sent
  it (JSON, or packed by packed-json.ts, binary): this script reads the three back with
  an anchored match and never decodes the rest (cjson would turn `[]` into `{}`).
]]
--- @include "includes/emit.lua"
--- @include "includes/owner-fence.lua"

local status = ARGV[3]
if status == "waiting_approval" then
  local runStatus = redis.call("HGET", KEYS[1], "status")
  if not runStatus then return {"not_found", ""} end
  if runStatus ~= "parked" then return {"wrong_status", runStatus} end
  local approval = redis.call("HGET", KEYS[5], ARGV[7])
  if not approval then return {"wrong_status", runStatus} end
  local decoded = cjson.decode(approval)
  if decoded.status ~= "pending" or decoded.invocation_id ~= ARGV[8] then
    return {"wrong_status", runStatus}
  end
else
  local f, refused = fenceRunningOwner()
  if refused then return {refused[1], refused[2]} end
end

local stored = redis.call("HGET", KEYS[3], ARGV[2])
local seq, startedAt
local event = "step.started"
if status == "ended" then event = "step.ended" end
if stored then
  local storedSeq, storedStart, storedStatus = string.match(stored, '^(%d+) (%d+) ([a-z_]+)\n')
  if not storedSeq then
    -- A record stored whole as JSON, earlier packed them.
    storedSeq, storedStart, storedStatus =
      string.match(stored, '^{"seq":(%d+),"started_at_ms":(%d+),"status":"([a-z_]+)"')
  end
  if storedStatus == "ended" or ARGV[6] == "1" then return {"unchanged", tonumber(storedSeq)} end
  seq, startedAt = storedSeq, storedStart
  if status == "waiting_approval" then event = nil
  elseif status == "started" then event = "step.resumed" end
else
  seq = tostring(redis.call("RPUSH", KEYS[4], ARGV[2]))
  startedAt = ARGV[4]
end

redis.call("HSET", KEYS[3], ARGV[2], seq .. " " .. startedAt .. " " .. status .. "\n" .. ARGV[5])
if event then emit(event, tonumber(ARGV[10]), cjson.decode(ARGV[9])) end
return {"ok", tonumber(seq)}
