-- break.lua: an administrator frees a netmutex whoever holds it, and clears
-- ENOTRECOVERABLE (which is the lock key's value then), the robust marker
-- and the queue.  The slot's fence floor (P) is kept: fences must never go back.
-- KEYS K, P, Q, W, H (lib.lua).  Returns 1 if the lock was held or marked
-- ENOTRECOVERABLE, 0 if there was nothing to free.
local cur = redis.call('GET', K)
-- Asked before the first write (lib.lua).
local cluster = in_cluster()
local held = redis.call('DEL', K)
redis.call('DEL', Q, W, H)
-- Waiters of quorum mode wake on this; queued waiters of one server find
-- the lock free at their next look, within half a second.  A cluster has
-- no quorum waiters, and would broadcast the message to every node.
if not cluster then
  redis.pcall('PUBLISH', K, 'released')
end
-- A caching holder must not lock from its cache again.
if cur and cur ~= UNRECOVERABLE then
  ask_holder(cur, 'b')
end
return math.min(held, 1)
