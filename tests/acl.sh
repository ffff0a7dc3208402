#!/bin/sh
# acl.sh -- the core of the suite again, with the library as a Redis user
# that has exactly the rule netmutex_acl_rule(3) gives (NETMUTEX_TEST_ACL=1:
# the fixture, fixture_server.c, and cli/lib.sh set the servers up), so a
# command the library sends and the rule lacks fails here.  One TAP line
# per program; a failed one's output follows as comments.
#
# With NETMUTEX_TEST_TLS=1 (make check-tls: tests/Makefile.am, TLS_TESTS)
# the same runs over TLS with client certificates, every server on a TLS
# port only: both at once, as a deployment would have them.
: "${srcdir:=.}"
NETMUTEX_TEST_ACL=1; export NETMUTEX_TEST_ACL

# Not cli/list.sh (it lists under other prefixes, which the user may not
# touch), nor the tests of credentials themselves (test_auth,
# cli/secret.sh, cli/messages.sh).  Over TLS, the netmutex(1) tests of
# the TLS set alone (tests/Makefile.am): not usage.sh, which spells
# unix:// URLs itself, nor names.sh and interrupt.sh, whose every probe
# is a process of its own and a handshake.  NM_ACL_PROGS and NM_ACL_CLI
# choose others.
over=
progs_all="test_api test_wait test_robust test_cache test_quorum test_cond test_rwlock test_sem"
cli_all="run exclusion admin quorum flock flock_suite names interrupt usage shared permits rwstatus"
if [ "${NETMUTEX_TEST_TLS:-}" = 1 ]; then
    # Not test_cond, which is not of the TLS set (its proxy speaks plain).
    over=" over TLS"
    progs_all="test_api test_wait test_robust test_cache test_quorum"
    cli_all="run exclusion admin quorum flock"
fi
PROGS=${NM_ACL_PROGS-$progs_all}
CLI=${NM_ACL_CLI-$cli_all}

# NM_ACL_PART=K/N runs the K-th of N shares alone: the programs and then
# the netmutex(1) tests, dealt out in turn, item I to share I mod N + 1.
# make check runs the shares as acl-1.sh ... acl-3.sh, side by side
# (tests/Makefile.am, ACL_TESTS): one after the other they took two
# minutes, the suite's longest test.
if [ -n "${NM_ACL_PART:-}" ]; then
    k=${NM_ACL_PART%/*} parts=${NM_ACL_PART#*/} i=0 p_sel= c_sel=
    for p in $PROGS; do
        [ $((i % parts + 1)) = "$k" ] && p_sel="$p_sel $p"
        i=$((i + 1))
    done
    for t in $CLI; do
        [ $((i % parts + 1)) = "$k" ] && c_sel="$c_sel $t"
        i=$((i + 1))
    done
    PROGS=$p_sel CLI=$c_sel
fi

log=$(mktemp "${TMPDIR:-/tmp}/netmutex-acl.XXXXXX") || exit 99
trap 'rm -f "$log"' EXIT
n=0
report() {
    n=$((n + 1))
    if [ "$1" = 0 ] && ! grep -q '^not ok' "$log"; then
        echo "ok $n - $2 as an ACL user$over"
    else
        echo "not ok $n - $2 as an ACL user$over (exit $1)"
        grep -v '^ok ' "$log" | sed 's/^/# /'
    fi
}

# A program that a refused command leaves waiting is stopped: 300 s each,
# times NETMUTEX_TEST_SLOWDOWN.
bound=$(awk -v s="${NETMUTEX_TEST_SLOWDOWN:-1}" 'BEGIN { if (s + 0 < 1) s = 1; printf "%d\n", 300 * s }')
for p in $PROGS; do
    timeout -k 10 "$bound" "./$p" >"$log" 2>&1
    report $? "$p"
done
for t in $CLI; do
    timeout -k 10 "$bound" ${SHELL:-/bin/sh} "$srcdir/cli/$t.sh" >"$log" 2>&1
    report $? "cli/$t.sh"
done
echo "1..$n"
