#!/bin/sh
# top: two runs sharing NAME under NETMUTEX_STATS=publish each publish
# their statistics; `top --once` shows NAME once, its read shares summed
# over both processes, `--json` says the same, `-n 1` shows one name, a
# pattern that matches nothing shows none; bad arguments are usage errors
# (2).  Once the runs are gone, their keys go with them and top shows
# nothing.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

expect_rc 2 "top -n 0 is a usage error" "$NM" top -n 0
expect_rc 2 "top -n without a COUNT is one" "$NM" top -n
expect_rc 2 "top --bogus is one" "$NM" top --bogus
expect_rc 2 "top with two patterns is one" "$NM" top 'a*' 'b*'
expect_rc 2 "run's -n before top is one" "$NM" -n top --once

"$NM" top --once >"$tmp/empty.out" 2>&1
check "with nothing published, top --once shows no name: $(head -n 1 "$tmp/empty.out")" \
    grep -q " 0 name(s)" "$tmp/empty.out"

# Two shared holders of pool, and one exclusive holder of solo, all
# publishing; each stays inside until the test ends.
for who in a b; do
    NETMUTEX_STATS=publish "$NM" -s pool sh -c 'echo in >"$1"; exec sleep 300' \
        sh "$tmp/$who.in" &
    bg_pids="$bg_pids $!"
done
NETMUTEX_STATS=publish "$NM" solo sh -c 'echo in >"$1"; exec sleep 300' sh "$tmp/solo.in" &
bg_pids="$bg_pids $!"
inside() { test -s "$tmp/a.in" && test -s "$tmp/b.in" && test -s "$tmp/solo.in"; }
wait_for 30 inside || bail "the holders never got in"

# jget FILE KIND NAME KEY: KEY of that row of top's JSON, or nothing.
jget() {
    python3 -c 'import json, sys
for r in json.loads(open(sys.argv[1]).readline()):
    if r["kind"] == sys.argv[2] and r["name"] == sys.argv[3]:
        print(r[sys.argv[4]])' "$@"
}
both() {
    "$NM" top --once --json >"$tmp/top.json" 2>/dev/null &&
        test "$(jget "$tmp/top.json" rwlock pool processes)" = 2
}
wait_for 30 both
check "top --json: pool's read shares come from 2 processes" both
check "... 2 acquisitions in all ($(jget "$tmp/top.json" rwlock pool acquisitions))" \
    test "$(jget "$tmp/top.json" rwlock pool acquisitions)" = 2
check "... and solo is there too, from 1" \
    test "$(jget "$tmp/top.json" mutex solo processes)" = 1

"$NM" top --once >"$tmp/top.out" 2>&1
check "top --once: a row for pool from 2 processes" \
    grep -Eq '^pool +rwlock +2 +2 ' "$tmp/top.out"
"$NM" top --once -n 1 >"$tmp/one.out" 2>&1
check "-n 1: one row under the header ($(sed -n 1p "$tmp/one.out"))" \
    test "$(wc -l <"$tmp/one.out")" -eq 4
"$NM" top --once 'so*' >"$tmp/so.out" 2>&1
check "a pattern: only solo's rows" sh -c '! grep -q "^pool" "$1" && grep -q "^solo" "$1"' \
    sh "$tmp/so.out"
"$NM" top --once 'nomatch*' >"$tmp/none.out" 2>&1
check "a pattern that matches nothing: no name" grep -q " 0 name(s)" "$tmp/none.out"
"$NM" top --iterations 2 --interval 100 --json >"$tmp/two.json" 2>&1
check "--iterations 2: two JSON lines" test "$(wc -l <"$tmp/two.json")" -eq 2

for p in $bg_pids; do kill -TERM "$p" 2>/dev/null; done
for p in $bg_pids; do wait "$p" 2>/dev/null; done
bg_pids=
gone() { "$NM" top --once >"$tmp/gone.out" 2>&1 && grep -q " 0 name(s)" "$tmp/gone.out"; }
wait_for 30 gone
check "once the holders are gone, top shows no name" gone

done_testing
