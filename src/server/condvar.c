/*
 * condvar.c -- one condition variable on the server (condvar.h): every request
 * is cond.lua on the calling thread's connection (in a Redis Cluster, on
 * the node of the condition's slot), by itself (routed.h, which notes its
 * outcome) or riding with a request of the mutex (lease.h), and a waiter
 * blocks with BLPOP on its own list there.
 *
 * The condition's keys share their own slot, never the mutex's: a wait is
 * made atomic with the mutex's release by order, not by one script.  The
 * waiter registers while it still holds the mutex and unlocks only once
 * the registration ran, so a signaller that holds the mutex afterwards
 * runs its signal after the registration.  Riding keeps that order: on one
 * server both go in one write and the server runs them in turn, in a
 * cluster the registration runs first by itself.  No request needs two
 * slots.
 *
 * Wake-ups.  A signal wakes the waiter it chose with a push on the
 * waiter's CG, a key the signaller could not declare.  On one server,
 * where no slot can be migrating, cond.lua pushes itself ('h'); in a
 * cluster it returns the waiters, and the caller pushes with grant.lua,
 * which declares their lists (lib.lua).  A push that never comes costs the
 * waiter its wait until its next look.
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
#include "routed.h"
#include "sentinel.h"

/* CW, CS and CH live this many of the waiter's leases after its latest
 * look (it looks three times a lease): a condition only dead waiters used
 * goes away by itself. */
#define LIST_LEASES 3
/* Wake-ups pushed by one grant.lua call (its KEYS and ARGV). */
#define WAKE_BATCH 128

/* The connection to server 0 on which this thread last ran cond.lua
 * (nm_conn_serial): that server has it, so a registration may ride. */
static __thread unsigned long script_known_on;

/* Whether CFG talks to a cluster (known once server 0 was dialed: this
 * asks it if need be, within the I/O timeout). */
static int in_cluster(nm_config_t *cfg)
{
    int on;
    nm_cluster_mode(cfg, nm_now_ms() + cfg->io_timeout_ms, &on);
    return on;
}

/* Runs CALL by itself, within the I/O timeout, where its first key lives
 * (routed.h); its outcome in its fields.  Returns its error. */
static int run_call(nm_config_t *cfg, nm_script_call_t *call)
{
    nm_routed_t q = { .key = call->argv[0], .key_len = call->lens[0], .argc = call->nargs,
                      .argv = call->argv, .lens = call->lens, .script = 1, .id = call->id,
                      .nkeys = call->nkeys };
    call->reply = NULL;
    call->err = nm_routed_call(cfg, &q, nm_now_ms() + cfg->io_timeout_ms, &call->reply,
                               &call->sent);
    return call->err;
}

/* The waiters REPLY names from index AT on (cond.lua 'r': token, lease,
 * ...) are woken with grant.lua on their lists, CW's KEYS[0] telling the
 * condition.  A hint: a failure is theirs to make up for at their next
 * look, and not reported. */
static void wake(nm_config_t *cfg, const char *keys, const size_t *lens, const redisReply *r,
                 size_t at)
{
    const char *argv[2 * WAKE_BATCH], *leases[WAKE_BATCH];
    size_t alens[2 * WAKE_BATCH], list_lens[WAKE_BATCH], lease_lens[WAKE_BATCH];
    char *lists[WAKE_BATCH];
    while (at + 1 < r->elements) {
        int n = 0;
        for (; n < WAKE_BATCH && at + 1 < r->elements; at += 2) {
            const char *token;
            size_t token_len;
            if (nm_reply_string(r->element[at], &token, &token_len) == 0 &&
                nm_reply_string(r->element[at + 1], &leases[n], &lease_lens[n]) == 0 &&
                (lists[n] = nm_keys_cond_grant_for(keys, lens, token, token_len,
                                                   &list_lens[n])) != NULL)
                n++;
        }
        for (int i = 0; i < n; i++) {
            argv[i] = lists[i];
            alens[i] = list_lens[i];
            argv[n + i] = leases[i];
            alens[n + i] = lease_lens[i];
        }
        nm_script_call_t call = { NM_SCRIPT_GRANT, n, 2 * n, argv, alens, 0, 0, NULL };
        if (n > 0 && run_call(cfg, &call) == 0)
            freeReplyObject(call.reply);
        for (int i = 0; i < n; i++)
            free(lists[i]);
    }
}

/* CALL's outcome, a cond.lua request on condition KEYS: its result in
 * *RESULT; the waiters it signalled woken.  Frees the reply. */
