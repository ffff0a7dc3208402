#!/bin/sh
# flock(1)'s spellings work: --nb, --nonblock, --wait, --timeout, -x, -e,
# --exclusive, -o, --close, -F, --no-fork, and every long option of flock's
# that netmutex takes (-s: shared.sh; -F: nofork.sh).  -o
# changes nothing, because the command never holds anything of the lock:
# the lock is released when the command exits, even if a child it left
# behind still runs.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

for opt in -x -e --exclusive -o --close; do
    expect_rc 3 "$opt runs the command (exit status passed through)" "$NM" "$opt" job sh -c 'exit 3'
done

# Every long option of flock(1) that netmutex takes, spelled out, on a free
# NAME (those it refuses: flock_suite.sh).
for opt in --shared --exclusive --nonblock --nonblocking --nb --timeout=1 --wait=1     --conflict-exit-code=9 --close --no-fork --verbose; do
    expect_rc 3 "$opt runs the command on a free NAME" quiet "$NM" "$opt" job sh -c 'exit 3'
done
expect_rc 3 "NAME --command runs a shell command" "$NM" job --command 'exit 3'
for opt in --help --version; do
    expect_rc 0 "$opt exits 0" quiet "$NM" "$opt"
done

hold job
expect_rc 1 "--nb while held gives 1" quiet "$NM" --nb job touch "$tmp/ran"
expect_rc 6 "--nonblock -E 6 while held gives 6" quiet "$NM" --nonblock -E 6 job touch "$tmp/ran"
expect_rc 1 "-x -n while held gives 1" quiet "$NM" -x -n job touch "$tmp/ran"
for opt in --wait --timeout; do
    start=$(date +%s)
    expect_rc 4 "$opt 0.5 -E 4 gives up with 4" quiet "$NM" "$opt" 0.5 -E 4 job touch "$tmp/ran"
    took=$(( $(date +%s) - start ))
    check "... in bounded time (${took}s)" test "$took" -le "$(secs 20)"
    expect_rc 4 "$opt=0 -E 4 is a non-blocking attempt" quiet "$NM" "$opt=0" -E 4 job touch "$tmp/ran"
done
check "no command of a failed attempt ran" test ! -e "$tmp/ran"
release_hold

for opt in -F --no-fork; do
    expect_rc 3 "$opt runs the command (exit status passed through)" "$NM" "$opt" job sh -c 'exit 3'
done
expect_rc 2 "-o is for running a command, not for status" quiet "$NM" status -o job

# The command leaves a child running and exits: with -o as without, the
# lock is free once the command is gone, though the child still runs.
for opt in --close ""; do
    rm -f "$tmp/child"
    "$NM" $opt job sh -c 'sleep 300 </dev/null >/dev/null 2>&1 & echo $! >"$1"' sh "$tmp/child"
    rc=$?
    child=$(cat "$tmp/child")
    bg_pids="$bg_pids $child"
    check "${opt:-no option}: the command left a child behind and exited 0 (exit $rc)" \
        test "$rc" = 0 -a -n "$child"
    check "... the child still runs" kill -0 "$child"
    expect_rc 1 "... and the lock is free" quiet "$NM" status job
    kill -TERM "$child"
done

# What the command's child could hold: nothing but what the command got,
# and the command got only what a plain command gets.
plain=$(sh -c 'ls /proc/$$/fd' | tr '\n' ' ')
locked=$("$NM" -o job sh -c 'ls /proc/$$/fd' | tr '\n' ' ')
check "-o: no descriptor of the tool reaches the command ($plain| $locked)" test "$plain" = "$locked"

done_testing
