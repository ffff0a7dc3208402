# lib.sh -- sourced by the netmutex(1) tests: a private redis-server (or
# three) on unix sockets in a temporary directory, removed at exit however
# the test ends, and TAP output for automake's tap-driver.
#
# Every process a test starts in the background must be in bg_pids (the
# tools) or redis_pids (start_redis sees to it): cleanup stops exactly
# those.  So neither may be started inside $(...), whose subshell would
# keep the pid to itself; .ci/run fails a run that leaves one behind.
#
# From the test environment (tests/Makefile.am): NETMUTEX_CLI, the tool
# under test; NM_LIBTOOL, the build's libtool; REDIS_SERVER;
# NETMUTEX_TEST_SLOWDOWN, which scales every time bound (CI sets it for
# valgrind and TSan).  Bounds are generous limits for
# "did not hang", never measurements of speed.

set -u

NM=${NETMUTEX_CLI:?NETMUTEX_CLI must name the netmutex tool}
# In the build tree NETMUTEX_CLI is libtool's wrapper script, which costs a
# bash and four more processes at every call, ten times the tool's own
# start: the tests make hundreds of calls.  libtool's execute mode (NM_LIBTOOL,
# from tests/Makefile.am) names the program it wraps and the library path it
# needs, once; the tests then run the program itself, as the wrapper would.
if [ -n "${NM_LIBTOOL:-}" ]; then
    nm_real=$($NM_LIBTOOL --mode=execute sh -c \
        'printf "%s\n%s\n" "$1" "${LD_LIBRARY_PATH-}"' sh "$NM") ||
        { echo "Bail out! libtool --mode=execute failed on $NM"; exit 99; }
    nm_libpath=$(printf '%s\n' "$nm_real" | sed -n 2p)
    nm_real=$(printf '%s\n' "$nm_real" | sed -n 1p)
    if [ "$nm_real" != "$NM" ] && [ -x "$nm_real" ]; then
        NM=$nm_real
        if [ -n "$nm_libpath" ]; then LD_LIBRARY_PATH=$nm_libpath; export LD_LIBRARY_PATH; fi
    fi
