#!/bin/sh
# Passwords: one given with -u is hidden from /proc/PID/cmdline (and so
# from ps) before the lock is taken, for every URL of a list, with one
# warning; it still reaches the server.  --url-file and NETMUTEX_URL pass
# one without a warning.
. "${srcdir:-.}/cli/lib.sh"

start_redis pw --requirepass secret; pw=${redis_url#unix://}
start_redis acl --user default off --user alice on '>hunter2' '~*' '&*' '+@all'
acl=${redis_url#unix://}
start_redis open; open=$redis_url
warning='may not be safe'

expect_rc 77 "the server refuses a URL without its password" quiet "$NM" -u "unix://$pw" job true

# holder PID-FILE ERR-FILE OPTION...: a background netmutex holding job
# with OPTIONs, its stderr in ERR-FILE; sets p once the command runs.
holder() {
    pidf=$1 errf=$2; shift 2
    rm -f "$pidf"
    "$NM" "$@" job sh -c 'echo $PPID >"$1"; exec sleep 300' sh "$pidf" 2>"$errf" &
    p=$!
    bg_pids="$bg_pids $p"
    wait_for 30 test -s "$pidf" || bail "the holder never got the lock: $(cat "$errf")"
}

cmdline() { tr '\0' ' ' <"/proc/$1/cmdline"; }

# One server: the lock is taken with the password, which the command line
# shows as stars.
holder "$tmp/held" "$tmp/err" -u "unix://:secret@$pw"
line=$(cmdline "$(cat "$tmp/held")")
check "-u: the password is not in /proc/PID/cmdline ($line)" test "${line#*secret}" = "$line"
check "... which shows it as stars" quiet expr "x$line" : "x.* -u unix://:\*\*\*\*\*\*@$pw job "
check "... and the tool warned once" test "$(grep -c "$warning" "$tmp/err")" = 1
NETMUTEX_URL="unix://:secret@$pw" "$NM" status job >/dev/null 2>"$tmp/env.err"
rc=$?
check "the lock is held on the server that wants the password (status exit $rc)" test "$rc" = 0
check "... and NETMUTEX_URL with a password gives no warning" test ! -s "$tmp/env.err"
kill -TERM "$p"
wait "$p"
rc=$?
check "the holder with the hidden password releases (exit $rc)" test "$rc" = 143
expect_rc 1 "... and the lock is free" quiet env NETMUTEX_URL="unix://:secret@$pw" "$NM" status job

# A list (quorum mode) in the --url=VALUE form: every password hidden, the
# ACL user name left visible, still one warning.
list="unix://:secret@$pw,unix://alice:hunter2@$acl,$open"
holder "$tmp/held" "$tmp/err" --url="$list"
line=$(cmdline "$(cat "$tmp/held")")
check "a list: neither password is in /proc/PID/cmdline ($line)" \
    test "${line#*secret}" = "$line" -a "${line#*hunter2}" = "$line"
check "... where they show as stars" \
    quiet expr "x$line" : "x.* --url=unix://:\*\*\*\*\*\*@$pw,unix://alice:\*\*\*\*\*\*\*@$acl,$open job "
check "... and one warning" test "$(grep -c "$warning" "$tmp/err")" = 1
expect_rc 0 "... and the lock is taken (as the server without a password shows)" quiet "$NM" -u "$open" status job
kill -TERM "$p"
wait "$p"
rc=$?
check "the holder of the list releases (exit $rc)" test "$rc" = 143

# No password, no warning.
"$NM" -u "$open" job true 2>"$tmp/err"
rc=$?
check "-u without a password: no warning (exit $rc)" test "$rc" = 0 -a ! -s "$tmp/err"

# --url-file: the password never is on the command line.
printf 'unix://:secret@%s\n' "$pw" >"$tmp/url"
chmod 600 "$tmp/url"
"$NM" --url-file "$tmp/url" job sh -c 'exit 3' 2>"$tmp/err"
rc=$?
check "--url-file: the lock is taken with the file's password (exit $rc)" test "$rc" = 3
check "... with no warning" test ! -s "$tmp/err"
expect_rc 1 "--url-file works for status" quiet "$NM" --url-file "$tmp/url" status job
expect_rc 78 "--url-file of a missing file gives 78" quiet "$NM" --url-file "$tmp/nofile" job true
: >"$tmp/empty"
expect_rc 78 "--url-file of an empty file gives 78" quiet "$NM" --url-file "$tmp/empty" job true
printf 'unix://%s\nunix://%s\n' "$pw" "$pw" >"$tmp/two"
expect_rc 78 "--url-file with two lines gives 78" quiet "$NM" --url-file "$tmp/two" job true
expect_rc 2 "-u and --url-file together give 2" quiet "$NM" -u "$open" --url-file "$tmp/url" job true

done_testing
