-- acquire.lua: take a netmutex if it is free, else (optionally) queue.
-- KEYS K, M, Q, W (see lib.lua)
-- ARGV[1] token, ARGV[2] lease in ms, ARGV[3] holder description,
-- ARGV[4] queue entry lifetime in ms (0: do not queue; trylock),
-- ARGV[5] the caller's wall clock in ms (for 'since', display only)
-- Returns {1, fence, previous_holder_died, held, released} when the lock is
-- ours (held and released: the meta fields as found, which quorum mode uses
-- to tell a holder that died from one whose release missed this server),
-- {0, pttl, 0} when someone else holds it (pttl -1: the key never expires),
-- or {-1, 0, 0} when the mutex was left ENOTRECOVERABLE.
local K, M, Q, W = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, lease, holder, ttl = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local cur = redis.call('GET', K)
if cur == token then
  return confirm(K, M, W, token, lease)
end
if not cur then
  local meta = read_meta(M)
  if meta.unrecoverable then
    return {-1, 0, 0}
  end
  -- Free, but waiters queued first (the holder's lease ran out, so nobody
  -- granted it): the head of the queue gets it, not a newcomer.
  local head = nil
  if queue_ready(Q, W) then
    head = grant_next(K, M, Q, W, meta, token)
  end
  if not head or head == token then
    local fence, dead = take(K, M, meta, token, lease, holder, ARGV[5], true)
    return {1, fence, dead, meta.held or '', meta.released or ''}
  end
end
if ttl > 0 then
  enqueue(Q, W, token, lease, ttl, holder)
end
return {0, redis.call('PTTL', K), 0}
