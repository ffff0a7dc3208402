/*
 * cluster_state.h -- the state behind cluster.h, shared by its files
 * (cluster.c: the map and routing, cluster_state.c: its life,
 * cluster_renew.c: the watchdog's renewals).  Nothing else includes it.
 */
#ifndef NM_CLUSTER_STATE_H
#define NM_CLUSTER_STATE_H

#include <pthread.h>
#include <stdint.h>

#include "cluster.h"
#include "slot.h"

#define NM_CL_HOST_MAX NM_CLUSTER_HOST_MAX
#define NM_CL_NO_NODE 0xffff

enum { NM_CL_UNKNOWN, NM_CL_OFF, NM_CL_ON };


struct nm_cluster {
    int state;                /* atomic: NM_CL_* */
    nm_server_t *seeds;       /* redis-cluster:// only: every seed */
    size_t nseeds;
    /* nm_cluster_lock() guards what follows */
    nm_node_addr_t *nodes;    /* the masters of the map */
    size_t nnodes;
    uint16_t slot_node[NM_SLOTS]; /* index into nodes, or NM_CL_NO_NODE */
    int stale;                /* read the map again before the next use */
    int64_t refreshed_at;
    nm_node_addr_t *down;     /* nodes reported unusable, for the log */
    size_t ndown;
};

/* One lock for the cluster state of every configuration: it is held for a
 * few loads and stores only, never while another lock is taken, and around
 * fork() (pthread_atfork), so a child never inherits it held. */
void nm_cluster_lock(void);
void nm_cluster_unlock(void);

/* KEY's master, the map read first when it is stale or empty.  0 or
 * NM_ECONN (no node serves the slot, or none told us the map).
 * (cluster_route.c, which dials.) */
int nm_cluster_node_of(nm_config_t *cfg, const char *key, size_t len, int64_t deadline,
                       nm_node_addr_t *out);

/* Reads the map now, whenever it was last read.  0 or NM_ECONN.
 * (cluster_route.c, which dials.) */
int nm_cluster_refresh(nm_config_t *cfg, int64_t deadline);

/* What follows is cluster.c's, which never dials. */

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

#endif /* NM_CLUSTER_STATE_H */
