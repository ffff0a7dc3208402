/*
 * topo_cluster.h -- a real Redis Cluster for the tests: 3 masters and 3
 * replicas on loopback, each a private redis-server of fixture.h (so each
 * is killed when the test program ends, however it ends), joined with
 * `redis-cli --cluster create ... --cluster-replicas 1`.  Starting one
 * takes a few seconds, so a test program shares one among its cases.
 * With NETMUTEX_TEST_TLS=1 every node listens on a TLS port only (the
 * fixture: tls-cluster and tls-replication yes, client certificates
 * wanted), redis-cli joins them with the test CA and client certificate,
 * and the URLs are rediss-cluster:// and rediss://.
 */
#ifndef NM_TOPO_CLUSTER_H
#define NM_TOPO_CLUSTER_H

#include "fixture.h"

#define NM_TOPO_NODES 6

typedef struct NmTopo {
    NmRedis *node[NM_TOPO_NODES];
} NmTopo;

/* Starts the cluster and waits, with a bound, until every node says
 * cluster_state:ok, the replicas are in sync and all agree on the
 * masters.  Aborts on failure. */
NmTopo *nm_topo_start(void);
void nm_topo_free(NmTopo *t);

/* "redis-cluster://127.0.0.1:P1,127.0.0.1:P2,..." (every node a seed), or
 * "redis://127.0.0.1:PORT" of node I (rediss with NETMUTEX_TEST_TLS=1). */
char *nm_topo_url(NmTopo *t);
char *nm_topo_node_url(NmTopo *t, int i);

/* CLUSTER KEYSLOT of KEY (LEN bytes), asked of node 0. */
long long nm_topo_keyslot(NmTopo *t, const char *key, size_t len);

/* The node that is master of SLOT now (by CLUSTER SLOTS of node 0). */
NmRedis *nm_topo_master_of(NmTopo *t, long long slot);

/* The node id of the master of SLOT in node R's CLUSTER SLOTS, a new
 * string; NULL if none. */
char *nm_topo_master_id(NmRedis *r, long long slot);

/* Whether node ASKED's CLUSTER SLOTS names NODE as master of SLOT. */
bool nm_topo_is_master_of(NmRedis *asked, long long slot, NmRedis *node);

/* Whether node R is a master now (ROLE). */
bool nm_topo_is_master(NmRedis *r);
/* A master of T other than FROM. */
NmRedis *nm_topo_other_master(NmTopo *t, NmRedis *from);

/* Node R's id (CLUSTER MYID), a new string. */
char *nm_topo_node_id(NmRedis *r);

/* Ends a migration of SLOT (set MIGRATING on FROM and IMPORTING on TO):
 * moves its keys from FROM to TO (MIGRATE), then the slot itself (CLUSTER
 * SETSLOT ... NODE on every master). */
void nm_topo_finish_migration(NmTopo *t, long long slot, NmRedis *from, NmRedis *to);

/* Waits until every node says cluster_state:ok, every replica's link to
 * its master is up, and all agree on who serves a sample of slots; false
 * after TIMEOUT_MS. */
bool nm_topo_wait_ok(NmTopo *t, unsigned int timeout_ms);

#endif /* NM_TOPO_CLUSTER_H */
