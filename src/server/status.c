/*
 * status.c -- what the servers know about a mutex, for people and tools.
 *
 * Every server answers status.lua; in quorum mode a name counts as held
 * only when a quorum of servers holds the same token, which is exactly when
 * somebody's acquisition succeeded and has not ended.
 *
 * A read-write lock or a semaphore (nm_shared_status) is asked with
 * rwstatus.lua, read-only as status.lua, on the one server or the node of
 * its slot: neither kind exists in quorum mode.  In a Redis Cluster the
 * request goes to its slot's node through routed.h, which notes its
 * outcome; otherwise through quorum.h, one server or many.
 */
#include "nm.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "cluster_route.h"
#include "config.h"
#include "keys.h"
#include "quorum.h"
#include "reply.h"
#include "routed.h"
#include "status.h"

/* status.lua reads K and Q, the first and third (lib.lua, "Declared
 * keys"). */
#define STATUS_KEYS (NM_KEY_QUEUE + 1)

/* One server's answer (status.lua). */
typedef struct view {
    const redisReply *token, *holder;
    long long pttl, fence, since, queued, unrecoverable, cached, idle;
} view_t;

static int read_view(const redisReply *r, view_t *v)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 7 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[3]->type != REDIS_REPLY_STRING)
        return EPROTO;
    const size_t at[5] = { 1, 2, 4, 5, 6 };
    long long *to[5] = { &v->pttl, &v->fence, &v->since, &v->queued, &v->unrecoverable };
    for (int k = 0; k < 5; k++)
        if (nm_reply_integer(r->element[at[k]], to[k]) != 0)
            return EPROTO;
    v->token = r->element[0];
    v->holder = r->element[3];
    /* Servers of an older version do not say (their holders never cache). */
    v->cached = v->idle = 0;
    if (r->elements >= 10 && (nm_reply_integer(r->element[8], &v->cached) != 0 ||
                              nm_reply_integer(r->element[9], &v->idle) != 0))
        return EPROTO;
    return 0;
}

/* How many views hold the same non-empty token as VIEWS[I]. */
static size_t agreeing(const view_t *views, const int *ok, size_t n, size_t i)
{
    size_t count = 0;
    const redisReply *t = views[i].token;
    for (size_t j = 0; j < n && t->len > 0; j++)
        count += ok[j] && views[j].token->len == t->len &&
                 memcmp(views[j].token->str, t->str, t->len) == 0;
    return count;
}

static void describe_holder(const view_t *v, netmutex_status_t *st)
{
    size_t len = NM_MIN(v->holder->len, sizeof st->holder - 1);
    memcpy(st->holder, v->holder->str, len);
    st->holder[len] = '\0';
    st->held = 1;
    st->cached = v->cached != 0;
    st->idle = v->idle != 0;
    st->since_ms = v->since;
    if (st->ttl_ms < 0 || v->pttl < st->ttl_ms)
        st->ttl_ms = v->pttl;
}

static void summarize(const nm_config_t *cfg, const view_t *views, const int *ok, size_t n,
                      netmutex_status_t *st)
{
    size_t unrecoverable = 0;
    memset(st, 0, sizeof *st);
    st->ttl_ms = -1;
    for (size_t i = 0; i < n; i++) {
        if (!ok[i])
            continue;
        st->fence = NM_MAX(st->fence, (uint64_t)views[i].fence);
        st->waiters = NM_MAX(st->waiters, (unsigned int)views[i].queued);
        unrecoverable += views[i].unrecoverable != 0;
        if (agreeing(views, ok, n, i) >= cfg->quorum)
            describe_holder(&views[i], st);
    }
    st->unrecoverable = unrecoverable >= cfg->quorum;
}

/* status.lua on every server (quorum.h); in cluster mode on the node of
 * the key's slot, the one server there is (routed.h). */
static void ask_servers(nm_config_t *cfg, nm_script_t id, int nkeys, const char **argv,
                        const size_t *lens, nm_votes_t *v)
{
    int64_t deadline = nm_request_deadline(cfg->io_timeout_ms, NM_FOREVER);
    nm_routed_t q = { .key = argv[0], .key_len = lens[0], .argc = nkeys, .argv = argv,
                      .lens = lens, .script = 1, .id = id, .nkeys = nkeys };
    int on;
    memset(v, 0, sizeof *v);
    v->n = 1;
    v->err[0] = nm_cluster_mode(cfg, deadline, &on);
    if (!v->err[0] && on)
        v->err[0] = nm_routed_call(cfg, &q, deadline, &v->reply[0], NULL);
    else if (!v->err[0])
        nm_quorum_call(cfg, id, nkeys, nkeys, argv, lens, NM_FOREVER, v);
}

