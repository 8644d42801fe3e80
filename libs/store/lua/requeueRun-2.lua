--[[
  Queues a waiting run to resume: `parked | waiting_child | waiting_user -> queued`, as a new
  execution (a new BullMQ job id, DESIGN §4.4). The attempt is kept.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)

    ARGV[1] now (epoch ms)
    ARGV[2] the status expected ('' for any of the three)
    ARGV[3] detail for the event (a JSON object)
    ARGV[4] the run it must be waiting on ('' for any): a child's end resumes only its own parent

  Output: { code, detail, fields of the run record (empty when refused) }
    {'ok', 'queued', fields}
    {'not_found' | 'wrong_status', status, {}}
]]
--- @include "includes/emit.lua"

local f = redis.call("HMGET", KEYS[1], "status", "attempt", "waiting_on")
if not f[1] then return {"not_found", "", {}} end
local status = f[1]
if status ~= "parked" and status ~= "waiting_child" and status ~= "waiting_user" then
  return {"wrong_status", status, {}}
end
if ARGV[2] ~= "" and ARGV[2] ~= status then return {"wrong_status", status, {}} end
if ARGV[4] ~= "" and ARGV[4] ~= f[3] then return {"wrong_status", status, {}} end

local now = tonumber(ARGV[1])
local execution = redis.call("HINCRBY", KEYS[1], "execution", 1)
redis.call("HSET", KEYS[1], "status", "queued", "owner", "", "updated_at", now, "waiting_on", "")
local data = cjson.decode(ARGV[3])
data.status = "queued"
data.previous = status
data.attempt = tonumber(f[2])
data.execution = execution
emit("run.requeued", now, data)
return {"ok", "queued", redis.call("HGETALL", KEYS[1])}
