/*
 * list.c -- the locks held under the key prefix, for people and tools
 * (netmutex_list, netmutex(1) list).
 *
 * Redis has no index of our locks, so the lock keys are found with SCAN
 * MATCH on every server that may hold one: the one server (or the master
 * the sentinels name), every server of a quorum list, every master of a
 * Redis Cluster (SCAN sees one node's keys only).  keys.c says which keys
 * are lock keys, so the key schema stays there.  Each name found is then
 * asked with status.c, which keeps the quorum rule: a key left on a
 * minority of the servers (a stale grant) is no held lock.
 *
 * Read-write locks and semaphores (nm_list_shared) are found the same
 * way, by the keys either keeps while it is held or waited for (K, S, Q:
 * three SCAN MATCH patterns, each exact on the name), then asked with
 * status.c's nm_shared_status.  Neither kind exists in quorum mode.
 *
 * Published statistics (nm_list_stats) are found the same way, by their
 * keys (keys.c's <prefix>stats:*), and read with GET where each lives
 * (stats_board.c).
 *
 * Enough servers must answer for the names to be complete: in quorum mode
 * a majority (any lock a quorum holds is then on one of them), in cluster
 * mode every master (each holds its slots' locks alone).  A server that
 * does not answer is said in a warning, with the cause.  Each request has
 * the bound of the library's other requests: the server timeout in quorum
 * mode (a server that fails is then left alone a moment, as quorum.c
 * does), else the I/O timeout.
 */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "cluster_route.h"
#include "config.h"
#include "conn.h"
#include "keys.h"
#include "list.h"
#include "log.h"
#include "quorum.h"
#include "reply.h"
#include "stats_board.h"
#include "status.h"
#include "url.h"
#include "waitfor.h"

#define SCAN_COUNT "1000"

/* Names found; for the shared kinds each is stored after its kind's
 * letter ('r' or 's'), and SHARED is 1; statistics keys (whole) when
 * SHARED is 2. */
typedef struct names {
    char **v;
    size_t n, cap;
    int shared;
    int waiters;    /* the waiters' ids of deadlock detection instead */
} names_t;

static int names_add(names_t *ns, const char *s, size_t len)
{
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? 2 * ns->cap : 64;
        char **v = realloc(ns->v, cap * sizeof *v);
        if (!v)
            return ENOMEM;
        ns->v = v;
        ns->cap = cap;
    }
    if (!(ns->v[ns->n] = strndup(s, len)))
        return ENOMEM;
    ns->n++;
    return 0;
}

static void names_free(names_t *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    free(ns->v);
}

static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The shared kinds' names in byte order of the names, then by kind. */
static int by_name_then_kind(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    int c = strcmp(x + 1, y + 1);
    return c ? c : (x[0] > y[0]) - (x[0] < y[0]);
}

/* Sorted, each name once: SCAN may return a key twice, and in quorum mode
 * every server of the quorum has it. */
static void names_unique(names_t *ns)
{
    size_t w = 0;
    if (ns->n == 0)
        return;
    qsort(ns->v, ns->n, sizeof *ns->v, ns->shared == 1 ? by_name_then_kind : by_bytes);
    for (size_t i = 1; i < ns->n; i++) {
        if (strcmp(ns->v[i], ns->v[w]) == 0)
            free(ns->v[i]);
        else
            ns->v[++w] = ns->v[i];
    }
    ns->n = w + 1;
}

/* The lock names of one SCAN page's keys into NS. */
static int take_page(const nm_config_t *cfg, redisReply *const *keys, size_t n, names_t *ns)
{
    const char *name;
    size_t len;
    char tagged[NETMUTEX_NAME_MAX + 1]; /* the kind's letter, then the name */
    int err = 0;
    for (size_t i = 0; !err && i < n; i++) {
        if (ns->waiters) {
            if (nm_keys_waiter_of(cfg, keys[i]->str, keys[i]->len, &name, &len))
                err = names_add(ns, name, len);
        } else if (ns->shared == 2) {
            if (nm_keys_is_stats(cfg, keys[i]->str, keys[i]->len) &&
                !memchr(keys[i]->str, '\0', keys[i]->len))
                err = names_add(ns, keys[i]->str, keys[i]->len);
        } else if (!ns->shared) {
            if (nm_keys_name_of(cfg, keys[i]->str, keys[i]->len, &name, &len))
                err = names_add(ns, name, len);
        } else if (nm_keys_shared_name_of(cfg, keys[i]->str, keys[i]->len, tagged, &name,
                                          &len)) {
            memcpy(tagged + 1, name, len);
            err = names_add(ns, tagged, len + 1);
        }
    }
    return err;
}

