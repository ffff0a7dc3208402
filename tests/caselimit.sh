#!/bin/sh
# caselimit.sh -- a test case that never ends is stopped by the fixture's
# time limit (fixture_case.c) and named, and takes its redis-server and
# the server's directory with it, instead of blocking the suite.
# stuck_case's first case blocks for ever; its second must not run.
set -u
n=0
say() { n=$((n + 1)); echo "$1 $n - $2"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/caselimit.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
slow=${NETMUTEX_TEST_SLOWDOWN:-1}
slow=${slow%%.*}
bound=$((120 * slow))

start=$(date +%s)
NETMUTEX_TEST_CASE_SECONDS=2 timeout -s KILL "$bound" ./stuck_case >"$tmp/out" 2>"$tmp/err"
rc=$?
took=$(( $(date +%s) - start ))
if [ "$rc" -ne 0 ] && [ "$rc" -ne 137 ]; then
    say ok "the stuck program ended by itself (status $rc, ${took} s)"
else
    say "not ok" "the stuck program ended with status $rc after ${took} s (137: killed at ${bound} s)"
fi
if grep -q '^Bail out! /stuck/blocks still running after' "$tmp/out"; then
    say ok "the stuck case is named on standard output"
else
    say "not ok" "no 'Bail out! /stuck/blocks' line; it printed: $(tail -n 3 "$tmp/out" | tr '\n' ' ')"
fi
if grep -q 'the case after the stuck one ran' "$tmp/out"; then
    say "not ok" "the case after the stuck one ran"
else
    say ok "the case after the stuck one did not run"
fi
dir=$(sed -n 's/^server-dir //p' "$tmp/err" | head -n 1)
if [ -z "$dir" ]; then
    say "not ok" "stuck_case printed no server directory: $(head -n 3 "$tmp/err" | tr '\n' ' ')"
else
    i=0
    # The server dies with the program (PDEATHSIG): give it a moment.
    while pgrep -f "$dir" >/dev/null 2>&1 && [ "$i" -lt $((20 * slow)) ]; do
        sleep 0.5
        i=$((i + 1))
    done
    if pgrep -f "$dir" >/dev/null 2>&1; then
        say "not ok" "its redis-server still runs: $(pgrep -af "$dir")"
        pkill -KILL -f "$dir"
    else
        say ok "its redis-server is gone"
    fi
    if [ -e "$dir" ]; then
        say "not ok" "its server directory $dir is left"
        rm -rf "$dir"
    else
        say ok "its server directory is removed"
    fi
fi
echo "1..$n"
exit 0
