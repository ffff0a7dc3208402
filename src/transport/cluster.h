/*
 * cluster.h -- Redis Cluster: detection and the slot map (cluster.c).  The
 * state they work on, and its life, are cluster_state.h's; sending a key's
 * request to the node that serves its slot is cluster_route.h's.
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

/* ---- the map, for cluster_route.c, which dials (cluster.c never does) ---- */

/* One lock for the cluster state of every configuration: it is held for a
 * few loads and stores only, never while another lock is taken, and around
 * fork() (pthread_atfork), so a child never inherits it held. */
void nm_cluster_lock(void);
void nm_cluster_unlock(void);

/* Whether CFG's server was probed already (nm_cluster_probe). */
int nm_cluster_known(const nm_config_t *cfg);

/* Where to ask for the map: the nodes we know, then the seeds (or the
 * configuration's one server).  *N of them in a new array, NULL if out of
 * memory. */
nm_node_addr_t *nm_cluster_candidates(nm_config_t *cfg, size_t *n);

/* CLUSTER SLOTS on C, a connection to ASKED (its address, for the nodes
 * the map leaves unnamed), installed as CL's map: 0, or an error of the
 * request (EPROTO for a reply of another shape); the map is then kept. */
int nm_cluster_read_map(redisContext *c, const char *asked, int64_t deadline,
                        nm_cluster_t *cl);

/* Whether CL's map must be read before it is used: none yet, or stale and
 * not read within the last moment. */
int nm_cluster_want_refresh(nm_cluster_t *cl);

/* KEY's master in CL's map as it is: 0 or NM_ECONN (no node for it). */
int nm_cluster_lookup(nm_cluster_t *cl, const char *key, size_t len, nm_node_addr_t *out);

/* Follows the redirection in the last error reply: MOVED fixes the slot
 * in the map (and returns 0), ASK returns 1 with the node to ask in *TO.
 * -1 if the text is not a redirection we understand. */
int nm_cluster_redirected(nm_config_t *cfg, nm_node_addr_t *to);

/* pthread_atfork hooks, called by mutex.c in the library's lock order. */
void nm_cluster_before_fork(void);
void nm_cluster_after_fork(void);

#endif /* NM_CLUSTER_H */
