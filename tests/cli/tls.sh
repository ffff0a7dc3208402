#!/bin/sh
# The --tls-* options against a TLS server that wants client certificates
# (tests/tls-certs.sh's): a command run, status and list with them and no
# NETMUTEX_TLS_* at all; the options win over the variables; the CA as a
# directory, --tls-server-name, --tls-insecure; and every refusal with its
# exit status: a file that cannot be read (even for a plain URL), one the
# library refuses, --tls-cert without --tls-key, a malformed name.
. "${srcdir:-.}/cli/lib.sh"

NETMUTEX_TEST_TLS=1 # start_redis: a TLS port, whatever the suite runs with
start_redis r1
plain_url=unix://$acl_auth$tmp/r1.sock
unset NETMUTEX_TLS_CA NETMUTEX_TLS_CERT NETMUTEX_TLS_KEY NETMUTEX_TLS_SERVER_NAME \
    NETMUTEX_TLS_VERIFY
NETMUTEX_URL=$redis_url; export NETMUTEX_URL
c=$tmp/certs
diag "$redis_url"

# client ARG...: netmutex with the client certificate; tls ARG...: and the CA.
client() { "$NM" --tls-cert "$c/client.crt" --tls-key "$c/client.key" "$@"; }
tls() { client --tls-ca "$c/ca.crt" "$@"; }

# ---- what works ----------------------------------------------------------

"$NM" -n job true 2>"$tmp/err"
rc=$?
check "no CA given: the server's certificate is refused (exit $rc, want 77)" test "$rc" = 77
check "... and the library says why" quiet grep 'certificate verify failed' "$tmp/err"

expect_rc 0 "--tls-ca, --tls-cert, --tls-key: the command runs" tls job touch "$tmp/ran"
check "... it ran" test -e "$tmp/ran"

hold job --tls-ca "$c/ca.crt" --tls-cert "$c/client.crt" --tls-key "$c/client.key"
tls status job >"$tmp/status"
rc=$?
check "status with the options while held: exit 0 (exit $rc)" test "$rc" = 0
check "... and says held" quiet grep -E '^state: +held$' "$tmp/status"
tls list >"$tmp/list"
rc=$?
check "list with the options: exit 0 (exit $rc)" test "$rc" = 0
check "... and lists the lock" quiet grep -E '^job ' "$tmp/list"
tls list --json >"$tmp/list.json"
check "list --json with the options" quiet grep '^{"name":"job","held":true,' "$tmp/list.json"
expect_rc 1 "-n while held: the conflict code" quiet tls -n job true
release_hold
expect_rc 1 "status after the release: free" quiet tls status job
expect_rc 1 "list after the release: nothing held" quiet tls list

# other_ca ARG...: netmutex ARG... with NETMUTEX_TLS_* naming another CA.
other_ca() (
    NETMUTEX_TLS_CA=$c/other-ca.crt NETMUTEX_TLS_CERT=$c/client.crt
    NETMUTEX_TLS_KEY=$c/client.key
    export NETMUTEX_TLS_CA NETMUTEX_TLS_CERT NETMUTEX_TLS_KEY
    "$@"
)
expect_rc 0 "the options win over NETMUTEX_TLS_* (another CA there)" other_ca tls -n job true
expect_rc 77 "... which alone is refused" quiet other_ca "$NM" -n job true
expect_rc 0 "--tls-ca DIR, a hashed directory" client --tls-ca "$c/cadir" -n job true
expect_rc 0 "--tls-server-name localhost, in the certificate" \
    tls --tls-server-name localhost -n job true
tls --tls-server-name other.example -n job true 2>"$tmp/err"
rc=$?
check "--tls-server-name other.example, not in it: refused (exit $rc, want 77)" test "$rc" = 77
check "... a name mismatch" quiet grep 'hostname mismatch' "$tmp/err"
client --tls-insecure -n job true 2>"$tmp/err"
rc=$?
check "--tls-insecure without a CA: the command runs (exit $rc)" test "$rc" = 0
check "... with the warning" quiet grep 'certificates are not verified' "$tmp/err"

# ---- refusals ------------------------------------------------------------

# refused WANT TEXT DESC ARG...: netmutex ARG... exits WANT and says TEXT.
refused() {
    want=$1 text=$2 desc=$3; shift 3
    "$NM" "$@" >/dev/null 2>"$tmp/err"
    got=$?
    check "$desc: exit $got, want $want" test "$got" = "$want"
    check "... and says so" quiet grep -F -e "$text" "$tmp/err"
    [ "$got" = "$want" ] || diag "$(cat "$tmp/err")"
}

: >"$tmp/empty.pem"
refused 78 "--tls-ca $tmp/missing: No such file or directory" "--tls-ca, no such file" \
    --tls-ca "$tmp/missing" job true
refused 78 "--tls-ca $tmp/missing: No such file" "... for status too" \
    --tls-ca "$tmp/missing" status job
refused 78 "--tls-ca $tmp/missing: No such file" "... and with a plain URL" \
    -u "$plain_url" --tls-ca "$tmp/missing" status job
refused 78 "--tls-key $tmp/missing: No such file" "--tls-key, no such file" \
    --tls-ca "$c/ca.crt" --tls-cert "$c/client.crt" --tls-key "$tmp/missing" list
refused 78 "--tls-cert $c: Is a directory" "--tls-cert, a directory" \
    --tls-cert "$c" --tls-key "$c/client.key" list
refused 78 "$tmp/empty.pem" "--tls-ca, a file that holds no certificate" \
    --tls-ca "$tmp/empty.pem" status job
refused 78 "$c/server.key" "--tls-key, another certificate's key" \
    --tls-ca "$c/ca.crt" --tls-cert "$c/client.crt" --tls-key "$c/server.key" status job
refused 2 "--tls-cert and --tls-key go together" "--tls-cert alone" \
    --tls-cert "$c/client.crt" status job
refused 2 "--tls-cert and --tls-key go together" "--tls-key alone" \
    --tls-key "$c/client.key" job true
refused 2 "bad TLS server name" "--tls-server-name, empty" --tls-server-name "" status job
refused 2 "bad TLS server name" "--tls-server-name, not a name" \
    --tls-server-name "a/b" status job
refused 2 "does not apply" "--tls-ca with acl" --tls-ca "$c/ca.crt" acl

done_testing
