-- rwlock.lua: a read-write lock (netmutex_rwlock_t): its read shares, its
-- writer's lock and one queue of both (lib.lua, "Keys of one read-write
-- lock"; docs/design.md, 9b, has the rules); and a counting semaphore
-- (netmutex_sem_t, 9c): a lock with readers only, whose share set is
-- bounded by its permits (shares.lua), its K never set.
-- KEYS K, P, Q, W, S, then G (the caller's own grant list) for 'a' and 'c'.
-- ARGV[1] the operation: 'a' acquire, 'c' cancel (a queued waiter gives
--   up), 'u' release, 'v' a semaphore's free permits;
-- ARGV[2] the caller's token; ARGV[3] what it holds or wants: 'r' a read
--   share, 'w' the write lock, 's' a semaphore's permit;
-- ARGV[4] its lease in ms; ARGV[5] how long its queue entry lives, in ms
--   (0: it does not queue: a try); ARGV[6] 'p' when a reader prefers
--   readers (it waits for a writer that holds the lock, never for one that
--   waits), else ''; ARGV[7] its holder "host:pid:tid"; ARGV[8] a
--   semaphore's permits, N (its share set's bound).
-- Returns {status, value}, then pairs of a waiter's token and claim:
--   'a' {1, fence} the caller holds it now; {0, pttl} it does not (queued
--       if ARGV[5] > 0), pttl ms until the writer's lease or, for a
--       writer, the first share that keeps it out runs out (-1: nothing
--       that runs out by itself: a writer waits ahead);
--   'c' {1, fence} a grant reached the caller before it left: this request
--       confirms it, and the caller holds it; {0, 0} it left the queue
--       (always, for a semaphore's caller whose N is not the set's bound);
--   'u' {1, 0} released; {0, 0} it was gone (the lease ran out); {-1, 0}
--       another holds the write lock (the caller's ran out before);
--   'v' {1, free} the permits not held (live shares and grants counted);
--   'a', 'v' of a semaphore: {-2, n} the set's bound is n, not ARGV[8]:
--       its processes disagree on its permits (nothing written).
-- A writer's 'a' that finds live shares publishes on R (lib.lua) for the
-- processes that cache theirs (cache.h).
-- The pairs name the queued waiters this call woke (a grant of a share or
-- of the write lock, reserved for the claim, or a deputy's wake: lib.lua,
-- Waiting), whose lists the caller pushes with grant.lua: in a Redis
-- Cluster only (lib.lua, Grants).
--
-- Who gets in.  The write lock is K, a lock key as a mutex's (its fence and
-- holder in its value, its lease its expiry), set only while S holds no
-- live share; a share is set only while K does not exist.  A waiter queues
-- in Q (arrival order) with its entry in W (lib.lua, Waiting), k 'w' a
-- writer, 'r' a reader, 'p' a reader that prefers readers, 's<N>' a
-- semaphore's waiter and its N.  While K does not exist, serve() hands
-- out, in this order: a share to every queued 'p' reader; a share to each
-- reader at the head of the queue up to the first writer; the write lock
-- to that writer, once no share is left.  That writer stays first in Q
-- until it confirms or leaves (or was granted twice: grant_write): one
-- slow to confirm, past its claim, is granted K again by the next serve(),
-- not overtaken by the readers behind it, which it would then wait for.
-- A newcomer writer takes K only when nobody is queued and no share is
-- live; a newcomer reader takes a share when K does not exist and, unless
-- it prefers readers, no writer waits (writers are not starved).  Writers
-- so follow one another in arrival order.
-- A semaphore's permit is a read share ('s'): S holds at most N shares, a
-- grant reserved included, and serve() grants the queue's head a share
-- while one is free, in arrival order; a newcomer takes one when one is
-- free after serve(), so never ahead of a live waiter of its N.  N is kept
-- in S as its bound while a share lives: a caller that names another N is
-- told, never mixed in.  Waiters of another N than the bound serve() works
-- under (the set's, or the caller's once the set is gone) leave the queue
-- when they reach its head, never granted, and are woken: they queued
-- under a bound that ran out with its last share, and their next attempt
-- is told.  So no waiter is ever let in
-- under a count other than its own, and a 'c' of such a waiter confirms
-- nothing.
-- @use shares
local op, token, kind = ARGV[1], ARGV[2], ARGV[3]
local lease, ttl = tonumber(ARGV[4]), tonumber(ARGV[5])
local prefer_readers, holder = ARGV[6] == 'p', ARGV[7] or ''
local sem = kind == 's'
local permits = sem and tonumber(ARGV[8])
local cap = permits or math.huge
if (op ~= 'a' and op ~= 'c' and op ~= 'u' and (op ~= 'v' or not sem)) or
   (kind ~= 'r' and kind ~= 'w' and not sem) or (sem and not permits) or cap < 1 or
   not token or #token ~= 32 or not lease or lease < 1 or not ttl or
   ((op == 'a' or op == 'c') and #KEYS < 6) or #KEYS < 5 then
  return redis.error_reply('ERR rwlock.lua: bad arguments')
end
local S = KEYS[5]

-- Everything read and checked before the first write.
local cur = redis.call('GET', K)
if cur and not parse(cur) then
  return redis.error_reply('ERR rwlock.lua: the write lock is not a lock')
end
redis.call('LLEN', Q)
redis.call('HLEN', W)
redis.call('ZCARD', S)
read_floor()
-- Grants to push, a writer's request to publish: lib.lua, in_cluster.
if (op == 'a' and (ttl > 0 or kind == 'w')) or redis.call('LLEN', Q) > 0 or
   redis.call('HEXISTS', W, '=pn') == 1 then
  in_cluster()
end
local now = now_ms()
local other_count = false -- a semaphore's caller whose N is not the bound
if sem then
  local bound = shares_bound(S)
  if bound and bound ~= cap then
    if op == 'a' or op == 'v' then
      return {-2, bound}
    end
    cap, other_count = bound, true
  end
end
local writers_waiting = false

-- The reply: STATUS, VALUE, then the wakes the caller pushes.
local function answer(status, value)
  if sem then
    shares_set_bound(S, cap)
  end
  return with_wakes({status, value})
end

-- Waiter W gets a share, reserved for its claim, and leaves the queue.
local function grant_share(w)
  local claim = claim_of(w)
  share_put(S, w.t, now, claim)
  queue_pop(w)
  if w.t ~= token then
    wake(w.t, claim)
  end
  return claim
end

-- How often a writer queued first may be granted K without confirming:
-- one slow to confirm, past its claim, is granted K again rather than let
-- the readers behind it in (which it would then wait for), and one that
-- died is passed over after that second claim (lib.lua, Waiting).
local WRITER_GRANTS = 2

-- Waiter W, first in the queue, gets the write lock, reserved for its
-- claim, with its fence, and stays first until it confirms or leaves (its
-- entry counts the grants): serve() cannot run again while K exists.
-- Returns the claim, or nil when W was granted WRITER_GRANTS times
-- already and is dropped.
local function grant_write(w)
  if (w.n or 0) >= WRITER_GRANTS then
    queue_pop(w)
    return nil
  end
  local claim = claim_of(w)
  redis.call('HSET', W, w.t, string.format('%.0f', w.expires) .. ':' .. w.lease .. ':w' ..
             ((w.n or 0) + 1) .. ':' .. w.who)
  redis.call('SET', K, lock_value(w.t, '-', 'c', next_fence(), w.who), 'PX', claim)
  if w.t ~= token then
    wake(w.t, claim)
  end
  return claim
end

-- A share to every queued reader that prefers readers (they wait only for
-- a writer that holds K, so each time K is free they are all served).
-- They are not in Q but listed in W ("=pn", "=p<i>": lib.lua, "Keys of
-- one read-write lock"), each once: the walk costs one step per reader
-- queued since the last one, and none for the writers and other readers
-- in Q.  One that left meanwhile has no entry, and is skipped.  Returns
-- how many got a share.
local function serve_preferring()
  local listed = tonumber(redis.call('HGET', W, '=pn') or 0) or 0
  local n = 0
  for i = 1, listed do
    local field = '=p' .. i
    local t = redis.call('HGET', W, field)
    redis.call('HDEL', W, field)
    local w = t and parse_entry(t, redis.call('HGET', W, t))
    if w and (t == token or w.expires > now) then
      local claim = claim_of(w)
      share_put(S, t, now, claim)
      redis.call('HDEL', W, t)
      if t ~= token then
        wake(t, claim)
      end
      n = n + 1
    elseif w then
      redis.call('HDEL', W, t)
    end
  end
  if listed > 0 then
    redis.call('HDEL', W, '=pn')
  end
  return n
end

-- Serves the queue from its head while K does not exist (see the top),
-- popping the waiters that died or gave up as it meets them; sets
-- writers_waiting.  Returns how many shares S holds after it (grants
-- reserved included).  A semaphore's waiter of another N than the bound is
-- popped and woken: its next attempt is told (EINVAL).  The first waiter
-- granted is woken with the deputies behind it (lib.lua, Waiting).
local function serve()
  local shares = shares_live(S, now) + serve_preferring()
  if redis.call('LLEN', Q) == 0 then
    return shares
  end
  local claim = nil
  while true do
    local w = queue_first(now, op == 'a' and token or nil)
    if not w then
      break
    end
    if w.k == 's' and w.n ~= cap then
      queue_pop(w)
      if w.t ~= token then
        wake(w.t, GRANT_CLAIM_MS)
      end
    elseif w.k ~= 'w' and shares < cap then
      claim = grant_share(w)
      shares = shares + 1
    elseif w.k == 'w' and shares == 0 then
      local c = grant_write(w)
      if c then
        claim = c
        writers_waiting = true
        wake_deputies(c, w.t, token)
        return shares
      end
    else
      writers_waiting = w.k == 'w'
      break
    end
  end
  if claim then
    wake_deputies(claim, nil, token)
  end
  return shares
end

-- The caller's own grant (reserved for it by serve(), or taken by an
-- earlier attempt whose reply was lost) is confirmed by this request, and
-- its lease runs from now: its fence, or nil when it has none.  A reader's
-- fence is drawn now, while its share keeps every writer out: greater than
-- every earlier writer's, smaller than every later one's.
local function confirm()
  if kind == 'w' then
    local c = redis.call('GET', K)
    if not c or string.sub(c, 1, 32) ~= token then
      return nil
    end
    local _, _, _, fence = parse(c)
    redis.call('SET', K, lock_value(token, '-', '-', fence, holder), 'PX', lease)
    return fence
  end
  if not share_end(S, token, now) then
    return nil
  end
  share_put(S, token, now, lease)
  return sem and 0 or next_fence()
end

-- The caller's queue entry and grant list go.  A reader that prefers
-- readers is not in Q (its place in W's list is skipped once its entry
-- is gone).
local function leave()
  local w = parse_entry(token, redis.call('HGET', W, token))
  if redis.call('HDEL', W, token) == 1 and not (w and w.k == 'p') then
    redis.call('LREM', Q, 1, token)
  end
  redis.call('DEL', G)
end

-- Queues the caller, or refreshes its entry, for ttl ms.
local function enqueue()
  local k = kind == 'w' and kind or sem and kind .. permits or (prefer_readers and 'p' or 'r')
  if queue_put(token, now, lease, ttl, k, holder, k == 'p') and k == 'p' then
    -- HGET and HSET, not HINCRBY: the commands a lock user may run are
    -- acl.c's.
    local i = (tonumber(redis.call('HGET', W, '=pn') or 0) or 0) + 1
    redis.call('HSET', W, '=pn', i, '=p' .. i, token)
  end
end

if op == 'v' then
  return answer(1, cap - serve())
end

if op == 'u' then
  local result = 1
  if kind == 'w' then
    if not cur then
      result = 0
    elseif string.sub(cur, 1, 32) ~= token then
      result = -1
    else
      redis.call('DEL', K)
    end
  else
    result = share_end(S, token, now) and 1 or 0
    redis.call('ZREM', S, token)
  end
  shares_live(S, now)
  if not redis.call('GET', K) then
    serve()
  end
  return answer(result, 0)
end

if op == 'c' then
  -- A waiter of another N than the bound was never granted (serve()):
  -- whatever S holds for it is not its to confirm.
  local fence = not other_count and confirm()
  if fence then
    leave()
    return answer(1, fence)
  end
  leave()
  if not cur then
    serve()
  end
  return answer(0, 0)
end

-- op == 'a'.  S is counted once, by serve(), and only while K does not
-- exist (nothing below needs it then): nothing after changes it but a
-- return.
local shares = 0
if not cur then
  shares = serve()
end
local fence = confirm()
if fence then
  leave()
  return answer(1, fence)
end
local held = redis.call('GET', K)
if not held then
  if kind == 'w' and shares == 0 and redis.call('LLEN', Q) == 0 then
    fence = next_fence()
    redis.call('SET', K, lock_value(token, '-', '-', fence, holder), 'PX', lease)
    leave()
    return answer(1, fence)
  end
  if kind == 'r' and (prefer_readers or not writers_waiting) then
    share_put(S, token, now, lease)
    leave()
    return answer(1, next_fence())
  end
  if sem and shares < cap then
    share_put(S, token, now, lease)
    leave()
    return answer(1, 0)
  end
end
if ttl > 0 then
  enqueue()
end
-- A writer kept out by read shares asks the processes that may keep theirs
-- cached (cache.c) to give them back: "<token> w" on R, sent again at every
-- attempt of the writer first in the queue (so at every look: a message
-- missed costs a look); the writers behind it would only repeat it.
-- pcall: an ACL user without channel rights must still be able to lock.
-- That writer looks again within ASK_AGAIN_MS, asking once more, as a
-- mutex's first waiter behind a caching holder does (acquire.lua).
local asked = kind == 'w' and not held and shares > 0 and
              (ttl == 0 or redis.call('LRANGE', Q, 0, 0)[1] == token)
if asked then
  redis.pcall(in_cluster() and 'SPUBLISH' or 'PUBLISH', R, token .. ' w')
end
local pttl = -1
if held then
  pttl = redis.call('PTTL', K)
elseif kind ~= 'r' then
  pttl = shares_first_end(S, now)
end
if asked and ttl > 0 then
  pttl = pttl < 0 and ASK_AGAIN_MS or math.min(pttl, ASK_AGAIN_MS)
end
return answer(0, pttl)
