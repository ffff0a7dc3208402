/*
 * cluster_state.h -- a configuration's cluster state: what it holds (read
 * and changed by cluster.c, cluster_route.c and cluster_renew.c, under
 * nm_cluster_lock of cluster.h), and its life (cluster_state.c): made
 * when config.c builds the configuration, freed with it.
 *
 * It includes nothing of cluster.h, which the state's users include as
 * well: the state is below the map and the routing that work on it, so
 * config.c can make it without the code that reads maps.
 */
#ifndef NM_CLUSTER_STATE_H
#define NM_CLUSTER_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "slot.h"
#include "url.h"

#define NM_CL_NO_NODE 0xffff

enum { NM_CL_UNKNOWN, NM_CL_OFF, NM_CL_ON };

struct nm_cluster {
    int state;                /* atomic: NM_CL_* */
    nm_server_t *seeds;       /* redis-cluster:// only: every seed */
    size_t nseeds;
    /* nm_cluster_lock() guards what follows */
    struct nm_node_addr *nodes; /* the masters of the map (cluster.h) */
    size_t nnodes;
    uint16_t slot_node[NM_SLOTS]; /* index into nodes, or NM_CL_NO_NODE */
    int stale;                /* read the map again before the next use */
    int64_t refreshed_at;
    struct nm_node_addr *down;  /* nodes reported unusable, for the log */
    size_t ndown;
};

/* The cluster state of a configuration of URLS: for a redis-cluster://
 * URL one that knows it is a cluster and takes the seeds (out of URLS);
 * for one plain URL, one that may turn out to reach a cluster; NULL for a
 * quorum or Sentinel configuration.  0, ENOMEM.  (config.c) */
int nm_cluster_attach(nm_urls_t *urls, struct nm_cluster **out);

void nm_cluster_free(struct nm_cluster *cl);

#endif /* NM_CLUSTER_STATE_H */
