/*
 * cluster.h -- Redis Cluster: detection and the slot map (cluster.c), and
 * the cluster state's life (cluster_state.c).  Sending a key's request to
 * the node that serves its slot is cluster_route.h's.
 *
 * A configuration talks to a cluster when its URL is
 * redis-cluster://[[user]:password@]host:port[,host:port...] (seeds), or
 * when its one redis:// or unix:// URL reaches a node with cluster_enabled:1
 * in INFO cluster: the first dial of that server asks (nm_cluster_probe),
 * before any request of ours goes out, so no request is ever sent in the
 * wrong mode.  Everything else in the library then stays in single-server
 * mode: one "server", whose requests cluster_route.c routes by the key's
 * slot.
 *
 * The slot map (CLUSTER SLOTS) is shared by the threads of a configuration;
 * each thread reaches a node through its own cached connection (conn.h).
 * A MOVED answer updates the slot at once and has the whole map read
 * again; an ASK answer sends the one request on, after ASKING, to the node
 * named; a node that cannot be reached has the map read again before the
 * next request (a failover may have promoted a replica).
 *
 * Quorum mode (several URLs) with a cluster is refused: EINVAL at
 * netmutex_configure for a redis-cluster:// URL in a list, EINVAL from the
 * first request for a listed redis:// URL that turns out to be a node.
 */
#ifndef NM_CLUSTER_H
#define NM_CLUSTER_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "settings.h"

typedef struct nm_cluster nm_cluster_t;

/* A node's address, as the slot map names it. */
#define NM_CLUSTER_HOST_MAX 256
typedef struct nm_node_addr {
    char host[NM_CLUSTER_HOST_MAX];
    int port;
} nm_node_addr_t;

/* ---- configuration (config.c) ---- */

/* The cluster state of a configuration of URLS: for a redis-cluster://
 * URL one that knows it is a cluster and takes the seeds (out of URLS);
 * for one plain URL, one that may turn out to reach a cluster; NULL for a
 * quorum or Sentinel configuration.  0, ENOMEM. */
int nm_cluster_attach(nm_urls_t *urls, nm_cluster_t **out);

void nm_cluster_free(nm_cluster_t *cl);

/* ---- detection (conn.c) ---- */

/* After dialing SRV of CFG: learns whether it is a cluster node (once per
 * configuration).  0, EINVAL (a node in a quorum list), or the errors of
 * nm_call. */
int nm_cluster_probe(redisContext *c, const nm_config_t *cfg, const nm_server_t *srv,
                     int64_t deadline);

/* Whether CFG talks to a cluster: known once its server was dialed. */
int nm_cluster_on(const nm_config_t *cfg);

/* For the people watching: node HOST:PORT of CFG answered (ERR 0) or not
 * (CAUSE in words).  Said once per outage, as nm_conn_report does. */
void nm_cluster_report(const nm_config_t *cfg, const char *host, int port, int err,
                       const char *cause);

/* ---- the subscribers (subscriber.c) ---- */


/* The master that serves SLOT in CFG's map as last read, without reading
 * it (a leaf lock only): HOST (of NM_CLUSTER_HOST_MAX bytes) and *PORT.
 * 0, or NM_ECONN (no map, or no master for the slot). */
int nm_cluster_slot_master(nm_config_t *cfg, unsigned int slot, char *host, int *port);

/* A subscriber was answered TEXT, "MOVED <slot> <host>:<port>": the map
 * takes it as a request's MOVED would (the slot at once, the rest at the
 * next read, marked stale). */
void nm_cluster_moved(nm_config_t *cfg, const char *text);

/* A master dropped shard channels by itself: its slots moved. */
void nm_cluster_mark_stale(nm_config_t *cfg);

/* pthread_atfork hooks, called by mutex.c in the library's lock order. */
void nm_cluster_before_fork(void);
void nm_cluster_after_fork(void);

#endif /* NM_CLUSTER_H */
