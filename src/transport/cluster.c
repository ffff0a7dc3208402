/*
 * cluster.c -- detecting a Redis Cluster on a connection, and its slot
 * map (cluster.h): what the map says and how it is read from a node.
 * Getting the connections is the callers' (cluster_route.c): this file
 * sits below conn.c, which calls it at every dial.
 */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "cluster_state.h"
#include "log.h"
#include "reply.h"
#include "url.h"

/* A stale map is read again at most this often: during a failover every
 * node may answer with yesterday's map for a moment. */
#define REFRESH_MIN_MS 100

/* ---- the lock ------------------------------------------------------------ */

/* A leaf: nothing else is taken under it.  mutex.c's fork handlers take
 * it in the library's lock order (a handler of its own would run first of
 * all, before the cache's sweep lock, which is held around requests that
 * take this one). */
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;

void nm_cluster_before_fork(void) { pthread_mutex_lock(&state_lock); }
void nm_cluster_after_fork(void) { pthread_mutex_unlock(&state_lock); }

void nm_cluster_lock(void)
{
    pthread_mutex_lock(&state_lock);
}

void nm_cluster_unlock(void)
{
    pthread_mutex_unlock(&state_lock);
}

/* ---- detection ------------------------------------------------------------ */

int nm_cluster_known(const nm_config_t *cfg)
{
    return __atomic_load_n(&cfg->cluster->state, __ATOMIC_ACQUIRE) != NM_CL_UNKNOWN;
}

int nm_cluster_on(const nm_config_t *cfg)
{
    return cfg->cluster && __atomic_load_n(&cfg->cluster->state, __ATOMIC_ACQUIRE) == NM_CL_ON;
}

/* Whether the server behind C says cluster_enabled:1.  A server that
 * refuses INFO (an ACL) is taken for a plain one. */
static int ask_enabled(redisContext *c, int64_t deadline, int *enabled)
{
    const char *argv[2] = { "INFO", "cluster" };
    const char *text;
    size_t len;
    redisReply *r;

    *enabled = 0;
    int err = nm_call(c, 2, argv, NULL, deadline, &r);
    if (err == EPROTO || err == EACCES)
        return 0;
    if (err)
        return err;
    if (nm_reply_string(r, &text, &len) == 0)
        *enabled = strstr(text, "cluster_enabled:1") != NULL;
    freeReplyObject(r);
    return 0;
}

