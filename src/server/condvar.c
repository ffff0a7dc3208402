/*
 * condvar.c -- one condition variable on the server (condvar.h): every request
 * is cond.lua on the calling thread's connection (in a Redis Cluster, on
 * the node of the condition's slot), and a waiter blocks with BLPOP on its
 * own signal list there.
 *
 * The condition's keys share their own slot, never the mutex's: a wait is
 * made atomic with the mutex's release by order, not by one script.  The
 * waiter registers while it still holds the mutex and unlocks only once
 * the server answered, so a signaller that holds the mutex afterwards runs
 * its signal after the registration.  No request needs two slots.
 */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "cluster_route.h"
#include "condvar.h"
#include "config.h"
#include "conn.h"
#include "reply.h"
#include "script.h"

/* CW and CS live this many of the waiter's leases after its latest look
 * (it looks at least once a lease): a list only dead waiters used goes
 * away by itself. */
#define LIST_LEASES 3

/* After a request: a broken connection is dropped (cluster.c drops a
 * node's itself), and the server's state reported (conn.h). */
static int note(nm_config_t *cfg, int err)
{
    int cluster = nm_cluster_on(cfg);
    if ((err == NM_EREDIRECT || err == NM_ETRYAGAIN) && !cluster)
        err = EPROTO;
    if (err == NM_ECONN && !cluster) {
        nm_conn_drop(0);
        nm_conn_report(cfg, 0, err, "connection lost, or no answer in time");
    } else if (!err && !cluster) {
        nm_conn_report(cfg, 0, 0, NULL);
    }
    return err;
}

/* Runs cond.lua with NKEYS of KEYS (lengths LENS) and the NARGS ARGS,
 * within the I/O timeout, on the node of the keys' slot. */
static int run(nm_config_t *cfg, const char *keys, const size_t *lens, int nkeys,
               const char **args, int nargs, long long *result)
{
    const char *argv[NM_CKEY_COUNT + 4];
    size_t alens[NM_CKEY_COUNT + 4];
    int64_t deadline = nm_now_ms() + cfg->io_timeout_ms;
    redisContext *c;
    redisReply *r;
    int on, sent;
    for (int i = 0; i < nkeys; i++) {
        argv[i] = nm_keys_cond_get(keys, lens, (nm_ckey_t)i);
        alens[i] = lens[i];
    }
    for (int i = 0; i < nargs; i++) {
        argv[nkeys + i] = args[i];
        alens[nkeys + i] = strlen(args[i]);
    }
    int err = nm_cluster_mode(cfg, deadline, &on);
    if (!err && on)
        err = nm_cluster_script(cfg, argv[0], alens[0], NM_SCRIPT_COND, nkeys, nkeys + nargs,
                                argv, alens, deadline, &r, &sent);
    else if (!err && (err = nm_conn_get(cfg, 0, deadline, &c)) == 0)
        err = nm_script_run(c, NM_SCRIPT_COND, nkeys, nkeys + nargs, argv, alens, deadline, &r);
    err = note(cfg, err);
    if (err)
        return err;
    err = nm_reply_integer(r, result);
    freeReplyObject(r);
    return err;
}

/* run(), once more after a broken connection: the cached one may be stale
 * (a restarted server, CLIENT KILL).  Every operation may run twice: a
 * waiter registered twice is signalled once, and a signal sent twice is a
 * spurious wake-up at worst.  *RETRIED (if not NULL): the first attempt
 * broke off unanswered, so it may have been applied. */
static int run_twice(nm_config_t *cfg, const char *keys, const size_t *lens, int nkeys,
                     const char **args, int nargs, long long *result, int *retried)
{
    int err = run(cfg, keys, lens, nkeys, args, nargs, result);
    if (retried)
        *retried = err == NM_ECONN;
    if (err == NM_ECONN)
        err = run(cfg, keys, lens, nkeys, args, nargs, result);
    return err;
}

/* A waiter's operation OP, with its token (and lease, for 'w'); RETRIED
 * as run_twice's. */
static int waiter_run(nm_waiter_t *w, const char *op, long long *result, int *retried)
{
    char ttl[24], lease[16];
    snprintf(ttl, sizeof ttl, "%llu", (unsigned long long)w->lease.lease_ms * LIST_LEASES);
    snprintf(lease, sizeof lease, "%u", w->lease.lease_ms);
    const char *args[4] = { op, ttl, w->lease.token, lease };
    int waiter = *op != 'c';
    return run_twice(w->lease.cfg, w->keys, w->lens, waiter ? NM_CKEY_COUNT : NM_CKEY_WAITER,
                     args, waiter ? 4 : 2, result, retried);
}

