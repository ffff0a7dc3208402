-- release.lua: give a netmutex back, only if it is still ours, handing it
-- to the first queued waiter if there is one.
-- KEYS K, M, Q, W (see lib.lua); ARGV[1] token, ARGV[2] '1' when a robust
-- mutex is unlocked after EOWNERDEAD without netmutex_consistent(): then it
-- stays ENOTRECOVERABLE for every later locker, as in pthread.  ARGV[3] '1'
-- gives back a grant quorum mode did not keep (no quorum): nobody waits for
-- that, so nobody is woken or handed the lock.
-- Returns 1 released, 2 released already (by an earlier attempt whose reply
-- was lost), 0 the key is gone (our lease ran out), -1 the key holds
-- another owner's token (ours ran out and someone else took it).
local K, M, Q, W = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, unrecoverable, quietly = ARGV[1], ARGV[2] == '1', ARGV[3] == '1'
local cur = redis.call('GET', K)
if cur ~= token then
  if cur then
    return -1
  end
  if redis.call('HGET', M, 'released') == token then
    return 2
  end
  return 0
end
-- Checked before the first write (lib.lua): the queue, and the fence a
-- grant will build on.
local meta = nil
if not quietly and not unrecoverable and queue_ready(Q, W) then
  meta = read_meta(M)
end
-- 'released' is remembered so that a retry after a lost reply knows it
-- was us; an empty 'held' tells the next taker nobody died holding it.
redis.call('HSET', M, 'held', '', 'released', token)
redis.call('DEL', K)
if quietly then
  return 1
end
if unrecoverable then
  redis.call('HSET', M, 'unrecoverable', '1')
elseif meta then
  meta.held = ''
  if grant_next(K, M, Q, W, meta, nil) then
    return 1
  end
end
-- Nobody queued: wake whoever listens (pcall: an ACL user without channel
-- rights must still be able to release; its waiters poll instead).
redis.pcall('PUBLISH', K, 'released')
return 1
