/* conn.c -- the thread-local connection cache. */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "config.h"
#include "conn.h"
#include "dial.h"
#include "log.h"
#include "reply.h"
#include "sentinel.h"
#include "server_check.h"
#include "url.h"


typedef struct conn_slot {
    redisContext *ctx;
    int64_t down_until; /* quorum mode: do not dial before this */
    unsigned long serial; /* ctx's dial (nm_conn_serial) */
} conn_slot_t;

/* The last serial a dial got: every connection has its own. */
static unsigned long last_serial; /* atomic */

/* Cluster mode: a node by its address. */
typedef struct node_conn {
    char *host;
    int port;
    redisContext *ctx;
} node_conn_t;

typedef struct conn_cache {
    nm_config_t *cfg;     /* reference: the configuration dialed for */
    conn_slot_t *slots;   /* cfg->nservers of them */
    node_conn_t *nodes;   /* cluster mode: the other nodes */
    size_t nnodes;
    unsigned long epoch;  /* fork_epoch when the slots were dialed */
} conn_cache_t;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
/* Bumped in every forked child; a cache of an older epoch holds the
 * parent's sockets. */
static unsigned long fork_epoch;

static void nodes_clear(conn_cache_t *cache)
{
    for (size_t i = 0; i < cache->nnodes; i++) {
        if (cache->nodes[i].ctx)
            nm_dial_close(cache->nodes[i].ctx);
        free(cache->nodes[i].host);
    }
    free(cache->nodes);
    cache->nodes = NULL;
    cache->nnodes = 0;
}

/* Called by the thread whose cache it is (at its exit too). */
static void cache_clear(conn_cache_t *cache)
{
    /* A reply still owed (a signal's, reply.h) is read before its
     * connection closes: once answered, the signal surely ran. */
    if (cache->cfg && cache->epoch == fork_epoch && nm_reply_owing())
        nm_reply_settle(nm_now_ms() + cache->cfg->io_timeout_ms);
    nodes_clear(cache);
    if (cache->cfg) {
        for (size_t i = 0; i < cache->cfg->nservers; i++)
            if (cache->slots[i].ctx)
                nm_dial_close(cache->slots[i].ctx);
        nm_config_unref(cache->cfg);
    }
    free(cache->slots);
    cache->slots = NULL;
    cache->cfg = NULL;
}

static void cache_destroy(void *p)
{
    conn_cache_t *cache = p;
    cache_clear(cache);
    free(cache);
}

static void make_key(void)
{
    pthread_key_create(&cache_key, cache_destroy);
}

static conn_cache_t *thread_cache(int create)
{
    pthread_once(&cache_once, make_key);
    conn_cache_t *cache = pthread_getspecific(cache_key);
    if (cache == NULL && create) {
        cache = calloc(1, sizeof *cache);
        if (cache && pthread_setspecific(cache_key, cache) != 0) {
            free(cache);
            cache = NULL;
        }
    }
    return cache;
}

/* Points CACHE at CFG, closing connections made for anything else. */
static int cache_bind(conn_cache_t *cache, nm_config_t *cfg)
{
    if (cache->epoch != fork_epoch) {
        /* Inherited from the parent: redisFree only closes our copy of the
         * descriptor, it sends nothing, so the parent's session is intact. */
        cache_clear(cache);
        cache->epoch = fork_epoch;
    }
    if (cache->cfg == cfg)
        return 0;
    cache_clear(cache);
    cache->slots = calloc(cfg->nservers, sizeof *cache->slots);
    if (!cache->slots)
        return ENOMEM;
    cache->cfg = nm_config_ref(cfg);
    return 0;
}

void nm_conn_report(const nm_config_t *cfg, size_t i, int err, const char *cause)
{
    /* The generation of the configuration under which server I was
     * reported down, 0 while it works: a new configuration's server is
     * another server, whose first failure is worth its own message. */
    static uint64_t down[NETMUTEX_SERVERS_MAX]; /* atomic */
    char where[NM_URL_MAX];
    int now_down = err != 0 && err != ENOTSUP; /* ENOTSUP: server_check said it */
    uint64_t state = now_down ? cfg->generation : 0;
    /* The common case, a server that works and worked, costs one load. */
    if (!now_down && !__atomic_load_n(&down[i], __ATOMIC_RELAXED))
        return;
    if (__atomic_exchange_n(&down[i], state, __ATOMIC_RELAXED) == state)
        return;
    nm_url_describe(&cfg->servers[i], where, sizeof where);
    if (now_down)
        netmutex_log(NETMUTEX_LOG_WARN, "%s: cannot use the server: %s", where, cause);
    else
        netmutex_log(NETMUTEX_LOG_INFO, "%s: reachable again", where);
}

