-- release.lua: give a netmutex back, only if it is still ours, handing it
-- to the first queued waiter if there is one.
-- KEYS K, P, Q, W, H (lib.lua), or K alone when mode is '': then 2 asks,
-- before any write, for the call again with every key when waiters are
-- queued; ARGV[1] token, ARGV[2] mode: letters 'r' (robust
-- mutex: its marker goes), 'u' (a robust mutex unlocked after EOWNERDEAD
-- without netmutex_consistent(): it stays ENOTRECOVERABLE for every later
-- locker, as in pthread), 'x' (give back a grant quorum mode did not
-- keep: nobody waits for that, so nobody is woken or handed the lock), 'f'
-- (quorum mode: the marker of a release stays, or with 'x' the one the
-- grant replaced comes back: see read_marker), 'p' (publish "released"
-- for quorum mode's waiters),
-- or '' for none.
-- Returns 1 released, 0 the key is gone (our lease ran out, or an earlier
-- attempt whose reply was lost released it), -1 the key holds another
-- owner's token (ours ran out and someone else took it), or {1, token,
-- ms, ...} when released and reserved for a queued waiter in a Redis
-- Cluster: the pairs name the waiters to wake, the one served first (the
-- caller pushes: lib.lua, Grants and Waiting).
local token, mode = ARGV[1], ARGV[2]
local cur = redis.call('GET', KEYS[1])
-- The fast path: ours, nobody queued, a plain mutex: compare and delete.
if mode == '' and cur and string.sub(cur, 1, 33) == token .. '-' then
  redis.call('DEL', KEYS[1])
  return 1
end
-- @lib
local function has(letter)
  return string.find(mode, letter, 1, true) ~= nil
end
if not cur then
  return 0
end
if string.sub(cur, 1, 32) ~= token then
  return -1
end
if #KEYS < 5 then
  return 2
end
-- Checked before the first write: the queue's keys.
local queued = string.sub(cur, 33, 33) == 'q' and not has('x') and not has('u') and
               queue_ready() and read_floor()
if queued then
  in_cluster() -- a grant to push (lib.lua)
end
if has('r') and has('f') then
  local _, _, _, fence = parse(cur)
  release_marker(token, fence, has('x'))
elseif has('r') then
  redis.call('DEL', H)
end
if has('u') then
  redis.call('SET', K, UNRECOVERABLE)
  return 1
end
redis.call('DEL', K)
if has('x') then
  -- Nobody waits for a grant we did not keep; a message would only wake
  -- the caller itself, which would retry at once (and again, and again).
  return 1
end
if queued and grant_next(nil) then
  if #wakes > 0 then
    return with_wakes({1})
  end
  return 1
end
if has('p') then
  -- pcall: an ACL user without channel rights must still be able to
  -- release; its waiters poll instead.
  redis.pcall('PUBLISH', K, 'released')
end
return 1
