#!/bin/sh
# netmutex list [PATTERN]: the locks held now under the key prefix, with
# holder, since, ttl, fence and waiters; exit 0 when it lists one, 1 when
# none is held.  Only lock keys count (not the meta keys a free lock
# leaves), the prefix is matched literally even with glob characters in
# it, and in quorum mode a key left on a minority of the servers is no
# held lock, while one server down of three changes nothing but a warning.
. "${srcdir:-.}/cli/lib.sh"

start_redis a; a=$redis_url
start_redis b; b=$redis_url
start_redis c; c=$redis_url
NETMUTEX_URL=$a; export NETMUTEX_URL

# holder NAME [OPTION...]: a background netmutex holding NAME (with the
# OPTIONs given to it before NAME); its command's pid in $tmp/NAME.cmd.
holder() {
    name=$1; shift
    "$NM" "$@" "$name" sh -c 'echo $$ >"$1"; exec sleep 300' sh "$tmp/$name.cmd" &
    bg_pids="$bg_pids $!"
    wait_for 30 test -s "$tmp/$name.cmd" || bail "the holder of $name never got it"
}

# field NAME KEY: KEY's value in NAME's object of the JSON in $tmp/list.json.
field() {
    python3 -c 'import json, sys
for l in json.load(open(sys.argv[1])):
    if l["name"] == sys.argv[2]:
        print(l[sys.argv[3]])' "$tmp/list.json" "$1" "$2"
}

"$NM" list >"$tmp/list.txt"
rc=$?
check "nothing held: exit 1 (exit $rc)" test "$rc" = 1
check "... and only the header" test "$(wc -l <"$tmp/list.txt")" = 1
json=$("$NM" list --json)
check "... an empty JSON array ($json)" test "$json" = "[]"
expect_rc 0 "a lock taken and released" "$NM" gone true
expect_rc 1 "... is not listed, though its meta key stays" quiet "$NM" list

holder alpha
holder beta
"$NM" alpha true &
waiter=$!
bg_pids="$bg_pids $waiter"
queued() { [ "$(waiters "$1")" = "$2" ]; }
wait_for 30 queued alpha 1 || bail "the waiter for alpha never queued"

"$NM" list --json >"$tmp/list.json"
rc=$?
check "two held: exit 0 (exit $rc)" test "$rc" = 0
check "... valid JSON" quiet python3 -m json.tool "$tmp/list.json"
names=$(python3 -c 'import json, sys; print(" ".join(l["name"] for l in json.load(open(sys.argv[1]))))' \
    "$tmp/list.json")
check "... alpha and beta, sorted ($names)" test "$names" = "alpha beta"
check "... alpha's holder is this host and its command's pid" \
    quiet expr "x$(field alpha holder)" : "x$(uname -n):$(cat "$tmp/alpha.cmd"):[0-9][0-9]*\$"
check "... alpha has a fence" quiet expr "x$(field alpha fence)" : 'x[1-9][0-9]*$'
check "... and a ttl within its lease" \
    quiet awk -v t="$(field alpha ttl_ms)" 'BEGIN { exit !(t > 0 && t <= 30000) }'
check "... and since, in ms" quiet expr "x$(field alpha since_ms)" : 'x[1-9][0-9]*$'
check "... and one waiter" test "$(field alpha waiters)" = 1
check "... beta none" test "$(field beta waiters)" = 0

"$NM" list >"$tmp/list.txt"
check "text: a header and a line each" test "$(wc -l <"$tmp/list.txt")" = 3
check "... the header names the columns" \
    quiet grep -E '^NAME +KIND +HELD +HOLDER +SINCE +TTL_MS +FENCE +WAITERS +CACHED$' "$tmp/list.txt"
check "... alpha's line has its holder, fence, waiters and that it caches" \
    quiet grep -E "^alpha +mutex +1 +$(uname -n):$(cat "$tmp/alpha.cmd"):[0-9]+ +[0-9]{4}-[^ ]+ +[0-9]+ +$(field alpha fence) +1 +yes\$" \
    "$tmp/list.txt"

