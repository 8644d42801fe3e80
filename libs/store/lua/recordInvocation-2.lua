--[[
  Records a tool call's state in the run's ledger (DESIGN §3), by the run's owner only. The ledger
  only moves forward: started -> dispatched -> completed | outcome_unknown (and started ->
  completed for a call with no effect). Recording the state an entry already has changes nothing;
  a `dispatched` entry is never set back to `started`, so a resumed run sees that its effect may
  have happened and never sends it again. A call recorded `started` for the first time counts one
  tool call in the run's usage, in the same step.

  Input:
    KEYS[1] the run's record   ({run:ID}:run)
    KEYS[2] the run's ledger   ({run:ID}:ledger), one field per invocation: a<attempt>:<step>:<index>

    ARGV[1] the owner token
    ARGV[2] step   ARGV[3] index (within the step)
    ARGV[4] the state to record
    ARGV[5] the tool's name (kept from the first record)
    ARGV[6] the result (JSON text; '' for none)
    ARGV[7] now (epoch ms)

  Output: { code, detail, the entry (JSON), its field }
    {'recorded', state, entry, field}
    {'unchanged', state, entry, field}     it already had that state
    {'refused', current state, entry, field}  the ledger never moves back

  An entry stores its tool, state, result and times; its attempt, step, index and invocation id
  are its field's and run's (redis_bytes_per_run), and the reader puts them back.
    {'not_found' | 'wrong_status' | 'not_owner', run status, ''}
]]
local f = redis.call("HMGET", KEYS[1], "status", "owner", "attempt")
if not f[1] then return {"not_found", "", ""} end
if f[1] ~= "running" then return {"wrong_status", f[1], ""} end
if f[2] ~= ARGV[1] then return {"not_owner", f[1], ""} end

local forward = {
  started = {dispatched = true, completed = true},
  dispatched = {completed = true, outcome_unknown = true},
  completed = {},
  outcome_unknown = {},
}
local state = ARGV[4]
if not forward[state] then return redis.error_reply("recordInvocation: unknown state " .. state) end

--[[
  An entry is a line, `<state>,<started_at>,<ms from start to its last update>,<tool>`, then `\n`
  and the result's JSON
  when it has one (a successful call's entry fits in 64 bytes, so the ledger stays in
  Redis's compact hash encoding). An entry stored as JSON before reads too.
]]
local function decodeEntry(raw)
  if string.sub(raw, 1, 1) == "{" then
    local e = cjson.decode(raw)
    return {state = e.state, started = e.started_at, updated = e.updated_at, tool = e.tool,
      result = e.result or ""}
  end
  local state, started, after, rest = string.match(raw, "^([%a_]+),(%d+),(%d+),(.*)$")
  local tool, result = rest, ""
  local newline = string.find(rest, "\n", 1, true)
  if newline then
    tool = string.sub(rest, 1, newline - 1)
    result = string.sub(rest, newline + 1)
  end
  return {state = state, started = tonumber(started), updated = tonumber(started) + tonumber(after),
    tool = tool, result = result}
end

local function encodeEntry(e)
  local line = e.state .. "," .. string.format("%.0f", e.started) .. "," ..
    string.format("%.0f", e.updated - e.started) .. "," .. e.tool
  if e.result ~= "" then line = line .. "\n" .. e.result end
  return line
end

local field = "a" .. f[3] .. ":" .. ARGV[2] .. ":" .. ARGV[3]
local now = tonumber(ARGV[7])
local raw = redis.call("HGET", KEYS[2], field)
if not raw then
  if state ~= "started" then return {"refused", "absent", ""} end
  local entry = encodeEntry({tool = ARGV[5], state = state, result = ARGV[6], started = now, updated = now})
  redis.call("HSET", KEYS[2], field, entry)
  redis.call("HINCRBY", KEYS[1], "tool_calls", 1)
  return {"recorded", state, entry, field}
end

local entry = decodeEntry(raw)
if entry.state == state then return {"unchanged", state, raw, field} end
if not forward[entry.state][state] then return {"refused", entry.state, raw, field} end
entry.state = state
entry.updated = now
if ARGV[6] ~= "" then entry.result = ARGV[6] end
local encoded = encodeEntry(entry)
redis.call("HSET", KEYS[2], field, encoded)
return {"recorded", state, encoded, field}
