#!/bin/sh
# Messages say what was tried and why.  For a server it cannot use, the
# library writes one line naming the server (password masked) and the cause
# (NETMUTEX_LOG decides whether it is shown); the tool's own line after it
# names the server(s) it used, masked too, and claims no cause of its own.
# A bad setting is blamed on -u or --url-file only when the URL was the
# bad part, never when the environment was.
. "${srcdir:-.}/cli/lib.sh"

# run_err NAME COMMAND...: COMMAND's stderr in $tmp/NAME.err, its exit
# status in rc.
run_err() {
    f=$tmp/$1.err; shift
    "$@" >/dev/null 2>"$f"
    rc=$?
}

# has FILE EXTENDED-REGEX: ok when a line matches; lacks FILE STRING: ok
# when none holds STRING.  Either puts the file in the log when not.
has() {
    if grep -Eq -- "$2" "$1"; then return 0; fi
    sed 's/^/#   | /' "$1"
    return 1
}
lacks() {
    if ! grep -Fq -- "$2" "$1"; then return 0; fi
    sed 's/^/#   | /' "$1"
    return 1
}

# unusable TAG URL SHOWN CAUSE: a lock, a status and a break at URL, which
# cannot be used for CAUSE: 69, the library names SHOWN with CAUSE, and the
# tool's line names SHOWN.
unusable() {
    tag=$1 url=$2 shown=$3 cause=$4
    run_err "$tag" "$NM" -u "$url" job true
    check "$tag: exit 69 (exit $rc)" test "$rc" = 69
    check "... the library names the server and the cause" \
        has "$f" "^netmutex: warning: $shown(:6379)?: cannot use the server: ($cause)\$"
    check "... the tool names the server it used" \
        has "$f" "^netmutex: cannot lock job at $shown: Redis server unreachable"
    run_err "$tag.status" "$NM" -u "$url" status job
    check "... status names it too (exit $rc)" \
        has "$f" "^netmutex: status of job at $shown: Redis server unreachable"
    run_err "$tag.break" "$NM" -u "$url" break job
    check "... and so does break (exit $rc)" \
        has "$f" "^netmutex: break job at $shown: Redis server unreachable"
}

unusable "refused TCP port" redis://127.0.0.1:1 'redis://127\.0\.0\.1:1' 'Connection refused'
unusable "missing socket" "unix://$tmp/missing.sock" "unix://$tmp/missing\\.sock" \
    'No such file or directory'
# The resolver's words depend on the host's setup (no DNS at all, or an
# answer that the name does not exist), not on us.
unusable "unresolvable host" redis://no-such-host.invalid 'redis://no-such-host\.invalid' \
    'Name or service not known|Temporary failure in name resolution|No address associated with hostname'

# A password never shows: not in the library's line, not in the tool's.
run_err masked "$NM" -u redis://alice:sekrit@127.0.0.1:1 job true
check "a password: exit 69 (exit $rc)" test "$rc" = 69
check "... the library's line masks it" \
    has "$f" '^netmutex: warning: redis://alice:\*\*\*@127\.0\.0\.1:1: cannot use the server: Connection refused$'
check "... so does the tool's" has "$f" '^netmutex: cannot lock job at redis://alice:\*\*\*@127\.0\.0\.1:1: '
check "... and the password is nowhere" lacks "$f" sekrit

# NETMUTEX_LOG=off silences the library's line, never the tool's.
run_err logoff env NETMUTEX_LOG=off "$NM" -u redis://127.0.0.1:1 job true
check "NETMUTEX_LOG=off: still exit 69 (exit $rc)" test "$rc" = 69
check "... without the library's line" lacks "$f" 'cannot use the server'
check "... with the tool's" has "$f" '^netmutex: cannot lock job at redis://127\.0\.0\.1:1: '

# Quorum mode with one server of three down: the lock works, and the
# warning names the server that is down.
start_redis a; a=$redis_url
start_redis b; b=$redis_url
down="unix://$tmp/down.sock"
run_err quorum env NETMUTEX_URL="$a,$b,$down" "$NM" job sh -c 'exit 4'
check "1 of 3 servers down: the lock is taken and the command runs (exit $rc)" test "$rc" = 4
check "... with a warning naming the server that is down, and why" \
    has "$f" "^netmutex: warning: unix://$tmp/down\\.sock: cannot use the server: No such file or directory\$"
check "... and no other line ($(wc -l <"$f"))" test "$(wc -l <"$f")" = 1
run_err quorum2 env NETMUTEX_URL="$a,$down,unix://$tmp/down2.sock" "$NM" job true
check "2 of 3 down: exit 69 (exit $rc)" test "$rc" = 69
check "... the tool names the servers it used" \
    has "$f" "^netmutex: cannot lock job at $a,$down,unix://$tmp/down2\\.sock: Redis server unreachable"
check "... and the library each one that is down" \
    test "$(grep -c 'cannot use the server: No such file or directory' "$f")" = 2

