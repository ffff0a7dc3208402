-- cancel.lua: a queued waiter gives up (deadline, error, exit).
-- KEYS K, M, Q, W (see lib.lua); ARGV[1] token, ARGV[2] lease in ms.
-- Returns {1, fence, dead} if the lock was granted to it meanwhile: this
-- request confirms the grant (lib.lua), so it is the caller's now, for
-- ARGV[2] ms from this request on.  Else {0, 0, 0}, the queue entry gone.
local K, M, Q, W = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token = ARGV[1]
if redis.call('GET', K) == token then
  return confirm(K, M, W, token, ARGV[2])
end
redis.call('HLEN', W)
redis.call('LREM', Q, 0, token)
redis.call('HDEL', W, token)
return {0, 0, 0}
