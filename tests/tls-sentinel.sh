#!/bin/sh
# tls-sentinel.sh -- make check-tls (tests/Makefile.am, TLS_TESTS): the core
# of test_sentinel over TLS.  With NETMUTEX_TEST_TLS=1 the master, its
# replicas and the sentinels listen on TLS ports only (topo_sentinel.c),
# the URL is rediss-sentinel://, and replication and the sentinels' watch
# run over TLS: locking through the sentinels, replica acknowledgement
# (WAIT), a lease lost in a failover reported, and netmutex(1).  The
# cases skipped here (-s: GLib's -p would print a TAP plan per path) run
# in make check; SENTINEL FAILOVER under load, with WAIT, wants a resync
# over TLS within its window, which a loaded machine does not keep.
# Over TLS every dial is a handshake, which a loaded machine makes slow,
# and these cases dial new nodes within short leases (600 ms in a
# migration): their bounds are doubled (NETMUTEX_TEST_SLOWDOWN at least 2;
# bounds, not speed, are what the tests assert).
NETMUTEX_TEST_SLOWDOWN=$(awk -v s="${NETMUTEX_TEST_SLOWDOWN:-1}" 'BEGIN { print (s + 0 < 2) ? 2 : s }')
export NETMUTEX_TEST_SLOWDOWN
exec ./test_sentinel -s /sentinel/silent-sentinel -s /sentinel/readonly \
    -s /sentinel/replicas/short -s /sentinel/failover/counter
