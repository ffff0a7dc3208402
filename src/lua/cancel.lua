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
-- Only a waiter whose entry is still there is looked for, and only its
-- first place: queue_put pushes a token with a new entry alone, and a copy
-- left behind (its entry gone) is popped at the head like any waiter that
-- left (lib.lua, queue_first).  So LREM stops where it finds the waiter: a
-- waiter giving up after a long wait is near the head, and costs that
-- walk, not the whole queue's.
if redis.call('HDEL', W, token) == 1 then
  redis.call('LREM', Q, 1, token)
end
redis.call('DEL', G)
return {0, 0, 0}
