/*
 * cluster_route.c -- one request about a key, sent to the node that serves
 * the key's slot, following MOVED and ASK (cluster.h); and the slot map,
 * read through the calling thread's connections (conn.c) when it is
 * missing or stale.
 *
 * A slot being migrated answers three ways, none of them an error for the
 * caller: MOVED (the map is behind: it is fixed and read again), ASK (this
 * one request goes to the importing node, after ASKING), and TRYAGAIN (the
 * request's keys are split between the two nodes: nothing was done, and
 * nothing will be until the migration moves on).  All are retried until
 * the request's deadline, TRYAGAIN and long chains of redirections after
 * a pause that doubles up to PAUSE_MAX_MS; only then is the request given
 * up, as NM_ECONN, which the caller retries within its own deadline like
 * any request that got no answer in time.
 */
#include "nm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster_route.h"
#include "cluster_state.h"
#include "conn.h"
#include "reply.h"

/* Redirections followed without a pause. */
#define MAX_HOPS 5
#define PAUSE_MAX_MS 50

/* ---- the map, read through this thread's connections --------------------- */

int nm_cluster_mode(nm_config_t *cfg, int64_t deadline, int *on)
{
    redisContext *c;
    int err = 0;
    /* The first dial of the server probes it (conn.c, nm_cluster_probe). */
    if (cfg->cluster && !nm_cluster_known(cfg))
        err = nm_conn_get(cfg, 0, deadline, &c);
    *on = nm_cluster_on(cfg);
    return err;
}

int nm_cluster_refresh(nm_config_t *cfg, int64_t deadline)
{
    size_t n;
    nm_node_addr_t *v = nm_cluster_candidates(cfg, &n);
    int err = v ? NM_ECONN : ENOMEM;
    redisContext *c;

    if (v && n == 0 && nm_conn_get(cfg, 0, deadline, &c) == 0) /* a unix:// seed */
        err = nm_cluster_read_map(c, "127.0.0.1", deadline, cfg->cluster);
    for (size_t i = 0; err && i < n && nm_remaining_ms(deadline) > 0; i++) {
        err = nm_conn_get_node(cfg, v[i].host, v[i].port, deadline, &c);
        if (!err && (err = nm_cluster_read_map(c, v[i].host, deadline, cfg->cluster)) == NM_ECONN)
            nm_conn_drop_node(v[i].host, v[i].port);
    }
    free(v);
    return err;
}

int nm_cluster_node_of(nm_config_t *cfg, const char *key, size_t len, int64_t deadline,
                       nm_node_addr_t *out)
{
    if (nm_cluster_want_refresh(cfg->cluster))
        nm_cluster_refresh(cfg, deadline); /* a failed read keeps the map we had */
    return nm_cluster_lookup(cfg->cluster, key, len, out);
}

void nm_cluster_refresh_stale(nm_config_t *cfg, int64_t deadline)
{
    if (cfg->cluster && nm_cluster_want_refresh(cfg->cluster))
        nm_cluster_refresh(cfg, deadline);
}

int nm_cluster_masters(nm_config_t *cfg, int64_t deadline, nm_node_addr_t **out, size_t *n)
{
    int err = nm_cluster_refresh(cfg, deadline);
    if (err)
        return err;
    nm_cluster_t *cl = cfg->cluster;
    nm_cluster_lock();
    *n = cl->nnodes;
    *out = malloc(NM_MAX(*n, 1) * sizeof **out);
    if (*out)
        memcpy(*out, cl->nodes, *n * sizeof **out);
    nm_cluster_unlock();
    return *out ? 0 : ENOMEM;
}

/* What to send, once the connection is chosen. */
typedef struct request {
    int script;          /* else a command */
    nm_script_t id;
    int nkeys, nargs;
    const char **argv;
    const size_t *lens;
    int64_t until;       /* a blocking command's (reply.h), else 0 */
} request_t;

static int send_request(redisContext *c, const request_t *q, int64_t deadline,
                        redisReply **out)
{
    if (q->script)
        return nm_script_run(c, q->id, q->nkeys, q->nargs, q->argv, q->lens, deadline, out);
    if (q->until)
        return nm_call_blocking(c, q->nargs, q->argv, q->lens, q->until, deadline, out);
    return nm_call(c, q->nargs, q->argv, q->lens, deadline, out);
}

