#!/bin/sh
# netmutex NAME COMMAND: exit status passthrough, -c, the fence in the
# environment, signals, and no sockets leaking into the command.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

expect_rc 0 "a command that succeeds gives 0" "$NM" job true
expect_rc 3 "a command's exit status is passed through" "$NM" job sh -c 'exit 3'
expect_rc 5 "-c runs a shell command" "$NM" job -c 'exit 5'
expect_rc 7 "run NAME -c works too" "$NM" run job --command 'exit 7'
expect_rc 137 "a command killed by SIGKILL gives 128+9" "$NM" job sh -c 'kill -KILL $$'
expect_rc 1 "the lock is free after its command was killed" quiet "$NM" status job
expect_rc 127 "a command that does not exist gives 127" quiet "$NM" job ./no-such-command-here
expect_rc 126 "a command that cannot be executed gives 126" quiet "$NM" job "$tmp"
expect_rc 1 "the lock is free after a failed start" quiet "$NM" status job

# Each acquisition's fence is larger than the last.
f1=$("$NM" job sh -c 'echo "$NETMUTEX_FENCE"')
f2=$(NETMUTEX_FENCE=junk "$NM" job sh -c 'echo "$NETMUTEX_FENCE"')
check "NETMUTEX_FENCE is a number ($f1)" quiet expr "x$f1" : 'x[0-9][0-9]*$'
check "NETMUTEX_FENCE grows, replacing an inherited one ($f1 < $f2)" test "$f1" -lt "$f2"

# The command sees the file descriptors a plain command sees (the harness
# may pass some of its own), none of netmutex's sockets or pipes.
plain=$(sh -c 'ls /proc/$$/fd' | tr '\n' ' ')
locked=$("$NM" job sh -c 'ls /proc/$$/fd' | tr '\n' ' ')
check "no descriptor leaks into the command ($plain| $locked)" test "$plain" = "$locked"

# SIGTERM sent to the tool reaches the command; the lock is released.
hold job
release_hold
check "SIGTERM is forwarded to the command (exit $hold_rc)" test "$hold_rc" = 143
expect_rc 1 "the lock is free after the forwarded SIGTERM" quiet "$NM" status job

# SIGHUP too, and the command can handle it.  (Not SIGINT: a shell starts
# background jobs with it ignored, and then the tool leaves it ignored.)
"$NM" job sh -c 'trap "echo HUP >>\"$1\"; exit 0" HUP
                 echo $PPID >"$1.pid"; while :; do sleep 0.05; done' sh "$tmp/sigs" &
p=$!
bg_pids="$bg_pids $p"
wait_for 30 test -s "$tmp/sigs.pid" || bail "the command never started"
kill -HUP "$p"
wait_for 30 grep -q HUP "$tmp/sigs"
check "SIGHUP is forwarded to the command" grep -q HUP "$tmp/sigs"
wait "$p"
rc=$?
check "... which handled it and exited 0 (exit $rc)" test "$rc" = 0

done_testing
