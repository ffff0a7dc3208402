#!/bin/sh
# status --rwlock / --sem and list of the other kinds: a read-write lock
# read by one process while a writer waits shows both (status exits 0); a
# semaphore with 2 of its 3 permits held shows 2/3; list shows every kind
# with its column, and its JSON each kind's fields; nothing is listed, and
# status says free (exit 1), once they are released.  break refuses a
# rwlock or a semaphore (2) and leaves it held; --rwlock and --sem exclude
# each other, and apply to status and break only.
. "${srcdir:-.}/cli/lib.sh"

RWHOLD=${NM_RWHOLD:?NM_RWHOLD must name the cli_rwhold helper}
start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

# jfield FILE KIND NAME KEY: KEY of the KIND object named NAME in FILE's
# JSON (a list's array, or status's one object).
jfield() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for l in (d if isinstance(d, list) else [d]):
    if l.get("kind", "mutex") == sys.argv[2] and l["name"] == sys.argv[3]:
        print(str(l[sys.argv[4]]).lower())' "$@"
}

# rw NAME r|w TAG: a background cli_rwhold; its pid in rw_TAG, its output
# in $tmp/TAG.out.
rw() {
    "$RWHOLD" "$1" "$2" >"$tmp/$3.out" &
    eval "rw_$3=\$!"
    bg_pids="$bg_pids $!"
}

expect_rc 1 "status --rwlock of a lock never taken: free (1)" quiet "$NM" status --rwlock doc
"$NM" status --rwlock doc >"$tmp/status"
check "... and says free, kind rwlock" \
    quiet grep -Ezq 'kind: +rwlock.*state: +free' "$tmp/status"
expect_rc 1 "status --sem of a semaphore never taken: free (1)" quiet "$NM" status --sem pool

rw doc r reader
wait_for 30 test -s "$tmp/reader.out" || bail "the reader never got the read lock"
rw doc w writer
writer_queued() {
    "$NM" status --rwlock --json doc >"$tmp/s.json" &&
        [ "$(jfield "$tmp/s.json" rwlock doc writers_waiting)" = 1 ]
}
check "a writer waiting behind a reader is seen" wait_for 30 writer_queued
check "... the writer is still waiting" test ! -s "$tmp/writer.out"
"$NM" status --rwlock doc >"$tmp/status"
rc=$?
check "status --rwlock while read: exit 0 (exit $rc)" test "$rc" = 0
check "... state read-locked" quiet grep -E '^state: +read-locked$' "$tmp/status"
check "... one reader" quiet grep -E '^readers: +1$' "$tmp/status"
check "... no writer holds it" quiet grep -E '^writer: +-$' "$tmp/status"
check "... one writer waiting" \
    quiet grep -E '^waiters: +1 \(writers 1, readers 0\)$' "$tmp/status"
check "--json: held, 1 reader, no writer" test "$(jfield "$tmp/s.json" rwlock doc held)" = true \
    -a "$(jfield "$tmp/s.json" rwlock doc readers)" = 1 \
    -a "$(jfield "$tmp/s.json" rwlock doc writer)" = false
expect_rc 1 "a mutex of the same name is another lock: free" quiet "$NM" status doc

expect_rc 2 "break --rwlock is refused (2)" quiet "$NM" break --rwlock doc
"$NM" break --rwlock doc 2>"$tmp/err"
check "... saying it is not supported" quiet grep -E '^netmutex: break doc: .*not supported' "$tmp/err"
expect_rc 0 "... and the lock is still held" quiet "$NM" status --rwlock doc

hold pool --permits 3
first=$hold_pid
"$NM" --permits 3 pool sh -c 'echo x >"$1"; exec sleep 300' sh "$tmp/second" &
second=$!
bg_pids="$bg_pids $second"
wait_for 30 test -s "$tmp/second" || bail "the second permit was never taken"
"$NM" status --sem pool >"$tmp/status"
rc=$?
check "status --sem with 2 of 3 permits held: exit 0 (exit $rc)" test "$rc" = 0
check "... permits 2/3" quiet grep -E '^permits: +2/3 held$' "$tmp/status"
check "... kind sem, held" quiet grep -Ezq 'kind: +sem.state: +held' "$tmp/status"
"$NM" status --sem --json pool >"$tmp/s.json"
check "--json: permits_held 2, permits 3" \
    test "$(jfield "$tmp/s.json" sem pool permits_held)" = 2 \
    -a "$(jfield "$tmp/s.json" sem pool permits)" = 3
