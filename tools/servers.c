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

/* The library's default timeouts (README, "Configuration"); a variable
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

int cli_servers_parse(const char *urls, struct cli_server **servers, size_t *n)
{
    size_t count = 1;
    int err = 0;

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

/* Words the library also reads as a refusal (src/reply.c). */
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

redisContext *cli_server_dial(const struct cli_server *s, int *err, char *why, size_t len)
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
