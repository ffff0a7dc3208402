/*
 * config.h -- the process-wide configuration: where the servers are, how
 * long to wait for them, the lease and the key prefix.
 *
 * A configuration is immutable once built and reference counted: a thread
 * that dialed with it, and a lock acquired under it, keep their reference,
 * so netmutex_configure() can replace the current one without pulling it
 * from under anybody.
 */
#ifndef NM_CONFIG_H
#define NM_CONFIG_H

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

/* Builds a configuration from USER (may be NULL), falling back to the
 * environment and the defaults.  EINVAL, ENOMEM. */
int nm_config_build(const netmutex_config_t *user, nm_config_t **out);

nm_config_t *nm_config_ref(nm_config_t *cfg);
void nm_config_unref(nm_config_t *cfg);

/* A new reference to the current configuration, built from the environment
 * on first use.  Errors of nm_config_build. */
int nm_config_current(nm_config_t **out);

/* The generation of the current configuration, 0 if there is none yet: a
 * cheap way for a thread to notice that its connections are stale. */
uint64_t nm_config_current_generation(void);

/* Makes CFG (consumed; NULL to forget) the current configuration, unless
 * BUSY(), called under the same lock, says a lock is held: then EBUSY. */
int nm_config_replace(nm_config_t *cfg, int (*busy)(void));

/* pthread_atfork hooks (parent and child alike release the lock). */
void nm_config_before_fork(void);
void nm_config_after_fork(void);

#endif /* NM_CONFIG_H */
