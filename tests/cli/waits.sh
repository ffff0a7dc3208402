#!/bin/sh
# waits, deadlocks and status's "waited for by": a netmutex run under
# NETMUTEX_DEADLOCK=detect that waits for a name another run holds
# publishes its wait (after about 150 ms); `waits` lists it (exit 0),
# `status NAME` names it, and `deadlocks` finds no cycle in a plain wait
# (exit 1).  Once the waiter is gone, `waits` lists nothing (exit 1) and
# status names no waiter.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

expect_rc 1 "waits with no wait published gives 1" "$NM" waits
expect_rc 1 "deadlocks with no wait published gives 1" "$NM" deadlocks

hold job
NETMUTEX_DEADLOCK=detect "$NM" job true 2>"$tmp/waiter.err" &
waiter=$!
bg_pids="$bg_pids $waiter"

# published: `waits` lists one.
published() { "$NM" waits >"$tmp/waits.out" 2>&1; }
wait_for 30 published || bail "the wait was never published"
check "waits lists the waiter's wait for job ($(tail -n 1 "$tmp/waits.out"))" \
    grep -q "job" "$tmp/waits.out"
# The waiter is named host:pid:tid, pid its command's process (status's
# holder string for a netmutex run), the waiting tool's child.
wpid=$(awk 'NR == 2 { n = split($1, f, ":"); print f[n - 1] }' "$tmp/waits.out")
check "... as its command's process, the tool's child (pid ${wpid:-none})" \
    grep -qs "^PPid:[[:space:]]*$waiter\$" "/proc/${wpid:-0}/status"

"$NM" status job >"$tmp/status.out" 2>&1
check "status job names it: $(grep waited "$tmp/status.out")" \
    grep -q "^waited for by: .*:$wpid:[0-9]* (wait [0-9]*)\$" "$tmp/status.out"

expect_rc 1 "deadlocks: a plain wait is no cycle (1)" "$NM" deadlocks

release_hold
wait "$waiter"
rc=$?
check "the waiter got job and ran its command (exit $rc)" test "$rc" = 0
check "... and said nothing on stderr" test ! -s "$tmp/waiter.err"

unpublished() { ! "$NM" waits >/dev/null 2>&1; }
wait_for 30 unpublished
check "once it ended, waits lists nothing" unpublished
"$NM" status job >"$tmp/status.out" 2>&1
check "... and status names no waiter" sh -c '! grep -q "waited for by" "$1"' sh "$tmp/status.out"

done_testing