/* Every lock key MATCH finds on the server behind C, into NS, each page
 * bounded by BOUND ms.  0 or an errno, the cause in WHY. */
static int scan_one(const nm_config_t *cfg, redisContext *c, const char *match,
                    unsigned int bound, names_t *ns, char *why, size_t size)
{
    char cursor[NM_SCAN_CURSOR_MAX] = "0";
    do {
        const char *argv[] = { "SCAN", cursor, "MATCH", match, "COUNT", SCAN_COUNT };
        int64_t deadline = nm_request_deadline(bound, NM_FOREVER);
        redisReply *r, *const *keys;
        size_t n;
        int err = nm_call(c, 6, argv, NULL, deadline, &r);
        if (err == NM_ECONN) {
            snprintf(why, size, "%s", c->err ? c->errstr : "no answer to SCAN (too slow, or the connection broke)");
            return err;
        }
        if (err) {
            snprintf(why, size, "SCAN refused: %s", nm_reply_last_error());
            return err;
        }
        err = nm_reply_scan(r, cursor, &keys, &n);
        if (!err)
            err = take_page(cfg, keys, n, ns);
        else
            snprintf(why, size, "unexpected answer to SCAN");
        freeReplyObject(r);
        if (err)
            return err;
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

/* The same for each of the NULL-terminated MATCHES. */
static int scan(const nm_config_t *cfg, redisContext *c, char *const *matches,
                unsigned int bound, names_t *ns, char *why, size_t size)
{
    int err = 0;
    for (size_t i = 0; !err && matches[i]; i++)
        err = scan_one(cfg, c, matches[i], bound, ns, why, size);
    return err;
}

/* Which error the listing reports when too few answered: a refusal or a
 * strange answer says more than a server that was down. */
static int worse(int a, int b)
{
    static const int order[] = { ENOMEM, EACCES, EPROTO, ENOTSUP, EINVAL, NM_ECONN };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (a == order[i] || b == order[i])
            return order[i];
    return a ? a : b;
}

static void say_failed(const char *where, const char *why)
{
    netmutex_log(NETMUTEX_LOG_WARN, "%s: cannot list the locks: %s", where, why);
}

/* Server I of CFG (one server, its sentinels' master, or one of a quorum
 * list). */
static int list_server(nm_config_t *cfg, size_t i, char *const *match, names_t *ns)
{
    char why[256] = "", where[NM_URL_MAX];
    redisContext *c;
    int64_t deadline = nm_request_deadline(nm_quorum_dial_bound(cfg), NM_FOREVER);
    int err = nm_conn_get_why(cfg, i, deadline, &c, why, sizeof why);
    if (!err)
        err = scan(cfg, c, match, nm_quorum_server_bound(cfg), ns, why, sizeof why);
    if (err == NM_ECONN)
        nm_quorum_set_down(cfg, i);
    if (err && err != ENOMEM) {
        nm_url_describe(&cfg->servers[i], where, sizeof where);
        say_failed(where, why);
    }
    return err;
}

/* Master NODE of CFG's cluster. */
static int list_node(nm_config_t *cfg, const nm_node_addr_t *node, char *const *match,
                     names_t *ns)
{
    char why[256], where[NM_CLUSTER_HOST_MAX + 32];
    redisContext *c;
    int64_t deadline = nm_request_deadline(cfg->io_timeout_ms, NM_FOREVER);
    int err = nm_conn_get_node(cfg, node->host, node->port, deadline, &c);
    if (err)
        snprintf(why, sizeof why, "%s",
                 netmutex_strerror(err == NM_ECONN ? EAGAIN : err));
    else if ((err = scan(cfg, c, match, cfg->io_timeout_ms, ns, why, sizeof why)) == NM_ECONN)
        nm_conn_drop_node(node->host, node->port);
    if (err && err != ENOMEM) {
        snprintf(where, sizeof where, strchr(node->host, ':') ? "redis://[%s]:%d"
                                                              : "redis://%s:%d",
                 node->host, node->port);
        say_failed(where, why);
    }
    return err;
}

/* The names on the servers of CFG into NS, from enough of them; INFO
 * filled.  0 or an errno. */
static int collect(nm_config_t *cfg, char *const *match, names_t *ns,
                   netmutex_list_info_t *info)
{
    nm_node_addr_t *nodes = NULL;
    size_t n = cfg->nservers, answered = 0;
    int64_t deadline = nm_request_deadline(cfg->io_timeout_ms, NM_FOREVER);
    int on, worst = 0;
    /* One server that cannot be dialed is said below, as a server. */
    int err = nm_cluster_mode(cfg, deadline, &on);
    if (err && !on && err != ENOMEM)
        err = 0;
    if (!err && on) {
        info->cluster = 1;
        err = nm_cluster_masters(cfg, deadline, &nodes, &n);
        if (err == NM_ECONN)
            netmutex_log(NETMUTEX_LOG_WARN, "cannot read the cluster's masters");
    }
    if (err)
        return err == NM_ECONN ? EAGAIN : err;
    info->servers = (unsigned int)n;
    info->needed = (unsigned int)(on ? n : cfg->quorum);
    for (size_t i = 0; i < n; i++) {
        int e = on ? list_node(cfg, &nodes[i], match, ns) : list_server(cfg, i, match, ns);
        if (e == ENOMEM) {
            worst = e;
            break;
        }
        answered += e == 0;
        worst = worse(worst, e);
    }
    free(nodes);
    info->answered = (unsigned int)answered;
    if (worst != ENOMEM && answered >= info->needed)
        worst = 0;
    return worst == NM_ECONN ? EAGAIN : worst;
}

/* The held names of NS, handed to FN. */
static int hand_out(const names_t *ns, netmutex_list_fn fn, void *arg)
{
    netmutex_status_t st;
    for (size_t i = 0; i < ns->n; i++) {
        int err = nm_status(ns->v[i], strlen(ns->v[i]), &st);
        if (err)
            return err;
        if (st.held && fn(ns->v[i], &st, arg) != 0)
            return ECANCELED;
    }
    return 0;
}

int nm_list(const char *pattern, netmutex_list_fn fn, void *arg, netmutex_list_info_t *info)
{
    nm_config_t *cfg;
    names_t ns = { NULL, 0, 0, 0, 0 };
    netmutex_list_info_t ignored;
    memset(&ignored, 0, sizeof ignored);
    int err = nm_config_current(&cfg);
    if (err)
        return err;
    char *match[2] = { nm_keys_match(cfg, pattern), NULL };
    err = match[0] ? collect(cfg, match, &ns, info ? info : &ignored) : ENOMEM;
    free(match[0]);
    nm_config_unref(cfg);
    names_unique(&ns);
    if (!err)
        err = hand_out(&ns, fn, arg);
    names_free(&ns);
    return err;
}

/* The held read-write locks and semaphores of NS, handed to FN. */
static int hand_out_shared(const names_t *ns, netmutex_list_shared_fn fn, void *arg)
{
    netmutex_shared_status_t st;
    for (size_t i = 0; i < ns->n; i++) {
        const char *name = ns->v[i] + 1;
        int sem = ns->v[i][0] == 's';
        int err = nm_shared_status(sem, name, strlen(name), &st);
        if (err)
            return err;
        if ((st.writer || st.shares > 0) &&
            fn(name, sem ? NETMUTEX_KIND_SEM : NETMUTEX_KIND_RWLOCK, &st, arg) != 0)
            return ECANCELED;
    }
    return 0;
}

int nm_list_shared(const char *pattern, netmutex_list_shared_fn fn, void *arg,
                   netmutex_list_info_t *info)
{
    static const char *const ends[] = { "", ":s", ":q" };
    nm_config_t *cfg;
    names_t ns = { NULL, 0, 0, 1, 0 };
    char *match[4] = { NULL };
    netmutex_list_info_t ignored;
    memset(&ignored, 0, sizeof ignored);
    int err = nm_config_current(&cfg);
    if (err)
        return err;
    if (cfg->nservers > 1) {
        nm_config_unref(cfg);
        return ENOTSUP;
    }
    for (size_t i = 0; !err && i < 3; i++)
        if (!(match[i] = nm_keys_match_shared(cfg, pattern, ends[i])))
            err = ENOMEM;
    if (!err)
        err = collect(cfg, match, &ns, info ? info : &ignored);
    for (size_t i = 0; i < 3; i++)
        free(match[i]);
    nm_config_unref(cfg);
    names_unique(&ns);
    if (!err)
        err = hand_out_shared(&ns, fn, arg);
    names_free(&ns);
    return err;
}

/* A copy of LEN bytes at S, NUL-terminated, or NULL. */
static char *copy(const char *s, size_t len)
{
    char *c = malloc(len + 1);
    if (c) {
        memcpy(c, s, len);
        c[len] = '\0';
    }
    return c;
}

/* Waiter ID's record, handed to FN if it is still there: 0, ECANCELED, or
 * an error. */
static int hand_out_wait(nm_config_t *cfg, const char *id, netmutex_waits_fn fn, void *arg)
{
    char *text, *holder = NULL, *name = NULL;
    char *held[NM_WAITREC_HELD_MAX] = { NULL };
    const char *held_as[NM_WAITREC_HELD_MAX] = { NULL };
    size_t len;
    nm_waitrec_t r;
    int err = nm_waitfor_record(cfg, id, strlen(id), &text, &len);
    if (err || !text)
        return err;
    if (nm_waitrec_parse(text, len, &r) != 0 || !nm_waitfor_kind_word(r.wait_kind)) {
        free(text);
        return 0; /* not a record this version understands */
    }
    err = nm_waitfor_blocker(cfg, &r, &holder);
    if (!err && !(name = copy(r.wait, r.wait_len)))
        err = ENOMEM;
    size_t nheld = 0;
    for (size_t i = 0; !err && i < r.nheld; i++) {
        if (!(held_as[nheld] = nm_waitfor_kind_word(r.held_kind[i])))
            continue; /* a kind of a later version */
        if (!(held[nheld++] = copy(r.held[i], r.held_len[i])))
            err = ENOMEM;
    }
    if (!err) {
        netmutex_wait_t w = {
            .waiter = id,
            .name = name,
            .holder = holder,
            .seq = (unsigned long long)r.seq,
            .held = (const char *const *)held,
            .nheld = (unsigned int)nheld,
            .wait_as = nm_waitfor_kind_word(r.wait_kind),
            .held_as = held_as,
        };
        if (fn(&w, arg) != 0)
            err = ECANCELED;
    }
    for (size_t i = 0; i < nheld; i++)
        free(held[i]);
    free(name);
    free(holder);
    free(text);
    return err;
}

int nm_list_waits(netmutex_waits_fn fn, void *arg, netmutex_list_info_t *info)
{
    nm_config_t *cfg;
    names_t ns = { NULL, 0, 0, 0, 1 };
    netmutex_list_info_t ignored;
    memset(&ignored, 0, sizeof ignored);
    int err = nm_config_current(&cfg);
    if (err)
        return err;
    if (cfg->nservers > 1) {
        nm_config_unref(cfg);
        return ENOTSUP;
    }
    char *match[2] = { nm_keys_match_waiters(cfg), NULL };
    err = match[0] ? collect(cfg, match, &ns, info ? info : &ignored) : ENOMEM;
    free(match[0]);
    names_unique(&ns);
    for (size_t i = 0; !err && i < ns.n; i++)
        err = hand_out_wait(cfg, ns.v[i], fn, arg);
    nm_config_unref(cfg);
    names_free(&ns);
    return err == NM_ECONN ? EAGAIN : err;
}

int nm_list_stats(int (*fn)(const char *text, size_t len, void *arg), void *arg,
                  netmutex_list_info_t *info)
{
    nm_config_t *cfg;
    names_t ns = { NULL, 0, 0, 2, 0 };
    netmutex_list_info_t ignored;
    memset(&ignored, 0, sizeof ignored);
    int err = nm_config_current(&cfg);
    if (err)
        return err;
    char *match[2] = { nm_keys_stats_match(cfg), NULL };
    err = match[0] ? collect(cfg, match, &ns, info ? info : &ignored) : ENOMEM;
    free(match[0]);
    names_unique(&ns);
    for (size_t i = 0; !err && i < ns.n; i++) {
        char *text;
        size_t len;
        int64_t deadline = nm_request_deadline(cfg->io_timeout_ms, NM_FOREVER);
        int e = nm_stats_board_get(cfg, ns.v[i], strlen(ns.v[i]), deadline, &text, &len);
        if (e == ENOENT)
            continue; /* expired since the scan */
        if (e) {
            err = e;
            break;
        }
        if (fn(text, len, arg) != 0)
            err = ECANCELED;
        free(text);
    }
    nm_config_unref(cfg);
    names_free(&ns);
    return err;
}
