/*
 * routed.c -- one request about a key, where it goes, and what its outcome
 * says (routed.h).  Every layer above that sends a request of its own to
 * the one server or a cluster's node (a lease's commands, a condition's
 * block and scripts, the wait-for graph's keys, the lock-order checker's,
 * a statistics key, a status in a cluster) comes through here, so the
 * route is chosen and an error reply reported in one way: EACCES and
 * EPROTO with the server's own words, through conn.c's report, once per
 * outage.  What a caller makes of the error afterwards (retry, EAGAIN for
 * a best-effort key, give up) stays the caller's.
 */
#include "nm.h"

#include <errno.h>
#include <stdio.h>

#include "cluster.h"
#include "cluster_route.h"
#include "conn.h"
#include "reply.h"
#include "routed.h"

int nm_routed_note(nm_config_t *cfg, int err)
{
    char cause[200];
    int cluster = nm_cluster_on(cfg);
    if ((err == NM_EREDIRECT || err == NM_ETRYAGAIN) && !cluster)
        err = EPROTO;
    if (err == NM_ECONN && cluster) {
        /* cluster_route.c dropped the node's connection */
    } else if (err == NM_ECONN) {
        nm_conn_drop(0);
        nm_conn_report(cfg, 0, err, "connection lost, or no answer in time");
    } else if (err == EACCES || err == EPROTO) {
        /* The server's own words (an ACL's NOPERM, say): the errno alone
         * cannot tell a missing permission from a missing password. */
        const char *said = nm_reply_last_error();
        snprintf(cause, sizeof cause, "%s: %s", err == EACCES ? "refused" : "unexpected answer",
                 *said ? said : "a reply of another shape");
        nm_conn_report(cfg, 0, err, cause);
    } else {
        nm_conn_report(cfg, 0, 0, NULL);
    }
    return err;
}

/* Q in a cluster, on the node of its key's slot. */
static int to_node(nm_config_t *cfg, const nm_routed_t *q, int64_t reply_by, redisReply **out,
                   int *sent)
{
    if (q->script)
        return nm_cluster_script(cfg, q->key, q->key_len, q->id, q->nkeys, q->argc, q->argv,
                                 q->lens, reply_by, out, sent);
    return nm_cluster_command(cfg, q->key, q->key_len, q->argc, q->argv, q->lens, q->until,
                              reply_by, out, sent);
}

/* Q on C, the one server's connection. */
static int to_server(redisContext *c, const nm_routed_t *q, int64_t reply_by, redisReply **out)
{
    if (q->script)
        return nm_script_run(c, q->id, q->nkeys, q->argc, q->argv, q->lens, reply_by, out);
    if (q->until)
        return nm_call_blocking(c, q->argc, q->argv, q->lens, q->until, reply_by, out);
    return nm_call(c, q->argc, q->argv, q->lens, reply_by, out);
}

int nm_routed_call(nm_config_t *cfg, const nm_routed_t *q, int64_t reply_by, redisReply **out,
                   int *sent)
{
    const nm_routed_hooks_t *h = q->hooks;
    redisContext *c;
    int on, unused;
    sent = sent ? sent : &unused;
    *sent = 0;
    int err = nm_cluster_mode(cfg, reply_by, &on);
    if (!err && on) /* cluster.h: to the node of the key's slot */
        return nm_routed_note(cfg, to_node(cfg, q, reply_by, out, sent));
    if (!err)
        err = nm_conn_get(cfg, 0, reply_by, &c);
    if (!err && h && h->before)
        err = h->before(h->arg);
    if (err)
        return err;
    *sent = 1;
    err = to_server(c, q, reply_by, out);
    if (h && h->after)
        h->after(h->arg);
    return nm_routed_note(cfg, err);
}