int nm_cluster_probe(redisContext *c, const nm_config_t *cfg, const nm_server_t *srv,
                     int64_t deadline)
{
    char where[NM_URL_MAX];
    int enabled;
    if (cfg->cluster && __atomic_load_n(&cfg->cluster->state, __ATOMIC_ACQUIRE) != NM_CL_UNKNOWN)
        return 0;
    if (!cfg->cluster && cfg->nservers == 1)
        return 0; /* a master found through sentinels */
    int err = ask_enabled(c, deadline, &enabled);
    if (err)
        return err;
    if (cfg->cluster) {
        int want = NM_CL_UNKNOWN;
        __atomic_compare_exchange_n(&cfg->cluster->state, &want, enabled ? NM_CL_ON : NM_CL_OFF,
                                    0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        return 0;
    }
    if (!enabled)
        return 0;
    /* Said once per configuration, not at every dial of every call. */
    static uint64_t said; /* atomic: a generation */
    if (__atomic_exchange_n(&said, cfg->generation, __ATOMIC_RELAXED) == cfg->generation)
        return EINVAL;
    nm_url_describe(srv, where, sizeof where);
    netmutex_log(NETMUTEX_LOG_ERROR, "%s: refused: a Redis Cluster node in a list of servers; "
                 "quorum mode with a Redis Cluster is not supported", where);
    return EINVAL;
}

/* ---- reporting -------------------------------------------------------------- */

static int same_node(const nm_node_addr_t *a, const char *host, int port)
{
    return a->port == port && strcmp(a->host, host) == 0;
}

/* Adds (DOWN) or removes HOST:PORT in the reported list: 1 if it changed.
 * ndown is also read without the lock (nm_cluster_report), so it is
 * stored atomically. */
static int set_down_locked(nm_cluster_t *cl, const char *host, int port, int down)
{
    for (size_t i = 0; i < cl->ndown; i++) {
        if (!same_node(&cl->down[i], host, port))
            continue;
        if (!down) {
            cl->down[i] = cl->down[cl->ndown - 1];
            __atomic_store_n(&cl->ndown, cl->ndown - 1, __ATOMIC_RELAXED);
        }
        return !down;
    }
    if (!down)
        return 0;
    nm_node_addr_t *d = realloc(cl->down, (cl->ndown + 1) * sizeof *d);
    if (!d)
        return 0;
    cl->down = d;
    snprintf(d[cl->ndown].host, sizeof d->host, "%s", host);
    d[cl->ndown].port = port;
    __atomic_store_n(&cl->ndown, cl->ndown + 1, __ATOMIC_RELAXED);
    return 1;
}

void nm_cluster_report(const nm_config_t *cfg, const char *host, int port, int err,
                       const char *cause)
{
    nm_cluster_t *cl = cfg->cluster;
    int down = err != 0 && err != ENOTSUP;
    if (!cl || (!down && __atomic_load_n(&cl->ndown, __ATOMIC_RELAXED) == 0))
        return;
    nm_cluster_lock();
    int changed = set_down_locked(cl, host, port, down);
    nm_cluster_unlock();
    if (changed && down)
        netmutex_log(NETMUTEX_LOG_WARN, "redis://%s:%d: cannot use the cluster node: %s", host,
                     port, cause);
    else if (changed)
        netmutex_log(NETMUTEX_LOG_INFO, "redis://%s:%d: reachable again", host, port);
}

/* ---- the slot map ------------------------------------------------------------ */

typedef struct slot_map {
    nm_node_addr_t *nodes;
    size_t n;
    uint16_t *slot_node;
} slot_map_t;

static void map_clear(slot_map_t *m)
{
    free(m->nodes);
    free(m->slot_node);
    memset(m, 0, sizeof *m);
}

/* The index of HOST:PORT in NODES, added if new; NM_CL_NO_NODE if full. */
static uint16_t node_index(nm_node_addr_t **nodes, size_t *n, const char *host, size_t hlen,
                           int port)
{
    for (size_t i = 0; i < *n; i++)
        if ((*nodes)[i].port == port && strlen((*nodes)[i].host) == hlen &&
            memcmp((*nodes)[i].host, host, hlen) == 0)
            return (uint16_t)i;
    if (hlen >= NM_CLUSTER_HOST_MAX || *n >= NM_CL_NO_NODE)
        return NM_CL_NO_NODE;
    nm_node_addr_t *grown = realloc(*nodes, (*n + 1) * sizeof *grown);
    if (!grown)
        return NM_CL_NO_NODE;
    *nodes = grown;
    memcpy(grown[*n].host, host, hlen);
    grown[*n].host[hlen] = '\0';
    grown[*n].port = port;
    return (uint16_t)(*n)++;
}

/* One entry of CLUSTER SLOTS: [start, end, [host, port, id...], replicas...].
 * An empty host means the node we asked (ASKED). */
static int take_range(const redisReply *e, const char *asked, slot_map_t *m)
{
    long long from, to, port;
    const char *host;
    size_t hlen;
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3)
        return EPROTO;
    const redisReply *master = e->element[2];
    if (nm_reply_integer(e->element[0], &from) || nm_reply_integer(e->element[1], &to) ||
        master->type != REDIS_REPLY_ARRAY || master->elements < 2 ||
        nm_reply_string(master->element[0], &host, &hlen) ||
        nm_reply_integer(master->element[1], &port) || from < 0 || to >= NM_SLOTS ||
        from > to || port < 1 || port > 65535)
        return EPROTO;
    if (hlen == 0 || (hlen == 1 && host[0] == '?')) {
        host = asked;
        hlen = strlen(asked);
    }
    uint16_t idx = node_index(&m->nodes, &m->n, host, hlen, (int)port);
    if (idx == NM_CL_NO_NODE)
        return ENOMEM;
    for (long long s = from; s <= to; s++)
        m->slot_node[s] = idx;
    return 0;
}

/* CLUSTER SLOTS on C (a connection to ASKED) into *M. */
static int read_map(redisContext *c, const char *asked, int64_t deadline, slot_map_t *m)
{
    const char *argv[2] = { "CLUSTER", "SLOTS" };
    redisReply *r;
    int err = nm_call(c, 2, argv, NULL, deadline, &r);
    if (err)
        return err;
    m->slot_node = malloc(NM_SLOTS * sizeof *m->slot_node);
    err = m->slot_node ? 0 : ENOMEM;
    if (!err && r->type != REDIS_REPLY_ARRAY)
        err = EPROTO;
    if (!err)
        memset(m->slot_node, 0xff, NM_SLOTS * sizeof *m->slot_node);
    for (size_t i = 0; !err && i < r->elements; i++)
        err = take_range(r->element[i], asked, m);
    freeReplyObject(r);
    if (err)
        map_clear(m);
    return err;
}

nm_node_addr_t *nm_cluster_candidates(nm_config_t *cfg, size_t *n)
{
    nm_cluster_t *cl = cfg->cluster;
    const nm_server_t *seeds = cl->nseeds ? cl->seeds : cfg->servers;
    size_t nseeds = cl->nseeds ? cl->nseeds : 1;
    nm_cluster_lock();
    nm_node_addr_t *v = malloc((cl->nnodes + nseeds) * sizeof *v);
    *n = 0;
    for (size_t i = 0; v && i < cl->nnodes; i++)
        v[(*n)++] = cl->nodes[i];
    nm_cluster_unlock();
    for (size_t i = 0; v && i < nseeds; i++) {
        if (seeds[i].is_unix)
            continue; /* reached through the configuration's own server */
        snprintf(v[*n].host, sizeof v->host, "%s", seeds[i].host);
        v[(*n)++].port = seeds[i].port;
    }
    return v;
}

