/*
 * shares.c -- a read-write lock's holds on the server (shares.h): every
 * request is rwlock.lua on the calling thread's connection (in a Redis
 * Cluster, on the node of the lock's slot: its keys share one hash tag).
 * A semaphore's permit is one more kind of hold, a share of a bounded set
 * on the semaphore's keys: the same requests with its permits.
 *
 * Waiting is every queued kind's (waiting.h): this file gives the loop its
 * requests (attempt, cancel, undo, the exit handler's leave).  The attempt
 * after a grant confirms it: a grant is a hint, never proof.
 *
 * While a hold is being acquired its lease's key is every key of the lock,
 * K first (so lease.h's steps find the lock and the grant list by it);
 * once granted it is the one key its renewal needs, S or K (renew.lua).
 */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "keys.h"
#include "lease.h"
#include "replicas.h"
#include "reply.h"
#include "script.h"
#include "shares.h"
#include "waiting.h"

#define ARGS 8

/* One hold's requests: its lease (key: every key, K first), what it is,
 * and the keys' lengths. */
typedef struct hold_req {
    nm_lease_t *l;
    nm_share_kind_t kind;
    unsigned int flags;
    unsigned int permits; /* a permit's semaphore's; 0 otherwise */
    size_t lens[NM_RKEY_COUNT];
} hold_req_t;

/* The keys of KIND's lock NAME: a semaphore's, or a read-write lock's. */
static int build_keys(const nm_config_t *cfg, nm_share_kind_t kind, const char *name,
                      size_t name_len, const char *token, char **keys,
                      size_t lens[NM_RKEY_COUNT])
{
    return kind == NM_SHARE_PERMIT ? nm_keys_sem(cfg, name, name_len, token, keys, lens)
                                   : nm_keys_rwlock(cfg, name, name_len, token, keys, lens);
}

/* rwlock.lua's letter for KIND. */
static const char *kind_arg(nm_share_kind_t kind)
{
    return kind == NM_SHARE_WRITE ? "w" : kind == NM_SHARE_PERMIT ? "s" : "r";
}

/* Runs rwlock.lua's OP for R, queued for TTL ms (0: not), by DEADLINE. */
static int run_op(hold_req_t *r, char op, unsigned int ttl, int64_t deadline, redisReply **out,
                  int *sent)
{
    char ops[2] = { op, '\0' }, lease[16], ttls[16], permits[16], holder[NETMUTEX_HOLDER_MAX];
    const char *argv[NM_RKEY_COUNT + ARGS];
    size_t lens[NM_RKEY_COUNT + ARGS];
    int nkeys = op == 'u' || op == 'v' ? NM_RKEY_GRANT : NM_RKEY_COUNT;
    nm_lease_t *l = r->l;

    snprintf(lease, sizeof lease, "%u", l->lease_ms);
    snprintf(ttls, sizeof ttls, "%u", ttl);
    snprintf(permits, sizeof permits, "%u", r->permits);
    size_t holder_len = nm_lease_holder(l->cfg, holder, sizeof holder);
    for (int i = 0; i < nkeys; i++) {
        argv[i] = nm_keys_rwlock_get(l->key, r->lens, (nm_rkey_t)i);
        lens[i] = r->lens[i];
    }
    const char *args[ARGS] = { ops,  l->token, kind_arg(r->kind),
                               lease, ttls, r->flags & NM_SHARES_PREFER_READERS ? "p" : "",
                               holder, permits };
    size_t arg_lens[ARGS] = { 1,           NM_TOKEN_LEN,    1,          strlen(lease),
                              strlen(ttls), strlen(args[5]), holder_len, strlen(permits) };
    for (int i = 0; i < ARGS; i++) {
        argv[nkeys + i] = args[i];
        lens[nkeys + i] = arg_lens[i];
    }
    return nm_lease_script(l, NM_SCRIPT_RWLOCK, nkeys, nkeys + ARGS, argv, lens, deadline, out,
                           sent);
}

/* rwlock.lua's answer: {status, value} in V; the grants it names are
 * pushed to their waiters (a Redis Cluster's: lib.lua, Grants). */
static int take_answer(hold_req_t *r, redisReply *reply, long long v[2], int64_t deadline)
{
    int err = nm_reply_integers(reply, v, 2);
    if (!err)
        nm_lease_push_wakes(r->l, reply, 2, deadline);
    freeReplyObject(reply);
    return err;
}