/* The calling thread's dials (nm_conn_thread_dials); initial-exec, as
 * stats.c's thread-local fields. */
static __thread __attribute__((tls_model("initial-exec"))) unsigned long thread_dials;

unsigned long nm_conn_thread_dials(void)
{
    return thread_dials;
}

static int dial(const nm_config_t *cfg, const nm_server_t *srv, int64_t budget,
                redisContext **out, char *cause, size_t size)
{
    thread_dials++;
    /* Connect and handshake together get the connect timeout (and so do
     * the sentinels' answers, for a server found through them). */
    int64_t until = nm_now_ms() + budget;
    redisContext *c;
    int err = srv->sentinel ? nm_sentinel_dial(srv, until, &c, cause, size)
                            : nm_dial_open(srv, srv->is_unix ? NULL : srv->host, srv->port,
                                           until, &c, cause, size);
    if (err)
        return err;
    err = nm_server_check(c, cfg, srv, until);
    if (!err)
        err = nm_cluster_probe(c, cfg, srv, until);
    if (err) {
        nm_dial_describe(c, err, budget, cause, size);
        nm_dial_close(c);
        return err;
    }
    *out = c;
    return 0;
}

/* nm_conn_dial, with the cause of a failure in CAUSE. */
static int dial_reported(const nm_config_t *cfg, const nm_server_t *srv, int64_t deadline,
                         redisContext **out, char *cause, size_t size)
{
    int64_t budget = NM_MAX(NM_MIN((int64_t)cfg->connect_timeout_ms, nm_remaining_ms(deadline)), 1);
    cause[0] = '\0';
    int err = dial(cfg, srv, budget, out, cause, size);
    nm_conn_report(cfg, (size_t)(srv - cfg->servers), err, cause);
    return err;
}

int nm_conn_dial(const nm_config_t *cfg, const nm_server_t *srv, int64_t deadline,
                 redisContext **out)
{
    char cause[256];
    return dial_reported(cfg, srv, deadline, out, cause, sizeof cause);
}

int nm_conn_get(nm_config_t *cfg, size_t i, int64_t deadline, redisContext **out)
{
    char cause[256];
    return nm_conn_get_why(cfg, i, deadline, out, cause, sizeof cause);
}

int nm_conn_get_why(nm_config_t *cfg, size_t i, int64_t deadline, redisContext **out,
                    char *cause, size_t size)
{
    conn_cache_t *cache = thread_cache(1);
    if (!cache)
        return ENOMEM;
    int err = cache_bind(cache, cfg);
    if (err)
        return err;
    conn_slot_t *slot = &cache->slots[i];
    if (slot->down_until && nm_now_ms() < slot->down_until) {
        snprintf(cause, size, "not dialed again yet: it failed a moment ago");
        return NM_ECONN;
    }
    if (slot->ctx && nm_sentinel_moved(cfg, &cfg->servers[i], slot->ctx, deadline)) {
        nm_dial_close(slot->ctx); /* the sentinels name another master now */
        slot->ctx = NULL;
    }
    if (slot->ctx == NULL) {
        err = dial_reported(cfg, &cfg->servers[i], deadline, &slot->ctx, cause, size);
        if (err)
            return err;
        slot->serial = __atomic_add_fetch(&last_serial, 1, __ATOMIC_RELAXED);
    }
    *out = slot->ctx;
    return 0;
}

