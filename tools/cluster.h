/*
 * cluster.h -- `netmutex list` on a Redis Cluster: the lock keys are spread
 * over the masters, and SCAN sees one node's keys only, so every master is
 * scanned (all must answer: a master that does not may hold any lock).
 */
#ifndef NETMUTEX_CLI_CLUSTER_H
#define NETMUTEX_CLI_CLUSTER_H

#include <stddef.h>

#include "servers.h"

/* When the URL SERVERS (*N of them, CLUSTER_URL: of the redis-cluster://
 * form) reaches a Redis Cluster -- asked of the first seed that answers --
 * replaces them with the cluster's masters and sets *IS_CLUSTER; a single
 * plain URL that reaches a node counts too.  Otherwise leaves them alone.
 * 0, or an errno with the cause said (EAGAIN: no seed answered). */
int cli_cluster_expand(struct cli_server **servers, size_t *n, int cluster_url,
                       int *is_cluster);

#endif /* NETMUTEX_CLI_CLUSTER_H */
