#!/bin/sh
# -s/--shared: runs of one NAME with -s hold it together; an exclusive run
# (the default, -x) excludes them and is excluded by them, as flock(1)'s
# -s and -x on one file; --nonblocking and --wait 0 give up at once.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

# reader ME OTHER: a shared run that marks it is in, then waits (bounded)
# for the other reader to be in too, and marks that it saw it.
reader() {
    "$NM" -s doc sh -c '
        touch "$1/in.$2"
        i=0
        while [ ! -e "$1/in.$3" ] && [ "$i" -lt "$4" ]; do sleep 0.05; i=$((i + 1)); done
        [ -e "$1/in.$3" ] && touch "$1/saw.$2"' sh "$tmp" "$1" "$2" "$(( $(secs 20) * 20 ))"
}

reader a b &
ra=$!
reader b a &
rb=$!
bg_pids="$bg_pids $ra $rb"
wait "$ra"; rca=$?
wait "$rb"; rcb=$?
check "two shared runs both exited 0 ($rca, $rcb)" test "$rca" = 0 -a "$rcb" = 0
check "... and held NAME at once (each saw the other)" test -e "$tmp/saw.a" -a -e "$tmp/saw.b"

hold doc -s
expect_rc 0 "a shared run while a shared one holds runs" quiet "$NM" --shared -n doc true
expect_rc 1 "an exclusive run with -n gives 1" quiet "$NM" -n doc touch "$tmp/ran"
expect_rc 1 "... with --nonblocking too" quiet "$NM" --nonblocking doc touch "$tmp/ran"
expect_rc 5 "... with -x --wait 0 -E 5, 5" quiet "$NM" -x --wait 0 -E 5 doc touch "$tmp/ran"
expect_rc 1 "... with --timeout 0.3, 1" quiet "$NM" --timeout 0.3 doc touch "$tmp/ran"
expect_rc 1 "a shared run leaves the mutex NAME free (status)" quiet "$NM" status doc
"$NM" doc touch "$tmp/writer" &
writer=$!
bg_pids="$bg_pids $writer"
sleep 0.5
check "a waiting exclusive run has not run" test ! -e "$tmp/writer"
release_hold
check "the shared holder exited as its command (143: $hold_rc)" test "$hold_rc" = 143
wait "$writer"; rc=$?
check "the exclusive run ran once the share was gone (exit $rc)" \
    test "$rc" = 0 -a -e "$tmp/writer"
check "no exclusive run ran while the share was held" test ! -e "$tmp/ran"

hold doc
expect_rc 1 "a shared run while an exclusive one holds gives 1" quiet "$NM" -s -n doc true
expect_rc 1 "... with -s --wait=0 too" quiet "$NM" -s --wait=0 doc true
expect_rc 1 "... and with -x -s (the last one counts)" quiet "$NM" -x -s -n doc true
expect_rc 0 "an exclusive run holds the mutex NAME (status)" quiet "$NM" status doc
release_hold
expect_rc 0 "-s -x is an exclusive run once free" quiet "$NM" -s -x -n doc true
expect_rc 2 "-s is for running a command, not for status" quiet "$NM" status -s doc

done_testing
