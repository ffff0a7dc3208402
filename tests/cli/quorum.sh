#!/bin/sh
# Quorum mode: NETMUTEX_URL lists three servers.  The tool works the same:
# exclusion, conflicts, status and break.
. "${srcdir:-.}/cli/lib.sh"

start_redis a; a=$redis_url
start_redis b; b=$redis_url
start_redis c; c=$redis_url
NETMUTEX_URL="$a,$b,$c"; export NETMUTEX_URL
ROUNDS=4

expect_rc 3 "quorum: exit status passthrough" "$NM" job sh -c 'exit 3'

. "${srcdir:-.}/cli/exclusion.inc"
exclusion_test "quorum"

hold job
expect_rc 1 "quorum: -n while held gives 1" quiet "$NM" -n job true
expect_rc 0 "quorum: status while held exits 0" quiet "$NM" status job
expect_rc 0 "quorum: -u with one server sees the lock too" quiet "$NM" -u "$b" status job
release_hold
check "quorum: SIGTERM reached the command (exit $hold_rc)" test "$hold_rc" = 143
expect_rc 1 "quorum: status after release: free (1)" quiet "$NM" status job

hold job --lease 500
expect_rc 0 "quorum: break while held gives 0" quiet "$NM" break job
wait "$hold_pid"
rc=$?
check "quorum: the broken holder exits 75 (exit $rc)" test "$rc" = 75

done_testing
