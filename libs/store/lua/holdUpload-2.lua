--[[
  A run's input lists an upload: the upload is the tenant's and still kept, and from now on it
  does not expire while the run is named among its holders (the artifact sweep lets go of runs
  that are gone, and the record then expires 7 days after it was made, or at once past that).

  Input:
    KEYS[1] the upload's record    ({fil:ID}:file)
    KEYS[2] the upload's holders   ({fil:ID}:runs): run id -> when it was listed (ms)

    ARGV[1] the tenant submitting the run
    ARGV[2] the run id
    ARGV[3] now (ms)

  Output:
    'ok' | 'not_found' (no such upload, it expired, or it is another tenant's)
]]
if redis.call("HGET", KEYS[1], "tenant") ~= ARGV[1] then return "not_found" end
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[2])
redis.call("PERSIST", KEYS[1])
redis.call("PERSIST", KEYS[2])
return "ok"
