/* sentinel.c -- redis-sentinel:// URLs: parsing, discovery, failovers. */
#include "nm.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "conn.h"
#include "log.h"
#include "reply.h"
#include "sentinel.h"

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

struct nm_sentinel {
    nm_server_t *nodes;      /* the sentinels, with the query's credentials */
    size_t n;
    char *name;              /* MASTERNAME */
    master_rec_t *current;   /* atomic: the latest answer, NULL before one */
    size_t first;            /* atomic: the sentinel that answered last */
    int64_t next_check;      /* atomic: when to ask the sentinels again */
    int64_t backoff;         /* atomic: while none answers, 0 otherwise */
};

/* ---- parsing ------------------------------------------------------------
 * The pieces are handed to the redis:// parser (config.h) as URLs of their
 * own, so host, port, credential and db syntax, %XX escapes included, are
 * exactly those of redis:// URLs. */

static __thread char parse_why[160];

static int refuse(const char *why)
{
    snprintf(parse_why, sizeof parse_why, "%s", why);
    return EINVAL;
}

int nm_sentinel_is_url(const char *url)
{
    return url && strncmp(url, NM_SENTINEL_SCHEME, strlen(NM_SENTINEL_SCHEME)) == 0;
}

/* Parses "redis://" PIECES... as one server into *OUT. */
static int parse_piece(const char *a, const char *b, const char *c, nm_server_t *out)
{
    nm_server_t *one;
    size_t n;
    char *url = malloc(strlen("redis://") + strlen(a) + strlen(b) + strlen(c) + 1);
    if (!url)
        return ENOMEM;
    sprintf(url, "redis://%s%s%s", a, b, c);
    int err = strpbrk(url + strlen("redis://"), ",") ? EINVAL
                                                     : nm_config_parse_urls(url, &one, &n);
    free(url);
    if (err)
        return err;
    *out = *one;
    free(one);
    return 0;
}

/* One "name=value" of the query into the sentinels' "user:password@". */
static int take_param(const char *p, size_t len, char **user, char **pass)
{
    const char *eq = memchr(p, '=', len);
    size_t klen = eq ? (size_t)(eq - p) : len;
    char **to = klen == 13 && !memcmp(p, "sentinel_user", 13)     ? user
              : klen == 17 && !memcmp(p, "sentinel_password", 17) ? pass : NULL;
    if (!eq || !to || *to)
        return refuse("the query may only set sentinel_user and sentinel_password, once each");
    free(*to);
    *to = strndup(eq + 1, len - klen - 1);
    return *to ? 0 : ENOMEM;
}

/* The query's credentials as the userinfo of a redis:// URL ("" if none). */
static int sentinel_userinfo(const char *q, char **out)
{
    char *user = NULL, *pass = NULL;
    int err = 0;
    for (const char *p = q; q && !err && *p;) {
        size_t len = strcspn(p, "&");
        err = take_param(p, len, &user, &pass);
        p += len + (p[len] == '&');
    }
    if (!err && user && !pass)
        err = refuse("sentinel_user needs a sentinel_password");
    if (!err && !(*out = calloc(1, (user ? strlen(user) : 0) + (pass ? strlen(pass) : 0) + 3)))
        err = ENOMEM;
    if (!err && pass)
        sprintf(*out, "%s:%s@", user ? user : "", pass);
    free(user);
    free(pass);
    return err;
}

/* "h1[:p1],h2[:p2]..." into st->nodes, with the sentinels' USERINFO. */
static int parse_nodes(char *hosts, const char *userinfo, nm_sentinel_t *st)
{
    size_t count = 1;
    for (const char *p = hosts; *p; p++)
        count += *p == ',';
    if (count > NM_SENTINEL_NODES_MAX)
        return refuse("more than 16 sentinels");
    if (!(st->nodes = calloc(count, sizeof *st->nodes)))
        return ENOMEM;
    for (char *h = hosts; st->n < count; st->n++) {
        char *end = h + strcspn(h, ",");
        char *close = memchr(h, ']', (size_t)(end - h));
        int has_port = memchr(close ? close : h, ':', (size_t)(end - (close ? close : h))) != NULL;
        char port[16];
        snprintf(port, sizeof port, ":%d", NM_SENTINEL_PORT);
        *end = '\0';
        if (!*h)
            return refuse("an empty host in the list of sentinels");
        int err = parse_piece(userinfo, h, has_port ? "" : port, &st->nodes[st->n]);
        if (err)
            return err == EINVAL ? refuse("a malformed sentinel host:port") : err;
        h = end + 1;
    }
    return 0;
}

