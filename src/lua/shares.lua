-- shares.lua: a share set, the helper of the scripts that use one ("-- @use
-- shares", embed-lua.sh): rwlock.lua's read shares S, and renew.lua, which
-- renews a share as it renews a lock key.  A semaphore's permits are one
-- too, whose size is bounded (below).
--
-- A share set is a sorted set: a member is a share's token, its score the
-- moment the share runs out, in this server's milliseconds (TIME).  A
-- share is a lease like a lock key: its holder's renewal job pushes the
-- score on, and a holder that died stops doing so.  So:
--   - every script that reads the set prunes it first (shares_live): a
--     share whose score has passed is gone, whoever asks;
--   - the set's own expiry is its latest share's end, moved at every prune
--     and every new or renewed share: a set whose holders all died goes
--     away by itself, with no script run, and Redis deletes a set whose
--     last member was removed.  Nothing is left on the server once the
--     last share is gone.
-- Scores are server time (lib.lua's now_ms), as a key's expiry is: a
-- step of the server's clock moves both alike.
--
-- A bounded set (a semaphore's) also holds its bound N as the member
-- "=N", scored -1: never pruned (pruning starts at 0), not a share, and
-- gone with the set, which is deleted once it is all that is left.  Every
-- process that uses the set so reads the bound the set was made with, as
-- long as a share is live.

-- Prunes SET of the shares that ran out by NOW, moves its expiry to its
-- latest share's end, and returns how many shares it holds.
local function shares_live(set, now)
  redis.call('ZREMRANGEBYSCORE', set, 0, now)
  local last = redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')
  if #last == 0 then
    return 0
  end
  if tonumber(last[2]) < 0 then
    redis.call('DEL', set)
    return 0
  end
  redis.call('PEXPIRE', set, tonumber(last[2]) - now)
  local n = redis.call('ZCARD', set)
  local first = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
  if tonumber(first[2]) < 0 then
    n = n - 1
  end
  return n
end

-- The bound of SET ("=N" scored -1), or nil when it has none.
local function shares_bound(set)
  local first = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
  if #first == 0 or tonumber(first[2]) >= 0 then
    return nil
  end
  return tonumber(string.match(first[1], '^=(%d+)$'))
end

-- SET, if it holds a share, holds bound N too.
local function shares_set_bound(set, n)
  if redis.call('ZCARD', set) > 0 then
    redis.call('ZADD', set, -1, '=' .. n)
  end
end

-- When TOKEN's share of SET runs out (ms), or nil when it has none at NOW.
local function share_end(set, token, now)
  local s = tonumber(redis.call('ZSCORE', set, token))
  if s and s > now then
    return s
  end
  return nil
end

-- TOKEN's share of SET runs until NOW + MS: a new share, a renewal, or a
-- reservation (a grant not confirmed yet); the set lives at least as long.
local function share_put(set, token, now, ms)
  redis.call('ZADD', set, string.format('%.0f', now + ms), token)
  if redis.call('PTTL', set) < ms then
    redis.call('PEXPIRE', set, ms)
  end
end

-- How long until the first share of SET runs out, in ms from NOW, or -1
-- when it holds none.
local function shares_first_end(set, now)
  local first = redis.call('ZRANGE', set, 0, 1, 'WITHSCORES')
  if #first > 0 and tonumber(first[2]) < 0 then
    first = {first[3], first[4]}
  end
  if #first == 0 then
    return -1
  end
  return math.max(tonumber(first[2]) - now, 0)
end

-- renew.lua's renewal of TOKEN's share of SET for MS more: 1, or 0 when it
-- had run out (or was never there).
local function share_renew(set, token, ms)
  local now = now_ms()
  if not share_end(set, token, now) then
    return 0
  end
  share_put(set, token, now, ms)
  return 1
end
