-- renew.lua: extend a batch of leases, each only if it is still ours.
-- KEYS[i] lock key; ARGV[2i-1] its token, ARGV[2i] the new lease in ms.
-- Returns one integer per key: 1 extended, 0 lost (gone or someone else's).
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[2 * i - 1] then
    redis.call('PEXPIRE', key, ARGV[2 * i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
