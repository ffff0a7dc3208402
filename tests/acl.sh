#!/bin/sh
# acl.sh -- the core of the suite again, with the library as a Redis user
# that has exactly the rule netmutex_acl_rule(3) gives (NETMUTEX_TEST_ACL=1:
# the fixture, fixture_server.c, and cli/lib.sh set the servers up), so a
# command the library sends and the rule lacks fails here.  One TAP line
# per program; a failed one's output follows as comments.
: "${srcdir:=.}"
NETMUTEX_TEST_ACL=1; export NETMUTEX_TEST_ACL

# Not cli/list.sh (it lists under other prefixes, which the user may not
# touch), nor the tests of credentials themselves (test_auth,
# cli/secret.sh, cli/messages.sh).  NM_ACL_PROGS and NM_ACL_CLI choose
# others.
PROGS=${NM_ACL_PROGS-"test_api test_wait test_robust test_cache test_quorum test_rwlock"}
CLI=${NM_ACL_CLI-"run exclusion admin quorum flock names interrupt usage"}

log=$(mktemp "${TMPDIR:-/tmp}/netmutex-acl.XXXXXX") || exit 99
trap 'rm -f "$log"' EXIT
n=0
report() {
    n=$((n + 1))
    if [ "$1" = 0 ] && ! grep -q '^not ok' "$log"; then
        echo "ok $n - $2 as an ACL user"
    else
        echo "not ok $n - $2 as an ACL user (exit $1)"
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
