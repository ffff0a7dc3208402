-- status.lua: what this server knows about a netmutex; changes nothing.
-- KEYS K, P, Q (lib.lua).
-- Returns {token or '', pttl, fence, holder, since, queued, unrecoverable,
-- granted, cached}: fence, holder and since describe the current holder (0,
-- '' and 0 when free: nothing is kept of a released lock); granted is 1
-- while the lock is only reserved for a queued waiter that has not confirmed
-- it yet; cached is 1 while its holder's process may keep it cached, and
-- idle 1 while that process says none of its threads is in it.
local cur = redis.call('GET', K)
local token, fence, holder, since, granted, cached, idle = '', 0, '', 0, 0, 0, 0
local unrecoverable = cur == UNRECOVERABLE and 1 or 0
if unrecoverable == 1 then
  cur = nil
end
if cur then
  local q, c
  token, q, c, fence, holder = parse(cur)
  if token then
    since = math.floor(fence / 1000)
    granted = c == 'c' and 1 or 0
    cached = (c == 'k' or c == 'i') and 1 or 0
    idle = c == 'i' and 1 or 0
  else -- not written by netmutex: held, by nobody we can name
    token, fence, holder = cur, 0, ''
  end
end
local pttl = unrecoverable == 1 and -2 or redis.call('PTTL', K)
return {token, pttl, fence, holder, since, redis.call('LLEN', Q), unrecoverable, granted,
        cached, idle}
