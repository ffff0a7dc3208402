-- grant.lua: push a grant to the queued waiter a release or an acquire
-- reserved the lock for (lib.lua, Grants); its BLPOP returns, and it
-- confirms the grant with a request of its own.
-- KEYS G of that waiter; ARGV[1] its claim in ms (the list lives as long:
-- a waiter that died never pops it).
-- Returns 1.
redis.call('RPUSH', KEYS[1], '1')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
