/*
 * servers.c -- the URL list split into servers, and a connection to one,
 * for `netmutex list` (see servers.h).  netmutex_configure has already
 * accepted the list, so the parsing here only takes a valid URL apart; the
 * library stays the judge of what is valid.
 */
#include "ac_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cli.h"
#include "servers.h"

#define SENTINEL_SCHEME "redis-sentinel://"
#define SENTINEL_PORT 26379

/* The library's default timeouts (netmutex_configure(3)); a variable
 * that is set was validated by netmutex_configure. */
#define DEFAULT_TIMEOUT_MS 2000

static char *dup_range(const char *s, size_t len)
{
    char *p = malloc(len + 1);

    if (p != NULL) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

static int hexval(char c)
{
    if (isdigit((unsigned char)c))
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* [S, S+LEN) with its %XX escapes decoded (the library refused any that
 * is malformed). */
static char *percent_decode(const char *s, size_t len)
{
    char *out = malloc(len + 1), *w = out;

    for (size_t i = 0; out != NULL && i < len; i++) {
        if (s[i] == '%' && i + 2 < len && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            *w++ = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else {
            *w++ = s[i];
        }
    }
    if (out != NULL)
        *w = '\0';
    return out;
}

/* "user:password" or ":password". */
static int take_userinfo(const char *s, size_t len, struct cli_server *srv)
{
    const char *colon = memchr(s, ':', len);
    size_t ulen = colon != NULL ? (size_t)(colon - s) : len;

    if (colon != NULL && (srv->password = percent_decode(colon + 1, len - ulen - 1)) == NULL)
        return ENOMEM;
    if (ulen > 0 && (srv->user = percent_decode(s, ulen)) == NULL)
        return ENOMEM;
    return 0;
}

/* host[:port][/db], host being a name, IPv4 or [IPv6]. */
static int take_hostport(const char *s, size_t len, struct cli_server *srv)
{
    const char *end = s + len, *p;

    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        p = close != NULL ? close + 1 : end;
        srv->host = dup_range(s + 1, (size_t)(p - s) - 2);
    } else {
        p = s;
        while (p < end && *p != ':' && *p != '/')
            p++;
        srv->host = dup_range(s, (size_t)(p - s));
    }
    srv->port = 6379;
    if (p < end && *p == ':')
        srv->port = atoi(p + 1);
    const char *slash = memchr(p, '/', (size_t)(end - p));
    if (slash != NULL && slash + 1 < end)
        srv->db = atoi(slash + 1);
    return srv->host != NULL ? 0 : ENOMEM;
}

/* /absolute/path[?db=N] */
static int take_unix_path(const char *s, size_t len, struct cli_server *srv)
{
    const char *q = memchr(s, '?', len);

    if (q != NULL)
        srv->db = atoi(q + strlen("?db="));
    srv->path = dup_range(s, q != NULL ? (size_t)(q - s) : len);
    return srv->path != NULL ? 0 : ENOMEM;
}

/* The credentials end at the last '@' before the host, or for unix://
 * before the first '/' of the path (which may hold an '@' itself). */
static int parse_one(const char *url, size_t len, struct cli_server *srv)
{
    int is_unix = strncmp(url, "unix://", strlen("unix://")) == 0;
    const char *s = url + strlen(is_unix ? "unix://" : "redis://"), *end = url + len;
    const char *limit = end, *at = NULL;
    int err;

    if (is_unix && (limit = memchr(s, '/', (size_t)(end - s))) == NULL)
        limit = end;
    for (const char *p = s; p < limit; p++) {
        if (*p == '@')
            at = p;
    }
    if (at != NULL) {
        if ((err = take_userinfo(s, (size_t)(at - s), srv)) != 0)
            return err;
        s = at + 1;
    }
    err = is_unix ? take_unix_path(s, (size_t)(end - s), srv)
                  : take_hostport(s, (size_t)(end - s), srv);
    char *copy = err == 0 ? dup_range(url, len) : NULL;
    if (copy != NULL)
        srv->shown = cli_url_mask(copy);
    free(copy);
    return err == 0 && srv->shown == NULL ? ENOMEM : err;
}

/* The query's "sentinel_user=U&sentinel_password=P" into each sentinel. */
static int take_sentinel_auth(const char *q, struct cli_server *srv)
{
    for (const char *p = q; p != NULL && *p != '\0';) {
        size_t len = strcspn(p, "&"), klen = strcspn(p, "=");
        char *v = percent_decode(p + klen + 1, len - klen - 1);
        if (v == NULL)
            return ENOMEM;
        for (size_t i = 0; i < srv->nsentinels; i++) {
            char **to = klen == strlen("sentinel_user") ? &srv->sentinels[i].user
                                                        : &srv->sentinels[i].password;
            free(*to);
            *to = strdup(v);
            if (*to == NULL)
                break;
        }
        free(v);
        p += len + (p[len] == '&');
    }
    return 0;
}

/* "h1[:p1],h2[:p2]..." (HOSTS, cut at END) into srv->sentinels. */
static int take_sentinels(const char *hosts, const char *end, struct cli_server *srv)
{
    size_t count = 1;
    for (const char *p = hosts; p < end; p++)
        count += *p == ',';
    if ((srv->sentinels = calloc(count, sizeof *srv->sentinels)) == NULL)
        return ENOMEM;
    for (const char *h = hosts; srv->nsentinels < count; srv->nsentinels++) {
        const char *e = memchr(h, ',', (size_t)(end - h));
        e = e != NULL ? e : end;
        const char *close = memchr(h, ']', (size_t)(e - h)), *from = close ? close : h;
        struct cli_server *s = &srv->sentinels[srv->nsentinels];
        if (take_hostport(h, (size_t)(e - h), s) != 0)
            return ENOMEM;
        if (memchr(from, ':', (size_t)(e - from)) == NULL)
            s->port = SENTINEL_PORT;
        h = e + 1;
    }
    return 0;
}

/* redis-sentinel://[[user]:password@]hosts[/db][?query]#MASTER: the data
 * nodes' credentials and db into SRV, the sentinels into srv->sentinels. */
static int parse_sentinel(const char *url, struct cli_server *srv)
{
    const char *s = url + strlen(SENTINEL_SCHEME), *hash = strrchr(s, '#');
    const char *q = memchr(s, '?', (size_t)(hash - s)), *end = q != NULL ? q : hash;
    const char *at = NULL, *slash;
    int err = 0;

    for (const char *p = s; p < end; p++) {
        if (*p == '@')
            at = p;
    }
    if (at != NULL && (err = take_userinfo(s, (size_t)(at - s), srv)) != 0)
        return err;
    s = at != NULL ? at + 1 : s;
    if ((slash = memchr(s, '/', (size_t)(end - s))) != NULL)
        srv->db = atoi(slash + 1);
    if ((srv->master = strdup(hash + 1)) == NULL ||
        (err = take_sentinels(s, slash != NULL ? slash : end, srv)) != 0)
        return err != 0 ? err : ENOMEM;
    if (q != NULL) {
        char *query = dup_range(q + 1, (size_t)(hash - q - 1));
        err = query != NULL ? take_sentinel_auth(query, srv) : ENOMEM;
        free(query);
    }
    srv->shown = err == 0 ? cli_url_mask(url) : NULL;
    return err == 0 && srv->shown == NULL ? ENOMEM : err;
}

/* redis-cluster://[userinfo@]host[:port][,host[:port]...]: each seed as a
 * redis:// URL of its own, with the shared credentials. */
static int parse_cluster(const char *urls, struct cli_server **servers, size_t *n)
{
    const char *rest = urls + strlen(CLI_CLUSTER_SCHEME), *at = strrchr(rest, '@');
    const char *hosts = at != NULL ? at + 1 : rest;
    size_t ui = at != NULL ? (size_t)(at + 1 - rest) : 0;
    size_t size = strlen("redis://") + strlen(rest) + 1;
    char *one = malloc(size);
    int err = one != NULL ? 0 : ENOMEM;
    size_t count = 1;

    for (const char *p = hosts; *p != '\0'; p++)
        count += *p == ',';
    struct cli_server *list = err == 0 ? calloc(count, sizeof *list) : NULL;
    if (list == NULL)
        err = ENOMEM;
    const char *p = hosts;
    for (size_t i = 0; i < count && err == 0; i++) {
        size_t len = strcspn(p, ",");
        snprintf(one, size, "redis://%.*s%.*s", (int)ui, rest, (int)len, p);
        err = parse_one(one, strlen(one), &list[i]);
        p += len + 1;
    }
    free(one);
    if (err != 0) {
        cli_servers_free(list, count);
        return err;
    }
    *servers = list;
    *n = count;
    return 0;
}

int cli_servers_parse(const char *urls, struct cli_server **servers, size_t *n)
{
    size_t count = 1;
    int err = 0;

    if (strncmp(urls, SENTINEL_SCHEME, strlen(SENTINEL_SCHEME)) == 0) {
        /* One server: the commas are its sentinels'. */
        struct cli_server *one = calloc(1, sizeof *one);
        err = one != NULL ? parse_sentinel(urls, one) : ENOMEM;
        if (err != 0) {
            cli_servers_free(one, 1);
            return err;
        }
        *servers = one;
        *n = 1;
        return 0;
    }

    if (strncmp(urls, CLI_CLUSTER_SCHEME, strlen(CLI_CLUSTER_SCHEME)) == 0)
        return parse_cluster(urls, servers, n);
    for (const char *p = urls; *p != '\0'; p++)
        count += *p == ',';
    struct cli_server *list = calloc(count, sizeof *list);
    if (list == NULL)
        return ENOMEM;
    const char *p = urls;
    for (size_t i = 0; i < count && err == 0; i++) {
        size_t len = strcspn(p, ",");
        err = parse_one(p, len, &list[i]);
        p += len + 1;
    }
    if (err != 0) {
        cli_servers_free(list, count);
        return err;
    }
    *servers = list;
    *n = count;
    return 0;
}

void cli_servers_free(struct cli_server *servers, size_t n)
{
    for (size_t i = 0; servers != NULL && i < n; i++) {
        free(servers[i].host);
        free(servers[i].path);
        free(servers[i].user);
        free(servers[i].password);
        free(servers[i].shown);
        free(servers[i].master);
        cli_servers_free(servers[i].sentinels, servers[i].nsentinels);
    }
    free(servers);
}

static struct timeval env_timeout(const char *var)
{
    const char *s = getenv(var);
    long ms = s != NULL && *s != '\0' ? strtol(s, NULL, 10) : DEFAULT_TIMEOUT_MS;
    struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

    return tv;
}

/* Words the library also reads as a refusal (src/transport/reply.c). */
int cli_reply_errno(const redisReply *r)
{
    static const char *const refusals[] = {
        "NOAUTH", "WRONGPASS", "NOPERM", "ERR invalid password", "ERR AUTH",
        "ERR DB index", "ERR Protocol error: unauthenticated",
    };

    for (size_t i = 0; r->str != NULL && i < sizeof refusals / sizeof refusals[0]; i++) {
        if (strncmp(r->str, refusals[i], strlen(refusals[i])) == 0)
            return EACCES;
    }
    return EPROTO;
}

/* One command of the handshake; 0 or an errno with the cause in WHY. */
static int handshake_call(redisContext *c, int argc, const char **argv, char *why, size_t len)
{
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    int err = 0;

    if (r == NULL) {
        snprintf(why, len, "%s", c->errstr);
        return EAGAIN;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, len, "refused: %s", r->str);
        err = cli_reply_errno(r);
    }
    freeReplyObject(r);
    return err;
}

static int handshake(redisContext *c, const struct cli_server *s, char *why, size_t len)
{
    char db[16];
    int err = 0;

    if (s->password != NULL) {
        const char *argv[] = { "AUTH", s->user != NULL ? s->user : s->password, s->password };
        err = handshake_call(c, s->user != NULL ? 3 : 2, argv, why, len);
    }
    if (err == 0 && s->db != 0) {
        snprintf(db, sizeof db, "%d", s->db);
        const char *argv[] = { "SELECT", db };
        err = handshake_call(c, 2, argv, why, len);
    }
    return err;
}

static redisContext *dial_node(const struct cli_server *s, int *err, char *why, size_t len);

/* The first word of a reply to ROLE is "master". */
static int is_master(redisContext *c)
{
    redisReply *r = redisCommand(c, "ROLE");
    int yes = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
              r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "master") == 0;
    freeReplyObject(r);
    return yes;
}

