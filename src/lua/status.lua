-- status.lua: what this server knows about a netmutex; changes nothing.
-- KEYS K, M, Q (see lib.lua).
-- Returns {token or '', pttl, fence, holder, since, queued, unrecoverable}
-- (holder and since describe the latest holder, who may have released).
local K, M, Q = KEYS[1], KEYS[2], KEYS[3]
local meta = redis.call('HMGET', M, 'fence', 'holder', 'since', 'unrecoverable')
return {redis.call('GET', K) or '', redis.call('PTTL', K), tonumber(meta[1] or 0),
        meta[2] or '', tonumber(meta[3] or 0), redis.call('LLEN', Q),
        meta[4] and 1 or 0}
