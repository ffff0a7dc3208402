#!/bin/sh
# util-linux's own test suite for flock(1), tests/ts/flock (its scripts
# flock, close, unlock and range-lock, as of util-linux 2.42's development
# in 2026), is the judge of the options that make sense for a named lock.
# Every case of it that applies to a NAME is performed here with netmutex:
# the same options, the same lock state around it, the same exit status
# and outcome.  Each case names the one it mirrors as script:subtest.
#
# The cases that do not apply (a descriptor, a file, fcntl(2) locks, a byte
# range, a descriptor inherited by the command) are listed with the reason
# in netmutex.1, DIFFERENCES FROM FLOCK(1); the last part of this test
# checks that each of their options is refused with a usage error that
# says why, and that what the command inherits is what that page says.
#
# Timing: util-linux checks that its timed waiter got the lock between 3 and
# 5 seconds after a 3-second shared hold began.  The lower bound is checked
# here as an order (the waiter's command ran after the holder's had ended),
# the upper one by the waiter's exit status (0, not its -E code: it got the
# lock within its --timeout); no duration is measured.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

# A path, as flock(1) takes: for netmutex it is a NAME like any other, and
# nothing is created there.
name=$tmp/lockfile
never='a refused run printed this'

# into OUT ERR COMMAND...: COMMAND with its stdout and stderr appended to
# OUT and ERR (for expect_rc, whose own lines must stay on stdout).
into() {
    into_out=$1 into_err=$2; shift 2
    "$@" >>"$into_out" 2>>"$into_err"
}

# has_child PID: PID has a child process (the command, for netmutex).
has_child() {
    grep -qs "^PPid:[[:space:]]*$1\$" /proc/[0-9]*/status
}

# ---- flock: the cases of tests/ts/flock/flock, for the flock(2) API --------

# flock (the general lock): a shared holder in the background; its lock is
# there once it has a child.  util-linux's holder runs for 3 seconds; ours
# runs until the timed case below lets it go, then one more second, so
# that a slow machine (a sanitizer, a busy CI) cannot end the hold before
# the cases that need it held have run (nor outlive the test's directory).
go=$tmp/holder-may-go
"$NM" --shared "$name" sh -c 'echo "holder in"
    while [ ! -e "$1" ] && [ -d "${1%/*}" ]; do sleep 0.05; done
    sleep 1; echo "holder out"' sh "$go" \
    >>"$tmp/general" 2>&1 &
general=$!
bg_pids="$bg_pids $general"
wait_for 10 has_child "$general" || bail "the shared holder never ran its command"

# flock:flock-non-block
expect_rc 123 "flock-non-block: --nonblocking --conflict-exit-code 123 gives 123" \
    into "$tmp/out" "$tmp/err" "$NM" --nonblocking --conflict-exit-code 123 "$name" echo "$never"

# flock:flock-no-fork
expect_rc 123 "flock-no-fork: --no-fork --nonblocking --conflict-exit-code 123 gives 123" \
    into "$tmp/out" "$tmp/err" \
    "$NM" --no-fork --nonblocking --conflict-exit-code 123 "$name" echo "$never"

# flock:flock-shared
expect_rc 0 "flock-shared: --shared runs beside the shared holder" \
    into "$tmp/out" "$tmp/err" "$NM" --shared "$name" echo "shared beside the holder"

# flock:flock-exclusive (the default mode, asked for by name)
expect_rc 123 "flock-exclusive: --nb --exclusive --conflict-exit-code 123 gives 123" \
    into "$tmp/out" "$tmp/err" \
    "$NM" --nb --exclusive --conflict-exit-code 123 "$name" echo "$never"

check "... no refused command ran, the shared one did" \
    test "$(cat "$tmp/out")" = "shared beside the holder"
check "... and none of them said anything on stderr: $(head -n 3 "$tmp/err")" \
    test ! -s "$tmp/err"

# flock:flock-timeout: an exclusive run that waits up to 5 seconds gets the
# lock once the shared run is over (a second after this lets it go).  (flock:flock-fd and
# flock:fcntl-vs-flock do not apply: see the top.)
: >"$go"
expect_rc 0 "flock-timeout: --timeout 5 --conflict-exit-code 5 waits and runs (exit 0)" \
    into "$tmp/general" "$tmp/general" \
    "$NM" --timeout "$(secs 5)" --conflict-exit-code 5 "$name" echo "waiter ran"
# flock:flock-time-check, as an order (see the top)
printf '%s\n' "holder in" "holder out" "waiter ran" >"$tmp/want"
check "flock-time-check: the waiter ran only after the shared run had ended ($(tr '\n' '|' <"$tmp/general"))" \
    cmp -s "$tmp/want" "$tmp/general"
wait "$general"
rc=$?
check "flock: the shared holder exited 0 (exit $rc)" test "$rc" = 0

