--[[
  Moves a run `queued -> running` for the worker that claimed its job (DESIGN §4.2), making that
  worker's token the owner. A claim for another execution (a stale job) or for a run running
  under another owner does nothing, unless the caller takes over a stalled job of the current
  execution (BullMQ handed it on because its worker died: §4.6, same attempt).

  Input:
    KEYS[1] the run's record        ({run:ID}:run)
    KEYS[2] the run's event stream  ({run:ID}:events)
    KEYS[3] the run's transcript    ({run:ID}:transcript), only counted

    ARGV[1] the job's execution number
    ARGV[2] the claiming worker's owner token
    ARGV[3] '1' to take over a run of this execution running under another owner
    ARGV[4] now (epoch ms)
    ARGV[5] the claiming run worker's id, or '' (the run's lease then stays where it is kept)

  Output: { code, detail, fields of the run record (empty when refused)[, queued at, entries, upkeep] }
    {'ok', 'claimed', fields, queued_at, entries}  queued_at: when the run became queued (epoch ms)
    {'ok', 'already' | 'taken_over', fields, '', entries}
    entries: how many entries the current attempt's transcript has (the new owner skips
    reading an empty one; only the owner writes it, so it cannot fill between this claim and
    that read)
    upkeep: {worker that kept the run's lease before, lease id, `tenant/profile`}, when the run
    has a lease and ARGV[5] names a worker: the run's record now names that worker (`upkeep_by`),
    and the caller moves the lease between the two workers' upkeep indexes (each in its own slot,
    so not here)
    {'not_found', '', {}}
    {'stale_execution', status, {}}
    {'not_owner', 'running', {}}      running under another owner
    {'wrong_status', status, {}}
]]
--- @include "includes/emit.lua"

local f = redis.call("HMGET", KEYS[1], "status", "execution", "owner", "attempt", "updated_at")
if not f[1] then return {"not_found", "", {}} end
if tonumber(f[2]) ~= tonumber(ARGV[1]) then return {"stale_execution", f[1], {}} end
local now = tonumber(ARGV[4])

-- The run's lease is kept up by the worker that runs it now (ADR-0127 d6).
local function takeUpkeep()
  if ARGV[5] == "" then return {} end
  local lease = redis.call("HMGET", KEYS[1], "upkeep_by", "lease_id", "lease_profile")
  if not lease[2] or lease[2] == "" then return {} end
  redis.call("HSET", KEYS[1], "upkeep_by", ARGV[5])
  return {lease[1] or "", lease[2], lease[3] or ""}
end
local data = {status = "running", previous = f[1], attempt = tonumber(f[4]), execution = tonumber(f[2])}

if f[1] == "running" then
  if f[3] == ARGV[2] then
    local upkeep = takeUpkeep()
    return {"ok", "already", redis.call("HGETALL", KEYS[1]), "", redis.call("LLEN", KEYS[3]), upkeep}
  end
  if ARGV[3] ~= "1" then return {"not_owner", "running", {}} end
  redis.call("HSET", KEYS[1], "owner", ARGV[2], "updated_at", now)
  redis.call("HINCRBY", KEYS[1], "takeovers", 1)
  emit("run.resumed", now, data)
  local upkeep = takeUpkeep()
  return {"ok", "taken_over", redis.call("HGETALL", KEYS[1]), "", redis.call("LLEN", KEYS[3]), upkeep}
end
if f[1] ~= "queued" then return {"wrong_status", f[1], {}} end

-- Queue wait: only a move into `queued` writes a queued run's updated_at (submit,
-- requeue, retry, wake, hand-back), so until this claim it holds when the run became queued.
local queuedAt = f[5]
redis.call("HSET", KEYS[1], "status", "running", "owner", ARGV[2], "updated_at", now, "waiting_for", "")
emit("run.claimed", now, data)
local upkeep = takeUpkeep()
return {"ok", "claimed", redis.call("HGETALL", KEYS[1]), queuedAt, redis.call("LLEN", KEYS[3]), upkeep}