static int quorum(const nm_config_t *cfg)
{
    return cfg->nservers > 1;
}

static void waiter_free(nm_waiter_t *w)
{
    free(w->keys);
    nm_lease_forget(&w->lease);
    memset(w, 0, sizeof *w);
}

/* The waiter's lease record: CK, under its own copy (the lease frees it). */
static int waiter_build(nm_waiter_t *w, const char *name, size_t name_len,
                        unsigned int lease_ms)
{
    nm_lease_t *l = &w->lease;
    int err = nm_config_current(&l->cfg);
    if (err)
        return err;
    if (quorum(l->cfg))
        return ENOTSUP;
    l->lease_ms = lease_ms ? lease_ms : l->cfg->lease_ms;
    err = nm_token_new(l->token);
    if (!err)
        err = nm_keys_cond(l->cfg, name, name_len, l->token, &w->keys, w->lens);
    if (err)
        return err;
    l->key_len = w->lens[NM_CKEY_WAITER];
    l->key = malloc(l->key_len + 1);
    if (!l->key)
        return ENOMEM;
    memcpy(l->key, nm_keys_cond_get(w->keys, w->lens, NM_CKEY_WAITER), l->key_len + 1);
    return 0;
}

int nm_cond_register(nm_waiter_t *w, const char *name, size_t name_len,
                     unsigned int lease_ms)
{
    long long ignored;
    memset(w, 0, sizeof *w);
    int err = waiter_build(w, name, name_len, lease_ms);
    if (!err) {
        w->lease.sent_at = nm_now_ms();
        err = waiter_run(w, "w", &ignored, NULL);
    }
    if (err)
        waiter_free(w);
    return err;
}

int nm_cond_block(nm_waiter_t *w, int64_t until)
{
    nm_config_t *cfg = w->lease.cfg;
    int64_t now = nm_now_ms(), ms = until - now - NM_BLOCK_EARLY_MS;
    if (ms < 1) { /* too short to block for: leaving tells */
        nm_sleep_ms(until - now);
        return ETIMEDOUT;
    }
    char timeout[24];
    snprintf(timeout, sizeof timeout, "%.3f", (double)ms / 1000);
    const char *argv[3] = { "BLPOP", nm_keys_cond_get(w->keys, w->lens, NM_CKEY_GRANT), timeout };
    size_t lens[3] = { 5, w->lens[NM_CKEY_GRANT], strlen(timeout) };
    int64_t reply_by = until + cfg->io_timeout_ms;
    redisContext *c;
    redisReply *r;
    int on, sent;
    int err = nm_cluster_mode(cfg, reply_by, &on);
    if (!err && on)
        err = nm_cluster_command(cfg, argv[1], lens[1], 3, argv, lens, until, reply_by, &r,
                                 &sent);
    else if (!err && (err = nm_conn_get(cfg, 0, reply_by, &c)) == 0)
        err = nm_call_blocking(c, 3, argv, lens, until, reply_by, &r);
    err = note(cfg, err);
    if (err)
        return err;
    err = r->type == REDIS_REPLY_ARRAY ? 0 : ETIMEDOUT;
    freeReplyObject(r);
    return err;
}

int nm_cond_look(nm_waiter_t *w)
{
    long long ignored;
    return waiter_run(w, "c", &ignored, NULL);
}

int nm_cond_leave(nm_waiter_t *w, int pass, int *signalled)
{
    long long v = 0;
    int retried, err = waiter_run(w, pass ? "p" : "l", &v, &retried);
    /* A first attempt whose answer was lost may have taken the signal: the
     * second then finds none.  Counted as signalled: a spurious wake-up,
     * never a signal that vanishes. */
    *signalled = !err && (v == 1 || retried);
    waiter_free(w);
    return err;
}

int nm_cond_signal(const char *name, size_t name_len, int all, long long *woken)
{
    nm_config_t *cfg;
    char *keys = NULL, ttl[24];
    size_t lens[NM_CKEY_COUNT];
    int err = nm_config_current(&cfg);
    if (err)
        return err;
    snprintf(ttl, sizeof ttl, "%llu", (unsigned long long)cfg->lease_ms * LIST_LEASES);
    const char *args[2] = { all ? "b" : "s", ttl };
    if (quorum(cfg))
        err = ENOTSUP;
    else
        err = nm_keys_cond(cfg, name, name_len, NULL, &keys, lens);
    if (!err)
        err = run_twice(cfg, keys, lens, NM_CKEY_WAITER, args, 2, woken, NULL);
    free(keys);
    nm_config_unref(cfg);
    return err == NM_ECONN ? EAGAIN : err;
}
