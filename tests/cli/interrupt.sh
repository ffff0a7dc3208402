#!/bin/sh
# SIGTERM, SIGINT or SIGHUP sent to a netmutex that waits for a lock ends
# it with 128 + the signal, and its entry leaves the server's queue as it
# exits, so that the next release does not grant the lock to it.
#
# The queue checks need the library to cancel a waiter's entry when the
# process exit()s (its atexit handler): without that the dead entry stays
# until it expires, 2 to 3 s after the waiter's last refresh of it (see
# QUEUE_TTL_MS in src/server/lease.c), and a release in between hands the lock to
# the dead waiter for a whole lease.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

# A shell starts background jobs with SIGINT ignored, and the tool leaves
# an ignored signal ignored: env(1) sets it back to the default.
env --default-signal=INT true || bail "env --default-signal (coreutils >= 8.31) is needed"

# Well under the 2 s a dead entry lasts at the least, even when scaled.
bound=$(msecs 300 1000)

queued() { [ "$(waiters "$1")" = "$2" ]; }

# left_queue NAME SINCE: whether NAME's queue was seen empty by a status
# that started at most $bound ms after SINCE.
left_queue() {
    while :; do
        start=$(now_ms)
        [ $((start - $2)) -le "$bound" ] || return 1
        queued "$1" 0 && return 0
        sleep 0.02
    done
}

# interrupt SIG STATUS [OPTION...]: a waiter (with OPTIONs) queued behind
# a holder gets SIG.
interrupt() {
    sig=$1 code=$2 name=lock-$1; shift 2
    hold "$name"
    env --default-signal=INT "$NM" "$@" "$name" touch "$tmp/ran.$sig" 2>"$tmp/err.$sig" &
    w=$!
    bg_pids="$bg_pids $w"
    wait_for 30 queued "$name" 1 || bail "the waiter for $name never queued"
    kill -"$sig" "$w"
    wait "$w"
    rc=$?
    since=$(now_ms)
    check "SIG$sig while waiting: exit $code (exit $rc)" test "$rc" = "$code"
    check "... the command never ran" test ! -e "$tmp/ran.$sig"
    check "... its queue entry is gone within ${bound} ms of its exit" left_queue "$name" "$since"
    release_hold
    check "... the holder released (exit $hold_rc)" test "$hold_rc" = 143
    expect_rc 0 "... and then a newcomer gets the lock at once" \
        "$NM" -w "$(secs 1)" "$name" true
}

interrupt TERM 143
interrupt INT 130 -v
check "... -v says why it gave up" quiet grep -q 'while waiting for lock-INT: giving up' "$tmp/err.INT"
interrupt HUP 129 -w "$(secs 300)"

# A signal ignored when the tool started stays ignored while it waits.
hold lock-ign
"$NM" lock-ign touch "$tmp/ran.ign" &
w=$!
bg_pids="$bg_pids $w"
wait_for 30 queued lock-ign 1 || bail "the waiter for lock-ign never queued"
kill -INT "$w"
sleep 0.2
check "an ignored SIGINT leaves the waiter waiting" kill -0 "$w"
release_hold
wait "$w"
rc=$?
check "... which then gets the lock and runs its command (exit $rc)" test "$rc" = 0 -a -e "$tmp/ran.ign"

done_testing