int nm_status(const char *name, size_t name_len, netmutex_status_t *st)
{
    nm_config_t *cfg;
    char *keys;
    size_t key_len;
    const char *argv[STATUS_KEYS];
    size_t lens[STATUS_KEYS];
    view_t views[NM_SERVERS_MAX];
    int ok[NM_SERVERS_MAX] = { 0 };
    nm_votes_t v;

    int err = nm_config_current(&cfg);
    if (err)
        return err;
    err = nm_keys_build(cfg, name, name_len, NULL, &keys, &key_len);
    if (!err) {
        for (int i = 0; i < STATUS_KEYS; i++)
            argv[i] = nm_keys_get(keys, key_len, (nm_key_t)i, &lens[i]);
        ask_servers(cfg, NM_SCRIPT_STATUS, STATUS_KEYS, argv, lens, &v);
        size_t answered = 0;
        for (size_t i = 0; i < v.n; i++)
            answered += ok[i] = v.err[i] == 0 && read_view(v.reply[i], &views[i]) == 0;
        if (answered >= cfg->quorum)
            summarize(cfg, views, ok, v.n, st);
        else
            err = nm_votes_failure(&v);
        nm_votes_clear(&v);
        free(keys);
    }
    nm_config_unref(cfg);
    return err == NM_ECONN ? EAGAIN : err;
}

/* rwstatus.lua reads K, Q, W and S, the first five keys with P. */
#define SHARED_KEYS (NM_RKEY_SHARES + 1)

/* rwstatus.lua's answer into *ST: {token, pttl, fence, holder, since,
 * shares, bound, writers queued, others queued, granted}. */
static int read_shared(const redisReply *r, netmutex_shared_status_t *st)
{
    long long n[8];
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 10 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[3]->type != REDIS_REPLY_STRING)
        return EPROTO;
    const size_t at[8] = { 1, 2, 4, 5, 6, 7, 8, 9 };
    for (int k = 0; k < 8; k++)
        if (nm_reply_integer(r->element[at[k]], &n[k]) != 0 || (k >= 2 && n[k] < 0))
            return EPROTO;
    memset(st, 0, sizeof *st);
    st->writer = r->element[0]->len > 0;
    if (st->writer) {
        size_t len = NM_MIN(r->element[3]->len, sizeof st->holder - 1);
        memcpy(st->holder, r->element[3]->str, len);
        st->holder[len] = '\0';
        st->fence = (uint64_t)n[1];
        st->since_ms = n[2];
    }
    st->ttl_ms = st->writer ? n[0] : -1;
    st->shares = (unsigned int)NM_MIN(n[3], (long long)UINT_MAX);
    st->permits = (unsigned int)NM_MIN(n[4], (long long)UINT_MAX);
    st->writers_waiting = (unsigned int)NM_MIN(n[5], (long long)UINT_MAX);
    st->waiters = (unsigned int)NM_MIN(n[6], (long long)UINT_MAX);
    return 0;
}

int nm_shared_status(int sem, const char *name, size_t name_len, netmutex_shared_status_t *st)
{
    nm_config_t *cfg;
    char *keys;
    size_t lens[NM_RKEY_COUNT];
    const char *argv[SHARED_KEYS];
    nm_votes_t v;

    int err = nm_config_current(&cfg);
    if (err)
        return err;
    if (cfg->nservers > 1) {
        nm_config_unref(cfg);
        return ENOTSUP;
    }
    err = sem ? nm_keys_sem(cfg, name, name_len, NULL, &keys, lens)
              : nm_keys_rwlock(cfg, name, name_len, NULL, &keys, lens);
    if (!err) {
        for (int i = 0; i < SHARED_KEYS; i++)
            argv[i] = nm_keys_rwlock_get(keys, lens, (nm_rkey_t)i);
        ask_servers(cfg, NM_SCRIPT_RWSTATUS, SHARED_KEYS, argv, lens, &v);
        err = v.err[0] ? v.err[0] : read_shared(v.reply[0], st);
        nm_votes_clear(&v);
        free(keys);
    }
    nm_config_unref(cfg);
    return err == NM_ECONN ? EAGAIN : err;
}
