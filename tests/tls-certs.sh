#!/bin/sh
# tls-certs.sh DIR -- the certificates the TLS tests use, made in DIR with
# openssl(1) at test time (nothing secret is committed):
#   ca.crt/ca.key          the test CA
#   server.crt/.key        signed by it: SAN IP:127.0.0.1, DNS:localhost
#   client.crt/.key        signed by it, for tls-auth-clients yes
#   expired.crt/.key       signed by it, for 127.0.0.1, expired
#   selfsigned.crt/.key    for 127.0.0.1, signed by nobody but itself
#   otherhost.crt/.key     signed by it, for other.example only
#   other-ca.crt           another CA, which signed none of them
#   cadir/                 ca.crt as a hashed directory (NETMUTEX_TLS_CA=DIR)
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
[ -e done ] && exit 0
o() { openssl "$@" 2>/dev/null; }
key() { o genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key"; }
ext() { printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\n' "$1" >"$2.ext"; }

key ca
o req -x509 -new -key ca.key -subj /CN=netmutex-test-ca -days 2 -out ca.crt
key other-ca
o req -x509 -new -key other-ca.key -subj /CN=other-ca -days 2 -out other-ca.crt

# sign NAME SAN DAYS: NAME.crt signed by the CA (DAYS may be negative
# through -not_after in the past: see expired below).
sign() {
    key "$1"
    o req -new -key "$1.key" -subj "/CN=$1" -out "$1.csr"
    ext "$2" "$1"
    o x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$3" \
        -extfile "$1.ext" -out "$1.crt"
}
sign server "IP:127.0.0.1,DNS:localhost" 2
sign client "DNS:netmutex-client" 2
sign otherhost "DNS:other.example" 2

# Expired: a CA-signed certificate whose validity ended yesterday, made
# with openssl ca's explicit dates.
key expired
o req -new -key expired.key -subj /CN=expired -out expired.csr
ext "IP:127.0.0.1,DNS:localhost" expired
mkdir -p ca.db && : >ca.db/index && echo 01 >ca.db/serial
cat >ca.cnf <<CNF
[ca]
default_ca = d
[d]
database = ca.db/index
serial = ca.db/serial
new_certs_dir = ca.db
default_md = sha256
policy = p
[p]
commonName = supplied
CNF
o ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in expired.csr \
    -startdate 20200101000000Z -enddate 20200102000000Z -extfile expired.ext \
    -out expired.crt
key selfsigned
ext "IP:127.0.0.1,DNS:localhost" selfsigned
o req -x509 -new -key selfsigned.key -subj /CN=selfsigned -days 2 \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -out selfsigned.crt
# The CA as a directory, named by its hash as OpenSSL looks it up.
mkdir -p cadir
ln -sf ../ca.crt "cadir/$(openssl x509 -hash -noout -in ca.crt).0"
chmod 600 ./*.key
touch done