static int take(nm_config_t *cfg, const char *keys, const size_t *lens, nm_script_call_t *call,
                long long *result)
{
    int err = call->err;
    *result = 0;
    if (err)
        return err;
    redisReply *r = call->reply;
    call->reply = NULL;
    err = nm_reply_integers(r, result, 1);
    if (!err) {
        if (!nm_cluster_on(cfg))
            script_known_on = nm_conn_serial(cfg, 0);
        wake(cfg, keys, lens, r, 1);
    }
    freeReplyObject(r);
    return err;
}

/* Builds cond.lua's call in ARGV and ALENS: NKEYS of KEYS (lengths LENS),
 * operation OP, the lists' life from LEASE_MS, then NEXTRA more words. */
static int build(nm_config_t *cfg, const char *keys, const size_t *lens, int nkeys,
                 const char *op, char *ttl, size_t ttl_size, unsigned int lease_ms,
                 const char **argv, size_t *alens)
{
    snprintf(ttl, ttl_size, "%llu", (unsigned long long)lease_ms * LIST_LEASES);
    for (int i = 0; i < nkeys; i++) {
        argv[i] = nm_keys_cond_get(keys, lens, (nm_ckey_t)i);
        alens[i] = lens[i];
    }
    const char *args[3] = { op, ttl, in_cluster(cfg) ? "r" : "h" };
    for (int i = 0; i < 3; i++) {
        argv[nkeys + i] = args[i];
        alens[nkeys + i] = strlen(args[i]);
    }
    return nkeys + 3;
}

/* ---- waiters ------------------------------------------------------------- */

static int quorum(const nm_config_t *cfg)
{
    return cfg->nservers > 1;
}

void nm_cond_waiter_free(nm_waiter_t *w)
{
    free(w->keys);
    nm_config_unref(w->cfg);
    memset(w, 0, sizeof *w);
}

int nm_cond_waiter(nm_waiter_t *w, const char *name, size_t name_len, unsigned int lease_ms)
{
    memset(w, 0, sizeof *w);
    int err = nm_config_current(&w->cfg);
    if (err)
        return err;
    if (quorum(w->cfg))
        err = ENOTSUP;
    w->lease_ms = lease_ms ? lease_ms : w->cfg->lease_ms;
    w->gen = nm_sentinel_master_gen(&w->cfg->servers[0]);
    if (!err)
        err = nm_token_new(w->token);
    if (!err)
        err = nm_keys_cond(w->cfg, name, name_len, w->token, &w->keys, w->lens);
    if (err)
        nm_cond_waiter_free(w);
    return err;
}

int nm_cond_may_ride(nm_waiter_t *w)
{
    /* In a cluster a rider runs by itself first, NOSCRIPT handled. */
    return in_cluster(w->cfg) ||
           (script_known_on != 0 && script_known_on == nm_conn_serial(w->cfg, 0));
}

void nm_cond_request(nm_waiter_t *w, nm_cond_op_t op, nm_script_call_t *call)
{
    w->op[0] = (char)op;
    w->op[1] = '\0';
    int n = build(w->cfg, w->keys, w->lens, NM_CKEY_COUNT, w->op, w->ttl, sizeof w->ttl,
                  w->lease_ms, w->argv, w->alens);
    snprintf(w->lease, sizeof w->lease, "%u", w->lease_ms);
    w->argv[n] = w->token;
    w->alens[n] = NM_TOKEN_LEN;
    w->argv[n + 1] = w->lease;
    w->alens[n + 1] = strlen(w->lease);
    *call = (nm_script_call_t){ NM_SCRIPT_COND, NM_CKEY_COUNT, n + 2, w->argv, w->alens,
                                0, 0, NULL };
}

int nm_cond_rode(nm_waiter_t *w, nm_script_call_t *call, long long *result)
{
    return take(w->cfg, w->keys, w->lens, call, result);
}

/* Runs CALL by itself, once more after a broken connection: the cached
 * one may be stale (a restarted server, CLIENT KILL).  Every operation may
 * run twice: a waiter registered twice is registered once, one that left
 * twice left, and a signal sent twice is a spurious wake-up at worst.
 * Returns whether the first attempt broke off unanswered after it went
 * out, so that it may have been applied. */
static int run_twice(nm_config_t *cfg, nm_script_call_t *call)
{
    if (run_call(cfg, call) != NM_ECONN)
        return 0;
    int sent = call->sent;
    run_call(cfg, call);
    return sent;
}

