-- break.lua: an administrator frees a netmutex whoever holds it, and clears
-- ENOTRECOVERABLE.  The fence is kept: it must never go back.
-- KEYS[1] lock key, KEYS[2] meta hash.  Returns 1 if the lock was held.
local held = redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], 'held', 'holder', 'since', 'dead', 'unrecoverable')
redis.pcall('PUBLISH', KEYS[1], 'released')
return held