/* Sentinel SN's word on where S's master is, dialed and confirmed. */
static redisContext *ask_sentinel(const struct cli_server *s, const struct cli_server *sn,
                                  int *err, char *why, size_t len)
{
    redisContext *c = dial_node(sn, err, why, len);
    if (c == NULL) {
        char cause[200];
        snprintf(cause, sizeof cause, "%s", why);
        snprintf(why, len, "sentinel %s:%d: %s", sn->host, sn->port, cause);
        return NULL;
    }
    redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", s->master);
    redisFree(c);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        snprintf(why, len, "sentinel %s:%d does not name a master '%s'", sn->host, sn->port,
                 s->master);
        freeReplyObject(r);
        *err = EAGAIN;
        return NULL;
    }
    struct cli_server m = *s;
    m.host = r->element[0]->str;
    m.port = atoi(r->element[1]->str);
    c = dial_node(&m, err, why, len);
    if (c != NULL && !is_master(c)) {
        snprintf(why, len, "%s:%d, named by a sentinel, is not a master", m.host, m.port);
        redisFree(c);
        c = NULL;
        *err = EAGAIN;
    }
    freeReplyObject(r);
    return c;
}

redisContext *cli_server_dial(const struct cli_server *s, int *err, char *why, size_t len)
{
    redisContext *c = NULL;

    if (s->sentinels == NULL)
        return dial_node(s, err, why, len);
    for (size_t i = 0; c == NULL && i < s->nsentinels; i++)
        c = ask_sentinel(s, &s->sentinels[i], err, why, len);
    return c;
}

static redisContext *dial_node(const struct cli_server *s, int *err, char *why, size_t len)
{
    struct timeval tv = env_timeout("NETMUTEX_CONNECT_TIMEOUT_MS");
    redisContext *c = s->path != NULL ? redisConnectUnixWithTimeout(s->path, tv)
                                      : redisConnectWithTimeout(s->host, s->port, tv);

    *err = c == NULL ? ENOMEM : c->err != 0 ? EAGAIN : 0;
    if (*err == 0 && redisSetTimeout(c, env_timeout("NETMUTEX_IO_TIMEOUT_MS")) != REDIS_OK)
        *err = EAGAIN;
    if (*err != 0)
        snprintf(why, len, "%s", c != NULL ? c->errstr : "out of memory");
    if (*err == 0)
        *err = handshake(c, s, why, len);
    if (*err != 0 && c != NULL) {
        redisFree(c);
        c = NULL;
    }
    return c;
}
