#!/bin/sh
# Bad command lines exit 2 with a message, never crash and never touch a
# server; bad or unreachable servers have their own codes.
. "${srcdir:-.}/cli/lib.sh"

# A socket nobody listens on: nothing below may get as far as dialing.
NETMUTEX_URL="unix://$tmp/nobody.sock"; export NETMUTEX_URL
long=$(awk 'BEGIN { while (i++ < 1025) printf "x" }')

usage() {
    desc=$1; shift
    "$NM" "$@" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ "$rc" = 2 ] && grep -q . "$tmp/err"; then ok "$desc"; else
        not_ok "$desc"; diag "exit $rc, stderr: $(cat "$tmp/err")"; fi
}

usage "no arguments"
usage "missing command" job
usage "missing NAME after run" run
usage "missing NAME after --" --
usage "empty NAME" "" true
usage "NAME of 1025 bytes" "$long" true
usage "-c without its command" job -c
usage "-c with two words" job -c 'true' extra
usage "bad -w" -w abc job true
usage "negative -w" -w -1 job true
usage "-w nan" -w nan job true
usage "-w without a value" -w
usage "bad -E" -E x job true
usage "-E out of range" -E 256 job true
usage "bad --lease" --lease 5 job true
usage "bad --on-lost" --on-lost NOSUCHSIG job true
usage "unknown option" --frobnicate job true
usage "unknown short option" -Z job true
usage "status without NAME" status
usage "status with two NAMEs" status a b
usage "--json is for status" --json job true
usage "-n is not for status" status -n job
usage "break without NAME" break
usage "--lease is not for break" break --lease 100 job
usage "--json is not for break" break --json job
usage "list with two PATTERNs" list a b
usage "-n is not for list" list -n
usage "-x is not for list" list -x
usage "-s is not for list" list -s
usage "-F is not for status" status -F job
usage "--no-fork is not for list" list --no-fork
usage "acl with two PREFIXes" acl a b
usage "acl PREFIX with a brace" acl 'a{'
usage "-n is not for acl" acl -n
usage "-u is not for acl" acl -u "$NETMUTEX_URL"

expect_rc 0 "--help exits 0" quiet "$NM" --help
expect_rc 0 "--version exits 0" quiet "$NM" --version
expect_rc 78 "a malformed URL gives 78" quiet "$NM" -u 'nosuch://x' job true
expect_rc 69 "an unreachable server gives 69" quiet "$NM" job true
expect_rc 69 "status of an unreachable server gives 69" quiet "$NM" status job
expect_rc 69 "break on an unreachable server gives 69" quiet "$NM" break job
expect_rc 69 "list on an unreachable server gives 69" quiet "$NM" list
expect_rc 0 "acl asks no server" quiet "$NM" acl
expect_rc 78 "acl with a bad NETMUTEX_PREFIX gives 78" quiet env NETMUTEX_PREFIX='}' "$NM" acl

# A lock may be called "status", "break" or "list": after "run" or "--".
start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL
expect_rc 4 "run status COMMAND takes the lock named status" "$NM" run status sh -c 'exit 4'
expect_rc 5 "-- break COMMAND takes the lock named break" "$NM" -- break sh -c 'exit 5'
expect_rc 1 "status status: the lock named status is free" quiet "$NM" status status
expect_rc 6 "run list COMMAND takes the lock named list" "$NM" run list sh -c 'exit 6'
expect_rc 7 "run acl COMMAND takes the lock named acl" "$NM" run acl sh -c 'exit 7'
expect_rc 1 "status, break, list: options may follow the operand" quiet "$NM" status job --json
NAME1024=$(awk 'BEGIN { while (i++ < 1024) printf "y" }')
expect_rc 0 "a NAME of 1024 bytes works" "$NM" "$NAME1024" true

done_testing
