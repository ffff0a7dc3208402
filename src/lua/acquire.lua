-- acquire.lua: take a netmutex if it is free.
-- KEYS[1] lock key, KEYS[2] meta hash
-- ARGV[1] token, ARGV[2] lease in ms, ARGV[3] holder description
-- Returns {1, fence, previous_holder_died} when the lock is ours,
-- {0, pttl, 0} when someone else holds it (pttl -1: the key never expires),
-- or {-1, 0, 0} when the mutex was left ENOTRECOVERABLE.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  -- Our own token: an earlier attempt of this very acquisition was applied
  -- but its reply was lost.  Succeed again instead of waiting for ourselves.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local meta = redis.call('HMGET', KEYS[2], 'fence', 'dead')
  return {1, tonumber(meta[1] or 0), tonumber(meta[2] or 0)}
end
if cur then
  return {0, redis.call('PTTL', KEYS[1]), 0}
end
if redis.call('HEXISTS', KEYS[2], 'unrecoverable') == 1 then
  return {-1, 0, 0}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
-- The fence only ever grows: it is never reset by a release or an expiry.
local fence = redis.call('HINCRBY', KEYS[2], 'fence', 1)
-- 'held' survives only if the previous holder never released: its lease
-- ran out instead, so it died or lost touch while holding the lock.
local dead = 0
if redis.call('HEXISTS', KEYS[2], 'held') == 1 then
  dead = 1
end
local now = redis.call('TIME')
redis.call('HSET', KEYS[2], 'held', ARGV[1], 'holder', ARGV[3],
           'since', now[1] * 1000 + math.floor(now[2] / 1000), 'dead', dead)
return {1, fence, dead}
