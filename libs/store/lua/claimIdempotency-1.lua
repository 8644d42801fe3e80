--[[
  The exact idempotency rule (DESIGN §5): the first request with a key claims it; the same key
  with the same body later replays the stored answer; with a different body it is a conflict.

  Input:
    KEYS[1] the idempotency record

    ARGV[1] hash of the request (route and body)
    ARGV[2] time to live (ms)

  Output:
    {'claimed'}
    {'replay', status, body}
    {'pending'}                 the first request is still being answered
    {'conflict'}
]]
--- @include "includes/claim-idempotency.lua"

return claimIdempotencyRecord(KEYS[1], ARGV[1], ARGV[2])
