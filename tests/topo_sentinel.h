/*
 * topo_sentinel.h -- a Redis Sentinel set-up for the tests: a master, one
 * or two replicas and three sentinels on 127.0.0.1, each a private redis-server of
 * fixture.h (so each dies with the test program, whatever happens), with
 * short failure detection so that a failover takes a second or two.
 * With NETMUTEX_TEST_TLS=1 every one of them listens on a TLS port only
 * (the fixture: tls-replication yes, client certificates wanted), so the
 * replicas follow their master and the sentinels watch the nodes and one
 * another over TLS, and nm_topo_url names them rediss-sentinel://.
 */
#ifndef NM_TEST_TOPO_SENTINEL_H
#define NM_TEST_TOPO_SENTINEL_H

#include "fixture.h"

G_BEGIN_DECLS

#define NM_TOPO_SENTINELS 3
#define NM_TOPO_MASTER_NAME "nmtest"

#define NM_TOPO_NODES_MAX 3

typedef struct NmTopo {
    NmRedis *node[NM_TOPO_NODES_MAX];     /* [0] is the master at start */
    int nnodes;
    NmRedis *sentinel[NM_TOPO_SENTINELS];
} NmTopo;

/* Starts a master, REPLICAS (1 or 2) replicas and the sentinels, and waits
 * (bounded) until every sentinel names node[0] as the master and sees the
 * replicas and the other sentinels, and the replicas have caught up. */
NmTopo *nm_topo_start(int replicas);
/* Stops them all (paused ones included) and removes their directories. */
void nm_topo_free(NmTopo *t);

/* "redis-sentinel://127.0.0.1:P1,...#nmtest", the sentinels in order
 * (rediss-sentinel:// with NETMUTEX_TEST_TLS=1). */
char *nm_topo_url(NmTopo *t);

/* The data node that sentinel 0 names as the master, and the first other
 * one (a replica, unless a failover is still under way). */
NmRedis *nm_topo_master(NmTopo *t);
NmRedis *nm_topo_replica(NmTopo *t);

/* Waits (bounded) until every replica's link to the master is up and has
 * caught up with everything the master wrote so far. */
void nm_topo_wait_synced(NmTopo *t);

/* SENTINEL FAILOVER, then waits (bounded) until every sentinel names
 * another node, which says it is a master.  Returns the new master. */
NmRedis *nm_topo_failover(NmTopo *t);

/* Its steps, for a test that acts in between: SENTINEL FAILOVER (returns
 * the master it leaves); waits (bounded) until a node other than OLD says
 * it is a master (returns it: the sentinels may still name OLD for a
 * second); waits as nm_topo_failover does (returns the new master). */
NmRedis *nm_topo_failover_start(NmTopo *t);
NmRedis *nm_topo_promoted(NmTopo *t, NmRedis *old);
NmRedis *nm_topo_failover_wait(NmTopo *t, NmRedis *old);

/* The port sentinel I names for the master, 0 if none. */
int nm_topo_named_port(NmTopo *t, int i);

G_END_DECLS

#endif /* NM_TEST_TOPO_SENTINEL_H */
