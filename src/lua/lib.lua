-- lib.lua: functions shared by the scripts; embed-lua.sh puts this text in
-- front of every script, so each stays one self-contained EVAL.
--
-- Keys of one mutex (all share the {<tag>} hash tag, so one cluster slot;
-- <tag> is 16 hex digits of the FNV-1a digest of the name, keys.c, so no
-- brace in a name can move it), and P, the fence floor of that slot;
-- a key of a name exists only while it has something to say, so a name
-- that is not held, waited for or marked leaves nothing on the server (P
-- is the slot's, not the name's: at most 16384 of them in all).
--
-- Declared keys.  A script is given, in KEYS, every key it may touch, in
-- this order: K, P, Q, W, H, G (its caller's own grant list); each script
-- takes the first few it needs (its top comment says how many; keys.h
-- holds the order for the C side).  Redis Cluster requires it: while a
-- slot is being migrated, a node refuses, in the middle of a script, a key
-- the caller did not declare and that it does not hold ("non local key"),
-- whereas declared keys are checked before the script runs and answered
-- with ASK or TRYAGAIN, which the caller follows or retries
-- (cluster_route.c).  A fast path given fewer keys (acquire.lua: K and P;
-- release.lua: K) returns "again with every key" before its first write
-- when it finds it needs more: an uncontended cycle declares no key it
-- does not touch.  While a slot is being migrated, K and P of a name are
-- on different nodes until the end, so its acquisitions wait for the end
-- (TRYAGAIN); renewals and an uncontended release, K alone, go on.
--
--   K  <prefix>{<tag>}<name>      the lock, PX = its lease.  Value:
--                            "<token><q><c> <fence> <holder>" --
--                            token: 32 hex; q: 'q' while waiters are queued
--                            (the release must serve them), else '-'; c: 'c'
--                            while it is only a grant not yet confirmed by
--                            its waiter, 'k' while its holder's process may
--                            keep it cached after unlock (and so must be
--                            asked to give it back on R), 'i' the same while
--                            that process says no thread of it is in the
--                            lock (mark.lua), else '-'
--                            or UNRECOVERABLE, with no expiry, once a
--                            robust holder unlocked without repairing: every
--                            SET NX fails on it, and only break removes it
--                            (or a server that loses its data, as H)
--   Q  <prefix>{<tag>}<name>:q    list: tokens of queued waiters, in arrival order
--   W  <prefix>{<tag>}<name>:w    hash: token -> a waiter's entry (Waiting,
--                            below), its k 'm'
--   H  <prefix>{<tag>}<name>:h    robust mutexes: "h<token><fence>|<replaced>"
--                            of the holder, kept for ROBUST_KEEP_MS; a
--                            holder that released deletes it, so finding it
--                            means the holder died (quorum mode keeps
--                            "r<token><fence>" of a release instead: see
--                            read_marker)
--   G  <prefix>{<tag>}<name>:g:<t> list: the grant to queued waiter t, which
--                            waits for it with BLPOP on its own connection
--                            ("1", pushed by grant.lua), or a caching
--                            holder's answer to a trylock that the mutex is
--                            really held ("0")
--   P  <prefix>{<s>}fence        the fence floor of K's hash slot, not of the
--                            name: the highest fence given in the slot so
--                            far (in µs, no expiry).  <s> is the slot's tag
--                            (slot.h: the first short string CRC16 puts in
--                            that slot), so P shares K's slot in a cluster;
--                            there are at most 16384 of them, however many
--                            names come and go (the "nothing left per
--                            name" rule holds: P is per slot)
--   R  <prefix>{<tag>}<name>:r channel (never a key): "<holder> <kind><asker>"
--                            asks a caching holder to give the lock back --
--                            kind 'w' a waiter, 't' a trylock (answer "0" on
--                            its G if a thread holds it), 'b' a break;
--                            in a Redis Cluster a shard channel (SPUBLISH)
--
-- Keys of one condition variable (netmutex_cond_t, cond.lua).  They share
-- the hash tag {c<tag>}, 'c' then the 16 hex digits of the FNV-1a digest of
-- the condition's name: one slot for the condition (its mutex's keys are
-- elsewhere), and a tag no mutex key has (a mutex's is 16 characters), so
-- no name of either kind can ever name the other's key, and netmutex_list
-- never takes one for a lock.  Nothing is left once every waiter left:
--   CW <prefix>{c<tag>}<name>:cw        list: tokens of the waiters not
--                                      signalled yet, in arrival order; PX
--                                      one and a half to three leases of
--                                      the latest waiter to register or look
--                                      (gone once a dead waiter's last look
--                                      is that old)
--   CS <prefix>{c<tag>}<name>:cs        sorted set: tokens of signalled
--                                      waiters that have not left yet,
--                                      scored by when their CH entry
--                                      expires (server ms); PX as CW,
--                                      and at least CH's once a signal
--                                      chose a waiter (whatever the
--                                      signaller's own lease)
--   CH <prefix>{c<tag>}<name>:ch        hash: token t -> "<s>:<expires>:<lease>"
--                                      for each waiter, s 'w' waiting or 's'
--                                      signalled, expires the server's time
--                                      in ms past which the waiter counts as
--                                      dead (its registration or latest look
--                                      plus its lease: a live waiter looks
--                                      every third of it); PX as CW
--   CG <prefix>{c<tag>}<name>:cg:<t>    list: "1" pushed when waiter t is
--                                      signalled; it waits with BLPOP; PX
--                                      the waiter's lease
-- Every key a script reads or writes is declared but one: a signal wakes
-- the waiter it chose with a push on that waiter's CG, which its caller
-- could not name.  Wake-ups: as with Grants below, on a single server the
-- script pushes itself (cond.lua 'h'); in a Redis Cluster it returns the
-- tokens, and its caller pushes with grant.lua, which declares each CG (a
-- hint either way: the choice is made, atomically, in CS and CH).
--
-- Keys of one read-write lock (netmutex_rwlock_t, rwlock.lua).  They share
-- the hash tag {r<tag>}, 'r' then the 16 hex digits of the FNV-1a digest
-- of the name: one slot for the lock, and a tag neither a mutex's key nor
-- a condition's has.  Declared in this order: K, P, Q, W, S, G.  Nothing
-- is left once the last holder and waiter left (the fence floor P is the
-- slot's):
--   K  <prefix>{r<tag>}<name>         the write lock: a lock key as a
--                                     mutex's K (its 'q' is always '-'),
--                                     'c' while it is a grant not yet
--                                     confirmed; set only while S holds no
--                                     live share
--   P  <prefix>{<s>}fence             the fence floor of K's slot, as above:
--                                     writers and readers draw their
--                                     fences from it
--   Q  <prefix>{r<tag>}<name>:q       list: tokens of queued waiters, in
--                                     arrival order
--   W  <prefix>{r<tag>}<name>:w       hash: token -> a waiter's entry
--                                     (Waiting, below), k 'w' writer, 'r'
--                                     reader, 'p' reader that prefers
--                                     readers; and, no waiter's, the list
--                                     of the readers that prefer readers,
--                                     which are not in Q: "=pn" how many
--                                     were queued since they were last
--                                     served, "=p<i>" the i-th one's token
--                                     (1 <= i <= =pn; one that left has no
--                                     entry)
--   S  <prefix>{r<tag>}<name>:s       sorted set: the read shares, token ->
--                                     when it runs out (server ms), a grant
--                                     not confirmed yet included; its PX is
--                                     its latest share's end (shares.lua)
--   G  <prefix>{r<tag>}<name>:g:<t>   list: the grant to queued waiter t
--                                     (a share or the write lock), as a
--                                     mutex's
--
-- Keys of one semaphore (netmutex_sem_t, rwlock.lua with kind 's').  The
-- hash tag {s<tag>}, 's' then the digest; the order and meaning of a
-- read-write lock's, with readers only: K (declared, never set), P (read,
-- never written: permits have no fence), Q, W (k 's<N>', the waiter's N),
-- S, G.  S is bounded:
-- it also holds "=N", N the permits, scored -1 (shares.lua), and is
-- deleted once that is all it holds.  Nothing is left once the last
-- holder and waiter left.

-- Fences.  A fence is this server's clock in microseconds when the lock was
-- taken, raised above the slot's floor P if the clock is not past it, and
-- P becomes the new fence.  Acquisitions of one name happen one after
-- another (a release or an expiry lies between), and P is at least every
-- fence given in the slot, so every fence of a name is greater than the
-- one before, even after the server's clock stepped back (NTP, a VM
-- restore): the fences then count up from P by one until the clock has
-- caught up.  fence / 1000 is
-- the server's Unix time in ms while the clock is ahead of P (status's
-- "since").  One key per slot rather than per name: a released name still
-- leaves nothing behind, and the floors are bounded at 16384 keys.
-- What is guaranteed: strictly increasing per name across clock steps for
-- as long as P survives; across a restart that lost the data (no
-- persistence) only if the clock did not go back meanwhile (the fence is
-- the clock again, and the clock is past every earlier fence); a restart
-- without data AND a clock behind it are covered only with persistence.
-- P replicates asynchronously, as K does: a failover to a replica that
-- lacks the latest P and whose clock is behind can give a fence at or
-- below the last one, unless the grant waited for that replica (WAIT,
-- NETMUTEX_MIN_REPLICAS, replicas.c).  Quorum mode raises fences to the
-- highest a quorum gave (redlock.c): fence.lua raises P there too.
--
-- Redis does not roll a script back: a script that fails after its first
-- write leaves that write behind.  So every script reads and checks what it
-- depends on before it writes anything.
--
-- Grants.  The waiter a release (or an acquire that finds the lock free
-- with waiters queued) serves is known only inside the script, so its
-- grant list cannot be declared by the caller.  The script reserves the
-- lock for it and returns its token and claim; the caller then pushes to
-- that waiter's G with grant.lua, which declares it.  The hand-off so
-- costs the releaser one more round trip (the waiter's side is unchanged:
-- its BLPOP returns, it confirms), and only when it hands off.  Safety does
-- not rest on the push: a grant is a hint the waiter confirms with a
-- request of its own, and the reservation is in K, written atomically with
-- the queue's change.  The alternatives were worse: one grant list per
-- lock would be popped by whichever waiter blocked first, not by the one
-- served, and declaring every waiter's list would make a release's KEYS as
-- long as the queue.  Outside a Redis Cluster the script pushes the grant
-- itself (wake): a single server has no slot that can be migrating, so the
-- undeclared list is always local, and the hand-off keeps its two round
-- trips (the release, then the waiter's confirmation) instead of three.
--
-- Waiting.  One queue protocol for every kind that queues (a mutex, a
-- read-write lock, a semaphore): Q the tokens in arrival order, W each
-- waiter's entry "<expires>:<lease>:<k><n>:<holder>" -- expires the
-- server's time in ms past which it surely died (it looks at least every
-- third of that: lease.h, NM_QUEUE_TTL_MS), lease its lease, k its kind
-- ('m' a mutex's waiter; rwlock.lua's letters), n a number of the kind's
-- (a semaphore waiter's N, how often a writer was granted), holder
-- "host:pid:tid".  A live waiter does not refresh its entry to prove it is
-- alive: it blocks on its G for seconds at a time, and its liveness is
-- checked when it is granted the lock.  A grant is a reservation for
-- GRANT_CLAIM_MS only, which a live waiter confirms within a round trip;
-- one that died never does.  Whoever notices the claim ran out serves the
-- next waiter: the grant also wakes the DEPUTIES waiters behind it (a
-- push of "d<claim>" on their G, which confirms nothing), and each looks
-- once the claim is over and, finding the lock free, serves the queue; a
-- deputy woken again meanwhile (the queue moved on) waits again.  So a
-- waiter that died costs the next live one a claim and a round trip, and
-- is never granted the lock for a lease; only when the grantee and every
-- deputy died does the next live waiter find the lock at its own next
-- look.  Every step costs O(1) in the queue's length
-- (plus the waiters given up, popped when they reach the head); the cost
-- of waiting is a look per waiter every few seconds, not four.  One that
-- confirms too late (it was stopped) finds the lock free or queues again,
-- which costs it its turn, never anybody's safety.

local GRANT_CLAIM_MS = 150
local DEPUTIES = 2
-- How soon the waiter first in line asks a caching holder again
-- (acquire.lua): as often as every waiter did before looks were seconds
-- apart.
local ASK_AGAIN_MS = 250
local K, P, Q, W, H, G = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local R = K .. ':r'
local ROBUST_KEEP_MS = 7 * 24 * 3600 * 1000
local UNRECOVERABLE = 'netmutex:unrecoverable'

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function lock_value(token, q, c, fence, holder)
  return token .. q .. c .. ' ' .. string.format('%.0f', fence) .. ' ' .. holder
end

-- K's value split: token, q, c, fence, holder; nil if it is not one of ours.
local function parse(v)
  local token, q, c, fence, holder =
    string.match(v, '^(' .. string.rep('%x', 32) .. ')([q-])([cki-]) (%d+) (.*)$')
  if not token then
    return nil
  end
  return token, q, c, tonumber(fence), holder
end


-- The slot's floor (see Fences): read before the first write, as every
-- script reads what it depends on; one that is not a number is an error.
local floor_now = nil
local function read_floor()
  local f = redis.call('GET', P)
  if f and not tonumber(f) then
    error('netmutex: ' .. P .. ' is not a number')
  end
  floor_now = tonumber(f) or 0
  return floor_now
end

-- The next fence: the clock, above the floor, which it becomes.
local function next_fence()
  local fence = math.max(now_us(), (floor_now or read_floor()) + 1)
  floor_now = fence
  redis.call('SET', P, string.format('%.0f', fence))
  return fence
end

-- H's value: a kind ('h' held, 'r' released in quorum mode), the holder's
-- token and its fence, then after '|' the marker it replaced.  The fence
-- orders markers across servers: redlock.c dismisses a death that one
-- server tells of when another saw a later holder release (the repair of
-- that very death, say, which missed the first server).  The replaced
-- marker comes back if this grant is given back unkept (release.lua 'x'):
-- a grant quorum mode did not keep must not hide a death.
local function read_marker()
  local m = redis.call('GET', H) or ''
  local bar = string.find(m, '|', 1, true)
  if bar then
    return string.sub(m, 1, bar - 1), string.sub(m, bar + 1)
  end
  return m, ''
end

-- Robust bookkeeping when TOKEN becomes the holder with FENCE: whether the
-- previous holder died (its marker is still there), and the new marker.
-- Returns dead, held (the died holder's "<token><fence>" or ''), released
-- (the same of a release quorum mode kept, or '').
local function take_marker(token, fence)
  local m, prev = read_marker()
  local kind, who = string.sub(m, 1, 1), string.sub(m, 2, 33)
  if who ~= token then
    prev = m
  end
  redis.call('SET', H, 'h' .. token .. string.format('%.0f', fence) .. '|' .. prev,
             'PX', ROBUST_KEEP_MS)
  if kind == 'h' and who ~= token then
    return 1, string.sub(m, 2), ''
  end
  if kind == 'r' then
    return 0, '', string.sub(m, 2)
  end
  return 0, '', ''
end

-- TOKEN's marker (if H holds it) with FENCE instead (fence.lua).
local function raise_marker(token, fence)
  local m, prev = read_marker()
  if string.sub(m, 1, 33) == 'h' .. token then
    redis.call('SET', H, 'h' .. token .. string.format('%.0f', fence) .. '|' .. prev, 'KEEPTTL')
  end
end

-- The release of TOKEN, whose lock's fence is FENCE: quorum mode keeps a
-- marker of it; a grant given back unkept (GIVEN_BACK) puts the marker it
-- replaced back.
local function release_marker(token, fence, given_back)
  local m, prev = read_marker()
  if not given_back then
    local f = fence and string.format('%.0f', fence) or ''
    redis.call('SET', H, 'r' .. token .. f, 'PX', ROBUST_KEEP_MS)
  elseif string.sub(m, 1, 33) ~= 'h' .. token then
    return
  elseif prev ~= '' then
    redis.call('SET', H, prev, 'PX', ROBUST_KEEP_MS)
  else
    redis.call('DEL', H)
  end
end

-- Whether anybody is queued; checks Q's and W's types before any write.
local function queue_ready()
  if redis.call('LLEN', Q) == 0 then
    return false
  end
  redis.call('HLEN', W)
  return true
end

-- Whether this server is a Redis Cluster node, asked once per call:
-- CLUSTER KEYSLOT answers a number on one and "cluster support disabled"
-- on a plain server.  Any other answer is an ACL's refusal, which says
-- neither: INFO (in the library's rule, which every connection needs)
-- tells.  A plain server so does without +cluster|keyslot; a Cluster node
-- is refused (NOPERM, EACCES to the caller) rather than served as a plain
-- one, which would push grants to undeclared keys and PUBLISH where
-- holders listen with SSUBSCRIBE.  A refusal after a write would leave
-- that write behind (see above), so a script that may need the answer
-- asks before its first write: one that may queue, serve the queue or ask
-- a caching holder.
local cluster_node = nil
local function in_cluster()
  if cluster_node ~= nil then
    return cluster_node
  end
  local r = redis.pcall('CLUSTER', 'KEYSLOT', R)
  if type(r) == 'number' then
    cluster_node = true
    return true
  end
  if type(r) == 'table' and string.find(tostring(r.err), 'cluster support disabled', 1, true) then
    cluster_node = false
    return false
  end
  local info = redis.pcall('INFO', 'cluster')
  if type(info) == 'string' and string.find(info, 'cluster_enabled:0', 1, true) then
    cluster_node = false
    return false
  end
  error({err = 'NOPERM netmutex: this user lacks +cluster|keyslot, which a ' ..
               'Redis Cluster node needs (netmutex_acl_rule(3))'})
end

-- This server's clock in ms.
local function now_ms()
  return math.floor(now_us() / 1000)
end

-- A queue entry (Waiting) split: {t, expires, lease, k, n, who}, or nil.
local function parse_entry(t, e)
  local expires, lease, k, n, who = string.match(e or '', '^(%d+):(%d+):(%a)(%d*):(.*)$')
  if not expires then
    return nil
  end
  return {t = t, expires = tonumber(expires), lease = tonumber(lease), k = k,
          n = tonumber(n), who = who}
end

-- Writes TOKEN's entry for TTL ms from NOW (queueing it in Q if it is
-- new, unless OFF_Q: rwlock.lua lists the readers that prefer readers in
-- W), and keeps Q and W for at least as long; returns whether it is new.
local function queue_put(token, now, lease, ttl, kn, holder, off_q)
  local e = string.format('%.0f', now + ttl) .. ':' .. lease .. ':' .. kn .. ':' .. holder
  local fresh = redis.call('HSET', W, token, e) == 1
  if fresh and not off_q then
    redis.call('RPUSH', Q, token)
  end
  for _, key in ipairs({Q, W}) do
    if redis.call('PTTL', key) < ttl then
      redis.call('PEXPIRE', key, ttl)
    end
  end
  return fresh
end

-- The first waiter of the queue whose entry has not run out by NOW (SELF,
-- the caller, is alive whatever its entry says), left at the head; the
-- ones before it, gone or dead, are popped.  nil when nobody is queued.
local function queue_first(now, self)
  while true do
    -- LRANGE, not LINDEX: the commands a lock user may run are acl.c's.
    local t = redis.call('LRANGE', Q, 0, 0)[1]
    if not t then
      return nil
    end
    local w = parse_entry(t, redis.call('HGET', W, t))
    if w and (t == self or w.expires > now) then
      return w
    end
    redis.call('LPOP', Q)
    redis.call('HDEL', W, t)
  end
end

-- How long a grant to waiter W is reserved: GRANT_CLAIM_MS, or its
-- lease if that is shorter.
local function claim_of(w)
  return math.min(GRANT_CLAIM_MS, w.lease)
end

-- The head of the queue, W, leaves it.
local function queue_pop(w)
  redis.call('LPOP', Q)
  redis.call('HDEL', W, w.t)
end

-- Wake-ups the script could not push itself (a Redis Cluster's): token,
-- ms pairs for the reply (see Grants).
local wakes = {}

-- Wakes waiter TOKEN, its push living MS: here and now outside a Redis
-- Cluster, else by the caller (wakes).  A grant pushes "1"; a deputy's
-- wake (MS negative: -4 claims) "d<claim>": its waiter blocks one claim
-- more, then looks (waiting.c, nm_wait_grant).  grant.lua pushes the same.
local function wake(token, ms)
  if in_cluster() then
    wakes[#wakes + 1] = token
    wakes[#wakes + 1] = ms
    return
  end
  local list = K .. ':g:' .. token
  redis.call('RPUSH', list, ms < 0 and 'd' .. math.floor(-ms / 4) or '1')
  redis.call('PEXPIRE', list, math.abs(ms))
end

-- Wakes the DEPUTIES waiters at the head of the queue (Waiting), but SKIP
-- (a writer kept first while it confirms) and SELF (the caller, awake),
-- for a grant whose claim is CLAIM ms.
local function wake_deputies(claim, skip, self)
  for _, t in ipairs(redis.call('LRANGE', Q, 0, skip and DEPUTIES or DEPUTIES - 1)) do
    if t ~= skip and t ~= self then
      wake(t, -4 * claim)
    end
  end
end

-- ANSWER with the wakes appended.
local function with_wakes(answer)
  for _, v in ipairs(wakes) do
    answer[#answer + 1] = v
  end
  return answer
end

-- Hands the free lock K to the first queued waiter, reserved for its
-- claim (GRANT_CLAIM_MS at most), and wakes it and its deputies (Waiting).
-- SELF, the caller's token, is not granted anything: it is returned, for
-- the caller to take.  Returns the token served and its claim, or nil when
-- nobody live is queued.  The caller checked queue_ready(), read_floor()
-- and in_cluster() before its first write.
local function grant_next(self)
  local w = queue_first(now_ms(), self)
  if not w then
    return nil
  end
  queue_pop(w)
  local claim = claim_of(w)
  if w.t ~= self then
    local q = redis.call('LLEN', Q) > 0 and 'q' or '-'
    redis.call('SET', K, lock_value(w.t, q, 'c', next_fence(), w.who), 'PX', claim)
    wake(w.t, claim)
    wake_deputies(claim, nil, self)
  end
  return w.t, claim
end

-- Whether the lock CUR is held by a process that may keep it cached.
local function holder_caches(cur)
  local c = cur and string.sub(cur, 34, 34)
  return (c == 'k' or c == 'i') and parse(cur) ~= nil
end

-- Asks the caching holder of CUR to give the lock back (cache.c): WHAT is
-- the kind and the asker's token.  Sent again at every look, so a
-- message lost (the holder was resubscribing) costs a look, not a lease.
-- pcall: an ACL user without channel rights must still be able to lock;
-- the holder then gives it back at its idle time or renewal.
-- In a Redis Cluster the request is a sharded message: R shares K's
-- slot, so SPUBLISH reaches the holder's subscriber on this node
-- (subscriber.c keeps one per master) and never crosses the cluster bus,
-- where PUBLISH would go to every node.
local function ask_holder(cur, what)
  if holder_caches(cur) then
    local verb = in_cluster() and 'SPUBLISH' or 'PUBLISH'
    redis.pcall(verb, R, string.sub(cur, 1, 32) .. ' ' .. what)
  end
end

-- Puts TOKEN (of HOLDER, "host:pid:tid") in the queue, or refreshes its
-- entry, for TTL ms, marks the lock CUR (K's value) as waited for, and asks
-- a caching holder for it (KIND: 'w' or 't', see R).
local function enqueue(cur, token, lease, ttl, holder, kind)
  redis.call('LLEN', Q)
  redis.call('HLEN', W)
  local fresh = queue_put(token, now_ms(), lease, ttl, 'm', holder)
  local waited = string.sub(cur, 33, 33) == 'q'
  if parse(cur) and not waited then
    redis.call('SET', K, string.sub(cur, 1, 32) .. 'q' .. string.sub(cur, 34), 'KEEPTTL')
  end
  -- The holder is asked by the first waiter (it learnt of the others from
  -- its acquisition or that first request), by every trylock (it wants an
  -- answer), and again at each look, in case a request was lost: under
  -- contention a message per waiter would wake every caching process.
  if not waited or not fresh or kind == 't' then
    ask_holder(cur, kind .. token)
  end
end

-- TOKEN finds the lock CUR already its own: granted from the queue (a
-- reservation until now) or taken by an earlier attempt whose reply was
-- lost.  The lease runs from this request on.  Returns acquire's reply.
local function confirm(cur, token, lease, robust, cache)
  local _, q, _, fence, holder = parse(cur)
  local dead, held, released = 0, '', ''
  if robust then
    dead, held, released = take_marker(token, fence)
  end
  redis.call('SET', K, lock_value(token, q, cache and 'k' or '-', fence, holder), 'PX', lease)
  redis.call('DEL', G)
  return {1, fence, dead, held, released, q == 'q' and 1 or 0}
end
