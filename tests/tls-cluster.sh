#!/bin/sh
# tls-cluster.sh -- make check-tls (tests/Makefile.am, TLS_TESTS): the core
# of test_cluster over TLS.  With NETMUTEX_TEST_TLS=1 the six nodes listen
# on TLS ports only, with tls-cluster and tls-replication (topo_cluster.c),
# redis-cli joins them over TLS and the URLs are rediss-cluster:// and
# rediss://: locking by either URL, a manual failover while processes
# lock, a slot migrated under a held lock (ASK, then MOVED; MIGRATE runs
# between TLS nodes), and netmutex(1).  The cases skipped here (-s:
# GLib's -p would print a TAP plan per path) run in make check.
exec ./test_cluster -s /cluster/xproc/counters-on-all-masters \
    -s /cluster/failover/lost-lease-reported -s /cluster/failover/master-killed \
    -s /cluster/migration/renewal-follows-ask -s /cluster/migration/waiter-waits-no-eproto \
    -s /cluster/migration/release-with-queue-moved -s /cluster/migration/four-busy-slots \
    -s /cluster/cond/other-node-than-mutex
