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
exec ./test_sentinel -s /sentinel/silent-sentinel -s /sentinel/readonly \
    -s /sentinel/replicas/short -s /sentinel/failover/counter
