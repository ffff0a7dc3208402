-- grant.lua: push wake-up hints, each to a list a waiter blocks on with
-- BLPOP: the grant to the queued waiter a release or an acquire reserved
-- the lock for (lib.lua, Grants), or the wake-up of condition waiters a
-- signal chose (cond.lua 'r').  The waiter trusts none of it: it confirms
-- with a request of its own.
-- KEYS the lists (one slot); ARGV[i] how long KEYS[i] lives, in ms (the
-- grant's claim, the waiter's lease: one that died never pops it), or
-- ARGV[1] for every list when it is the only one; negative, -ms, for a
-- deputy's wake (lib.lua, Waiting), which pushes "d<claim>" instead of
-- "1", the claim a fourth of ms.
-- Returns how many lists it pushed to.
-- @nolib
for i, key in ipairs(KEYS) do
  local ms = tonumber(ARGV[i] or ARGV[1])
  if ms < 0 then
    redis.call('RPUSH', key, 'd' .. math.floor(-ms / 4))
    ms = -ms
  else
    redis.call('RPUSH', key, '1')
  end
  redis.call('PEXPIRE', key, ms)
end
return #KEYS
