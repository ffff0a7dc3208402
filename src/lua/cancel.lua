-- cancel.lua: a queued waiter gives up (deadline, error).
-- KEYS K, M, Q, W (see lib.lua); ARGV[1] token
-- Returns {1, fence, dead} if the lock was granted to it meanwhile (it is
-- the caller's now), else {0, 0, 0} with the queue entry removed.
local K, M, Q, W = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token = ARGV[1]
if redis.call('GET', K) == token then
  local meta = redis.call('HMGET', M, 'fence', 'dead')
  return {1, tonumber(meta[1] or 0), tonumber(meta[2] or 0)}
end
redis.call('LREM', Q, 0, token)
redis.call('HDEL', W, token)
return {0, 0, 0}