fi
REDIS_SERVER=${REDIS_SERVER:-redis-server}
case $REDIS_SERVER in */*) ;; *) REDIS_SERVER=$(command -v "$REDIS_SERVER") ;; esac
# The command line client beside that server, else on PATH: redis-cli, or
# Valkey's valkey-cli where there is no redis-cli.
REDIS_CLI=
for nm_cli in redis-cli valkey-cli; do
    if [ -x "${REDIS_SERVER%/*}/$nm_cli" ]; then REDIS_CLI=${REDIS_SERVER%/*}/$nm_cli; break; fi
done
[ -n "$REDIS_CLI" ] || REDIS_CLI=$(command -v redis-cli || command -v valkey-cli || echo redis-cli)
# The environment may point elsewhere; the tests choose their servers.
unset NETMUTEX_URL NETMUTEX_LEASE_MS NETMUTEX_PREFIX

tmp=$(mktemp -d "${TMPDIR:-/tmp}/netmutex-cli.XXXXXX") || exit 99
bg_pids=
redis_pids=
tap_n=0
# NM_CLI_VALGRIND (make check-valgrind-set, for the netmutex(1) tests of
# the valgrind set): the command to run the tool under, memcheck with an
# exit status of its own for an error, which no test expects.  exec: the
# tool keeps the pid a test started it with.
if [ -n "${NM_CLI_VALGRIND:-}" ]; then
    printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$NM_CLI_VALGRIND" "$NM" \
        >"$tmp/netmutex-valgrind" && chmod +x "$tmp/netmutex-valgrind" || exit 99
    NM=$tmp/netmutex-valgrind
fi

any_alive() {
    for p in "$@"; do
        kill -0 "$p" 2>/dev/null && return 0
    done
    return 1
}

# The tools get SIGTERM first and a moment to act on it: a netmutex passes
# it on to its command (often a `sleep 300`), which SIGKILL would orphan.
# The servers go last, so that the tools can still release their locks.
cleanup() {
    for p in $bg_pids; do
        kill -TERM "$p" 2>/dev/null
    done
    n=50
    while [ "$n" -gt 0 ] && any_alive $bg_pids; do
        sleep 0.1
        n=$((n - 1))
    done
    for p in $bg_pids $redis_pids; do
        kill -KILL "$p" 2>/dev/null
    done
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 99' HUP INT TERM

# Whole seconds: N times the slowdown, rounded up.
secs() {
    awk -v n="$1" -v s="${NETMUTEX_TEST_SLOWDOWN:-1}" \
        'BEGIN { if (s + 0 < 1) s = 1; v = n * s; printf "%d\n", (v == int(v)) ? v : int(v) + 1 }'
}

# Milliseconds: N times the slowdown, for the few bounds that must stay
# below a time the library itself takes, so never more than MAX.
msecs() {
    awk -v n="$1" -v max="$2" -v s="${NETMUTEX_TEST_SLOWDOWN:-1}" \
        'BEGIN { if (s + 0 < 1) s = 1; v = int(n * s); printf "%d\n", (v > max) ? max : v }'
}

# The time in milliseconds (GNU date), for measuring such bounds.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

ok() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $1"; }
not_ok() { tap_n=$((tap_n + 1)); echo "not ok $tap_n - $1"; }
diag() { echo "# $*"; }
done_testing() { echo "1..$tap_n"; }
bail() { echo "Bail out! $*"; exit 99; }

# check DESC COMMAND...: ok when COMMAND succeeds.
check() {
    desc=$1; shift
    if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}

# expect_rc WANT DESC COMMAND...: ok when COMMAND exits with WANT.
expect_rc() {
    want=$1 desc=$2; shift 2
    "$@"
    got=$?
    if [ "$got" = "$want" ]; then ok "$desc"; else not_ok "$desc"; diag "exit $got, want $want"; fi
}

# wait_for SECS COMMAND...: until COMMAND succeeds; 1 when SECS (scaled)
# pass first.
wait_for() {
    tries=$(( $(secs "$1") * 20 )); shift
    until "$@"; do
        tries=$((tries - 1))
        [ "$tries" -gt 0 ] || return 1
        sleep 0.05
    done
}

# NETMUTEX_TEST_ACL=1 (tests/acl.sh): a server started without options of
# its own about users (--user, --requirepass) gets the user nmuser with
# exactly the rule `netmutex acl` prints, and a default user allowed
# nothing; its redis_url carries nmuser's credentials.  Sets acl_auth to
# them ("" otherwise) and appends the options to acl_opts.
acl_setup() {
    acl_auth= acl_opts=
    [ "${NETMUTEX_TEST_ACL:-}" = 1 ] || return 0
    for a in "$@"; do
        case $a in --user|--requirepass) return 0 ;; esac
    done
    acl_cmd=$("$NM" acl) || bail "netmutex acl failed"
    acl_opts="--user default on nopass -@all --user nmuser on >nmuser-pw ${acl_cmd#'ACL SETUSER <user> on ><password> '}"
    acl_auth=nmuser:nmuser-pw@
}

# start_redis TAG [OPTION...]: a server on $tmp/TAG.sock, with OPTIONs
# such as --requirepass added; sets redis_url to its URL (without
# credentials but acl_setup's).  Not a $(...) command: see the top of
# this file.  With NETMUTEX_TEST_TLS=1 it listens on a TLS port too
# (tls_args), which redis_url names; the socket stays for raw commands.
start_redis() {
    tag=$1; shift
    acl_setup "$@"
    # acl_opts is split into words, unglobbed (the default prefix needs no
    # quoting: one rule per word).
    set -f
    # shellcheck disable=SC2086
    set -- "$@" $acl_opts
    set +f
    tls_port=
    [ "${NETMUTEX_TEST_TLS:-}" = 1 ] && tls_certs
    for try in 1 2 3 4 5; do
        [ "${NETMUTEX_TEST_TLS:-}" = 1 ] && tls_port=$(tls_pick_port "$try")
        "$REDIS_SERVER" --port 0 --unixsocket "$tmp/$tag.sock" --unixsocketperm 700 \
            --dir "$tmp" --dbfilename "$tag.rdb" --save '' --appendonly no \
            $(tls_args "$tls_port") "$@" >"$tmp/$tag.log" 2>&1 &
        pid=$!
        redis_pids="$redis_pids $pid"
        wait_for 30 redis_up "$tag" "$pid" || bail "redis-server $tag did not start"
        test -S "$tmp/$tag.sock" && break
    done
    redis_url="unix://$acl_auth$tmp/$tag.sock"
    [ -n "$tls_port" ] && redis_url="rediss://${acl_auth}127.0.0.1:$tls_port"
}

# redis_up TAG PID: its socket is there, or it exited (a port taken).
redis_up() { test -S "$tmp/$1.sock" || ! kill -0 "$2" 2>/dev/null; }

# tls_pick_port TRY: a port to try, different at each TRY.
tls_pick_port() {
    echo $(( 20000 + ($$ * 7919 + $1 * 104729 + $(date +%N | sed 's/^0*//;s/^$/0/') / 1000) % 30000 ))
}

