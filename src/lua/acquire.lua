-- acquire.lua: take a netmutex if it is free, else (optionally) queue.
-- KEYS K (see lib.lua; the script derives the rest)
-- ARGV[1] token, ARGV[2] lease in ms, ARGV[3] queue entry lifetime in ms
-- (0: do not queue; trylock), ARGV[4] mode: letters 'w' (the caller is
-- queued already), 'r' (robust mutex), 'f' (quorum mode: fence floor), or
-- '' for none, ARGV[5] holder description "host:pid:tid".
-- Returns {1, fence, previous_holder_died, held, released} when the lock is
-- ours (held and released: the robust marker as found, which quorum mode
-- uses to tell a holder that died from one whose release missed this
-- server), {0, pttl, 0} when someone else holds it (pttl -1: the key never
-- expires), or {-1, 0, 0} when the mutex was left ENOTRECOVERABLE.
local token, lease, mode = ARGV[1], ARGV[2], ARGV[4]
-- The fast path, for a newcomer to a plain mutex: the clock, and SET NX --
-- the same work as the simplest lock there is.  (lib.lua's lock_value,
-- spelled out: the prelude comes after this.)  A newcomer may so overtake
-- queued waiters only while the lock is free, which, with waiters, happens
-- only when a holder or a granted waiter died.
if mode == '' then
  local t = redis.call('TIME')
  local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local v = token .. '-- ' .. string.format('%.0f', fence) .. ' ' .. ARGV[5]
  if redis.call('SET', KEYS[1], v, 'NX', 'PX', lease) then
    return {1, fence, 0}
  end
end
-- @lib
local ttl, holder = tonumber(ARGV[3]), ARGV[5]
local robust, floor = string.find(mode, 'r', 1, true), string.find(mode, 'f', 1, true)

local cur = redis.call('GET', K)
if cur == UNRECOVERABLE then
  return {-1, 0, 0}
end
if cur and string.sub(cur, 1, 32) == token then
  return confirm(cur, token, lease, robust)
end
if not cur then
  -- Free, but waiters queued first (the holder's lease ran out, so nobody
  -- granted it): the head of the queue gets it, not a newcomer.
  local head = nil
  if queue_ready() then
    head = grant_next(floor, token)
  end
  if not head or head == token then
    local fence = next_fence(floor)
    local dead, held, released = 0, '', ''
    if robust then
      dead, held, released = take_marker(token)
    end
    local q = head and redis.call('LLEN', Q) > 0 and 'q' or '-'
    redis.call('SET', K, lock_value(token, q, '-', fence, holder), 'PX', lease)
    return {1, fence, dead, held, released}
  end
  cur = redis.call('GET', K)
end
if ttl > 0 then
  enqueue(cur, token, lease, ttl, holder)
end
return {0, redis.call('PTTL', K), 0}