# A wrong password and an ACL refusal are told apart: the library gives
# the server's own words.
start_redis pw --requirepass secret; pw=${redis_url#unix://}
run_err wrongpass env NETMUTEX_URL="unix://:notit@$pw" "$NM" job true
check "wrong password: exit 77 (exit $rc)" test "$rc" = 77
check "... the server's WRONGPASS, on the masked URL" \
    has "$f" "^netmutex: warning: unix://:\\*\\*\\*@$pw: cannot use the server: refused: WRONGPASS "
check "... the tool's line names the masked URL, without guessing AUTH or SELECT" \
    has "$f" "^netmutex: cannot lock job at unix://:\\*\\*\\*@$pw: refused by the server \\(credentials, database or ACL permission\\), or a TLS certificate not accepted\$"
check "... and the password is nowhere" lacks "$f" notit

# dave may do everything but SELECT: the refusal is NOPERM, not WRONGPASS.
# bob may touch no key of ours: the server refuses the lock's script
# later, on a request.
start_redis acl --user default off --user dave on '>pw' '~*' '&*' '+@all' '-select' \
    --user bob on '>pw' '~other:*' '&*' '+@all'
acl=${redis_url#unix://}
run_err noperm env NETMUTEX_URL="unix://dave:pw@$acl?db=1" "$NM" job true
check "ACL NOPERM: exit 77 (exit $rc)" test "$rc" = 77
check "... the server's NOPERM, naming the user, the password masked" \
    has "$f" "^netmutex: warning: unix://dave:\\*\\*\\*@$acl: cannot use the server: refused: NOPERM .*select"
check "... which is not a password problem" lacks "$f" WRONGPASS
check "... the tool's line names the URL it used" \
    has "$f" "^netmutex: cannot lock job at unix://dave:\\*\\*\\*@$acl\\?db=1: refused by the server"

run_err nokeys env NETMUTEX_URL="unix://bob:pw@$acl" "$NM" job true
check "ACL without our keys: exit 77 (exit $rc)" test "$rc" = 77
check "... the tool's line names the URL, masked, and the kinds of refusal" \
    has "$f" "^netmutex: cannot lock job at unix://bob:\\*\\*\\*@$acl: refused by the server \\(credentials, database or ACL permission\\), or a TLS certificate not accepted\$"

# A bad setting in the environment is not blamed on -u, which is fine.
run_err lease env NETMUTEX_LEASE_MS=abc "$NM" -u "$a" job true
check "bad NETMUTEX_LEASE_MS with -u: exit 78 (exit $rc)" test "$rc" = 78
check "... the library names the variable and its value" \
    has "$f" '^netmutex: error: NETMUTEX_LEASE_MS=abc: not a whole number from 10 to 86400000$'
check "... the tool blames the configuration" \
    has "$f" '^netmutex: cannot use the configuration: '
check "... and not -u" lacks "$f" '-u'
run_err lease2 env NETMUTEX_LEASE_MS=abc NETMUTEX_URL="$a" "$NM" status job
check "bad NETMUTEX_LEASE_MS without -u: exit 78 (exit $rc)" test "$rc" = 78
check "... the library names the variable" has "$f" '^netmutex: error: NETMUTEX_LEASE_MS=abc: '
check "... and the tool the configuration" has "$f" '^netmutex: cannot use the configuration: '
run_err lease3 env NETMUTEX_LOG=off NETMUTEX_LEASE_MS=abc "$NM" -u "$a" job true
check "NETMUTEX_LOG=off: still 78 and the tool's line (exit $rc)" \
    test "$rc" = 78 -a "$(grep -c '^netmutex: cannot use the configuration: ' "$f")" = 1

# A bad URL is blamed on where it came from, and shown masked.
run_err badurl "$NM" -u 'nosuch://bob:hunter2@h' job true
check "a malformed URL with -u: exit 78 (exit $rc)" test "$rc" = 78
check "... the library shows it masked" has "$f" "^netmutex: error: .*'nosuch://\\*\\*\\*@h': "
check "... the tool blames -u" has "$f" '^netmutex: cannot use the URL given with -u: '
check "... and the password is nowhere" lacks "$f" hunter2
run_err badenv env NETMUTEX_URL='nosuch://h' "$NM" job true
check "a malformed NETMUTEX_URL: exit 78 (exit $rc)" test "$rc" = 78
check "... the library names the variable" has "$f" "^netmutex: error: NETMUTEX_URL 'nosuch://h': "
check "... and the tool does not blame -u" lacks "$f" '-u'
printf 'nosuch://h\n' >"$tmp/url"
run_err badfile "$NM" --url-file "$tmp/url" status job
check "a malformed URL in --url-file: exit 78 (exit $rc)" test "$rc" = 78
check "... the tool names the file" has "$f" "^netmutex: cannot use the URL in --url-file $tmp/url: "

# A raw ',' in a sentinel URL's credentials or db is refused as any
# malformed URL is, from the environment or -u (it once crashed the tool).
run_err sentcomma env NETMUTEX_URL='redis-sentinel://a,b@h#m' "$NM" status x
check "a ',' in a sentinel URL's credentials: exit 78 (exit $rc)" test "$rc" = 78
check "... the library says why" \
    has "$f" "^netmutex: error: NETMUTEX_URL 'redis-sentinel://a,b@h#m': malformed credentials or db; "
run_err sentdb "$NM" -u 'redis-sentinel://h/1,2#m' status x
check "a ',' in a sentinel URL's db, with -u: exit 78 (exit $rc)" test "$rc" = 78
check "... the library says why" has "$f" "'redis-sentinel://h/1,2#m': malformed credentials or db; "
check "... the tool blames -u" has "$f" '^netmutex: cannot use the URL given with -u: '

# Waiting for a held lock says nothing, whatever the server's hz: Redis
# answers a BLPOP timeout at its next tick (up to 1000/hz ms late), which
# the library took for a lost connection, with a warning each time.
for hz in 1 10 500; do
    start_redis "hz$hz" --hz "$hz"
    hold waitjob -u "$redis_url"
    run_err "wait$hz" "$NM" -u "$redis_url" -w 1 waitjob true
    check "-w 1 on a held lock, server at hz $hz: exit 1 (exit $rc)" test "$rc" = 1
    check "... and no message" test ! -s "$f"
    [ -s "$f" ] && sed 's/^/#   | /' "$f"
    release_hold
done

done_testing
