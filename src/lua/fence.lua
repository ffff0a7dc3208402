-- fence.lua: quorum mode's second round (see redlock.c): raise the fence of
-- a lock we hold to at least the highest value the quorum gave, and the
-- slot's fence floor (P) with it, so that this server's next fence in the
-- slot is above it whatever its clock says (lib.lua, Fences).
-- KEYS K, P, Q, W, H (lib.lua: H for a robust mutex's marker, which keeps
-- the holder's fence); ARGV[1] token, ARGV[2] fence.
-- Returns 1 (the fence is at least ARGV[2] now), 0 (the lock is not ours).
local raise = tonumber(ARGV[2])
local cur = redis.call('GET', K)
if not cur or string.sub(cur, 1, 32) ~= ARGV[1] then
  return 0
end
local token, q, c, fence, holder = parse(cur)
local floor = read_floor()
if fence < raise then
  redis.call('SET', K, lock_value(token, q, c, raise, holder), 'KEEPTTL')
  raise_marker(token, raise)
end
if floor < raise then
  redis.call('SET', P, string.format('%.0f', raise))
end
return 1
