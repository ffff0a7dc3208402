-- lib.lua: functions shared by the scripts; embed-lua.sh puts this text in
-- front of every script, so each stays one self-contained EVAL.
--
-- Keys of one mutex (all share the {name} hash tag, so one cluster slot):
--   K  <prefix>{<name>}     the lock: the holder's token, PX = its lease
--   M  <prefix>{<name>}:m   meta hash: fence, held (holder's token, '' once
--                           released), holder, since, dead, released,
--                           unrecoverable
--   Q  <prefix>{<name>}:q   list: tokens of queued waiters, in arrival order
--   W  <prefix>{<name>}:w   hash: token -> "<refreshed_ms>:<lease_ms>:<holder>"
--
-- Redis does not roll a script back: a script that fails after its first
-- write leaves that write behind (a lock key set for a caller who was told
-- the call failed).  So every script reads and checks what it depends on
-- before it writes anything; a key of the wrong type fails the read, and a
-- field this library did not write fails the check.
--
-- A grant to a queued waiter is only a reservation (see take): the waiter
-- learns of it by a message anybody allowed to PUBLISH could forge, so it
-- never believes the message.  It confirms the grant by a request on its own
-- connection (confirm), and a waiter that died or stalls never confirms, so
-- its turn passes after GRANT_CLAIM_MS instead of after a whole lease.  A
-- live waiter refreshes its queue entry every 250 ms (lease.c); one whose
-- entry is older than WAITER_STALE_MS has missed two refreshes, so it died
-- or stalls, and is passed over: waiters killed one after another cost the
-- next live one a claim each at most for those that died within the last
-- half second.  The claim is short because a live waiter confirms within a
-- round trip; one that confirms too late finds the lock free or queues
-- again, which costs it its turn, never anybody's safety.

local GRANT_CLAIM_MS = 150
local WAITER_STALE_MS = 500

local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- Whether M's 'held' field names a holder (a release empties it).
local function was_held(held)
  return held and held ~= ''
end

-- M's fields, checked: {fence, held, released, unrecoverable}.
local function read_meta(M)
  local m = redis.call('HMGET', M, 'fence', 'held', 'released', 'unrecoverable')
  local fence = tonumber(m[1] or 0)
  if not fence then
    error('netmutex: the fence of ' .. M .. ' is not a number')
  end
  return {fence = fence, held = m[2], released = m[3], unrecoverable = m[4]}
end

-- The next fencing token: the server's clock in microseconds, or one more
-- than the last token if that is not less.  A counter alone would start
-- again at 1 on a server restarted without its data; the clock goes on.
local function next_fence(last)
  local t = redis.call('TIME')
  return math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), last + 1)
end

-- Makes TOKEN the holder of the free lock K for PX ms.  CONFIRMED: the
-- caller's own request takes it (it holds it now); otherwise it is a grant
-- to a queued waiter, and 'held' keeps naming the previous holder who did
-- not release (if any) until the waiter confirms: a waiter that never does
-- holds nothing, and the next taker must still learn that a holder died.
-- Returns fence, dead.
local function take(K, M, meta, token, px, holder, since, confirmed)
  local fence = next_fence(meta.fence)
  local dead = 0
  if was_held(meta.held) then
    dead = 1
  end
  local held = meta.held or ''
  if confirmed then
    held = token
  end
  redis.call('SET', K, token, 'PX', px)
  redis.call('HSET', M, 'fence', string.format('%.0f', fence), 'held', held,
             'holder', holder, 'since', since, 'dead', dead)
  return fence, dead
end

-- TOKEN finds the lock K already its own: granted from the queue (a
-- reservation until now) or taken by an earlier attempt whose reply was
-- lost.  The lease runs from this request on.  Returns acquire's reply.
local function confirm(K, M, W, token, lease)
  local m = redis.call('HMGET', M, 'fence', 'dead')
  redis.call('HDEL', W, token)
  redis.call('PEXPIRE', K, lease)
  redis.call('HSET', M, 'held', token)
  return {1, tonumber(m[1] or 0), tonumber(m[2] or 0)}
end

-- Whether anybody is queued; checks Q's and W's types before any write.
local function queue_ready(Q, W)
  if redis.call('LLEN', Q) == 0 then
    return false
  end
  redis.call('HLEN', W)
  return true
end

-- Hands the free lock K to the first queued waiter whose entry has not
-- expired (a waiter that crashed stops refreshing its entry), reserved for
-- GRANT_CLAIM_MS, and tells it on the channel K.  SELF, the caller's token,
-- is not granted anything: it is returned, for the caller to take.  Returns
-- the token served, or nil when nobody live is queued.  The caller checked
-- queue_ready() before its first write.
local function grant_next(K, M, Q, W, meta, self)
  local now = now_ms()
  while true do
    local token = redis.call('LPOP', Q)
    if not token then
      return nil
    end
    local entry = redis.call('HGET', W, token)
    redis.call('HDEL', W, token)
    local refreshed, lease, holder = string.match(entry or '', '^(%d+):(%d+):(.*)$')
    if refreshed and now - tonumber(refreshed) < WAITER_STALE_MS then
      if token ~= self then
        take(K, M, meta, token, math.min(GRANT_CLAIM_MS, tonumber(lease)), holder, now, false)
        redis.pcall('PUBLISH', K, 'granted ' .. token)
      end
      return token
    end
  end
end

-- Puts TOKEN (of HOLDER, "host:pid:tid") in the queue, or refreshes its
-- entry, for TTL ms.
local function enqueue(Q, W, token, lease, ttl, holder)
  redis.call('LLEN', Q)
  local now = now_ms()
  if redis.call('HSET', W, token, now .. ':' .. lease .. ':' .. holder) == 1 then
    redis.call('RPUSH', Q, token)
  end
  for _, key in ipairs({Q, W}) do
    if redis.call('PTTL', key) < ttl then
      redis.call('PEXPIRE', key, ttl)
    end
  end
end