int nm_cond_run(nm_waiter_t *w, nm_cond_op_t op, long long *result)
{
    nm_script_call_t call;
    nm_cond_request(w, op, &call);
    int retried = run_twice(w->cfg, &call);
    int err = take(w->cfg, w->keys, w->lens, &call, result);
    /* A first leave whose answer was lost may have taken the signal: the
     * second then finds none.  Counted as signalled: a spurious wake-up,
     * never a signal that vanishes. */
    if (!err && retried && (op == NM_COND_LEAVE || op == NM_COND_LEAVE_PASS))
        *result = 1;
    return err;
}

int nm_cond_block_request(nm_waiter_t *w, int64_t until, nm_trailer_t *t)
{
    int64_t ms = until - nm_now_ms() - NM_BLOCK_EARLY_MS;
    if (ms < 1)
        return ETIMEDOUT;
    snprintf(w->timeout, sizeof w->timeout, "%.3f", (double)ms / 1000);
    w->bargv[0] = "BLPOP";
    w->bargv[1] = nm_keys_cond_get(w->keys, w->lens, NM_CKEY_GRANT);
    w->bargv[2] = w->timeout;
    w->blens[0] = 5;
    w->blens[1] = w->lens[NM_CKEY_GRANT];
    w->blens[2] = strlen(w->timeout);
    *t = (nm_trailer_t){ 3, w->bargv, w->blens, 0 };
    return 0;
}

/* The BLPOP's reply R (or ERR, noted already): 0 when a signal came,
 * ETIMEDOUT, or an error.  Frees R. */
static int blocked(int err, redisReply *r)
{
    if (err)
        return err;
    err = r->type == REDIS_REPLY_ARRAY ? 0 : ETIMEDOUT;
    freeReplyObject(r);
    return err;
}

/* Marks W in a block that may be cancelled (ON), or out of it. */
static void cancel_point(nm_waiter_t *w, int on)
{
    if (w->cancellable) {
        w->blocking = on;
        nm_reply_cancellable(on);
    }
}

void nm_cond_cancelled(nm_waiter_t *w)
{
    nm_reply_cancellable(0);
    if (w->blocking)
        nm_cond_abandon(w);
    w->blocking = 0;
}

int nm_cond_await(nm_waiter_t *w, int64_t until)
{
    nm_config_t *cfg = w->cfg;
    redisContext *c = nm_conn_peek(cfg, 0);
    redisReply *r = NULL;
    if (!c)
        return NM_ECONN; /* dropped meanwhile: so was the BLPOP */
    cancel_point(w, 1);
    int err = nm_await_blocking(c, until, until + cfg->io_timeout_ms, &r);
    cancel_point(w, 0);
    err = nm_routed_note(cfg, err);
    return blocked(err, r);
}

void nm_cond_abandon(nm_waiter_t *w)
{
    /* A blocked command cannot be taken back: the connection goes. */
    (void)w;
    nm_conn_drop(0);
}

/* On the one server, once the BLPOP's connection is chosen: W's master
 * is still the one the sentinels name, and the wait a cancellation
 * point. */
static int block_enter(void *arg)
{
    nm_waiter_t *w = arg;
    /* Dialing looked at the sentinels' answer: the connection is fine,
     * only W may be stale. */
    if (nm_sentinel_master_gen(&w->cfg->servers[0]) != w->gen)
        return NM_ECONN;
    cancel_point(w, 1);
    return 0;
}

static void block_leave(void *arg)
{
    cancel_point(arg, 0);
}

int nm_cond_block(nm_waiter_t *w, int64_t until)
{
    nm_config_t *cfg = w->cfg;
    nm_trailer_t t;
    int64_t now = nm_now_ms();
    if (nm_cond_block_request(w, until, &t) != 0) {
        /* too short to block for: the look or the leave tells */
        nm_sleep_ms(until - now);
        return ETIMEDOUT;
    }
    nm_routed_hooks_t hooks = { block_enter, block_leave, w };
    nm_routed_t q = { .key = t.argv[1], .key_len = t.lens[1], .argc = 3, .argv = t.argv,
                      .lens = t.lens, .until = until, .hooks = &hooks };
    redisReply *r = NULL;
    int err = nm_routed_call(cfg, &q, until + cfg->io_timeout_ms, &r, NULL);
    return blocked(err, r);
}

/* ---- signals --------------------------------------------------------------- */

/* The calling thread's latest signal on one server, written without
 * waiting for its answer (condvar.h): none, one whose reply is owed
 * (reply.h), or one to send again (its answer said it did not run, or
 * its connection broke first). */
enum { SIG_NONE, SIG_OWED, SIG_AGAIN };
static __thread struct {
    int state;
    int all;
    size_t name_len;
    char name[NETMUTEX_NAME_MAX + 1];
} sent;

