-- cond.lua: the waiters of a condition variable (lib.lua, "Keys of one
-- condition variable"; src/api/cond.c has the protocol).
-- KEYS CW, CS, then for 'w', 'l' and 'p' the caller's CK and CG.
-- ARGV[1] the operation: 'w' register waiter ARGV[3] (its CK lives
--   ARGV[4] ms), 's' signal, 'b' broadcast, 'c' a waiter's periodic look,
--   'l' waiter ARGV[3] leaves, 'p' it leaves and passes a signal it got on
--   to the next waiter (it returns an error, not a wake-up);
-- ARGV[2] how long CW and CS live at least after this call, in ms.
-- Every operation first passes on the signals of waiters that died after
-- they were chosen (their CK expired), so a dead waiter never swallows one.
-- Returns 'w': 1; 's', 'b', 'c': how many waiters it signalled; 'l', 'p':
-- 1 if the waiter had been signalled (it consumed the signal), else 0.
local CW, CS = KEYS[1], KEYS[2]
local base = string.sub(CW, 1, -4)
local op, ttl = ARGV[1], tonumber(ARGV[2])

local function ck(t) return base .. ':ck:' .. t end
local function cg(t) return base .. ':cg:' .. t end

-- KEY (a list of ours) lives at least ttl ms more.
local function keep(key)
  local left = redis.call('PTTL', key)
  if left == -1 or (left >= 0 and left < ttl) then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- Signals the longest waiting live waiter: 1, or 0 if none waits.  A token
-- whose CK is gone (dead) or signalled already is dropped on the way.
local function signal_one()
  while true do
    local t = redis.call('LPOP', CW)
    if not t then return 0 end
    local v = redis.call('GET', ck(t))
    if v and string.sub(v, 1, 33) == t .. 'w' then
      redis.call('SETRANGE', ck(t), 32, 's')
      redis.call('RPUSH', cg(t), '1')
      redis.call('PEXPIRE', cg(t), ttl)
      redis.call('RPUSH', CS, t)
      keep(CS)
      return 1
    end
  end
end

-- The signals of waiters that died after they were chosen go on to the
-- next live waiters: how many did.
local function move_on()
  local n = 0
  for _, t in ipairs(redis.call('LRANGE', CS, 0, -1)) do
    if redis.call('EXISTS', ck(t)) == 0 then
      redis.call('LREM', CS, 0, t)
      redis.call('DEL', cg(t))
      n = n + signal_one()
    end
  end
  return n
end

if not ttl or ttl < 1 or not string.find('wsbclp', op, 1, true) or #op ~= 1 then
  return redis.error_reply('ERR cond.lua: bad arguments')
end
local token = ARGV[3]
if (op == 'w' or op == 'l' or op == 'p') and
   (not token or #token ~= 32 or not KEYS[4]) then
  return redis.error_reply('ERR cond.lua: bad waiter')
end
local moved = move_on()
if op == 'w' then
  redis.call('SET', KEYS[3], token .. 'w', 'PX', ARGV[4])
  redis.call('DEL', KEYS[4])
  redis.call('RPUSH', CW, token)
  keep(CW)
  keep(CS)
  return 1
elseif op == 's' then
  return signal_one()
elseif op == 'b' then
  local n = 0
  while signal_one() == 1 do n = n + 1 end
  return n
elseif op == 'c' then
  keep(CW)
  keep(CS)
  return moved
end
local signalled = redis.call('LREM', CS, 0, token) > 0
redis.call('LREM', CW, 0, token)
redis.call('DEL', KEYS[3], KEYS[4])
if signalled and op == 'p' then signal_one() end
return signalled and 1 or 0
