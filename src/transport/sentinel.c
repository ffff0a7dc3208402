/* sentinel.c -- redis-sentinel:// servers: discovery, failovers. */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dial.h"
#include "log.h"
#include "reply.h"
#include "sentinel.h"
#include "url.h"

#define NAME_MAX_LEN 255
#define RECHECK_MAX_MS 5000

/* A master's address as the sentinels named it.  Records are never freed
 * while the configuration lives: a thread may still be reading the one it
 * loaded when another publishes a newer one (a failover is rare, a record
 * small), and no lock is needed, none held across fork(). */
typedef struct master_rec {
    struct master_rec *prev;
    uint64_t gen;            /* 1 for the first answer, + 1 at each change */
    int port;
    char host[];
} master_rec_t;

/* What the sentinels of one redis-sentinel:// server said; the URL's
 * parts (the sentinels, MASTERNAME) are the server's own (url.h). */
struct nm_sentinel {
    master_rec_t *current;   /* atomic: the latest answer, NULL before one */
    size_t first;            /* atomic: the sentinel that answered last */
    int64_t next_check;      /* atomic: when to ask the sentinels again */
    int64_t backoff;         /* atomic: while none answers, 0 otherwise */
};

/* ---- the state's life ------------------------------------------------- */

int nm_sentinel_attach(nm_server_t *servers, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (servers[i].master_name && !(servers[i].sentinel = calloc(1, sizeof(nm_sentinel_t))))
            return ENOMEM;
    return 0;
}

void nm_sentinel_free(nm_sentinel_t *st)
{
    if (!st)
        return;
    for (master_rec_t *m = st->current, *prev; m; m = prev) {
        prev = m->prev;
        free(m);
    }
    free(st);
}

/* ---- asking the sentinels ------------------------------------------------ */

/* Asks sentinel NODE for the master's address by UNTIL: 0 with HOST and
 * *PORT, or an error with CAUSE. */
static int ask_one(const nm_server_t *srv, const nm_server_t *node, int64_t until,
                   char *host, size_t host_size, int *port, char *cause, size_t size)
{
    const char *argv[3] = { "SENTINEL", "get-master-addr-by-name", srv->master_name };
    const char *s[2];
    size_t lens[2];
    redisContext *c;
    redisReply *r;
    int err = nm_dial_open(node, node->host, node->port, until, &c, cause, size);
    if (err)
        return err;
    err = nm_call(c, 3, argv, NULL, until, &r);
    nm_dial_close(c);
    if (err) {
        snprintf(cause, size, "%s", err == NM_ECONN ? "no answer in time"
                                                    : nm_reply_last_error());
        return err;
    }
    if (r->type == REDIS_REPLY_NIL) {
        snprintf(cause, size, "does not know a master named '%s'", srv->master_name);
        err = NM_ECONN;
    } else if (nm_reply_strings(r, s, lens, 2) || lens[0] >= host_size || lens[1] > 5) {
        snprintf(cause, size, "unexpected answer to SENTINEL get-master-addr-by-name");
        err = EPROTO;
    } else {
        memcpy(host, s[0], lens[0]);
        host[lens[0]] = '\0';
        *port = atoi(s[1]);
    }
    freeReplyObject(r);
    return err;
}

/* The time sentinel K of the N still to be asked may take: an equal share
 * of what is left, so a silent one cannot use up a caller's deadline. */
static int64_t share_until(int64_t until, size_t left)
{
    int64_t now = nm_now_ms();
    return now + NM_MAX((until - now) / (int64_t)left, 1);
}

/* Publishes HOST:PORT as the master, saying so when it moved. */
static void set_master(const nm_server_t *srv, const char *host, int port)
{
    nm_sentinel_t *st = srv->sentinel;
    master_rec_t *cur = __atomic_load_n(&st->current, __ATOMIC_ACQUIRE), *rec;
    if (cur && cur->port == port && !strcmp(cur->host, host))
        return;
    if (!(rec = malloc(sizeof *rec + strlen(host) + 1)))
        return;
    rec->port = port;
    strcpy(rec->host, host);
    do {
        rec->prev = cur;
        rec->gen = cur ? cur->gen + 1 : 1;
    } while (!__atomic_compare_exchange_n(&st->current, &cur, rec, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE));
    if (cur) {
        char where[NM_URL_MAX];
        nm_url_describe(srv, where, sizeof where);
        netmutex_log(NETMUTEX_LOG_INFO, "%s: the master is now %s:%d (was %s:%d)", where, host,
                     port, cur->host, cur->port);
    }
}

/* The node at HOST:PORT with SRV's credentials, if ROLE says it is a master:
 * 0, NM_ECONN (a replica: the sentinel is behind), or a dial error. */
static int open_master(const nm_server_t *srv, const char *host, int port, int64_t until,
                       redisContext **out, char *cause, size_t size)
{
    const char *argv[1] = { "ROLE" }, *role;
    size_t len;
    redisReply *r;
    int err = nm_dial_open(srv, host, port, until, out, cause, size);
    if (err)
        return err;
    err = nm_call(*out, 1, argv, NULL, until, &r);
    if (!err) {
        err = nm_reply_strings(r, &role, &len, 1);
        if (!err && (len != 6 || memcmp(role, "master", 6)))
            err = NM_ECONN;
        freeReplyObject(r);
    }
    if (err) {
        snprintf(cause, size, "%.64s:%d: %.120s", host, port,
                 err == NM_ECONN ? "not a master (ROLE), or no answer in time"
                                 : nm_reply_last_error());
        nm_dial_close(*out);
    }
    return err;
}

