#!/bin/sh
# While another netmutex holds NAME: -n, -E and -w give the conflict code;
# `status` shows the holder (the command's pid) and says free otherwise;
# `break` frees it and the holder's command gets its
# lost-lease signal, and says why when there is nothing to break.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

"$NM" status nightly >"$tmp/status"
rc=$?
check "status of a lock never taken: free (exit $rc)" test "$rc" = 1
check "... and says free" quiet grep -E '^state: +free$' "$tmp/status"
json=$("$NM" status --json nightly)
check "... in JSON too ($json)" quiet expr "x$json" : 'x{"name":"nightly","held":false,.*"unrecoverable":false}$'
"$NM" break nightly 2>"$tmp/err"
rc=$?
check "break with nothing to break gives 1 (exit $rc)" test "$rc" = 1
check "... and says the lock is free, and where it looked" \
    quiet grep -E '^netmutex: break nightly: nothing to break: it is free at (unix|rediss)://' "$tmp/err"

hold nightly
tool_pid=$(cat "$tmp/held")
cmd_pid=$(cat "$tmp/held.cmd")
expect_rc 1 "-n while held gives 1" quiet "$NM" -n nightly touch "$tmp/ran"
expect_rc 7 "-n -E 7 while held gives 7" quiet "$NM" -n -E 7 nightly touch "$tmp/ran"
expect_rc 9 "--nonblock --conflict-exit-code=9 gives 9" quiet "$NM" --nonblock --conflict-exit-code=9 nightly touch "$tmp/ran"
expect_rc 1 "-w 0 is a non-blocking attempt" quiet "$NM" -w 0 nightly touch "$tmp/ran"

start=$(date +%s)
expect_rc 4 "-w 0.5 -E 4 gives up with 4" quiet "$NM" -w 0.5 -E 4 nightly touch "$tmp/ran"
took=$(( $(date +%s) - start ))
check "-w 0.5 gave up in bounded time (${took}s)" test "$took" -le "$(secs 20)"
check "the command of a failed attempt never ran" test ! -e "$tmp/ran"

"$NM" status nightly >"$tmp/status"
rc=$?
check "status while held exits 0 (exit $rc)" test "$rc" = 0
holder=$(sed -n 's/^holder: *//p' "$tmp/status")
check "the holder names this host and the command's pid ($holder, command $cmd_pid)" \
    quiet expr "x$holder" : "x$(uname -n):$cmd_pid:[0-9][0-9]*\$"
check "... which is not the tool's ($tool_pid)" test "$cmd_pid" != "$tool_pid"
check "status says held" quiet grep -E '^state: +held$' "$tmp/status"
check "status shows a fence" quiet grep -E '^fence: +[1-9]' "$tmp/status"
check "status shows when it was taken" quiet grep -E '^since: +[0-9]{4}-.*\([1-9][0-9]* ms\)' "$tmp/status"
json=$("$NM" status --json nightly)
check "status --json while held" quiet expr "x$json" : 'x{"name":"nightly","held":true,"holder":"[^"]*:'"$cmd_pid"':'

release_hold
"$NM" status nightly >"$tmp/status"
rc=$?
check "status after release: free (exit $rc)" test "$rc" = 1
check "... and says free" quiet grep -E '^state: +free$' "$tmp/status"
json=$("$NM" status --json nightly)
check "status --json after release" quiet expr "x$json" : 'x.*"held":false,"holder":"",.*"unrecoverable":false}$'
"$NM" break nightly 2>"$tmp/err"
rc=$?
check "break of a free lock gives 1 (exit $rc)" test "$rc" = 1
check "... and says it is free" quiet grep -E '^netmutex: break nightly: nothing to break: it is free at (unix|rediss)://' "$tmp/err"

# Breaking a held lock: with a short lease the watchdog's next renewal finds
# the key gone, the command gets --on-lost's signal, and the tool exits 75
# once the command has gone.
"$NM" --lease 500 --on-lost USR1 nightly sh -c 'trap "echo USR1 >\"$1\"; exit 0" USR1
    echo $PPID >"$1.pid"; while :; do sleep 0.05; done' sh "$tmp/lost" 2>"$tmp/lost.err" &
p=$!
bg_pids="$bg_pids $p"
wait_for 30 test -s "$tmp/lost.pid" || bail "the command never started"
expect_rc 0 "break while held gives 0" "$NM" break nightly
wait "$p"
rc=$?
check "after a break, the tool exits 75 (exit $rc)" test "$rc" = 75
check "... once its command got the --on-lost signal" quiet grep -q USR1 "$tmp/lost"
check "... and it says so on stderr" quiet grep -q "lost" "$tmp/lost.err"

# --on-lost none: the command is left alone, the exit is still 75.
"$NM" --lease 500 --on-lost none nightly sh -c 'trap "echo TERM >\"$1\"" TERM
    echo $PPID >"$1.pid"; sleep 2' sh "$tmp/none" 2>/dev/null &
p=$!
bg_pids="$bg_pids $p"
wait_for 30 test -s "$tmp/none.pid" || bail "the command never started"
quiet "$NM" break nightly
wait "$p"
rc=$?
check "--on-lost none: still 75 (exit $rc)" test "$rc" = 75
check "... and the command got no signal" test ! -e "$tmp/none"

# A break the watchdog has not seen yet (30 s lease) is found by the
# release: the command exits 0 at once, and still the tool says 75.
"$NM" nightly sh -c '"$1" break nightly' sh "$NM" 2>"$tmp/unlock.err"
rc=$?
check "a break found at release gives 75 too (exit $rc)" test "$rc" = 75
check "... and it says so on stderr" quiet grep -q "lost" "$tmp/unlock.err"

# acl: its command, pasted into redis-cli, makes a user that can lock
# under the prefix, and whose key pattern takes a prefix with white space,
# a quote and a glob character as written.
acl_prefix='odd "p*x:'
NETMUTEX_PREFIX=$acl_prefix "$NM" acl >"$tmp/acl.cmd"
check "acl prints ACL SETUSER" quiet grep -q '^ACL SETUSER <user> on ><password> resetkeys ' "$tmp/acl.cmd"
start_redis acl --user default on nopass '~*' '&*' '+@all'
sed 's/<user>/locker/; s/<password>/pw/' "$tmp/acl.cmd" |
    "$REDIS_CLI" -s "$tmp/acl.sock" >"$tmp/acl.out" 2>&1
check "redis-cli takes it as it is ($(cat "$tmp/acl.out"))" test "$(cat "$tmp/acl.out")" = OK
acl_url="unix://locker:pw@$tmp/acl.sock"
expect_rc 0 "the user can lock under the prefix" \
    env NETMUTEX_PREFIX="$acl_prefix" "$NM" -u "$acl_url" accounts true
expect_rc 77 "... and under no other" quiet "$NM" -u "$acl_url" accounts true

done_testing