/* The owed reply (nm_reply_owe): it ran, or it goes again. */
static void signal_answered(void *arg, int err, redisReply *r)
{
    long long n;
    (void)arg;
    if (!err) {
        err = nm_reply_integers(r, &n, 1);
        freeReplyObject(r);
    }
    sent.state = err ? SIG_AGAIN : SIG_NONE;
}

/* Writes the signal ARGV (N words, the keys first) on the calling
 * thread's connection to the one server, not waiting for its answer:
 * 1, or 0 when it must run as a request of its own (a cluster, whose
 * wake-ups the caller pushes; a connection not known to have the script,
 * which would refuse it after the caller went on; a reply owed already). */
static int signal_written(nm_config_t *cfg, const char **argv, const size_t *alens, int n,
                          const char *name, size_t name_len, int all)
{
    redisContext *c;
    if (in_cluster(cfg) || nm_reply_owing() || script_known_on == 0 ||
        nm_conn_get(cfg, 0, nm_now_ms() + cfg->io_timeout_ms, &c) != 0 ||
        script_known_on != nm_conn_serial(cfg, 0))
        return 0;
    if (nm_script_append(c, NM_SCRIPT_COND, NM_CKEY_GRANT, n, argv, alens) != 0 ||
        nm_send(c, nm_now_ms() + cfg->io_timeout_ms) != 0) {
        /* It may have gone out in part: the connection goes, and the
         * signal as a request of its own (twice is a spurious wake-up). */
        nm_conn_drop(0);
        return 0;
    }
    sent.all = all;
    sent.name_len = name_len;
    memcpy(sent.name, name, name_len);
    sent.name[name_len] = '\0';
    sent.state = SIG_OWED;
    nm_reply_owe(c, signal_answered, NULL);
    return 1;
}

static int signal_now(const char *name, size_t name_len, int all, long long *woken,
                      int may_write);

void nm_cond_flush(int wait)
{
    if (sent.state == SIG_NONE)
        return;
    if (sent.state == SIG_OWED && !nm_reply_owing()) {
        sent.state = SIG_NONE; /* a child's copy: the parent's to read */
    } else if (sent.state == SIG_OWED) {
        nm_config_t *cfg;
        int64_t by = nm_now_ms();
        if (wait && nm_config_current(&cfg) == 0) {
            by += cfg->io_timeout_ms;
            nm_config_unref(cfg);
        }
        int err = nm_reply_settle(by);
        /* Broken, or no answer in time when one was waited for: the
         * connection goes (nm_reply_forget: SIG_AGAIN). */
        if (err && (err != ETIMEDOUT || wait))
            nm_conn_drop(0);
    }
    if (sent.state == SIG_AGAIN) {
        long long woken;
        sent.state = SIG_NONE;
        signal_now(sent.name, sent.name_len, sent.all, &woken, 0);
    }
}

int nm_cond_flushed(int err)
{
    nm_cond_flush(1);
    return err;
}

int nm_cond_owed(void)
{
    return sent.state == SIG_OWED && nm_reply_owing();
}

int nm_cond_flush_due(void)
{
    return sent.state == SIG_AGAIN;
}

int nm_cond_signal(const char *name, size_t name_len, int all, int may_defer, long long *woken)
{
    nm_cond_flush(0); /* an answer still owed after this: this one waits */
    return signal_now(name, name_len, all, woken, may_defer);
}

/* The signal; MAY_WRITE: it may go without waiting for its answer. */
static int signal_now(const char *name, size_t name_len, int all, long long *woken,
                      int may_write)
{
    nm_config_t *cfg;
    char *keys = NULL, ttl[24];
    size_t lens[NM_CKEY_COUNT];
    const char *argv[NM_CKEY_COUNT + NM_COND_ARGS];
    size_t alens[NM_CKEY_COUNT + NM_COND_ARGS];
    int err = nm_config_current(&cfg);
    if (err)
        return err;
    if (quorum(cfg))
        err = ENOTSUP;
    else
        err = nm_keys_cond(cfg, name, name_len, NULL, &keys, lens);
    if (!err) {
        int n = build(cfg, keys, lens, NM_CKEY_GRANT, all ? "b" : "s", ttl, sizeof ttl,
                      cfg->lease_ms, argv, alens);
        nm_script_call_t call = { NM_SCRIPT_COND, NM_CKEY_GRANT, n, argv, alens, 0, 0, NULL };
        *woken = 0;
        if (!may_write || !signal_written(cfg, argv, alens, n, name, name_len, all)) {
            run_twice(cfg, &call);
            err = take(cfg, keys, lens, &call, woken);
        }
    }
    free(keys);
    nm_config_unref(cfg);
    return err == NM_ECONN ? EAGAIN : err;
}
