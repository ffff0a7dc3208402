-- release.lua: give a netmutex back, only if it is still ours.
-- KEYS[1] lock key, KEYS[2] meta hash; ARGV[1] token, ARGV[2] '1' when a
-- robust mutex is unlocked after EOWNERDEAD without netmutex_consistent():
-- then it stays ENOTRECOVERABLE for every later locker, as in pthread.
-- Returns 1 released, 2 released already (by an earlier attempt whose reply
-- was lost), 0 the key is gone (our lease ran out), -1 the key holds
-- another owner's token (ours ran out and someone else took it).
local cur = redis.call('GET', KEYS[1])
if cur ~= ARGV[1] then
  if cur then
    return -1
  end
  if redis.call('HGET', KEYS[2], 'released') == ARGV[1] then
    return 2
  end
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], 'held', 'holder', 'since')
-- Remembered so that a retry after a lost reply knows it was us.
redis.call('HSET', KEYS[2], 'released', ARGV[1])
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[2], 'unrecoverable', '1')
end
-- Waiters subscribe to the lock key's name as a channel.  pcall: an ACL
-- user without channel rights must still be able to release; its waiters
-- fall back to polling, as they cannot subscribe either.
redis.pcall('PUBLISH', KEYS[1], 'released')
return 1
