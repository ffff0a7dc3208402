-- release.lua: give a netmutex back, only if it is still ours.
-- KEYS[1] lock key, KEYS[2] meta hash; ARGV[1] token
-- Returns 1 released, 0 the key is gone (our lease ran out), -1 the key
-- holds another owner's token (ours ran out and someone else took it).
local cur = redis.call('GET', KEYS[1])
if cur ~= ARGV[1] then
  if cur then
    return -1
  end
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], 'held', 'holder', 'since')
-- Waiters subscribe to the lock key's name as a channel.
redis.call('PUBLISH', KEYS[1], 'released')
return 1
