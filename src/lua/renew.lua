-- renew.lua: extend a batch of leases, each only if it is still ours.
-- KEYS[i] lock key; ARGV[2i-1] its token, ARGV[2i] the new lease in ms.
-- Returns one integer per key: 1 extended, 2 extended and waited for (a
-- caching holder gives it back: see cache.c), 0 lost (gone or someone
-- else's).
-- The token is the first 32 bytes of the lock's value (lib.lua).
local out = {}
for i, key in ipairs(KEYS) do
  local v = redis.call('GET', key)
  if v and string.sub(v, 1, 32) == ARGV[2 * i - 1] then
    redis.call('PEXPIRE', key, ARGV[2 * i])
    out[i] = string.sub(v, 33, 33) == 'q' and 2 or 1
  else
    out[i] = 0
  end
end
return out
