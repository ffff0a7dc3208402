-- cond.lua: the waiters of a condition variable (lib.lua, "Keys of one
-- condition variable"; src/api/cond.c has the protocol).
-- KEYS CW, CS, CH, then for 'w', 'c', 'l' and 'p' the caller's own CG.
-- ARGV[1] the operation: 'w' register waiter ARGV[4], its entry living
--   ARGV[5] ms; 's' signal; 'b' broadcast; 'c' waiter ARGV[4]'s periodic
--   look, its entry living ARGV[5] ms more; 'l' waiter ARGV[4] leaves; 'p'
--   it leaves and passes a signal it got on to the next waiter (it returns
--   an error, not a wake-up);
-- ARGV[2] how long CW, CS and CH are to live after this call, in ms (at
--   least half of it);
-- ARGV[3] how the waiters this call signals are woken: 'h' here, with a
--   push on their CG (a single server), 'r' by the caller, with grant.lua,
--   which declares their CG (a Redis Cluster: lib.lua, "Wake-ups").
-- Every operation but leaving first passes on the signals of waiters that
-- died after they were chosen (their entry expired), so a dead waiter
-- never swallows one.
-- Returns {n, ...}: n is, for 'w', 1; 's', 'b': how many waiters it
-- signalled; 'c': 1 if the waiter was signalled, 0 if not, -1 if its entry
-- is gone (a signal passed it over: it wakes); 'l', 'p': 1 if the waiter
-- had been signalled (it consumed the signal), else 0.  With 'r', then the
-- token and lease of every waiter it signalled, for the caller to wake.
-- @nolib
local CW, CS, CH = KEYS[1], KEYS[2], KEYS[3]
local base = string.sub(CW, 1, -4)
local op, ttl, wake_here = ARGV[1], tonumber(ARGV[2]), ARGV[3] == 'h'
local token, lease = ARGV[4], tonumber(ARGV[5])
local mine = op == 'w' or op == 'c' or op == 'l' or op == 'p'

if not ttl or ttl < 1 or #op ~= 1 or not string.find('wsbclp', op, 1, true) or
   (ARGV[3] ~= 'h' and ARGV[3] ~= 'r') then
  return redis.error_reply('ERR cond.lua: bad arguments')
end
if (mine and (not token or #token ~= 32 or not KEYS[4])) or
   ((op == 'w' or op == 'c') and not (lease and lease >= 1)) then
  return redis.error_reply('ERR cond.lua: bad waiter')
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local out = {0}

local function ms(v) return string.format('%.0f', v) end

-- KEY (of ours) lives at least ttl / 2 ms more (ARGV[2] is three leases:
-- a waiter looks three times a lease, so its lists outlive it), and is
-- given ttl again only when less is left: most calls read the time alone.
local function keep(key)
  local left = redis.call('PTTL', key)
  if left == -1 or (left >= 0 and left < ttl / 2) then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- Once a signal chose a waiter, CS lives at least as long as CH, whatever
-- the caller's own lease (ttl): every waiter's registration and looks give
-- CH three of that waiter's leases, so CH outlives the entry of every live
-- waiter, and so its next look, which passes on the signal of a chosen
-- waiter that died.  CS given the signaller's ttl alone expired first when
-- the signaller's lease was the shorter, and took the signal with it.
local function keep_signalled()
  local life = math.max(ttl, redis.call('PTTL', CH))
  local left = redis.call('PTTL', CS)
  if left == -1 or (left >= 0 and left < life) then
    redis.call('PEXPIRE', CS, life)
  end
end

-- Waiter T's entry in CH: its state ('w' waiting, 's' signalled), when it
-- expires (server ms) and its lease; nil when it has none we can read.
local function entry(t)
  local s, expires, l = string.match(redis.call('HGET', CH, t) or '', '^([ws]):(%d+):(%d+)$')
  if not s then return nil end
  return s, tonumber(expires), l
end

-- Wakes signalled waiter T: the hint on its CG lives its lease L (one that
-- died never pops it).
local function wake(t, l)
  if wake_here then
    local g = base .. ':cg:' .. t
    redis.call('RPUSH', g, '1')
    redis.call('PEXPIRE', g, l)
  else
    out[#out + 1] = t
    out[#out + 1] = l
  end
end

-- Signals the longest waiting live waiter: 1, or 0 if none waits.  A
-- token whose entry expired or is gone (a dead waiter) is dropped on the
-- way.
local function signal_one()
  while true do
    local t = redis.call('LPOP', CW)
    if not t then return 0 end
    local s, expires, l = entry(t)
    if s == 'w' and expires > now then
      redis.call('HSET', CH, t, 's:' .. ms(expires) .. ':' .. l)
      redis.call('ZADD', CS, ms(expires), t)
      keep_signalled()
      wake(t, l)
      return 1
    elseif s ~= 's' then
      redis.call('HDEL', CH, t)
    end
  end
end

-- The signals of waiters that died after they were chosen (their entry
-- expired) go on to the next live waiters.  CS is scored by when each
-- entry expires, so only those are read: O(log N) each, whatever CS
-- holds.  CS is read first, CW too before the first write (the types are
-- checked before anything is written).
local function move_on()
  local first = redis.call('ZRANGE', CS, 0, 0, 'WITHSCORES')
  if #first == 0 or tonumber(first[2]) > now then
    return
  end
  redis.call('LLEN', CW)
  redis.call('HLEN', CH)
  while #first > 0 and tonumber(first[2]) <= now do
    redis.call('ZREM', CS, first[1])
    redis.call('HDEL', CH, first[1])
    signal_one()
    first = redis.call('ZRANGE', CS, 0, 0, 'WITHSCORES')
  end
end

-- The types are checked before the first write: each key is read first
-- (LLEN, HLEN, ZRANGE, HEXISTS, HGET), or is the only one written.
if op == 'w' then
  redis.call('LLEN', CW)
  move_on()
  -- Registered already: this is a request sent again (condvar.c).
  if redis.call('HEXISTS', CH, token) == 0 then
    redis.call('RPUSH', CW, token)
    redis.call('HSET', CH, token, 'w:' .. ms(now + lease) .. ':' .. ms(lease))
  end
  keep(CW)
  keep(CH)
  out[1] = 1
elseif op == 's' or op == 'b' then
  redis.call('HLEN', CH)
  move_on()
  local n = signal_one()
  while op == 'b' and n > 0 and signal_one() == 1 do n = n + 1 end
  out[1] = n
elseif op == 'c' then
  move_on()
  redis.call('LLEN', CW)
  local s, expires = entry(token)
  if s and expires > now then
    redis.call('HSET', CH, token, s .. ':' .. ms(now + lease) .. ':' .. ms(lease))
    if s == 's' then
      redis.call('ZADD', CS, ms(now + lease), token)
    end
    keep(CW)
    keep(CS)
    keep(CH)
    out[1] = s == 's' and 1 or 0
  else
    -- Passed over (or about to be): out, and it wakes.
    redis.call('LREM', CW, 1, token)
    redis.call('ZREM', CS, token)
    redis.call('HDEL', CH, token)
    redis.call('DEL', KEYS[4])
    out[1] = -1
  end
else
  -- Leaving passes no other signal on: the others' looks, the next
  -- registration and the next signal do (a leave is as frequent as a
  -- wake-up, and the cheaper the better).
  redis.call('LLEN', CW)
  redis.call('HLEN', CH)
  -- A signalled waiter is no longer in CW: only one that was not (its
  -- wait timed out) is looked for there, from the head.
  local signalled = redis.call('ZREM', CS, token) > 0
  if not signalled then
    redis.call('LREM', CW, 1, token)
  end
  redis.call('HDEL', CH, token)
  redis.call('DEL', KEYS[4])
  if signalled and op == 'p' then signal_one() end
  out[1] = signalled and 1 or 0
end
return out