/* "[userinfo@]hosts[/db]": the data nodes' credentials and db into SRV,
 * the hosts (cut out of HEAD) into *HOSTS. */
static int parse_head(char *head, nm_server_t *srv, char **hosts)
{
    char *at = strrchr(head, '@'), *rest = at ? at + 1 : head;
    char *slash = strchr(rest, '/');
    nm_server_t data;
    if (at)
        *at = '\0';
    int err = parse_piece(at ? head : "", at ? "@x" : "x", slash ? slash : "", &data);
    if (err)
        return err == EINVAL ? refuse("malformed credentials or db") : err;
    srv->user = data.user;
    srv->password = data.password;
    srv->db = data.db;
    free(data.host);
    if (slash)
        *slash = '\0';
    if (!*rest)
        return refuse("no sentinel host");
    *hosts = rest;
    return 0;
}

static int parse_name(const char *hash, nm_sentinel_t *st)
{
    size_t len = hash ? strlen(hash + 1) : 0;
    if (len == 0)
        return refuse("no #MASTERNAME at the end");
    for (size_t i = 1; i <= len; i++)
        if (!isgraph((unsigned char)hash[i]))
            return refuse("a MASTERNAME with spaces or control characters");
    if (len > NAME_MAX_LEN)
        return refuse("a MASTERNAME over 255 bytes");
    st->name = strdup(hash + 1);
    return st->name ? 0 : ENOMEM;
}

static int parse_server(const char *url, nm_server_t *srv)
{
    char *copy = strdup(url + strlen(NM_SENTINEL_SCHEME)), *userinfo = NULL, *hosts;
    nm_sentinel_t *st = calloc(1, sizeof *st);
    int err = copy && st ? 0 : ENOMEM;

    memset(srv, 0, sizeof *srv);
    parse_why[0] = '\0';
    if (!err && strlen(url) > NM_URL_MAX)
        err = refuse("longer than 4096 bytes");
    char *hash = err ? NULL : strrchr(copy, '#');
    if (!err)
        err = parse_name(hash, st);
    if (!err) {
        *hash = '\0';
        char *q = strchr(copy, '?');
        if (q)
            *q++ = '\0';
        err = sentinel_userinfo(q, &userinfo);
    }
    if (!err)
        err = parse_head(copy, srv, &hosts);
    if (!err)
        err = parse_nodes(hosts, userinfo, st);
    free(copy);
    free(userinfo);
    srv->sentinel = st;
    return err;
}

int nm_sentinel_parse(const char *url, nm_server_t **servers, size_t *n)
{
    nm_server_t *srv = calloc(1, sizeof *srv);
    int err = srv ? parse_server(url, srv) : ENOMEM;
    if (err) {
        nm_servers_free(srv, 1);
        return err;
    }
    *servers = srv;
    *n = 1;
    return 0;
}

void nm_sentinel_free(nm_sentinel_t *st)
{
    if (!st)
        return;
    nm_servers_free(st->nodes, st->n);
    for (master_rec_t *m = st->current, *prev; m; m = prev) {
        prev = m->prev;
        free(m);
    }
    free(st->name);
    free(st);
}

/* ---- messages ----------------------------------------------------------- */