expect_rc 2 "break --sem is refused (2)" quiet "$NM" break --sem pool

hold solo
"$NM" list >"$tmp/list.txt"
rc=$?
check "list with the three kinds held: exit 0 (exit $rc)" test "$rc" = 0
check "... a header with KIND and HELD" \
    quiet grep -E '^NAME +KIND +HELD +HOLDER +SINCE +TTL_MS +FENCE +WAITERS +CACHED$' "$tmp/list.txt"
check "... doc: rwlock, read by 1, 1 waiting" \
    quiet grep -E '^doc +rwlock +read:1 +- +- +-1 +0 +1 +-$' "$tmp/list.txt"
check "... pool: sem, 2/3" quiet grep -E '^pool +sem +2/3 +- +- +-1 +0 +0 +-$' "$tmp/list.txt"
check "... solo: mutex, 1 holder" quiet grep -E '^solo +mutex +1 +[^ ]+:[0-9]+:[0-9]+ ' "$tmp/list.txt"
check "... in byte order" test "$(awk 'NR > 1 { printf "%s ", $1 }' "$tmp/list.txt")" = "doc pool solo "
"$NM" list --json >"$tmp/list.json"
check "list --json: each object has its kind" \
    test "$(jfield "$tmp/list.json" rwlock doc kind)" = rwlock \
    -a "$(jfield "$tmp/list.json" sem pool kind)" = sem \
    -a "$(jfield "$tmp/list.json" mutex solo kind)" = mutex
check "... the semaphore's permits" test "$(jfield "$tmp/list.json" sem pool permits_held)" = 2
expect_rc 0 "list PATTERN finds a rwlock by its whole name" quiet "$NM" list 'd?c'
"$NM" list 'do' >"$tmp/list.txt"
check "... and 'do' matches nothing (header only)" test "$(wc -l <"$tmp/list.txt")" = 1

# The reader goes: the writer gets the lock.
kill -TERM "$rw_reader"
wait "$rw_reader"
rc=$?
check "the reader unlocked and exited 0 (exit $rc)" test "$rc" = 0
wait_for 30 test -s "$tmp/writer.out" || bail "the writer never got the lock"
"$NM" status --rwlock doc >"$tmp/status"
check "status --rwlock: write-locked by the writer" \
    quiet grep -Ezq "state: +write-locked.readers: +0.writer: +[^ ]+:$rw_writer:[0-9]+" "$tmp/status"
check "... with a fence" quiet grep -E '^fence: +[1-9]' "$tmp/status"
"$NM" list doc >"$tmp/list.txt"
check "list: doc held for writing" quiet grep -E "^doc +rwlock +write +[^ ]+:$rw_writer:" "$tmp/list.txt"

kill -TERM "$rw_writer"
wait "$rw_writer"
release_hold
kill -TERM "$first" "$second"
wait "$first" "$second"
expect_rc 1 "all released: list exits 1" quiet "$NM" list
"$NM" list >"$tmp/list.txt"
check "... and shows the header only" test "$(wc -l <"$tmp/list.txt")" = 1
expect_rc 1 "status --rwlock: free again" quiet "$NM" status --rwlock doc
expect_rc 1 "status --sem: free again" quiet "$NM" status --sem pool
"$NM" status --sem pool >"$tmp/status"
check "... with 0 permits held, their number unknown" quiet grep -E '^permits: +0/- held$' "$tmp/status"

expect_rc 2 "--rwlock with --sem is a usage error" quiet "$NM" status --rwlock --sem doc
expect_rc 2 "--rwlock with list is a usage error" quiet "$NM" list --rwlock
expect_rc 2 "--sem with a command is a usage error" quiet "$NM" --sem pool true

done_testing
