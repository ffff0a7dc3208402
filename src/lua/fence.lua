-- fence.lua: quorum mode's second round (see redlock.c): raise the fence of
-- a lock we hold to at least the highest value the quorum gave, and keep
-- that value as this server's fence floor (F) until its clock has passed it.
-- KEYS K, Q, W, H, F (lib.lua); ARGV[1] token, ARGV[2] fence.
-- Returns 1 (the fence is at least ARGV[2] now), 0 (the lock is not ours).
local raise = tonumber(ARGV[2])
local cur = redis.call('GET', K)
if not cur or string.sub(cur, 1, 32) ~= ARGV[1] then
  return 0
end
local token, q, c, fence, holder = parse(cur)
local floor = redis.call('GET', F)
if floor and not tonumber(floor) then
  error('netmutex: ' .. F .. ' is not a number')
end
if fence < raise then
  redis.call('SET', K, lock_value(token, q, c, raise, holder), 'KEEPTTL')
end
local ahead_ms = math.ceil((raise - now_us()) / 1000)
if ahead_ms > 0 and (tonumber(floor) or 0) < raise then
  redis.call('SET', F, string.format('%.0f', raise), 'PX', ahead_ms + 1)
end
return 1