void nm_sentinel_describe(const nm_server_t *srv, char *buf, size_t size)
{
    const nm_sentinel_t *st = srv->sentinel;
    const char *user = srv->user ? srv->user : "";
    const char *auth = srv->password ? ":***@" : srv->user ? "@" : "";
    size_t len = (size_t)snprintf(buf, size, "%s%s%s", NM_SENTINEL_SCHEME, user, auth);
    for (size_t i = 0; i < st->n && len < size; i++) {
        const nm_server_t *s = &st->nodes[i];
        const char *fmt = strchr(s->host, ':') ? "%s[%s]:%d" : "%s%s:%d";
        len += (size_t)snprintf(buf + len, size - len, fmt, i ? "," : "", s->host, s->port);
    }
    if (len < size && srv->db)
        len += (size_t)snprintf(buf + len, size - len, "/%d", srv->db);
    if (len < size && st->n && st->nodes[0].password)
        len += (size_t)snprintf(buf + len, size - len, "?sentinel_password=***");
    if (len < size)
        snprintf(buf + len, size - len, "#%s", st->name);
}

/* URL with the data nodes' password and the sentinels' masked. */
static void mask_url(const char *url, char *buf, size_t size)
{
    const char *host = url + strlen(NM_SENTINEL_SCHEME), *q = strchr(host, '?');
    const char *at = NULL, *colon;
    for (const char *p = host; *p && p != q; p++)
        at = *p == '@' ? p : at;
    colon = at ? memchr(host, ':', (size_t)(at - host)) : NULL;
    size_t len = (size_t)snprintf(buf, size, "%.*s%s", (int)((colon ? colon + 1 : host) - url),
                                  url, colon ? "***" : "");
    const char *rest = colon ? at : host;
    const char *pw = q ? strstr(q, "sentinel_password=") : NULL;
    if (len < size && pw) {
        pw += strlen("sentinel_password=");
        len += (size_t)snprintf(buf + len, size - len, "%.*s***", (int)(pw - rest), rest);
        rest = pw + strcspn(pw, "&#");
    }
    if (len < size)
        snprintf(buf + len, size - len, "%s", rest);
}

int nm_sentinel_bad_url(const char *url, int from_api)
{
    char shown[NM_URL_MAX + 64];
    mask_url(url, shown, sizeof shown);
    netmutex_log(NETMUTEX_LOG_ERROR, "%s '%s': %s; the form is "
                 "redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]"
                 "[?sentinel_user=U&sentinel_password=P]#MASTERNAME",
                 from_api ? "netmutex_config_t.url" : "NETMUTEX_URL", shown,
                 parse_why[0] ? parse_why : "malformed");
    return EINVAL;
}

/* ---- asking the sentinels ------------------------------------------------ */

/* Asks sentinel NODE for the master's address by UNTIL: 0 with HOST and
 * *PORT, or an error with CAUSE. */
static int ask_one(const nm_sentinel_t *st, const nm_server_t *node, int64_t until,
                   char *host, size_t host_size, int *port, char *cause, size_t size)
{
    const char *argv[3] = { "SENTINEL", "get-master-addr-by-name", st->name };
    const char *s[2];
    size_t lens[2];
    redisContext *c;
    redisReply *r;
    int err = nm_conn_open(node, node->host, node->port, until, &c, cause, size);
    if (err)
        return err;
    err = nm_call(c, 3, argv, NULL, until, &r);
    redisFree(c);
    if (err) {
        snprintf(cause, size, "%s", err == NM_ECONN ? "no answer in time"
                                                    : nm_reply_last_error());
        return err;
    }
    if (r->type == REDIS_REPLY_NIL) {
        snprintf(cause, size, "does not know a master named '%s'", st->name);
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
        nm_sentinel_describe(srv, where, sizeof where);
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
    int err = nm_conn_open(srv, host, port, until, out, cause, size);
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
        redisFree(*out);
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
    for (size_t k = 0; k < st->n && nm_remaining_ms(until) > 0; k++) {
        size_t i = (first + k) % st->n;
        const nm_server_t *node = &st->nodes[i];
        int e = ask_one(st, node, share_until(until, st->n - k), host, sizeof host, &port, why,
                        sizeof why);
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
    for (size_t k = 0; k < st->n && nm_remaining_ms(until) > 0; k++) {
        size_t i = (first + k) % st->n;
        if (ask_one(st, &st->nodes[i], share_until(until, st->n - k), host, sizeof host, &port,
                    why, sizeof why) == 0) {
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
