/* cluster.c -- the masters of a Redis Cluster, for `netmutex list`. */
#include "ac_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netmutex.h>

#include "cli.h"
#include "cluster.h"

/* Whether the server behind C has cluster_enabled:1. */
static int enabled(redisContext *c)
{
    redisReply *r = redisCommand(c, "INFO cluster");
    int on = r != NULL && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_enabled:1");
    freeReplyObject(r);
    return on;
}

/* Adds master HOST:PORT (credentials of SEED) to LIST once. */
static int add_master(struct cli_server **list, size_t *n, const struct cli_server *seed,
                      const char *host, size_t hlen, int port)
{
    char shown[300];
    for (size_t i = 0; i < *n; i++)
        if ((*list)[i].port == port && strlen((*list)[i].host) == hlen &&
            memcmp((*list)[i].host, host, hlen) == 0)
            return 0;
    struct cli_server *grown = realloc(*list, (*n + 1) * sizeof *grown);
    if (grown == NULL)
        return ENOMEM;
    *list = grown;
    struct cli_server *s = &grown[*n];
    memset(s, 0, sizeof *s);
    snprintf(shown, sizeof shown, "redis://%.*s:%d", (int)hlen, host, port);
    s->host = strndup(host, hlen);
    s->port = port;
    s->user = seed->user != NULL ? strdup(seed->user) : NULL;
    s->password = seed->password != NULL ? strdup(seed->password) : NULL;
    s->shown = strdup(shown);
    (*n)++;
    if (s->host == NULL || s->shown == NULL || (seed->user && !s->user) ||
        (seed->password && !s->password))
        return ENOMEM;
    return 0;
}

/* The masters in C's CLUSTER SLOTS ([start, end, [host, port, ...], ...]);
 * an empty host is the seed's own. */
static int read_masters(redisContext *c, const struct cli_server *seed,
                        struct cli_server **list, size_t *n)
{
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    int err = r == NULL || r->type != REDIS_REPLY_ARRAY ? EPROTO : 0;

    for (size_t i = 0; err == 0 && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
            e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
            e->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
            err = EPROTO;
            break;
        }
        const redisReply *host = e->element[2]->element[0];
        const char *h = host->len > 0 ? host->str : seed->host;
        size_t hlen = host->len > 0 ? host->len : strlen(seed->host);
        err = add_master(list, n, seed, h, hlen, (int)e->element[2]->element[1]->integer);
    }
    freeReplyObject(r);
    return err;
}

int cli_cluster_expand(struct cli_server **servers, size_t *n, int cluster_url,
                       int *is_cluster)
{
    char why[256] = "";
    struct cli_server *masters = NULL;
    size_t nm = 0;
    int err = EAGAIN;

    *is_cluster = 0;
    if (!cluster_url && *n != 1)
        return 0; /* quorum mode: independent masters */
    for (size_t i = 0; i < *n && err == EAGAIN; i++) {
        redisContext *c = cli_server_dial(&(*servers)[i], &err, why, sizeof why);
        if (c == NULL) {
            /* A plain server that is down is for list to say. */
            if (cluster_url)
                netmutex_log(NETMUTEX_LOG_WARN, "%s: %s", (*servers)[i].shown, why);
            continue;
        }
        *is_cluster = enabled(c);
        err = *is_cluster ? read_masters(c, &(*servers)[i], &masters, &nm) : 0;
        redisFree(c);
    }
    if (err == 0 && *is_cluster) {
        cli_servers_free(*servers, *n);
        *servers = masters;
        *n = nm;
        return 0;
    }
    cli_servers_free(masters, nm);
    if (err == EAGAIN && !cluster_url)
        return 0; /* the plain server is down: list says so itself */
    if (err != 0)
        cli_say("cannot read the cluster's masters: %s", netmutex_strerror(err));
    return err;
}