/* Why nobody could be used: a refusal is worth more than a silence. */
static int worse(int a, int b)
{
    return a == EACCES || b == EACCES ? EACCES : a ? a : b;
}

int nm_sentinel_dial(const nm_server_t *srv, int64_t until, redisContext **out, char *cause,
                     size_t size)
{
    nm_sentinel_t *st = srv->sentinel;
    size_t first = __atomic_load_n(&st->first, __ATOMIC_RELAXED);
    char host[256], why[200];
    int port, err = 0;

    snprintf(cause, size, "no sentinel answered in time");
    for (size_t k = 0; k < srv->nsentinels && nm_remaining_ms(until) > 0; k++) {
        size_t i = (first + k) % srv->nsentinels;
        const nm_server_t *node = &srv->sentinels[i];
        int e = ask_one(srv, node, share_until(until, srv->nsentinels - k), host, sizeof host,
                        &port, why, sizeof why);
        if (!e) {
            set_master(srv, host, port);
            e = open_master(srv, host, port, until, out, why, sizeof why);
        } else {
            char tmp[sizeof why];
            snprintf(tmp, sizeof tmp, "%s", why);
            snprintf(why, sizeof why, "sentinel %.40s:%d: %.120s", node->host, node->port, tmp);
        }
        if (!e) {
            __atomic_store_n(&st->first, i, __ATOMIC_RELAXED);
            __atomic_store_n(&st->next_check, nm_now_ms() + NM_SENTINEL_RECHECK_MS,
                             __ATOMIC_RELAXED);
            return 0;
        }
        snprintf(cause, size, "%s", why);
        err = worse(err, e);
    }
    return err ? err : NM_ECONN;
}

/* Asks the sentinels in turn, by UNTIL, where the master is now; while
 * none answers, ever less often (up to every RECHECK_MAX_MS), so silent
 * sentinels do not slow down every call to a master that works. */
static void refresh(const nm_server_t *srv, int64_t until)
{
    nm_sentinel_t *st = srv->sentinel;
    size_t first = __atomic_load_n(&st->first, __ATOMIC_RELAXED);
    char host[256], why[200];
    int port;
    for (size_t k = 0; k < srv->nsentinels && nm_remaining_ms(until) > 0; k++) {
        size_t i = (first + k) % srv->nsentinels;
        if (ask_one(srv, &srv->sentinels[i], share_until(until, srv->nsentinels - k), host,
                    sizeof host, &port, why, sizeof why) == 0) {
            __atomic_store_n(&st->first, i, __ATOMIC_RELAXED);
            __atomic_store_n(&st->backoff, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&st->next_check, nm_now_ms() + NM_SENTINEL_RECHECK_MS,
                             __ATOMIC_RELAXED);
            set_master(srv, host, port);
            return;
        }
    }
    int64_t backoff = __atomic_load_n(&st->backoff, __ATOMIC_RELAXED);
    backoff = NM_MIN(NM_MAX(backoff * 2, 2 * NM_SENTINEL_RECHECK_MS), RECHECK_MAX_MS);
    __atomic_store_n(&st->backoff, backoff, __ATOMIC_RELAXED);
    __atomic_store_n(&st->next_check, nm_now_ms() + backoff, __ATOMIC_RELAXED);
}

/* Asks the sentinels again if their last answer is older than
 * NM_SENTINEL_RECHECK_MS, within half of what DEADLINE leaves (a silent
 * sentinel must not make a call to a master that works fail). */
static void recheck(const nm_config_t *cfg, const nm_server_t *srv, int64_t deadline)
{
    nm_sentinel_t *st = srv->sentinel;
    int64_t budget = NM_MIN((int64_t)cfg->connect_timeout_ms, nm_remaining_ms(deadline) / 2);
    int64_t now = nm_now_ms(), next = __atomic_load_n(&st->next_check, __ATOMIC_RELAXED);
    /* One thread asks; the others go on with the answer they have. */
    if (now >= next && __atomic_compare_exchange_n(&st->next_check, &next, now + budget, 0,
                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        refresh(srv, now + budget);
}

int nm_sentinel_moved(const nm_config_t *cfg, const nm_server_t *srv, const redisContext *c,
                      int64_t deadline)
{
    nm_sentinel_t *st = srv->sentinel;
    if (!st)
        return 0;
    recheck(cfg, srv, deadline);
    master_rec_t *cur = __atomic_load_n(&st->current, __ATOMIC_ACQUIRE);
    return cur && c->tcp.host && (cur->port != c->tcp.port || strcmp(cur->host, c->tcp.host));
}

uint64_t nm_sentinel_master_gen(const nm_server_t *srv)
{
    const nm_sentinel_t *st = srv->sentinel;
    const master_rec_t *cur = st ? __atomic_load_n(&st->current, __ATOMIC_ACQUIRE) : NULL;
    return cur ? cur->gen : 0;
}

uint64_t nm_sentinel_recheck(const nm_config_t *cfg, const nm_server_t *srv, int64_t deadline)
{
    if (!srv->sentinel)
        return 0;
    recheck(cfg, srv, deadline);
    return nm_sentinel_master_gen(srv);
}