# ---- close: tests/ts/flock/close -------------------------------------------

# close (first run): with --close, the command does not hold the lock, so
# the same lock asked for again inside it, without waiting, is refused.
# flock's inner run finds its descriptor closed (65, EBADF); a NAME has no
# descriptor, so netmutex's inner run meets a conflict (1), which the outer
# run passes on as the command's status.
expect_rc 1 "close: --exclusive --close NAME --command 'inner --exclusive --nonblock' gives 1" \
    "$NM" --exclusive --close "$name" --command \
    "'$NM' --exclusive --nonblock '$name' true 2>>'$tmp/close.err'"
check "... the inner run said nothing on stderr" test ! -s "$tmp/close.err"

# ---- unlock: tests/ts/flock/unlock -----------------------------------------

# unlock (third run): --wait 0 on a free lock is a non-blocking attempt
# that succeeds; --verbose reports it.  flock writes "getting lock took N
# seconds" and "executing true" on stdout; netmutex writes its own lines on
# stderr (DIFFERENCES FROM FLOCK(1), Verbose).
expect_rc 0 "unlock: --exclusive --wait 0 --verbose NAME true on a free lock gives 0" \
    into "$tmp/v.out" "$tmp/v.err" "$NM" --exclusive --wait 0 --verbose "$name" true
check "... nothing on stdout" test ! -s "$tmp/v.out"
check "... and its --verbose lines on stderr" grep -q "^netmutex: acquired " "$tmp/v.err"
check "... and no line but those: $(grep -v '^netmutex: ' "$tmp/v.err" | head -n 3)" \
    test -z "$(grep -v '^netmutex: ' "$tmp/v.err")"

check "no file was made at the path used as a NAME" test ! -e "$name"

# ---- the cases that do not apply -------------------------------------------
# Each is refused with exit 2 and a message that names what it asked for,
# and runs nothing (see DIFFERENCES FROM FLOCK(1)).

# refused WANT DESC ARGS...: netmutex ARGS exits 2, runs nothing, and says
# WANT (a grep pattern) on stderr.
refused() {
    want=$1 desc=$2; shift 2
    rm -f "$tmp/ran"
    (cd "$tmp" && exec "$NM" "$@") >/dev/null 2>"$tmp/refused.err"
    rc=$?
    if [ "$rc" = 2 ] && [ ! -e "$tmp/ran" ] && grep -q -- "$want" "$tmp/refused.err"; then
        ok "$desc"
    else
        not_ok "$desc"; diag "exit $rc, stderr: $(cat "$tmp/refused.err")"
    fi
}

# flock:fcntl-* (every case run again with --fcntl), flock:fcntl-vs-flock
# and range-lock (--fcntl --start 1 --length 2 on a directory): fcntl(2)
# locks and byte ranges are locks of a file.
refused "--fcntl is flock(1)'s for a file" "flock-fcntl-*: --fcntl is refused" \
    --fcntl --nonblocking --conflict-exit-code 123 "$name" touch "$tmp/ran"
refused "--start is flock(1)'s for a file" "range-lock: --start is refused" \
    --shared --start 1 --length 2 --no-fork . -c 'touch ran'
refused "--length is flock(1)'s for a file" "range-lock: --length is refused" \
    --shared --length 2 --no-fork . -c 'touch ran'

# flock:flock-fd (a descriptor open on the file, locked by its number) and
# unlock's first run (the same with --verbose): a lone number is a NAME
# with its COMMAND missing, and flock's "file named 4" mistake cannot
# happen: nothing is created.
exec 4<>"$tmp/fdfile"
refused "file descriptor" "flock-fd: NAME 4 without a COMMAND is refused" \
    --nonblocking --exclusive --conflict-exit-code 123 4
refused "file descriptor" "unlock: --exclusive --nonblock --verbose 10 is refused" \
    --exclusive --nonblock --verbose 10
exec 4>&-
check "... and no file named after the number was made" test ! -e "$tmp/4" -a ! -e "$tmp/10"

# unlock (second run): --unlock of a descriptor.  A run's lock goes with
# its command; `netmutex break` frees one held by someone else.
refused "--unlock is flock(1)'s" "unlock: --unlock is refused" --unlock 10

# close (both runs): --fd names the descriptor to lock.
refused "--fd is flock(1)'s for a file" "close: --fd is refused" --exclusive --close --fd 10 --command 'touch ran'

# close (second run): without --close, flock's command inherits the locked
# descriptor, and the same lock asked for inside it is granted (0).  A
# netmutex command never holds anything of the lock, --close or not: the
# inner run meets a conflict (1).
expect_rc 1 "close: without --close the command still does not hold NAME (1, not flock's 0)" \
    "$NM" --exclusive "$name" --command "'$NM' --exclusive --nonblock '$name' true"

done_testing
