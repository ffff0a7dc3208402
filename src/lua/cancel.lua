-- cancel.lua: a queued waiter gives up (deadline, error, exit).
-- KEYS K, P, Q, W, H, G (lib.lua); ARGV[1] token, ARGV[2] lease in ms, ARGV[3] mode
-- (acquire.lua's letters; 'r' and 'k' count here).
-- Returns acquire's {1, fence, dead, held, released, waited} if the lock was granted
-- to it meanwhile: this request confirms the grant (see lib.lua), so it is
-- the caller's now, for ARGV[2] ms from this request on.  Else {0, 0, 0},
-- the queue entry and any grant list gone.
local token = ARGV[1]
local cur = redis.call('GET', K)
if cur and string.sub(cur, 1, 32) == token then
  return confirm(cur, token, ARGV[2], string.find(ARGV[3], 'r', 1, true),
                 string.find(ARGV[3], 'k', 1, true))
end
redis.call('LLEN', Q)
redis.call('HLEN', W)
redis.call('LREM', Q, 0, token)
redis.call('HDEL', W, token)
redis.call('DEL', G)
return {0, 0, 0}
