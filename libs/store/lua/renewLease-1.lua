--[[
  Renews a live lease (ADR-0127 d5): at most one step past now, never past the lifetime cap after
  acquire, never shorter than it is. An expired lease is not renewed: it starts closing, unsealed.

  Input:
    KEYS[1] the lease's record

    ARGV[1] requested expiry (epoch ms)
    ARGV[2] now (epoch ms)
    ARGV[3] step cap (ms)   ARGV[4] lifetime cap (ms)

  Output:
    {'renewed', expires_at}
    {'lease_expired', state}   'close' in state: the caller must close it unsealed now
    {'not_found'}
]]
--- @include "includes/renew-lease.lua"

return renewLeaseRecord(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
