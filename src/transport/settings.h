/*
 * settings.h -- what a configuration is: where the servers are, how long
 * to wait for them, the lease and the key prefix (nm_config_t), and the
 * defaults and bounds of those settings.
 *
 * Apart from config.h, which builds configurations and shares them
 * (reference counts, the current one), so that the files a configuration
 * is made with (cluster_state.h, sentinel.h) and every file that only
 * reads one include this, not the code that builds it.
 */
#ifndef NM_SETTINGS_H
#define NM_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "netmutex.h"
#include "url.h"

#define NM_DEFAULT_URL NETMUTEX_DEFAULT_URL
#define NM_DEFAULT_PREFIX NETMUTEX_DEFAULT_PREFIX
#define NM_DEFAULT_CONNECT_TIMEOUT_MS 2000u
#define NM_DEFAULT_IO_TIMEOUT_MS 2000u
#define NM_DEFAULT_LEASE_MS 30000u
#define NM_DEFAULT_RENEW_PERCENT 33u
#define NM_DEFAULT_COHORT_MAX 256u
#define NM_DEFAULT_COHORT_MS 5u
#define NM_DEFAULT_CACHE_IDLE_MS 1000u
#define NM_DEFAULT_DRIFT_FACTOR 0.01
#define NM_DEFAULT_DRIFT_MS 2u
#define NM_PREFIX_MAX 256u
#define NM_TIMEOUT_MAX_MS 3600000u
#define NM_HOLDER_MAX 256u
#define NM_DEFAULT_REPLICA_TIMEOUT_MS 1000u
#define NM_MIN_REPLICAS_MAX 100u

/* Immutable once built (config.h), but for the reference count. */
typedef struct nm_config {
    int refs;                 /* atomic */
    nm_server_t *servers;
    size_t nservers;
    char *prefix;
    size_t prefix_len;
    unsigned int connect_timeout_ms;
    unsigned int io_timeout_ms;
    unsigned int lease_ms;
    unsigned int renew_percent;
    unsigned int cohort_max;
    unsigned int cohort_ms;
    unsigned int server_timeout_ms; /* quorum mode: one server's answer */
    double drift_factor;            /* quorum mode: validity's clock margin */
    unsigned int drift_ms;
    size_t quorum;                  /* nservers / 2 + 1 */
    netmutex_lost_fn on_lost;
    void *on_lost_arg;
    int allow_eviction;       /* accept servers that may evict lock keys */
    int cache;                /* lease caching on (cache.h) */
    unsigned int cache_idle_ms;
    char *holder;             /* NULL: "<hostname>:<pid>" (see lease.c) */
    unsigned int min_replicas;       /* replicas.h: 0 = no WAIT */
    unsigned int replica_timeout_ms;
    uint64_t generation;      /* unique per built configuration */
    struct nm_cluster *cluster; /* one server: whether and which Redis
                                   Cluster it reaches (cluster.h) */
    struct nm_tls *tls;       /* NULL unless a URL says rediss (tls.h) */
} nm_config_t;

#endif /* NM_SETTINGS_H */
