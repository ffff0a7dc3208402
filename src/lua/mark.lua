-- mark.lua: a caching holder tells whether one of its threads is in the
-- lock ('k') or none has been for a while ('i'), for netmutex_status; the
-- process keeps the lease either way (cache.c).
-- KEYS K (lib.lua); ARGV[1] token, ARGV[2] 'i' or 'k'.
-- Returns 1 if the lock is ours and cached and says so now, else 0.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 32) ~= ARGV[1] then
  return 0
end
local c = string.sub(v, 34, 34)
if c ~= 'k' and c ~= 'i' then
  return 0
end
if c ~= ARGV[2] then
  redis.call('SET', KEYS[1], string.sub(v, 1, 33) .. ARGV[2] .. string.sub(v, 35), 'KEEPTTL')
end
return 1
