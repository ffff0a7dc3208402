-- rwstatus.lua: what this server knows about a read-write lock or a
-- semaphore (rwlock.lua's keys); changes nothing: no prune, no serve, so
-- it reads around what rwlock.lua would remove (a share whose score has
-- passed, a waiter whose entry is stale), as rwlock.lua counts them.
-- KEYS K, P, Q, W, S (lib.lua, "Keys of one read-write lock"; P is
-- declared for the order, never read).
-- Returns {token or '', pttl, fence, holder, since, shares, bound,
-- writers queued, others queued, granted}: token, pttl, fence, holder and
-- since describe the writer that holds K ('', -1, 0, '', 0 without one;
-- a semaphore's K is never set); shares the live shares (read shares or
-- permits, grants not confirmed yet included); bound a semaphore's
-- permits as its set keeps them while a permit lives, else 0; the live
-- queued waiters, writers and the others (readers, or a semaphore's);
-- granted 1 while K is only reserved for a queued writer.
-- @use shares
local S = KEYS[5]
local now = now_ms()
local cur = redis.call('GET', K)
local token, pttl, fence, holder, since, granted = '', -1, 0, '', 0, 0
if cur then
  local t, _, c, f, h = parse(cur)
  if t then
    token, fence, holder = t, f, h
    since = math.floor(f / 1000)
    granted = c == 'c' and 1 or 0
  else -- not written by netmutex: held, by nobody we can name
    token = cur
  end
  pttl = redis.call('PTTL', K)
end
-- ZRANGE and not ZCOUNT: the commands a lock user may run are the ones
-- acl.c lists, and a share set is as small as the holders are few.
local shares = 0
local all = redis.call('ZRANGE', S, 0, -1, 'WITHSCORES')
for i = 2, #all, 2 do
  if tonumber(all[i]) > now then
    shares = shares + 1
  end
end
local bound = shares > 0 and shares_bound(S) or 0
local writers, others = 0, 0
-- The queue, then the readers that prefer readers, listed in W alone.
local queued = redis.call('LRANGE', Q, 0, -1)
for i = 1, tonumber(redis.call('HGET', W, '=pn') or 0) or 0 do
  queued[#queued + 1] = redis.call('HGET', W, '=p' .. i)
end
for _, t in ipairs(queued) do
  local e = t and redis.call('HGET', W, t) or ''
  local expires, k = string.match(e, '^(%d+):%d+:([rpsw])%d*:')
  if expires and tonumber(expires) > now then
    if k == 'w' then
      writers = writers + 1
    else
      others = others + 1
    end
  end
end
return {token, pttl, fence, holder, since, shares, bound or 0, writers, others, granted}
