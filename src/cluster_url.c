/*
 * cluster_url.c -- the redis-cluster:// URL form, and the life of the
 * cluster state (cluster.h).
 *
 *   redis-cluster://[[user]:password@]host[:port][,host[:port]...]
 *
 * Each host is a seed: any of them that answers tells the slot map.  The
 * credentials are the cluster's (every node shares them), so they come
 * once, before the hosts; a ',' in them must be written %2C.  A cluster has
 * database 0 only, so no /db is accepted but /0.
 */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_state.h"
#include "log.h"

#define SCHEME "redis-cluster://"

static nm_cluster_t *cluster_new(int state)
{
    nm_cluster_t *cl = calloc(1, sizeof *cl);
    if (!cl)
        return NULL;
    cl->state = state;
    memset(cl->slot_node, 0xff, sizeof cl->slot_node);
    return cl;
}

void nm_cluster_free(nm_cluster_t *cl)
{
    if (!cl)
        return;
    nm_servers_free(cl->seeds, cl->nseeds);
    free(cl->nodes);
    free(cl->down);
    free(cl);
}

int nm_cluster_attach(const nm_server_t *servers, size_t n, nm_cluster_t **out)
{
    *out = NULL;
    if (n != 1 || servers[0].sentinel)
        return 0; /* quorum mode: nm_cluster_probe refuses nodes */
    *out = cluster_new(NM_CL_UNKNOWN);
    return *out ? 0 : ENOMEM;
}

/* One seed HOST (LEN bytes) with the credentials USERINFO (NULL: none)
 * into *SRV, through the redis:// parser. */
static int parse_seed(const char *userinfo, size_t ui_len, const char *host, size_t len,
                      nm_server_t *srv)
{
    size_t size = strlen("redis://") + ui_len + 1 + len + 1;
    char *url = malloc(size);
    nm_server_t *one;
    size_t n;
    if (!url)
        return ENOMEM;
    snprintf(url, size, "redis://%.*s%s%.*s", (int)ui_len, userinfo ? userinfo : "",
             userinfo ? "@" : "", (int)len, host);
    int err = len == 0 ? EINVAL : nm_config_parse_urls(url, &one, &n);
    free(url);
    if (err)
        return err;
    if (n != 1 || one->db != 0) {
        nm_servers_free(one, n);
        return EINVAL;
    }
    *srv = *one;
    free(one);
    return 0;
}

static int parse_seeds(const char *rest, nm_cluster_t *cl)
{
    const char *at = strrchr(rest, '@'), *hosts = at ? at + 1 : rest;
    size_t ui_len = at ? (size_t)(at - rest) : 0;
    size_t count = 1;
    int err = 0;

    for (const char *p = hosts; *p; p++)
        count += *p == ',';
    if (count > NM_CL_SEEDS_MAX)
        return EINVAL;
    cl->seeds = calloc(count, sizeof *cl->seeds);
    if (!cl->seeds)
        return ENOMEM;
    for (const char *p = hosts; cl->nseeds < count && !err; cl->nseeds++) {
        size_t len = strcspn(p, ",");
        err = parse_seed(at ? rest : NULL, ui_len, p, len, &cl->seeds[cl->nseeds]);
        p += len + 1;
    }
    return err;
}

/* A copy of the first seed: the configuration's one server. */
static int first_seed(const nm_cluster_t *cl, nm_server_t **servers, size_t *n)
{
    char where[NM_URL_MAX];
    const nm_server_t *s = &cl->seeds[0];
    /* The parser again, rather than a field-by-field copy to keep in step
     * with nm_server_t; the credentials are decoded already, so they are
     * copied after it. */
    nm_server_describe(&(nm_server_t){ .host = s->host, .port = s->port }, where, sizeof where);
    int err = nm_config_parse_urls(where, servers, n);
    if (err)
        return err;
    if ((s->user && !((*servers)->user = strdup(s->user))) ||
        (s->password && !((*servers)->password = strdup(s->password)))) {
        nm_servers_free(*servers, *n);
        return ENOMEM;
    }
    return 0;
}

int nm_cluster_parse_url(const char *url, nm_server_t **servers, size_t *n,
                         nm_cluster_t **out)
{
    const char *p = url ? strstr(url, SCHEME) : NULL;
    if (!p)
        return ENOENT;
    if (p != url || strstr(p + strlen(SCHEME), "://")) {
        netmutex_log(NETMUTEX_LOG_ERROR, "a redis-cluster:// URL cannot be part of a list: "
                     "quorum mode with a Redis Cluster is not supported");
        return EINVAL;
    }
    nm_cluster_t *cl = cluster_new(NM_CL_ON);
    if (!cl)
        return ENOMEM;
    int err = parse_seeds(p + strlen(SCHEME), cl);
    if (!err)
        err = first_seed(cl, servers, n);
    if (err) {
        nm_cluster_free(cl);
        return err;
    }
    *out = cl;
    return 0;
}