/* The entry of node HOST:PORT in CACHE, made if new (NULL: no memory). */
static node_conn_t *node_entry(conn_cache_t *cache, const char *host, int port)
{
    for (size_t i = 0; i < cache->nnodes; i++)
        if (cache->nodes[i].port == port && strcmp(cache->nodes[i].host, host) == 0)
            return &cache->nodes[i];
    node_conn_t *grown = realloc(cache->nodes, (cache->nnodes + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    cache->nodes = grown;
    node_conn_t *n = &grown[cache->nnodes];
    *n = (node_conn_t){ strdup(host), port, NULL };
    if (!n->host)
        return NULL;
    cache->nnodes++;
    return n;
}

static int is_server0(const nm_config_t *cfg, const char *host, int port)
{
    const nm_server_t *s = &cfg->servers[0];
    return !s->is_unix && s->port == port && strcmp(s->host, host) == 0;
}

/* Dials node HOST:PORT of CFG's cluster with server 0's credentials (every
 * node of a cluster shares them) and db 0. */
static int dial_node(const nm_config_t *cfg, const char *host, int port, int64_t deadline,
                     redisContext **out)
{
    nm_server_t srv = cfg->servers[0];
    int64_t budget = NM_MAX(NM_MIN((int64_t)cfg->connect_timeout_ms, nm_remaining_ms(deadline)),
                            1);
    char cause[256] = "";
    srv.is_unix = 0;
    srv.host = (char *)host;
    srv.port = port;
    srv.path = NULL;
    srv.sentinel = NULL;
    srv.db = 0;
    int err = dial(cfg, &srv, budget, out, cause, sizeof cause);
    nm_cluster_report(cfg, host, port, err, cause);
    return err;
}

int nm_conn_get_node(nm_config_t *cfg, const char *host, int port, int64_t deadline,
                     redisContext **out)
{
    if (is_server0(cfg, host, port))
        return nm_conn_get(cfg, 0, deadline, out);
    conn_cache_t *cache = thread_cache(1);
    int err = cache ? cache_bind(cache, cfg) : ENOMEM;
    node_conn_t *n = err ? NULL : node_entry(cache, host, port);
    if (!n)
        return err ? err : ENOMEM;
    if (!n->ctx && (err = dial_node(cfg, n->host, port, deadline, &n->ctx)) != 0)
        return err;
    *out = n->ctx;
    return 0;
}

int nm_conn_dial_node(const nm_config_t *cfg, const char *host, int port, int64_t deadline,
                      redisContext **out)
{
    if (is_server0(cfg, host, port))
        return nm_conn_dial(cfg, &cfg->servers[0], deadline, out);
    return dial_node(cfg, host, port, deadline, out);
}

void nm_conn_drop_node(const char *host, int port)
{
    conn_cache_t *cache = thread_cache(0);
    if (!cache || !cache->cfg)
        return;
    if (is_server0(cache->cfg, host, port)) {
        nm_conn_drop(0);
        return;
    }
    for (size_t i = 0; i < cache->nnodes; i++) {
        if (cache->nodes[i].ctx && cache->nodes[i].port == port &&
            strcmp(cache->nodes[i].host, host) == 0) {
            nm_dial_close(cache->nodes[i].ctx);
            cache->nodes[i].ctx = NULL;
        }
    }
}

void nm_conn_drop(size_t i)
{
    conn_cache_t *cache = thread_cache(0);
    if (cache && cache->cfg && i < cache->cfg->nservers && cache->slots[i].ctx) {
        nm_dial_close(cache->slots[i].ctx);
        cache->slots[i].ctx = NULL;
    }
}

redisContext *nm_conn_peek(const nm_config_t *cfg, size_t i)
{
    return nm_conn_cached(cfg, i) ? thread_cache(0)->slots[i].ctx : NULL;
}

unsigned long nm_conn_serial(const nm_config_t *cfg, size_t i)
{
    return nm_conn_cached(cfg, i) ? thread_cache(0)->slots[i].serial : 0;
}

int nm_conn_cached(const nm_config_t *cfg, size_t i)
{
    conn_cache_t *cache = thread_cache(0);
    return cache && cache->cfg == cfg && cache->epoch == fork_epoch && cache->slots[i].ctx;
}

void nm_conn_set_down(size_t i, int64_t until)
{
    conn_cache_t *cache = thread_cache(0);
    nm_conn_drop(i);
    /* A server skipped because it is down already keeps its time: were it
     * extended, a thread that retries more often than that would never try
     * the server again. */
    if (cache && cache->cfg && i < cache->cfg->nservers &&
        cache->slots[i].down_until <= nm_now_ms())
        cache->slots[i].down_until = until;
}

void nm_conn_close_thread(void)
{
    conn_cache_t *cache = thread_cache(0);
    if (cache)
        cache_clear(cache);
}

void nm_conn_after_fork_child(void)
{
    nm_reply_forget_all();
    fork_epoch++;
}
