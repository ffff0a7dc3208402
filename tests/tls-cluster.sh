#!/bin/sh
# tls-cluster.sh -- make check-tls (tests/Makefile.am, TLS_TESTS): the core
# of test_cluster over TLS.  With NETMUTEX_TEST_TLS=1 the six nodes listen
# on TLS ports only, with tls-cluster and tls-replication (topo_cluster.c),
# redis-cli joins them over TLS and the URLs are rediss-cluster:// and
# rediss://: locking by either URL, a manual failover while processes
# lock, a slot migrated under a held lock (ASK, then MOVED; MIGRATE runs
# between TLS nodes), and netmutex(1).  The cases skipped here (-s:
# GLib's -p would print a TAP plan per path) run in make check.
# Over TLS every dial is a handshake, which a loaded machine makes slow,
# and these cases dial new nodes within short leases (600 ms in a
# migration): their bounds are doubled (NETMUTEX_TEST_SLOWDOWN at least 2;
# bounds, not speed, are what the tests assert).
NETMUTEX_TEST_SLOWDOWN=$(awk -v s="${NETMUTEX_TEST_SLOWDOWN:-1}" 'BEGIN { print (s + 0 < 2) ? 2 : s }')
export NETMUTEX_TEST_SLOWDOWN
exec ./test_cluster -s /cluster/xproc/counters-on-all-masters \
    -s /cluster/failover/lost-lease-reported -s /cluster/failover/master-killed \
    -s /cluster/migration/renewal-follows-ask -s /cluster/migration/waiter-waits-no-eproto \
    -s /cluster/migration/release-with-queue-moved -s /cluster/migration/four-busy-slots \
    -s /cluster/cond/other-node-than-mutex
