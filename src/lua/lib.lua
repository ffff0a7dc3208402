-- lib.lua: functions shared by the scripts; embed-lua.sh puts this text in
-- front of every script, so each stays one self-contained EVAL.
--
-- Keys of one mutex (all share the {name} hash tag, so one cluster slot):
--   K  <prefix>{<name>}     the lock: the holder's token, PX = its lease
--   M  <prefix>{<name>}:m   meta hash: fence, held (holder's token, '' once
--                           released), holder, since, dead, released,
--                           unrecoverable
--   Q  <prefix>{<name>}:q   list: tokens of queued waiters, in arrival order
--   W  <prefix>{<name>}:w   hash: token -> "<expires_ms>:<lease_ms>:<holder>"

local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- Whether M's 'held' field names a holder (a release empties it).
local function was_held(held)
  return held and held ~= ''
end

-- Makes TOKEN the holder of the free lock K.  HELD is M's 'held' field as
-- read by the caller.  Returns fence, dead.
local function take(K, M, token, lease, holder, since, held)
  redis.call('SET', K, token, 'PX', lease)
  -- The fence only ever grows: it is never reset by a release or an expiry.
  local fence = redis.call('HINCRBY', M, 'fence', 1)
  -- 'held' still names someone only if the previous holder never released:
  -- its lease ran out instead, so it died or lost touch while holding it.
  local dead = 0
  if was_held(held) then
    dead = 1
  end
  redis.call('HSET', M, 'held', token, 'holder', holder, 'since', since, 'dead', dead)
  return fence, dead
end

-- Hands the free lock K to the first queued waiter whose entry has not
-- expired (a waiter that crashed simply stops refreshing its entry), and
-- tells it on the channel K.  HELD as for take().  Returns its token, fence
-- and dead, or nil.  The server clock is read only when someone is queued:
-- the uncontended path stays a few calls short.
local function grant_next(K, M, Q, W, held)
  local now = nil
  while true do
    local token = redis.call('LPOP', Q)
    if not token then
      return nil
    end
    now = now or now_ms()
    local entry = redis.call('HGET', W, token)
    redis.call('HDEL', W, token)
    if entry then
      local expires, lease, holder = string.match(entry, '^(%d+):(%d+):(.*)$')
      if expires and tonumber(expires) > now then
        local fence, dead = take(K, M, token, lease, holder, now, held)
        redis.pcall('PUBLISH', K, 'granted ' .. token .. ' ' .. fence .. ' ' .. dead)
        return token, fence, dead
      end
    end
  end
end

-- Puts TOKEN (of HOLDER, "host:pid:tid") in the queue, or refreshes its
-- entry, for TTL ms.
local function enqueue(Q, W, token, lease, ttl, holder)
  local now = now_ms()
  if redis.call('HSET', W, token, (now + ttl) .. ':' .. lease .. ':' .. holder) == 1 then
    redis.call('RPUSH', Q, token)
  end
  for _, key in ipairs({Q, W}) do
    if redis.call('PTTL', key) < ttl then
      redis.call('PEXPIRE', key, ttl)
    end
  end
end
