--[[
  Included (`--- @include "includes/retain-run.lua"`) by every script that can end a run, and by
  the retry that takes a failed run back (retention). Those scripts take, after their
  own keys, every other key the run owns (RunKeys.runOwned: record, events, ledger, transcripts of
  every attempt, approvals, grants, loop state, steps): all in the run's slot `{run:ID}`, all
  declared, so each script still touches one Redis Cluster slot. The end and its expiry are one
  step: no ended run keeps a key without an end in sight, and no live run has a key that expires.
  Expiring a key that does not exist yet does nothing; what the run owner writes later is fenced.
]]

-- The run's keys expire `retentionMs` after its end.
local function retainRunKeys(retentionMs)
  for i = 1, #KEYS do redis.call("PEXPIRE", KEYS[i], retentionMs) end
end

-- A run that leaves its end (an explicit retry) keeps its keys again.
local function keepRunKeys()
  for i = 1, #KEYS do redis.call("PERSIST", KEYS[i]) end
end
