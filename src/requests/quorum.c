/* quorum.c -- one request to every server at once, answers collected by poll(). */
#include "nm.h"

#include <errno.h>
#include <poll.h>
#include <string.h>

#include "clock.h"
#include "conn.h"
#include "quorum.h"
#include "reply.h"

/* How long a server that failed is left alone.  Short, so a restarted
 * server rejoins quickly; long enough that a dead one does not cost every
 * call a dial. */
#define DOWN_MS 500

/* ---- the fan: many pipelines, one poll() ---------------------------------- */

/* Server I failed: it is left alone for a moment in quorum mode, where the
 * others can do without it; a single server is redialed at once. */
void nm_quorum_set_down(const nm_config_t *cfg, size_t i)
{
    if (cfg->nservers > 1)
        nm_conn_set_down(i, nm_now_ms() + DOWN_MS);
    else
        nm_conn_drop(i);
}

unsigned int nm_quorum_server_bound(const nm_config_t *cfg)
{
    return cfg->nservers > 1 ? cfg->server_timeout_ms : cfg->io_timeout_ms;
}

unsigned int nm_quorum_dial_bound(const nm_config_t *cfg)
{
    if (cfg->nservers < 2)
        return nm_quorum_server_bound(cfg);
    return NM_MIN(NM_MAX(cfg->server_timeout_ms, NM_QUORUM_DIAL_MS), cfg->connect_timeout_ms);
}

static int pending(const nm_fan_t *f, size_t i)
{
    return f->ctx[i] && !f->err[i] && f->got[i] < f->want[i];
}

/* Takes every complete reply server I has sent. */
static void take_replies(nm_fan_t *f, size_t i)
{
    while (pending(f, i)) {
        redisReply *r;
        int err = nm_take_reply(f->ctx[i], &r);
        if (err == NM_ECONN || err == ENOMEM) {
            f->err[i] = err;
            return;
        }
        if (!err && !r)
            return; /* the rest is still on its way */
        f->out[i][f->got[i]++] = r;
        if (err && !f->err[i])
            f->err[i] = err; /* an error reply; later replies still count */
    }
}

static void send_all(nm_fan_t *f)
{
    for (size_t i = 0; i < f->n; i++)
        if (pending(f, i) && nm_send(f->ctx[i], f->until[i]) != 0)
            f->err[i] = NM_ECONN;
}

/* Gives up on the servers whose deadline passed. */
static void expire(nm_fan_t *f)
{
    int64_t now = nm_now_ms();
    for (size_t i = 0; i < f->n; i++)
        if (pending(f, i) && now >= f->until[i])
            f->err[i] = ETIMEDOUT;
}

void nm_fan_run(nm_fan_t *f, int64_t until)
{
    struct pollfd fds[NM_SERVERS_MAX];
    size_t idx[NM_SERVERS_MAX];

    for (size_t i = 0; i < f->n; i++)
        if (f->until[i] == 0)
            f->until[i] = until;
    send_all(f);
    for (;;) {
        int64_t next = NM_FOREVER;
        nfds_t nfds = 0;
        for (size_t i = 0; i < f->n; i++)
            if (pending(f, i)) {
                fds[nfds] = (struct pollfd){ f->ctx[i]->fd, POLLIN, 0 };
                idx[nfds++] = i;
                next = NM_MIN(next, f->until[i]);
            }
        if (nfds == 0)
            break;
        /* What has come is read before anyone is given up on: an answer
         * that arrived while the caller did something else (dialed
         * another server, say) arrived in time. */
        if (poll(fds, nfds, (int)NM_MIN(nm_remaining_ms(next), 60000)) < 0 && errno != EINTR) {
            for (nfds_t k = 0; k < nfds; k++)
                f->err[idx[k]] = NM_ECONN;
            break;
        }
        for (nfds_t k = 0; k < nfds; k++) {
            if (!fds[k].revents)
                continue;
            if (nm_receive(f->ctx[idx[k]]) != 0)
                f->err[idx[k]] = NM_ECONN;
            else
                take_replies(f, idx[k]);
        }
        expire(f);
    }
}

/* ---- one script call on every server ---------------------------------------- */

typedef struct call {
    nm_config_t *cfg;
    nm_script_t id;
    int nkeys, nargs;
    const char **argv;
    const size_t *lens;
} call_t;

/* When to give up on a server asked at NOW: the server timeout, but never
 * much past the caller's deadline. */
static int64_t server_deadline(const call_t *c, int64_t deadline)
{
    const nm_config_t *cfg = c->cfg;
    return nm_request_deadline(nm_quorum_server_bound(cfg), deadline);
}

/* Server I's connection, dialed if needed within the dial bound (quorum.h),
 * not the request's: a TLS handshake is no answer to a request.  NULL with
 * V->err[I] set when it cannot be had. */
static redisContext *connect_one(const call_t *c, size_t i, int64_t deadline, nm_votes_t *v)
{
    redisContext *ctx = NULL;
    int err = nm_conn_get(c->cfg, i, nm_request_deadline(nm_quorum_dial_bound(c->cfg), deadline),
                          &ctx);
    if (err == NM_ECONN)
        nm_quorum_set_down(c->cfg, i);
    v->err[i] = err;
    return err ? NULL : ctx;
}

/* Sends server I the call on CTX: CTX, or NULL with V->err[I] set.  *UNTIL:
 * when to stop waiting for its answer, the server's bound from now;
 * *SEND_ERR: the send failed (settle() decides what that means). */