/* ASK: the one next request is for the importing node, announced so. */
static int asking(redisContext *c, int64_t deadline)
{
    const char *argv[1] = { "ASKING" };
    redisReply *r;
    int err = nm_call(c, 1, argv, NULL, deadline, &r);
    if (!err) {
        err = nm_reply_expect_status(r, "OK");
        freeReplyObject(r);
    }
    return err;
}

/* NODE could not be dialed (nothing was sent): whether the map, read again
 * at once, now names another node for KEY (in *NODE).  A master that died
 * is replaced by its replica, and the map says so well before the caller's
 * next attempt would read it. */
static int moved_on(nm_config_t *cfg, const char *key, size_t len, int64_t deadline,
                    nm_node_addr_t *node)
{
    nm_node_addr_t now;
    if (nm_cluster_refresh(cfg, deadline) != 0 ||
        nm_cluster_node_of(cfg, key, len, deadline, &now) != 0 ||
        (now.port == node->port && strcmp(now.host, node->host) == 0))
        return 0;
    *node = now;
    return 1;
}

/* Q on NODE (after ASKING when ASK is set): a broken connection is dropped
 * and has the map read again. */
static int send_to(nm_config_t *cfg, const nm_node_addr_t *node, int ask, const request_t *q,
                   int64_t deadline, redisReply **out, int *sent)
{
    redisContext *c;
    int err = nm_conn_get_node(cfg, node->host, node->port, deadline, &c);
    if (!err) {
        *sent = 1;
        err = ask ? asking(c, deadline) : 0;
        if (!err)
            err = send_request(c, q, deadline, out);
    } else if (err == NM_ECONN) {
        return NM_EUNDIALED;
    }
    if (err == NM_ECONN) {
        nm_conn_drop_node(node->host, node->port);
        nm_cluster_mark_stale(cfg);
    }
    return err;
}

/* Sleeps *PAUSE ms before the next try, and doubles it (up to
 * PAUSE_MAX_MS); 0 when DEADLINE would pass first: give up. */
static int pause_before_retry(int64_t *pause, int64_t deadline)
{
    if (nm_remaining_ms(deadline) <= *pause)
        return 0;
    nm_sleep_ms(*pause);
    *pause = NM_MIN(*pause * 2, PAUSE_MAX_MS);
    return 1;
}

static int route(nm_config_t *cfg, const char *key, size_t len, const request_t *q,
                 int64_t deadline, redisReply **out, int *sent)
{
    nm_node_addr_t node;
    int ask = 0, hops = 0, err;
    int64_t pause = 1;
    *sent = 0;
    for (;;) {
        if (!ask && (err = nm_cluster_node_of(cfg, key, len, deadline, &node)) != 0)
            return err;
        err = send_to(cfg, &node, ask, q, deadline, out, sent);
        if (err == NM_EUNDIALED && !ask && moved_on(cfg, key, len, deadline, &node))
            continue; /* nothing was sent: the slot's new node is asked */
        if (err == NM_EUNDIALED) {
            nm_cluster_mark_stale(cfg);
            return NM_ECONN;
        }
        if (err == NM_EREDIRECT) {
            ask = nm_cluster_redirected(cfg, &node);
            if (ask < 0)
                return EPROTO;
        }
        if (err != NM_EREDIRECT && err != NM_ETRYAGAIN)
            return err;
        if (err == NM_ETRYAGAIN || ++hops >= MAX_HOPS) {
            /* A migration under way: the map is read again meanwhile. */
            ask = hops = 0;
            nm_cluster_mark_stale(cfg);
            if (!pause_before_retry(&pause, deadline))
                return NM_ECONN;
        }
    }
}

int nm_cluster_script(nm_config_t *cfg, const char *key, size_t key_len, nm_script_t id,
                      int nkeys, int nargs, const char **argv, const size_t *lens,
                      int64_t deadline, redisReply **out, int *sent)
{
    request_t q = { 1, id, nkeys, nargs, argv, lens, 0 };
    return route(cfg, key, key_len, &q, deadline, out, sent);
}

int nm_cluster_command(nm_config_t *cfg, const char *key, size_t key_len, int argc,
                       const char **argv, const size_t *lens, int64_t until,
                       int64_t deadline, redisReply **out, int *sent)
{
    request_t q = { 0, NM_SCRIPT_COUNT, 0, argc, argv, lens, until };
    return route(cfg, key, key_len, &q, deadline, out, sent);
}
