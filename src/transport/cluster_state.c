/*
 * cluster_state.c -- the life of a configuration's cluster state
 * (cluster_state.h): made when the configuration is, with the seeds of its
 * redis-cluster:// URL (url.h parses it), freed with it.
 */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_state.h"

static struct nm_cluster *cluster_new(int state)
{
    struct nm_cluster *cl = calloc(1, sizeof *cl);
    if (!cl)
        return NULL;
    cl->state = state;
    memset(cl->slot_node, 0xff, sizeof cl->slot_node);
    return cl;
}

void nm_cluster_free(struct nm_cluster *cl)
{
    if (!cl)
        return;
    nm_servers_free(cl->seeds, cl->nseeds);
    free(cl->nodes);
    free(cl->down);
    free(cl);
}

int nm_cluster_attach(nm_urls_t *urls, struct nm_cluster **out)
{
    *out = NULL;
    if (urls->seeds) { /* redis-cluster:// */
        if (!(*out = cluster_new(NM_CL_ON)))
            return ENOMEM;
        (*out)->seeds = urls->seeds;
        (*out)->nseeds = urls->nseeds;
        urls->seeds = NULL;
        urls->nseeds = 0;
        return 0;
    }
    if (urls->n != 1 || urls->servers[0].master_name)
        return 0; /* quorum mode: nm_cluster_probe refuses nodes */
    *out = cluster_new(NM_CL_UNKNOWN);
    return *out ? 0 : ENOMEM;
}