/* OP for R, answered: 0 with V, or the request's error. */
static int request(hold_req_t *r, char op, unsigned int ttl, int64_t deadline, long long v[2],
                   int *sent)
{
    redisReply *reply;
    int err = run_op(r, op, ttl, deadline, &reply, sent);
    return err ? err : take_answer(r, reply, v, deadline);
}

/* Gives back what R holds, once, by DEADLINE: V[0] of 'u' in *RESULT. */
static int release_once(hold_req_t *r, int64_t deadline, long long *result)
{
    long long v[2];
    int sent;
    int err = request(r, 'u', 0, deadline, v, &sent);
    if (!err)
        *result = v[0];
    return err;
}

/* Replica acknowledgement (replicas.h): a grant counts once enough
 * replicas have it; otherwise it goes back at once (NM_ECONN: the caller
 * tries again as after a broken connection). */
static int replicated(hold_req_t *r, int64_t deadline)
{
    long long ignored;
    int err = nm_replicas_confirm(r->l->cfg, deadline);
    if (err)
        release_once(r, NM_MAX(deadline, nm_now_ms() + NM_CLEANUP_MS), &ignored);
    return err;
}

/* One attempt ('a'), queued for TTL ms when not 0: 0 (ours: fence and
 * sent_at set), EBUSY with *PTTL, or an error. */
static int attempt(hold_req_t *r, unsigned int ttl, int64_t deadline, long long *pttl, int *sent)
{
    long long v[2];
    r->l->tried_at = nm_now_ms();
    int err = request(r, 'a', ttl, deadline, v, sent);
    if (err)
        return err;
    if (v[0] == -2)
        return EINVAL; /* another number of permits */
    if (v[0] != 1) {
        *pttl = v[1];
        return EBUSY;
    }
    r->l->fence = v[1];
    err = replicated(r, deadline);
    if (!err)
        r->l->sent_at = r->l->tried_at;
    return err;
}

/* Leaves the queue by DEADLINE ('c'); a grant that reached R meanwhile is
 * confirmed by this very request: 0, it is R's.  Else EBUSY, or an error. */
static int cancel_once(hold_req_t *r, int64_t deadline)
{
    long long v[2];
    int sent;
    int64_t sent_at = nm_now_ms();
    int err = request(r, 'c', 0, deadline, v, &sent);
    if (err)
        return err;
    if (v[0] != 1)
        return EBUSY;
    r->l->fence = v[1];
    err = replicated(r, deadline);
    if (!err)
        r->l->sent_at = sent_at;
    return err;
}

/* The exit handler's way out of the queue for a waiter of a read-write
 * lock (waiting.h): leave, and give back a grant that came meanwhile. */
static void leave_at_exit(nm_lease_t *l, void *arg, int64_t deadline)
{
    const hold_req_t *w = arg;
    hold_req_t r = { .l = l, .kind = w->kind, .flags = w->flags, .permits = w->permits };
    long long ignored;
    memcpy(r.lens, w->lens, sizeof r.lens);
    if (cancel_once(&r, deadline) == 0)
        release_once(&r, deadline, &ignored);
}

/* ---- the hold's requests for the one wait loop (waiting.h) ---------------- */

static int hold_attempt(nm_waiting_t *w, unsigned int ttl, int64_t deadline, long long *pttl,
                        int *sent)
{
    return attempt(w->arg, ttl, deadline, pttl, sent);
}

static int hold_cancel(nm_waiting_t *w, int64_t deadline)
{
    return cancel_once(w->arg, deadline);
}

static void hold_undo(nm_waiting_t *w, int64_t deadline)
{
    long long ignored;
    release_once(w->arg, deadline, &ignored);
}

/* A trylock does not queue. */
static const nm_wait_ops_t hold_ops = { hold_attempt, hold_cancel, hold_undo, leave_at_exit,
                                        0 };

/* The granted lease keeps the one key its renewal needs. */
static int keep_renewal_key(hold_req_t *r)
{
    nm_rkey_t which = r->kind == NM_SHARE_WRITE ? NM_RKEY_LOCK : NM_RKEY_SHARES;
    size_t len = r->lens[which];
    char *key = malloc(len + 1);
    if (!key)
        return ENOMEM;
    memcpy(key, nm_keys_rwlock_get(r->l->key, r->lens, which), len + 1);
    free(r->l->key);
    r->l->key = key;
    r->l->key_len = len;
    return 0;
}

