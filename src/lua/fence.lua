-- fence.lua: quorum mode's second round (see quorum.c): raise the fence
-- counter of a lock we hold to at least the highest value the quorum gave.
-- KEYS K, M (see lib.lua); ARGV[1] token, ARGV[2] fence.
-- Returns 1 (the counter is at least ARGV[2] now), 0 (the lock is not ours).
local K, M = KEYS[1], KEYS[2]
if redis.call('GET', K) ~= ARGV[1] then
  return 0
end
if read_meta(M).fence < tonumber(ARGV[2]) then
  redis.call('HSET', M, 'fence', ARGV[2])
end
return 1
