-- add.lua: adds a member to a list (RPUSH) or a set (SADD) and sets the
-- key's expiry, in one step.  Two requests would leave a key that never
-- expires behind a process killed, or a connection lost, between them:
-- the answer a caching holder gives a trylock on the asker's grant list
-- (lease.c), a read-write lock's waiting holders for the deadlock
-- detector (waitfor.c).
-- KEYS[1] the key; ARGV[1] 'l' a list or 's' a set, ARGV[2] the member,
-- ARGV[3] the key's lifetime in ms.
-- Returns 1.
-- @nolib
local ttl = tonumber(ARGV[3])
if (ARGV[1] ~= 'l' and ARGV[1] ~= 's') or not ARGV[2] or not ttl or ttl < 1 then
  return redis.error_reply('ERR add.lua: bad arguments')
end
redis.call(ARGV[1] == 'l' and 'RPUSH' or 'SADD', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
