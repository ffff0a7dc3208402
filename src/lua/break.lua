-- break.lua: an administrator frees a netmutex whoever holds it, and clears
-- ENOTRECOVERABLE and the queue.  The fence is kept: it must never go back.
-- KEYS K, M, Q, W (see lib.lua).  Returns 1 if the lock was held or
-- marked ENOTRECOVERABLE, 0 if there was nothing to free.
local K, M, Q, W = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
-- Read first: a meta key of the wrong type fails here, before any write.
local marked = redis.call('HEXISTS', M, 'unrecoverable')
local held = redis.call('DEL', K) + marked
redis.call('DEL', Q, W)
redis.call('HSET', M, 'held', '')
redis.call('HDEL', M, 'holder', 'since', 'dead', 'unrecoverable')
-- Queued waiters wake, try again and queue anew.
redis.pcall('PUBLISH', K, 'released')
return math.min(held, 1)
