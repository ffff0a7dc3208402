#!/bin/sh
# --permits N: NAME is a counting semaphore.  Eight commands started at
# once with --permits 3 never have more than three inside, and do have
# three; -n when every permit is held is a conflict (exit 1); another
# number of permits for a name in use is refused (78, EX_CONFIG); a bad
# number is a usage error.
. "${srcdir:-.}/cli/lib.sh"

start_redis r1
NETMUTEX_URL=$redis_url; export NETMUTEX_URL

# Inside, each command leaves a file of its own in $1/in while it counts
# the files there: a fourth command inside at once would count four.
mkdir "$tmp/in"
inside='touch "$1/in/$$"; ls "$1/in" | wc -l >>"$1/seen"; sleep 1; rm -f "$1/in/$$"'
pids=
i=0
while [ "$i" -lt 8 ]; do
    "$NM" --permits 3 pool sh -c "$inside" sh "$tmp" || echo "exit $?" >>"$tmp/bad" &
    pids="$pids $!"
    i=$((i + 1))
done
bg_pids="$bg_pids $pids"
wait $pids
check "every command ran and exited 0" test ! -e "$tmp/bad"
check "eight commands went in" test "$(wc -l <"$tmp/seen")" -eq 8
most=$(sort -n "$tmp/seen" | tail -n 1)
check "never more than 3 inside at once (most: $most)" test "$most" -le 3
check "3 inside at once" test "$most" -eq 3

hold pool --permits 1
expect_rc 1 "--nb with every permit held gives 1" quiet "$NM" --nb --permits 1 pool true
expect_rc 78 "another number of permits is refused with 78" quiet "$NM" --permits 2 pool true
release_hold
expect_rc 0 "once free, another number is taken" quiet "$NM" --permits 2 pool true

expect_rc 2 "--permits 0 is a usage error" quiet "$NM" --permits 0 pool true
expect_rc 2 "--permits 65537 is a usage error" quiet "$NM" --permits 65537 pool true
expect_rc 2 "--permits with status is a usage error" quiet "$NM" --permits 2 status pool
expect_rc 2 "--permits with -s is a usage error" quiet "$NM" --permits 2 -s pool true

done_testing
