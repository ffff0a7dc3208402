/*
 * cluster_route.h -- Redis Cluster, from above the connections: a key's
 * request sent to the node of its slot (cluster_route.c), the watchdog's
 * renewals per node (cluster_renew.c), and the slot map read through the
 * calling thread's connections.  cluster.h has the map and the detection.
 */
#ifndef NM_CLUSTER_ROUTE_H
#define NM_CLUSTER_ROUTE_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "script.h"
#include "settings.h"

/* Whether CFG talks to a cluster (nm_cluster_on), learned first when it
 * is not known yet: server 0 is dialed (nm_conn_get) if it never was.
 * 0 with *ON set, or the dial's error. */
int nm_cluster_mode(nm_config_t *cfg, int64_t deadline, int *on);

/* Runs script ID (as nm_script_run) on the node of KEY's slot, following
 * redirections.  *SENT tells whether a failed call may have reached a
 * server.  0, or the errors of nm_script_run (NM_ECONN also when the
 * redirections do not settle). */
int nm_cluster_script(nm_config_t *cfg, const char *key, size_t key_len, nm_script_t id,
                      int nkeys, int nargs, const char **argv, const size_t *lens,
                      int64_t deadline, redisReply **out, int *sent);

/* The same for one command (as nm_call) about KEY; a blocking command
 * (as nm_call_blocking) when UNTIL is not 0. */
int nm_cluster_command(nm_config_t *cfg, const char *key, size_t key_len, int argc,
                       const char **argv, const size_t *lens, int64_t until,
                       int64_t deadline, redisReply **out, int *sent);

/* One renewal for nm_cluster_renew. */
typedef struct nm_renewal {
    const char *key;
    size_t key_len;
    const char *token;
    const char *lease;
    int result; /* out: renew.lua's answer (1 renewed, 2 renewed and
                   waited for, 0 not ours any more), -1 not known */
} nm_renewal_t;

/* The watchdog's round: renews the N leases of ITEMS, grouped per node and
 * per slot (a script's keys must share a slot), one pipeline per node, all
 * nodes at once, by UNTIL.  *SENT_AT is when the requests left. */
void nm_cluster_renew(nm_config_t *cfg, nm_renewal_t *items, size_t n, int64_t until,
                      int64_t *sent_at);

/* Every master of CFG's cluster, the map read again first (a listing must
 * not go by a map a failover made stale): *N of them in *OUT (malloc'ed).
 * 0, NM_ECONN (no node told us the map), ENOMEM. */
int nm_cluster_masters(nm_config_t *cfg, int64_t deadline, nm_node_addr_t **out, size_t *n);

/* KEY's master, the map read first when it is stale or empty.  0 or
 * NM_ECONN (no node serves the slot, or none told us the map).
 * (cluster_renew.c finds its nodes with it too.) */
int nm_cluster_node_of(nm_config_t *cfg, const char *key, size_t len, int64_t deadline,
                       nm_node_addr_t *out);

/* Reads the map now, whenever it was last read.  0 or NM_ECONN. */
int nm_cluster_refresh(nm_config_t *cfg, int64_t deadline);

/* Reads the map again by DEADLINE if it is empty or stale (at most every
 * so often, as for requests). */
void nm_cluster_refresh_stale(nm_config_t *cfg, int64_t deadline);

#endif /* NM_CLUSTER_ROUTE_H */
