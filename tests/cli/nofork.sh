#!/bin/sh
# -F/--no-fork: the command is exec'd in place (it keeps the tool's pid)
# while a keeper process holds the lock and releases it when the command's
# process ends, however it ends (kill -9 included); a conflict exits as
# without -F; -s and --permits work with it; no keeper is left behind.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

# The names are this test's own, so that the keepers found below are its.
job=nf$$-job doc=nf$$-doc pool=nf$$-pool

# keepers: how many processes of the tool hold one of those names in
# their command line (a keeper is a fork of the tool, its argv the same)
# and are not children of this shell (a keeper is not even the child of
# the tool that started it).  The [f] keeps grep from finding itself.
nm_exe=$(readlink -f "$NM")
keeper_pids() {
    for f in $(grep -las -- "n[f]$$-" /proc/[0-9]*/cmdline); do
        d=${f%/cmdline}
        [ "$(readlink "$d/exe" 2>/dev/null)" = "$nm_exe" ] || continue
        [ "$(sed -n 's/^PPid:[[:space:]]*//p' "$d/status" 2>/dev/null)" = $$ ] && continue
        echo "${d#/proc/}"
    done
}
keepers() { keeper_pids | wc -l | tr -d ' '; }
no_keeper() { [ "$(keepers)" = 0 ]; }
is_free() { quiet "$NM" status "$1"; [ $? = 1 ]; }
queued() { [ "$(waiters "$1")" = "$2" ]; }

# hold_f NAME [OPTION...]: a background netmutex -F holding NAME; sets
# hold_pid, once its command runs, to the tool's pid, which is the
# command's (it wrote $$ to $tmp/held).
hold_f() {
    name=$1; shift
    rm -f "$tmp/held"
    "$NM" -F "$@" "$name" sh -c 'echo $$ >"$1.tmp"; mv "$1.tmp" "$1"; exec sleep 300' \
        sh "$tmp/held" &
    hold_pid=$!
    bg_pids="$bg_pids $hold_pid"
    wait_for 30 test -s "$tmp/held" || bail "the -F holder of $name never got it"
}

# The command keeps the tool's pid.
"$NM" -F "$job" sh -c 'echo $$ >"$1"' sh "$tmp/pid" &
p=$!
bg_pids="$bg_pids $p"
wait "$p"
rc=$?
check "the command ran as the tool's own process (pid $p: $(cat "$tmp/pid"))" \
    test "$rc" = 0 -a "$(cat "$tmp/pid")" = "$p"
check "--no-fork too" test "$("$NM" --no-fork "$job" -c 'echo ok')" = ok
expect_rc 3 "the command's exit status is the tool's" "$NM" -F "$job" sh -c 'exit 3'
expect_rc 127 "a command that does not exist gives 127" quiet "$NM" -F "$job" ./no-such-command
check "... and the lock is free promptly" wait_for 20 is_free "$job"

expect_rc 78 "a malformed URL gives 78, as without -F" quiet "$NM" -F -u 'nosuch://x' "$job" true
expect_rc 69 "an unreachable server gives 69, as without -F" \
    quiet "$NM" -F -u "unix://$tmp/nobody.sock" "$job" touch "$tmp/ran"
check "... and runs nothing" test ! -e "$tmp/ran"

f1=$("$NM" -F "$job" sh -c 'echo "$NETMUTEX_FENCE"')
f2=$(NETMUTEX_FENCE=junk "$NM" -F "$job" sh -c 'echo "$NETMUTEX_FENCE"')
check "NETMUTEX_FENCE is a number ($f1)" quiet expr "x$f1" : 'x[0-9][0-9]*$'
check "NETMUTEX_FENCE grows, replacing an inherited one ($f1 < $f2)" test "$f1" -lt "$f2"

# The command sees the descriptors and signal mask of a plain command.
plain=$(sh -c 'ls /proc/$$/fd' | tr '\n' ' ')
locked=$("$NM" -F "$job" sh -c 'ls /proc/$$/fd' | tr '\n' ' ')
check "no descriptor leaks into the command ($plain| $locked)" test "$plain" = "$locked"
user_sigs() {
    while read -r field mask; do
        printf '%s %x ' "$field" $(( 0x$mask & ~0x180000000 ))
    done
}
plain=$(grep -E '^Sig(Blk|Ign):' /proc/self/status | user_sigs)
locked=$("$NM" -F "$job" grep -E '^Sig(Blk|Ign):' /proc/self/status | user_sigs)
check "the command starts with the signal mask of a plain one ($plain| $locked)" \
    test "$plain" = "$locked"

# While a -F command runs the lock is held, by its pid; once it ends
# (here by the SIGTERM sent to its pid) the lock is free.  The keepers of
# the runs above leave once their commands ended (under the sanitizers a
# process's exit takes a while): none is counted below.
check "the keepers of the runs above have left" wait_for 20 no_keeper
exec 7>"$tmp/seven"
hold_f "$job"
exec 7>&-
check "one keeper runs meanwhile ($(keepers))" test "$(keepers)" = 1
k=$(keeper_pids)
check "... its stdin and stdout are /dev/null" \
    test "$(readlink "/proc/$k/fd/0")" = /dev/null -a "$(readlink "/proc/$k/fd/1")" = /dev/null
check "... and it closed the descriptors it inherited" \
    test "$(ls -l "/proc/$k/fd" | grep -c seven)" = 0 -a "$(ls -l "/proc/$hold_pid/fd" | grep -c seven)" = 1
