#!/bin/sh
# run-counter.sh -- `make check` for the porting example: each ported
# counter (source route, link route) runs as 2 processes x 3 threads
# bumping one counter file under stats_lock, selected by NETMUTEX_MUTEXES,
# against a private redis-server; every bump must survive.  The server and
# its directory go away at exit, also on failure.
set -u
dir=$(mktemp -d "${TMPDIR:-/tmp}/nmporting.XXXXXX") || exit 99
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 99' INT TERM

"${REDIS_SERVER:-redis-server}" --port 0 --unixsocket "$dir/redis.sock" --save "" \
    --appendonly no --dir "$dir" --daemonize no >"$dir/redis.log" 2>&1 &
server=$!
tries=0
until [ -S "$dir/redis.sock" ]; do
    tries=$((tries + 1))
    if [ "$tries" -gt 1000 ]; then echo "redis-server did not start"; exit 99; fi
    sleep 0.01
done

NETMUTEX_URL="unix://$dir/redis.sock"
NETMUTEX_MUTEXES=stats_lock
export NETMUTEX_URL NETMUTEX_MUTEXES
status=0
for route in source wrap; do
    file="$dir/count-$route"
    ./porting/counter-$route "$file" 3 100 & a=$!
    ./porting/counter-$route "$file" 3 100 & b=$!
    wait "$a" || status=1
    wait "$b" || status=1
    got=$(./porting/counter "$file" show)
    if [ "$got" = 600 ]; then
        echo "PASS: counter-$route: 2 processes x 300 bumps, counter at $got"
    else
        echo "FAIL: counter-$route: counter at $got, want 600"
        status=1
    fi
done
exit $status
