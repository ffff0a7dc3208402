-- renew.lua: extend a batch of leases, each only if it is still ours.
-- KEYS[i] a lock key, or a share set (shares.lua); ARGV[2i-1] its token,
-- ARGV[2i] the new lease in ms.
-- Returns one integer per key: 1 extended, 2 extended and waited for (a
-- caching holder gives it back: see cache.c), 0 lost (gone or someone
-- else's).
-- A lock key's token is the first 32 bytes of its value (lib.lua).  A key
-- that is not a string is a share set: the token's share in it is renewed
-- (shares.lua).  Telling them apart by the GET's answer costs a lock key
-- nothing.
-- @use shares
local out = {}
for i, key in ipairs(KEYS) do
  local token = ARGV[2 * i - 1]
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    out[i] = share_renew(key, token, tonumber(ARGV[2 * i]))
  elseif v and string.sub(v, 1, 32) == token then
    redis.call('PEXPIRE', key, ARGV[2 * i])
    out[i] = string.sub(v, 33, 33) == 'q' and 2 or 1
  else
    out[i] = 0
  end
end
return out