expect_rc 1 "a -n run while a -F command runs gives 1" quiet "$NM" -n "$job" touch "$tmp/ran"
expect_rc 5 "... -F -n -E 5 gives 5" quiet "$NM" -F -n -E 5 "$job" touch "$tmp/ran"
expect_rc 1 "... -F -w 0.3 gives 1" quiet "$NM" -F -w 0.3 "$job" touch "$tmp/ran"
check "no command of a refused run ran" test ! -e "$tmp/ran"
"$NM" status "$job" >"$tmp/status" 2>&1
check "status names the command's pid as the holder" grep -q ":$hold_pid:" "$tmp/status"
kill -TERM "$hold_pid"
wait "$hold_pid"
rc=$?
check "the command got the SIGTERM itself (exit $rc)" test "$rc" = 143
check "the lock is free promptly once it ended" wait_for 20 is_free "$job"
check "... and no keeper is left" wait_for 20 no_keeper
expect_rc 0 "... and a -n run takes it" "$NM" -n "$job" true

# kill -9 of the command: the keeper still releases.
hold_f "$job"
kill -KILL "$hold_pid"
wait "$hold_pid"
check "a command killed with SIGKILL: the lock is free promptly" wait_for 20 is_free "$job"
check "... and no keeper is left" wait_for 20 no_keeper

# Killed (kill -9) while waiting, before the command started: the keeper
# gives up, and the command never runs.
hold "$job"
"$NM" -F "$job" touch "$tmp/ran" &
p=$!
bg_pids="$bg_pids $p"
wait_for 30 queued "$job" 1 || bail "the -F waiter never queued"
kill -KILL "$p"
wait "$p"
check "killed while waiting: its keeper leaves" wait_for 20 no_keeper

# SIGTERM to a waiting -F run ends it (143); SIGTERM to its keeper ends
# the wait too, and the run exits as a normal run would (143).
for target in run keeper; do
    "$NM" -F "$job" touch "$tmp/ran" &
    p=$!
    bg_pids="$bg_pids $p"
    wait_for 30 queued "$job" 1 || bail "the -F waiter never queued"
    if [ "$target" = run ]; then kill -TERM "$p"; else kill -TERM $(keeper_pids); fi
    wait "$p"
    rc=$?
    check "SIGTERM to the $target of a waiting -F run: it exits 143 (exit $rc)" test "$rc" = 143
    check "... and its keeper leaves" wait_for 20 no_keeper
done
release_hold
expect_rc 0 "... the lock is free after the holder" "$NM" -n "$job" true
check "... and no command of a killed run ran" test ! -e "$tmp/ran"

# A lost lease: the keeper sends the --on-lost signal to the command.
rm -f "$tmp/lost" "$tmp/lost.pid"
"$NM" -F --lease 1000 --on-lost USR1 "$job" sh -c 'trap "echo lost >\"$1\"; exit 0" USR1
    echo $$ >"$1.pid"; while :; do sleep 0.05; done' sh "$tmp/lost" 2>"$tmp/lost.err" &
p=$!
bg_pids="$bg_pids $p"
wait_for 30 test -s "$tmp/lost.pid" || bail "the -F command never started"
quiet "$NM" break "$job"
check "a lost lease sends the --on-lost signal to the command" wait_for 30 test -s "$tmp/lost"
wait "$p"
rc=$?
check "... whose exit status is the tool's (exit $rc)" test "$rc" = 0
check "... with a message" grep -q "lost" "$tmp/lost.err"
check "... and no other line on stderr: $(grep -v '^netmutex: ' "$tmp/lost.err" | head -n 3)" \
    test -z "$(grep -v '^netmutex: ' "$tmp/lost.err")"
check "... and no keeper is left" wait_for 20 no_keeper

# -s: -F readers overlap, and keep an exclusive run out.
reader() {
    "$NM" -F -s "$doc" sh -c '
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
check "two -F -s runs both exited 0 ($rca, $rcb)" test "$rca" = 0 -a "$rcb" = 0
check "... and held NAME at once (each saw the other)" test -e "$tmp/saw.a" -a -e "$tmp/saw.b"
hold_f "$doc" -s
expect_rc 0 "a shared run while a -F -s one holds runs" quiet "$NM" -s -n "$doc" true
expect_rc 1 "an exclusive -n run gives 1" quiet "$NM" -n "$doc" true
kill -TERM "$hold_pid"
wait "$hold_pid"
check "once the -F -s command ended, an exclusive run gets NAME" \
    wait_for 20 quiet "$NM" -n "$doc" true

# --permits: two -F holders of a pool of 2 fill it.
hold_f "$pool" --permits 2
p1=$hold_pid
hold_f "$pool" --permits 2
p2=$hold_pid
expect_rc 1 "--permits 2: a third -n run with two -F holders gives 1" \
    quiet "$NM" -n --permits 2 "$pool" true
f=$("$NM" -F --permits 3 "$doc" sh -c 'echo "$NETMUTEX_FENCE"')
check "a permit's NETMUTEX_FENCE is 0 ($f)" test "$f" = 0
kill -KILL "$p1"
wait "$p1"
check "a permit whose -F command was killed comes back promptly" \
    wait_for 20 quiet "$NM" -n --permits 2 "$pool" true
kill -TERM "$p2"
wait "$p2"

check "no keeper is left after the run" wait_for 20 no_keeper
done_testing
