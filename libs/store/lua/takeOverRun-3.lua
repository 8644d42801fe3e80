--[[
  A person takes a run's page over, or lets go of a takeover that could not start (`person_control`;
  apart from the transition table's `take_over`, a worker claiming a stalled run). No status
  changes here: a parked run stays parked on its `person` approval, now held; a running or queued
  run gets a takeover request its loop obeys at its next safe point (it parks on a held `person`
  approval there). One person holds a page at a time.

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    KEYS[3] the run's approvals     ({run:ID}:approvals)

    ARGV[1] 'take' or 'release'
    ARGV[2] the tenant asking   ARGV[3] the principal asking   ARGV[4] the holder (`principal:<id>`)
    ARGV[5] now (epoch ms)      ARGV[6] until (epoch ms): when the takeover ends by itself
    ARGV[7] a new approval id, used when a parked run has no pending `person` approval (it waits
            on an action's): the takeover is written as its own `person` approval
    ARGV[8] the reason such a new approval shows
    ARGV[9] the page's URL as the person is given it ('' when unknown)
    With 'release', ARGV[7] names the approval the failed takeover wrote ('' for none): it is removed.

  Output: { code, detail, values }
    {'held', approval id, {since_ms, until_ms, created ('1' when ARGV[7] was written),
      fresh ('1' for a new hold, '0' for the same holder's renewal)}}
    {'pausing', '', {}}                       a running or queued run will park at its safe point
    {'released', approval id or '', {}}
    {'not_found', '', {}}                     no such run in this tenant
    {'not_principal', '', {}}                 another principal's run: it may be watched, not taken over; checked after person_in_control
    {'wrong_status', status, {}}              ended, or waiting for a child or the user (page released)
    {'person_in_control', holder, {}}         another person holds the page (or asked to)
]]
--- @include "includes/emit.lua"

local f = redis.call("HMGET", KEYS[1], "status", "tenant", "principal", "person_request", "id")
if not f[1] or f[2] ~= ARGV[2] then return {"not_found", "", {}} end
local status = f[1]
local holder = ARGV[4]
local now = tonumber(ARGV[5])

-- The pending `person` approval, if the run has one, and the holder of its page while it holds it.
local pendingId, pending
local all = redis.call("HGETALL", KEYS[3])
for i = 1, #all, 2 do
  local approval = cjson.decode(all[i + 1])
  if approval.status == "pending" and approval.kind == "person" then
    pendingId, pending = all[i], approval
  end
end
local function heldBy(approval)
  local person = approval and approval.person
  if type(person) ~= "table" or type(person.holder) ~= "string" then return nil end
  if tonumber(person.until_ms or 0) <= now then return nil end
  return person.holder
end
local request = f[4] and f[4] ~= "" and cjson.decode(f[4]) or nil

local current = heldBy(pending) or (request and request.holder)
-- One person at a time: whoever else asks while a person holds the page hears so (they may watch).
if ARGV[1] == "take" and current and current ~= holder then return {"person_in_control", current, {}} end
if f[3] ~= ARGV[3] then return {"not_principal", "", {}} end

if ARGV[1] == "release" then
  if request and request.holder == holder then redis.call("HDEL", KEYS[1], "person_request") end
  if ARGV[7] ~= "" and pendingId == ARGV[7] and heldBy(pending) == holder then
    redis.call("HDEL", KEYS[3], ARGV[7])
    return {"released", ARGV[7], {}}
  end
  if pending and heldBy(pending) == holder then
    pending.person.holder = cjson.null
    pending.person.since_ms = cjson.null
    pending.person.until_ms = cjson.null
    redis.call("HSET", KEYS[3], pendingId, cjson.encode(pending))
    return {"released", pendingId, {}}
  end
  return {"released", "", {}}
end

if status == "succeeded" or status == "failed" or status == "cancelled"
  or status == "waiting_child" or status == "waiting_user" then
  return {"wrong_status", status, {}}
end
if status == "running" or status == "queued" then
  redis.call("HSET", KEYS[1], "person_request", cjson.encode({holder = holder, at = now}))
  return {"pausing", "", {}}
end

-- Parked: the run's execution has ended and its lease is kept (ADR-0127 d4).
local created = "0"
if not pending then
  pendingId = ARGV[7]
  created = "1"
  pending = {id = pendingId, run_id = f[5], tenant = f[2], invocation_id = f[5] .. "-person-" .. pendingId,
    tool = "person.takeover", arguments = "null", status = "pending", created_at = now, card = "null",
    kind = "person", person = {reason = ARGV[8], expires_at_ms = tonumber(ARGV[6])}}
end
-- A renewal is the same holder's, whenever it comes (one in the take's own millisecond too).
local fresh = heldBy(pending) ~= holder
local since = (not fresh and tonumber(pending.person.since_ms)) or now
pending.person.holder = holder
pending.person.since_ms = since
pending.person.until_ms = tonumber(ARGV[6])
if fresh then pending.person.start_url = ARGV[9] ~= "" and ARGV[9] or cjson.null end
redis.call("HSET", KEYS[3], pendingId, cjson.encode(pending))
if fresh then
  emit("person.taken_over", now, {approval_id = pendingId, holder = holder, since_ms = since,
    until_ms = tonumber(ARGV[6])})
end
return {"held", pendingId, {since, tonumber(ARGV[6]), created, fresh and "1" or "0"}}