# tls_certs: the certificates, made once in $tmp/certs by tls-certs.sh,
# and the client's NETMUTEX_TLS_* exported.
tls_certs() {
    c=$tmp/certs
    [ -e "$c/done" ] || sh "${NM_TOP_SRCDIR:?}/tests/tls-certs.sh" "$c" >&2 ||
        bail "tls-certs.sh failed"
    NETMUTEX_TLS_CA=$c/ca.crt NETMUTEX_TLS_CERT=$c/client.crt NETMUTEX_TLS_KEY=$c/client.key
    export NETMUTEX_TLS_CA NETMUTEX_TLS_CERT NETMUTEX_TLS_KEY
}

# tls_args PORT: a TLS port with client certificates (nothing without
# PORT).
tls_args() {
    [ -n "$1" ] || return 0
    c=$tmp/certs
    echo "--tls-port $1 --tls-cert-file $c/server.crt --tls-key-file $c/server.key" \
        "--tls-ca-cert-file $c/ca.crt --tls-auth-clients yes"
}

# hold NAME [OPTIONS...]: a background netmutex holding NAME until
# release_hold; sets hold_pid (the tool's pid) once the lock is taken, and
# leaves the command's pid in $tmp/held.cmd and the tool's in $tmp/held.
hold() {
    name=$1; shift
    rm -f "$tmp/held" "$tmp/held.cmd"
    "$NM" "$@" "$name" sh -c 'echo $$ >"$1.cmd"; echo $PPID >"$1"; exec sleep 300' \
        sh "$tmp/held" &
    hold_pid=$!
    bg_pids="$bg_pids $hold_pid"
    wait_for 30 test -s "$tmp/held" || bail "the holder of $name never got it"
}

# release_hold: SIGTERM to the tool, which passes it to its command; sets
# hold_rc to the tool's exit status.
release_hold() {
    kill -TERM "$hold_pid"
    wait "$hold_pid"
    hold_rc=$?
}

# waiters NAME: how many wait for NAME, as `status` reads it: the length of
# the server's queue list (netmutex:{TAG}NAME:q).
waiters() {
    "$NM" status --json "$1" | sed -n 's/.*"waiters":\([0-9]*\).*/\1/p'
}

# quiet COMMAND...: COMMAND without its output, for expect_rc.
quiet() { "$@" >/dev/null 2>&1; }