/* Installs M (consumed) as CFG's map. */
static void map_install(nm_cluster_t *cl, slot_map_t *m)
{
    nm_cluster_lock();
    free(cl->nodes);
    cl->nodes = m->nodes;
    cl->nnodes = m->n;
    memcpy(cl->slot_node, m->slot_node, sizeof cl->slot_node);
    cl->stale = 0;
    cl->refreshed_at = nm_now_ms();
    nm_cluster_unlock();
    free(m->slot_node);
}

int nm_cluster_read_map(redisContext *c, const char *asked, int64_t deadline,
                        nm_cluster_t *cl)
{
    slot_map_t m = { 0 };
    int err = read_map(c, asked, deadline, &m);
    if (!err)
        map_install(cl, &m);
    return err;
}

int nm_cluster_lookup(nm_cluster_t *cl, const char *key, size_t len, nm_node_addr_t *out)
{
    unsigned int slot = nm_slot_of(key, len);
    nm_cluster_lock();
    uint16_t idx = cl->slot_node[slot];
    if (idx != NM_CL_NO_NODE)
        *out = cl->nodes[idx];
    nm_cluster_unlock();
    return idx != NM_CL_NO_NODE ? 0 : NM_ECONN;
}

void nm_cluster_mark_stale(nm_config_t *cfg)
{
    nm_cluster_lock();
    cfg->cluster->stale = 1;
    nm_cluster_unlock();
}

int nm_cluster_want_refresh(nm_cluster_t *cl)
{
    nm_cluster_lock();
    int want = cl->nnodes == 0 ||
               (cl->stale && nm_now_ms() - cl->refreshed_at >= REFRESH_MIN_MS);
    nm_cluster_unlock();
    return want;
}

/* "MOVED <slot> <host>:<port>" or "ASK ...": 1 (ASK) or 0 (MOVED) with the
 * node in *TO and the slot in *SLOT; -1 for anything else. */
static int parse_redirect(const char *text, nm_node_addr_t *to, unsigned int *slot)
{
    int ask = strncmp(text, "ASK ", 4) == 0;
    const char *p = text + (ask ? 4 : 6), *colon = strrchr(text, ':'), *space;
    char *end;
    if (!ask && strncmp(text, "MOVED ", 6) != 0)
        return -1;
    unsigned long s = strtoul(p, &end, 10);
    space = end;
    if (end == p || *space != ' ' || !colon || colon < space || s >= NM_SLOTS)
        return -1;
    size_t hlen = (size_t)(colon - space - 1);
    long port = strtol(colon + 1, &end, 10);
    if (hlen == 0 || hlen >= sizeof to->host || *end != '\0' || port < 1 || port > 65535)
        return -1;
    memcpy(to->host, space + 1, hlen);
    to->host[hlen] = '\0';
    to->port = (int)port;
    *slot = (unsigned int)s;
    return ask;
}

/* TEXT, a redirection: MOVED fixes the slot in the map (0), ASK returns 1
 * with the node to ask in *TO, anything else -1. */
static int redirected_by(nm_config_t *cfg, const char *text, nm_node_addr_t *to)
{
    nm_cluster_t *cl = cfg->cluster;
    unsigned int slot;
    int ask = parse_redirect(text, to, &slot);
    if (ask != 0)
        return ask;
    nm_cluster_lock();
    uint16_t idx = node_index(&cl->nodes, &cl->nnodes, to->host, strlen(to->host), to->port);
    if (idx != NM_CL_NO_NODE)
        cl->slot_node[slot] = idx;
    cl->stale = 1; /* more slots than this one may have moved */
    nm_cluster_unlock();
    return 0;
}

int nm_cluster_redirected(nm_config_t *cfg, nm_node_addr_t *to)
{
    return redirected_by(cfg, nm_reply_last_error(), to);
}

/* ---- for the subscribers ---------------------------------------------------- */

void nm_cluster_moved(nm_config_t *cfg, const char *text)
{
    nm_node_addr_t to;
    if (redirected_by(cfg, text, &to) != 0)
        nm_cluster_mark_stale(cfg);
}

int nm_cluster_slot_master(nm_config_t *cfg, unsigned int slot, char *host, int *port)
{
    nm_cluster_t *cl = cfg->cluster;
    if (!cl || slot >= NM_SLOTS)
        return NM_ECONN;
    nm_cluster_lock();
    uint16_t idx = cl->nnodes ? cl->slot_node[slot] : NM_CL_NO_NODE;
    if (idx != NM_CL_NO_NODE) {
        memcpy(host, cl->nodes[idx].host, NM_CLUSTER_HOST_MAX);
        *port = cl->nodes[idx].port;
    }
    nm_cluster_unlock();
    return idx != NM_CL_NO_NODE ? 0 : NM_ECONN;
}