static redisContext *send_one(const call_t *c, size_t i, redisContext *ctx, int64_t deadline,
                              int64_t *until, int *send_err, nm_votes_t *v)
{
    *until = server_deadline(c, deadline);
    int err = nm_script_append(ctx, c->id, c->nkeys, c->nargs, c->argv, c->lens);
    *send_err = err ? 0 : nm_send(ctx, *until);
    if (err == NM_ECONN)
        nm_quorum_set_down(c->cfg, i);
    v->err[i] = err;
    return err ? NULL : ctx;
}

/* What went wrong with one server in one call, so each remedy is tried
 * once: a lost script is loaded (the server restarted empty, SCRIPT
 * FLUSH), a stale cached connection redialed (restart, CLIENT KILL); both
 * can be needed in one call, in that order. */
typedef struct remedies {
    int reloaded[NM_SERVERS_MAX];
    int redialed[NM_SERVERS_MAX];
} remedies_t;

/* Whether server I is tried again at once; a server that did not answer in
 * time is left alone a while. */
static int settle(const call_t *c, redisContext *ctx, size_t i, int err, int was_cached,
                  int64_t deadline, remedies_t *rem, nm_votes_t *v)
{
    if (err == ENOENT && !rem->reloaded[i]++) {
        /* A load that fails is that server's failure, as a failed answer
         * to the call would be: one not answered in time leaves a reply
         * on its way, and the connection goes as any that timed out. */
        int64_t until = server_deadline(c, deadline);
        int load = nm_script_load(ctx, c->id, until);
        if (!load)
            return 1;
        if (load == NM_ECONN)
            err = nm_remaining_ms(until) == 0 ? ETIMEDOUT : NM_ECONN;
        else
            err = load == EACCES || load == ENOMEM ? load : EPROTO;
    }
    if (err == NM_ECONN && was_cached && !rem->redialed[i]++) {
        nm_conn_drop(i);
        return 1;
    }
    if (err == NM_ECONN || err == ETIMEDOUT) {
        nm_quorum_set_down(c->cfg, i);
        nm_conn_report(c->cfg, i, err, err == ETIMEDOUT ? "no answer in time" : "connection lost");
        err = NM_ECONN;
    }
    v->err[i] = err == ENOENT ? EPROTO : err;
    return 0;
}

/* One round over the servers in TODO; those to retry stay in TODO.
 * Returns how many. */
static int call_round(const call_t *c, int todo[], int64_t deadline, remedies_t *rem,
                      nm_votes_t *v)
{
    nm_fan_t f = { .n = v->n };
    int cached[NM_SERVERS_MAX], again = 0;

    /* Every connection first, then every request, so that no server's
     * bound is spent while another is dialed. */
    for (size_t i = 0; i < v->n; i++) {
        if (!todo[i])
            continue;
        cached[i] = nm_conn_cached(c->cfg, i);
        f.ctx[i] = connect_one(c, i, deadline, v);
        f.want[i] = 1;
        f.out[i] = &v->reply[i];
        todo[i] = 0;
    }
    if (!v->sent_at)
        v->sent_at = nm_now_ms(); /* no request of the call left before */
    for (size_t i = 0; i < v->n; i++)
        if (f.ctx[i])
            f.ctx[i] = send_one(c, i, f.ctx[i], deadline, &f.until[i], &f.err[i], v);
    nm_fan_run(&f, NM_FOREVER); /* each server has its own deadline */
    for (size_t i = 0; i < v->n; i++) {
        if (!f.ctx[i])
            continue;
        v->err[i] = 0;
        if (f.err[i])
            again += todo[i] = settle(c, f.ctx[i], i, f.err[i], cached[i], deadline, rem, v);
        else
            nm_conn_report(c->cfg, i, 0, NULL);
    }
    return again;
}

void nm_quorum_call(nm_config_t *cfg, nm_script_t id, int nkeys, int nargs,
                    const char **argv, const size_t *lens, int64_t deadline,
                    nm_votes_t *v)
{
    call_t c = { cfg, id, nkeys, nargs, argv, lens };
    remedies_t rem = { { 0 }, { 0 } };
    int todo[NM_SERVERS_MAX];

    memset(v, 0, sizeof *v);
    v->n = cfg->nservers;
    for (size_t i = 0; i < v->n; i++)
        todo[i] = 1;
    /* At most three rounds: each remedy is applied once per server. */
    while (call_round(&c, todo, deadline, &rem, v) > 0)
        ;
}

void nm_votes_clear(nm_votes_t *v)
{
    for (size_t i = 0; i < v->n; i++)
        if (v->reply[i])
            freeReplyObject(v->reply[i]);
    memset(v, 0, sizeof *v);
}

size_t nm_votes_answered(const nm_votes_t *v)
{
    size_t n = 0;
    for (size_t i = 0; i < v->n; i++)
        n += v->err[i] == 0 && v->reply[i] != NULL;
    return n;
}

int nm_votes_failure(const nm_votes_t *v)
{
    int err = NM_ECONN;
    for (size_t i = 0; i < v->n; i++)
        if (v->err[i] == EINVAL) /* a cluster node in the list (cluster.h) */
            return EINVAL;
    for (size_t i = 0; i < v->n; i++)
        if (v->err[i] == EACCES || (v->err[i] == EPROTO && err != EACCES))
            err = v->err[i];
    return err;
}
