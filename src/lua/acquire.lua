-- acquire.lua: take a netmutex if it is free, else (optionally) queue.
-- KEYS K, P, Q, W, H, G (lib.lua), or K and P alone for the fast path
-- (mode without 'w', 'r' or 'f'): then {3, 0, 0} asks, before any write,
-- for the call again with every key when the fast path did not settle it.
-- ARGV[1] token, ARGV[2] lease in ms, ARGV[3] queue entry lifetime in ms
-- (0: do not queue; trylock), ARGV[4] mode: letters 'w' (the caller is
-- queued already), 'r' (robust mutex), 'f' (quorum mode), 'k'
-- (the caller's process may keep the lock cached after unlock), 't' (a
-- trylock: it queues, for ARGV[3] ms, only to ask a caching holder), or
-- '' for none, ARGV[5] holder description "host:pid:tid".
-- Returns {1, fence, previous_holder_died, held, released, waited} when the
-- lock is ours (held and released: the robust marker as found, which quorum
-- mode uses to tell a holder that died from one whose release missed this
-- server; waited: 1 if others are queued for it already, so a caching
-- holder gives it back at unlock -- the fast path leaves both out), {0, pttl, 0} when someone else holds it (pttl -1: the key never
-- expires), with pairs of a token and ms after them in a Redis Cluster:
-- the waiters to wake (it found the lock free and reserved it for the
-- queued waiter the first pair names; the caller pushes: lib.lua, Grants
-- and Waiting), {2, pttl, 0} when a trylock found a caching holder and asked it
-- to give the lock back (the caller waits on its G for the grant or "0"),
-- or {-1, 0, 0} when the mutex was left ENOTRECOVERABLE.
local token, lease, mode = ARGV[1], ARGV[2], ARGV[4]
-- The fast path, for a newcomer (not queued) to a plain mutex (not robust,
-- not quorum mode): the clock and the slot's fence floor (lib.lua,
-- Fences), SET NX, and the floor moved up --
-- the work of the simplest lock there is, and one key more.  (lib.lua's lock_value,
-- spelled out: the prelude comes after this.)  A newcomer may so overtake
-- queued waiters only while the lock is free, which, with waiters, happens
-- only when a holder or a granted waiter died.
-- The usual mode, '', is told by one comparison: a pattern match costs the
-- server a few per cent of the whole cycle.
local fast, c = mode == '', '-'
if not fast then
  fast = not string.find(mode, '[wrf]')
  c = string.find(mode, 'k', 1, true) and 'k' or '-'
end
if fast then
  local t = redis.call('TIME')
  local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
  -- Not a number: the slow path says so.
  local floor = tonumber(redis.call('GET', KEYS[2]) or 0)
  if floor then
    fence = math.max(fence, floor + 1)
    local f = string.format('%.0f', fence)
    if redis.call('SET', KEYS[1], token .. '-' .. c .. ' ' .. f .. ' ' .. ARGV[5], 'NX', 'PX',
                  lease) then
      redis.call('SET', KEYS[2], f)
      return {1, fence, 0}
    end
  end
end
if #KEYS < 6 then
  return {3, 0, 0}
end
-- @lib
local ttl, holder = tonumber(ARGV[3]), ARGV[5]
local function has(letter)
  return string.find(mode, letter, 1, true) ~= nil
end
local robust, cache, trylock = has('r'), has('k'), has('t')
read_floor()

local cur = redis.call('GET', K)
if cur == UNRECOVERABLE then
  return {-1, 0, 0}
end
if cur and string.sub(cur, 1, 32) == token then
  return confirm(cur, token, lease, robust, cache)
end
-- A grant to push (waiters queued) or a caching holder to ask (held, and
-- we may queue): whether this is a Cluster node is asked before the first
-- write (lib.lua, in_cluster).
if (cur and ttl > 0) or redis.call('LLEN', Q) > 0 then
  in_cluster()
end
if not cur then
  -- Free, but waiters queued first (the holder's lease ran out, so nobody
  -- granted it): the head of the queue gets it, not a newcomer.
  local head, claim = nil, nil
  if queue_ready() then
    head, claim = grant_next(token)
  end
  if not head or head == token then
    local fence = next_fence()
    local dead, held, released = 0, '', ''
    if robust then
      dead, held, released = take_marker(token, fence)
    end
    local q = head and redis.call('LLEN', Q) > 0 and 'q' or '-'
    redis.call('SET', K, lock_value(token, q, cache and 'k' or '-', fence, holder), 'PX', lease)
    return {1, fence, dead, held, released, q == 'q' and 1 or 0}
  end
  cur = redis.call('GET', K)
end
if trylock and not holder_caches(cur) then
  -- A thread holds it, as far as anybody can tell: EBUSY, queue untouched.
  ttl = 0
end
if ttl > 0 then
  enqueue(cur, token, lease, ttl, holder, trylock and 't' or 'w')
end
-- The waiter first in line behind a holder that may keep the lock cached
-- looks again within ASK_AGAIN_MS, its look asking once more: an ask
-- published before the holder's subscription took is lost, and the
-- holder gives the lock back only when asked (or at its renewal).  The
-- waiters behind it look as they would.
local pttl = redis.call('PTTL', K)
if ttl > 0 and not trylock and holder_caches(cur) and
   redis.call('LRANGE', Q, 0, 0)[1] == token then
  pttl = pttl < 0 and ASK_AGAIN_MS or math.min(pttl, ASK_AGAIN_MS)
end
return with_wakes({trylock and ttl > 0 and 2 or 0, pttl, 0})