int nm_shares_acquire(nm_lease_t *l, nm_share_kind_t kind, const char *name, size_t name_len,
                      unsigned int lease_ms, unsigned int flags, unsigned int permits,
                      nm_wait_t wait, int64_t deadline)
{
    hold_req_t r = { .l = l, .kind = kind, .flags = flags, .permits = permits };
    long long ignored;

    memset(l, 0, sizeof *l);
    int err = nm_config_current(&l->cfg);
    if (err)
        return err;
    /* Quorum mode: each server would keep its own shares and queue, and
     * agreeing on who holds what needs a quorum protocol of its own. */
    if (l->cfg->nservers > 1) {
        nm_lease_forget(l);
        return ENOTSUP;
    }
    l->lease_ms = lease_ms ? lease_ms : l->cfg->lease_ms;
    if (wait == NM_NOWAIT)
        deadline = nm_now_ms() + l->cfg->io_timeout_ms;
    err = nm_token_new(l->token);
    if (!err)
        err = build_keys(l->cfg, kind, name, name_len, l->token, &l->key, r.lens);
    if (!err) {
        l->key_len = r.lens[NM_RKEY_LOCK];
        nm_waiting_t w = { .l = l, .ops = &hold_ops, .arg = &r };
        err = nm_wait_run(&w, wait, deadline);
    }
    if (!err && keep_renewal_key(&r) != 0) {
        release_once(&r, nm_now_ms() + l->cfg->io_timeout_ms, &ignored);
        err = ENOMEM;
    }
    if (err)
        nm_lease_forget(l);
    return err;
}

int nm_shares_release(nm_lease_t *l, nm_share_kind_t kind, const char *name, size_t name_len,
                      unsigned int permits)
{
    hold_req_t r = { .kind = kind, .permits = permits };
    nm_lease_t via = *l; /* every key, K first, for the requests */
    long long result = 0;
    int err = build_keys(l->cfg, kind, name, name_len, l->token, &via.key, r.lens);
    if (!err) {
        via.key_len = r.lens[NM_RKEY_LOCK];
        r.l = &via;
        /* One redial: the connection may be stale (a restart, CLIENT
         * KILL); a second failure means the server is not there.  As with
         * a mutex, a hold the second attempt finds gone may have been
         * released by the first: the answer that cannot hide a lost hold
         * is ENOLCK. */
        err = NM_ECONN;
        for (int i = 0; i < 2 && err == NM_ECONN; i++)
            err = release_once(&r, nm_now_ms() + l->cfg->io_timeout_ms, &result);
        free(via.key);
    }
    nm_lease_forget(l);
    if (err)
        return EIO;
    return result == 1 ? 0 : ENOLCK;
}

int nm_shares_free(const char *name, size_t name_len, unsigned int permits, unsigned int *free_out)
{
    nm_lease_t l;
    hold_req_t r = { .l = &l, .kind = NM_SHARE_PERMIT, .permits = permits };
    long long v[2];
    int sent;

    memset(&l, 0, sizeof l);
    int err = nm_config_current(&l.cfg);
    if (err)
        return err;
    if (l.cfg->nservers > 1) {
        nm_lease_forget(&l);
        return ENOTSUP;
    }
    l.lease_ms = l.cfg->lease_ms;
    err = nm_token_new(l.token); /* a token of nobody's: rwlock.lua wants one */
    if (!err)
        err = nm_keys_sem(l.cfg, name, name_len, NULL, &l.key, r.lens);
    if (!err) {
        l.key_len = r.lens[NM_RKEY_LOCK];
        /* One redial, as a release: the connection may be stale. */
        err = NM_ECONN;
        for (int i = 0; i < 2 && err == NM_ECONN; i++)
            err = request(&r, 'v', 0, nm_now_ms() + l.cfg->io_timeout_ms, v, &sent);
    }
    nm_lease_forget(&l);
    if (err == NM_ECONN)
        return EAGAIN;
    if (err)
        return err;
    if (v[0] == -2)
        return EINVAL;
    *free_out = v[1] > 0 ? (unsigned int)v[1] : 0;
    return 0;
}