"$NM" list 'al*' --json >"$tmp/list.json"
rc=$?
check "PATTERN al*: exit 0, alpha only (exit $rc)" \
    test "$rc" = 0 -a "$(field alpha waiters)" = 1 -a -z "$(field beta waiters)"
expect_rc 1 "a PATTERN that matches nothing: 1" quiet "$NM" list 'zz*'
expect_rc 0 "a PATTERN is a glob on the whole name: b?ta" quiet "$NM" list 'b?ta'
expect_rc 1 "... so 'alph' does not match alpha" quiet "$NM" list alph

# Braces in a name: the name runs from the first '{' after the prefix to
# the last '}' of the key, and a name ending in "}:m" is no meta key.
"$NM" 'x{y' true
holder 'x{y}:m}'
"$NM" list --json >"$tmp/list.json"
names=$(python3 -c 'import json, sys; print(" ".join(l["name"] for l in json.load(open(sys.argv[1]))))' \
    "$tmp/list.json")
check "a name with braces is listed whole, a free one's meta key is not ($names)" \
    test "$names" = "alpha beta x{y}:m}"

# The prefix is taken literally: t*x: is not a glob that would match tax:.
NETMUTEX_PREFIX='t*x:' holder starred
NETMUTEX_PREFIX='tax:' holder plain
"$NM" list --json >"$tmp/list.json"
check "the default prefix lists neither of the others' locks" \
    test -z "$(field starred fence)$(field plain fence)"
NETMUTEX_PREFIX='t*x:' "$NM" list --json >"$tmp/list.json"
check "prefix t*x: lists its lock only" \
    test -n "$(field starred fence)" -a -z "$(field plain fence)"
NETMUTEX_PREFIX='tax:' "$NM" list --json >"$tmp/list.json"
check "prefix tax: lists its lock only" \
    test -z "$(field starred fence)" -a -n "$(field plain fence)"

# Quorum mode: q is held on a quorum; stale only on server a (taken in
# single-server mode there), which no quorum holds.
quorum="$a,$b,$c"
NETMUTEX_URL=$quorum holder q
holder stale
NETMUTEX_URL=$quorum "$NM" list --json >"$tmp/list.json" 2>"$tmp/err"
rc=$?
check "quorum: exit 0 (exit $rc)" test "$rc" = 0
check "... q is listed, with its holder" \
    quiet expr "x$(field q holder)" : "x$(uname -n):$(cat "$tmp/q.cmd"):"
check "... the key on one server of three is not a held lock" test -z "$(field stale fence)"
check "... nor are the locks of server a alone" test -z "$(field alpha fence)"
check "... and nothing is said on stderr" test ! -s "$tmp/err"

down="unix://$tmp/down.sock"
NETMUTEX_URL="$b,$c,$down" "$NM" list --json >"$tmp/list.json" 2>"$tmp/err"
rc=$?
check "quorum, one server down: still exit 0, q listed (exit $rc)" \
    test "$rc" = 0 -a -n "$(field q fence)"
check "... with a warning naming the server that is down, and why" \
    quiet grep -E "^netmutex: warning: unix://$tmp/down\\.sock: cannot list the locks: No such file or directory\$" \
    "$tmp/err"
NETMUTEX_URL="$b,$down,unix://$tmp/down2.sock" "$NM" list >/dev/null 2>"$tmp/err"
rc=$?
check "quorum, two servers down of three: exit 69 (exit $rc)" test "$rc" = 69
check "... saying that too few answered" \
    quiet grep -E '^netmutex: cannot list the locks: 1 of 3 servers answered, fewer than a quorum' "$tmp/err"
"$NM" -u "unix://$tmp/down.sock" list >/dev/null 2>"$tmp/err"
rc=$?
check "one server, down: exit 69 (exit $rc)" test "$rc" = 69
check "... the tool names it" \
    quiet grep -E "^netmutex: cannot list the locks at unix://$tmp/down\\.sock: Redis server unreachable" "$tmp/err"

done_testing
