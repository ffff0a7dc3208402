#!/bin/sh
# waits, deadlocks and the "waited for by" of status and list: a netmutex
# run under NETMUTEX_DEADLOCK=detect that waits for a name another run
# holds publishes its wait (after about 150 ms); `waits` lists it (exit
# 0), `status NAME` names it, `list` too under the name's line (and in
# its JSON), not under another held name's, and `deadlocks` finds no
# cycle in a plain wait (exit 1).  Once the waiter is gone, `waits` lists
# nothing (exit 1), and status and list name no waiter, even while the
# name stays held.  A shared run's wait is a read-write lock's: `waits`
# marks it "(read)".
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

# list: the same wait, under job's line only; other, held and waited for
# by nobody, prints as before.
"$NM" other sh -c 'echo $$ >"$1"; exec sleep 300' sh "$tmp/other.cmd" &
bg_pids="$bg_pids $!"
wait_for 30 test -s "$tmp/other.cmd" || bail "the holder of other never got it"
waiter_id=$(awk 'NR == 2 { print $1 }' "$tmp/waits.out")
seq=$(awk 'NR == 2 { print $2 }' "$tmp/waits.out")
"$NM" list >"$tmp/list.txt"
rc=$?
check "list: exit 0 (exit $rc)" test "$rc" = 0
check "... the header as ever" \
    quiet grep -E '^NAME +KIND +HELD +HOLDER +SINCE +TTL_MS +FENCE +WAITERS +CACHED$' "$tmp/list.txt"
check "... job's line, then its waiter indented as status names it" \
    quiet awk -v w="  waited for by: $waiter_id (wait $seq)" \
    'prev ~ /^job / && $0 == w { found = 1 } { prev = $0 } END { exit !found }' "$tmp/list.txt"
check "... other's line, last, with nothing under it" \
    quiet awk 'END { exit !($1 == "other" && NR == 4) }' "$tmp/list.txt"

# waited NAME: NAME's "waited_for_by" in $tmp/list.json, as JSON, or
# "absent".
waited() {
    python3 -c 'import json, sys
for l in json.load(open(sys.argv[1])):
    if l["name"] == sys.argv[2]:
        print(json.dumps(l.get("waited_for_by", "absent")))' "$tmp/list.json" "$1"
}
"$NM" list --json >"$tmp/list.json"
check "list --json: valid JSON" quiet python3 -m json.tool "$tmp/list.json"
check "... job waited for by the waiter ($(waited job))" \
    test "$(waited job)" = "[{\"waiter\": \"$waiter_id\", \"wait\": $seq}]"
check "... other by nobody ($(waited other))" test "$(waited other)" = "[]"
"$NM" list other >"$tmp/list.txt"
check "list other: a wait for a name not listed is not shown" \
    test "$(wc -l <"$tmp/list.txt")" = 2

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

# A waiter stopped while job stays held: its wait goes (with its expiry).
hold job
NETMUTEX_DEADLOCK=detect "$NM" job true 2>/dev/null &
waiter=$!
bg_pids="$bg_pids $waiter"
wait_for 30 published || bail "the second wait was never published"
kill -TERM "$waiter"
wait "$waiter"
wait_for 30 unpublished
check "a waiter stopped: waits lists nothing" unpublished
"$NM" list >"$tmp/list.txt"
check "... and list shows job held, waited for by nobody" \
    quiet awk '$1 == "job" { held = 1 } /waited for by/ { named = 1 } END { exit !held || named }' \
    "$tmp/list.txt"
"$NM" list --json >"$tmp/list.json"
check "... in its JSON too ($(waited job))" test "$(waited job)" = "[]"
release_hold

# A read-write lock's wait: a shared run waits to read rw, which an
# exclusive run writes; `waits` says so after the name.
hold rw
NETMUTEX_DEADLOCK=detect "$NM" -s rw true 2>/dev/null &
waiter=$!
bg_pids="$bg_pids $waiter"
wait_for 30 published || bail "the read wait was never published"
check "waits shows a read-write lock's wait as read ($(tail -n 1 "$tmp/waits.out"))" \
    quiet awk 'NR == 2 && $3 == "rw" && $4 == "(read)" && $5 == "-"' "$tmp/waits.out"
"$NM" list >"$tmp/list.txt"
check "... which list does not put under a mutex's line" \
    sh -c '! grep -q "waited for by" "$1"' sh "$tmp/list.txt"
release_hold
wait "$waiter"
rc=$?
check "the shared run got rw and ran its command (exit $rc)" test "$rc" = 0

done_testing
