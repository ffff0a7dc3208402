/* url.c -- every URL form: parsing, describing and masking (url.h). */
#include "nm.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "netmutex.h"
#include "url.h"

/* Where a refusal's reason goes: the caller's buffer, never a global, so
 * that the reason reaches the message that names the URL. */
typedef struct why {
    char *buf;
    size_t size;
} why_t;

static int refuse(why_t *why, const char *text)
{
    if (why->size)
        snprintf(why->buf, why->size, "%s", text);
    return EINVAL;
}

/* ---- small string helpers ---------------------------------------------- */

/* Parses all of [S, S+LEN) as a decimal number in [MIN, MAX]. */
int nm_parse_uint(const char *s, size_t len, long min, long max, long *out)
{
    long v = 0;
    if (len == 0 || len > 10)
        return EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    if (v < min || v > max)
        return EINVAL;
    *out = v;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* %XX-decodes [S, S+LEN) into a new string.  A decoded NUL is refused: it
 * would silently truncate a password. */
static int percent_decode(const char *s, size_t len, char **out)
{
    char *p = malloc(len + 1), *w = p;
    if (!p)
        return ENOMEM;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '%') {
            *w++ = s[i];
            continue;
        }
        int hi = i + 2 < len ? hexval(s[i + 1]) : -1;
        int lo = i + 2 < len ? hexval(s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            free(p);
            return EINVAL;
        }
        *w++ = (char)(hi * 16 + lo);
        i += 2;
    }
    *w = '\0';
    *out = p;
    return 0;
}

/* ---- one URL ---------------------------------------------------------- */

/* "user:password" or ":password" (no ACL user).  Anything else is refused
 * rather than guessed at. */
static int parse_userinfo(const char *s, size_t len, nm_server_t *srv)
{
    const char *colon = memchr(s, ':', len);
    if (!colon)
        return EINVAL;
    size_t ulen = (size_t)(colon - s);
    int err = percent_decode(colon + 1, len - ulen - 1, &srv->password);
    if (!err && ulen > 0)
        err = percent_decode(s, ulen, &srv->user);
    return err;
}

static int valid_host_char(char c, int bracketed)
{
    if (isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_')
        return 1;
    return bracketed && (c == ':' || c == '%');
}

/* host[:port][/db], host being a name, IPv4 or [IPv6]. */
static int parse_hostport(const char *s, size_t len, nm_server_t *srv)
{
    const char *end = s + len, *host = s, *p;
    int bracketed = len > 0 && s[0] == '[';
    size_t hlen;
    long v;

    if (bracketed) {
        const char *close = memchr(s, ']', len);
        if (!close)
            return EINVAL;
        host = s + 1;
        hlen = (size_t)(close - host);
        p = close + 1;
    } else {
        p = s;
        while (p < end && *p != ':' && *p != '/')
            p++;
        hlen = (size_t)(p - s);
    }
    if (hlen == 0)
        return EINVAL;
    for (size_t i = 0; i < hlen; i++)
        if (!valid_host_char(host[i], bracketed))
            return EINVAL;
    srv->port = 6379;
    if (p < end && *p == ':') {
        const char *port = ++p;
        while (p < end && *p != '/')
            p++;
        if (nm_parse_uint(port, (size_t)(p - port), 1, 65535, &v))
            return EINVAL;
        srv->port = (int)v;
    }
    if (p < end && *p == '/') {
        p++;
        if (p < end) {
            if (nm_parse_uint(p, (size_t)(end - p), 0, INT_MAX, &v))
                return EINVAL;
            srv->db = (int)v;
        }
        p = end;
    }
    if (p != end)
        return EINVAL;
    srv->host = strndup(host, hlen);
    return srv->host ? 0 : ENOMEM;
}

/* /absolute/path[?db=N] */
static int parse_unix_path(const char *s, size_t len, nm_server_t *srv)
{
    const char *q = memchr(s, '?', len);
    size_t plen = q ? (size_t)(q - s) : len;
    long v;

    if (plen < 2 || s[0] != '/' || plen >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return EINVAL;
    if (q) {
        size_t qlen = len - plen - 1;
        if (qlen < 3 || memcmp(q + 1, "db=", 3) != 0 ||
            nm_parse_uint(q + 4, qlen - 3, 0, INT_MAX, &v))
            return EINVAL;
        srv->db = (int)v;
    }
    srv->path = strndup(s, plen);
    return srv->path ? 0 : ENOMEM;
}

static int has_prefix(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(s, prefix, n) == 0;
}

static int parse_url(const char *s, size_t len, nm_server_t *srv)
{
    int is_unix = has_prefix(s, len, "unix://");
    size_t skip;
    int err;

    memset(srv, 0, sizeof *srv);
    if (len > NM_URL_MAX || memchr(s, '\0', len))
        return EINVAL;
    if (is_unix)
        skip = strlen("unix://");
    else if (has_prefix(s, len, "redis://"))
        skip = strlen("redis://");
    else if (has_prefix(s, len, "rediss://"))
        skip = strlen("rediss://");
    else
        return EINVAL;
    srv->tls = skip == strlen("rediss://");
    s += skip;
    len -= skip;
    for (size_t i = 0; i < len; i++)
        if (isspace((unsigned char)s[i]) || iscntrl((unsigned char)s[i]))
            return EINVAL;

    /* Credentials end at the last '@' before the host or path: a password
     * may hold a raw '@', a host or db never does, and a socket path (which
     * may) starts with the first '/'. */
    size_t scan = len;
    if (is_unix) {
        const char *slash = memchr(s, '/', len);
        scan = slash ? (size_t)(slash - s) : len;
    }
    const char *at = NULL;
    for (size_t i = scan; i-- > 0;)
        if (s[i] == '@') {
            at = s + i;
            break;
        }
    if (at) {
        err = parse_userinfo(s, (size_t)(at - s), srv);
        if (err)
            return err;
        len -= (size_t)(at + 1 - s);
        s = at + 1;
    }
    srv->is_unix = is_unix;
    return is_unix ? parse_unix_path(s, len, srv) : parse_hostport(s, len, srv);
}


static void server_clear(nm_server_t *srv)
{
    nm_servers_free(srv->sentinels, srv->nsentinels);
    free(srv->master_name);
    free(srv->host);
    free(srv->path);
    free(srv->user);
    free(srv->password);
    memset(srv, 0, sizeof *srv);
}

void nm_servers_free(nm_server_t *servers, size_t n)
{
    for (size_t i = 0; servers && i < n; i++)
        server_clear(&servers[i]);
    free(servers);
}

void nm_urls_free(nm_urls_t *urls)
{
    nm_servers_free(urls->servers, urls->n);
    nm_servers_free(urls->seeds, urls->nseeds);
    memset(urls, 0, sizeof *urls);
}

/* ---- a list of redis:// and unix:// URLs (quorum mode) ---------------- */

static int parse_list(const char *urls, nm_urls_t *out, why_t *why)
{
    size_t count = 1, i = 0;
    int err = 0;

    for (const char *p = urls; *p; p++)
        count += *p == ',';
    if (strstr(urls, NM_CLUSTER_SCHEME) || strstr(urls, NM_CLUSTER_TLS_SCHEME))
        return refuse(why, "a redis-cluster:// URL cannot be part of a list: quorum mode "
                           "with a Redis Cluster is not supported");
    if (count > NETMUTEX_SERVERS_MAX || strlen(urls) > NETMUTEX_SERVERS_MAX * NM_URL_MAX)
        return EINVAL;
    if (!(out->servers = calloc(count, sizeof *out->servers)))
        return ENOMEM;
    out->n = count;
    for (const char *p = urls; i < count && !err; i++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        err = parse_url(p, len, &out->servers[i]);
        p += len + 1;
    }
    return err;
}

/* ---- redis-sentinel:// -------------------------------------------------
 * The pieces go through the redis:// parser, so host, port, credential and
 * db syntax, %XX escapes included, are exactly those of redis:// URLs. */

/* Parses "redis://" A B C as one server into *OUT, which is cleared first:
 * every return leaves it safe to free, whatever it held before (a caller's
 * fresh stack variable, which the refusal of a ',' used to free as it
 * was). */
static int parse_piece(const char *a, const char *b, const char *c, nm_server_t *out)
{
    size_t size = strlen("redis://") + strlen(a) + strlen(b) + strlen(c) + 1;
    char *url = malloc(size);
    memset(out, 0, sizeof *out);
    if (!url)
        return ENOMEM;
    snprintf(url, size, "redis://%s%s%s", a, b, c);
    int err = strchr(url, ',') ? EINVAL : parse_url(url, strlen(url), out);
    free(url);
    if (err)
        server_clear(out);
    return err;
}

/* The query's sentinel_user, sentinel_password and master_tls. */
typedef struct query {
    char *user, *pass, *master_tls;
} query_t;

/* One "name=value" of the query into Q. */
static int take_param(const char *p, size_t len, query_t *q, why_t *why)
{
    const char *eq = memchr(p, '=', len);
    size_t klen = eq ? (size_t)(eq - p) : len;
    char **to = klen == 13 && !memcmp(p, "sentinel_user", 13)     ? &q->user
              : klen == 17 && !memcmp(p, "sentinel_password", 17) ? &q->pass
              : klen == 10 && !memcmp(p, "master_tls", 10)        ? &q->master_tls : NULL;
    if (!eq || !to || *to)
        return refuse(why, "the query may only set sentinel_user and sentinel_password, "
                           "and master_tls, once each");
    *to = strndup(eq + 1, len - klen - 1);
    return *to ? 0 : ENOMEM;
}

/* master_tls=yes|no into SRV's tls (default: as the sentinels, SENT_TLS). */
static int take_master_tls(const char *v, int sent_tls, nm_server_t *srv, why_t *why)
{
    srv->tls = sent_tls;
    if (v && strcmp(v, "yes") != 0 && strcmp(v, "no") != 0)
        return refuse(why, "master_tls is yes or no");
    if (v)
        srv->tls = strcmp(v, "yes") == 0;
    return 0;
}

/* The query's credentials as the userinfo of a redis:// URL ("" if none),
 * its master_tls into SRV. */
static int sentinel_userinfo(const char *q, int sent_tls, nm_server_t *srv, char **out,
                             why_t *why)
{
    query_t query = { NULL, NULL, NULL };
    char *user, *pass;
    int err = 0;
    for (const char *p = q; q && !err && *p;) {
        size_t len = strcspn(p, "&");
        err = take_param(p, len, &query, why);
        p += len + (p[len] == '&');
    }
    user = query.user;
    pass = query.pass;
    if (!err)
        err = take_master_tls(query.master_tls, sent_tls, srv, why);
    free(query.master_tls);
    if (!err && user && !pass)
        err = refuse(why, "sentinel_user needs a sentinel_password");
    if (!err && !(*out = calloc(1, (user ? strlen(user) : 0) + (pass ? strlen(pass) : 0) + 3)))
        err = ENOMEM;
    if (!err && pass)
        sprintf(*out, "%s:%s@", user ? user : "", pass);
    free(user);
    free(pass);
    return err;
}

/* "h1[:p1],h2[:p2]..." into SRV's sentinels, with their USERINFO and
 * TLS. */
static int parse_nodes(char *hosts, const char *userinfo, int tls, nm_server_t *srv,
                       why_t *why)
{
    size_t count = 1;
    for (const char *p = hosts; *p; p++)
        count += *p == ',';
    if (count > NM_SENTINEL_NODES_MAX)
        return refuse(why, "more than 16 sentinels");
    if (!(srv->sentinels = calloc(count, sizeof *srv->sentinels)))
        return ENOMEM;
    for (char *h = hosts; srv->nsentinels < count; srv->nsentinels++) {
        char *end = h + strcspn(h, ",");
        char *close = memchr(h, ']', (size_t)(end - h));
        int has_port = memchr(close ? close : h, ':', (size_t)(end - (close ? close : h))) != NULL;
        char port[16];
        snprintf(port, sizeof port, ":%d", NM_SENTINEL_PORT);
        *end = '\0';
        if (!*h)
            return refuse(why, "an empty host in the list of sentinels");
        int err = parse_piece(userinfo, h, has_port ? "" : port,
                              &srv->sentinels[srv->nsentinels]);
        if (err)
            return err == EINVAL ? refuse(why, "a malformed sentinel host:port") : err;
        srv->sentinels[srv->nsentinels].tls = tls;
        h = end + 1;
    }
    return 0;
}

/* "[userinfo@]hosts[/db]": the data nodes' credentials and db into SRV,
 * the hosts (cut out of HEAD) into *HOSTS. */
static int parse_head(char *head, nm_server_t *srv, char **hosts, why_t *why)
{
    char *at = strrchr(head, '@'), *rest = at ? at + 1 : head;
    char *slash = strchr(rest, '/');
    nm_server_t data;
    if (at)
        *at = '\0';
    int err = parse_piece(at ? head : "", at ? "@x" : "x", slash ? slash : "", &data);
    if (err)
        return err == EINVAL ? refuse(why, "malformed credentials or db") : err;
    srv->user = data.user;
    srv->password = data.password;
    srv->db = data.db;
    free(data.host);
    if (slash)
        *slash = '\0';
    if (!*rest)
        return refuse(why, "no sentinel host");
    *hosts = rest;
    return 0;
}

static int parse_name(const char *hash, nm_server_t *srv, why_t *why)
{
    size_t len = hash ? strlen(hash + 1) : 0;
    if (len == 0)
        return refuse(why, "no #MASTERNAME at the end");
    for (size_t i = 1; i <= len; i++)
        if (!isgraph((unsigned char)hash[i]))
            return refuse(why, "a MASTERNAME with spaces or control characters");
    if (len > NM_MASTER_NAME_MAX)
        return refuse(why, "a MASTERNAME over 255 bytes");
    srv->master_name = strdup(hash + 1);
    return srv->master_name ? 0 : ENOMEM;
}

static int parse_sentinel(const char *url, nm_server_t *srv, why_t *why)
{
    int tls = strncmp(url, NM_SENTINEL_TLS_SCHEME, strlen(NM_SENTINEL_TLS_SCHEME)) == 0;
    char *copy = strdup(strstr(url, "://") + 3), *userinfo = NULL, *hosts;
    int err = copy ? 0 : ENOMEM;

    if (!err && strlen(url) > NM_URL_MAX)
        err = refuse(why, "longer than 4096 bytes");
    char *hash = err ? NULL : strrchr(copy, '#');
    if (!err)
        err = parse_name(hash, srv, why);
    if (!err) {
        *hash = '\0';
        char *q = strchr(copy, '?');
        if (q)
            *q++ = '\0';
        err = sentinel_userinfo(q, tls, srv, &userinfo, why);
    }
    if (!err)
        err = parse_head(copy, srv, &hosts, why);
    if (!err)
        err = parse_nodes(hosts, userinfo, tls, srv, why);
    free(copy);
    free(userinfo);
    return err;
}

/* ---- redis-cluster:// ---------------------------------------------------
 * Each host is a seed: any of them that answers tells the slot map.  The
 * credentials are the cluster's (every node shares them), so they come
 * once, before the hosts; a ',' in them must be written %2C.  A cluster has
 * database 0 only, so no /db is accepted but /0. */

/* One seed HOST (LEN bytes) with the credentials USERINFO (NULL: none),
 * over TLS when TLS. */
static int parse_seed(const char *userinfo, size_t ui_len, const char *host, size_t len,
                      int tls, nm_server_t *srv, why_t *why)
{
    size_t size = strlen("rediss://") + ui_len + 1 + len + 1;
    char *url = malloc(size);
    if (!url)
        return ENOMEM;
    snprintf(url, size, "%s%.*s%s%.*s", tls ? "rediss://" : "redis://", (int)ui_len,
             userinfo ? userinfo : "",
             userinfo ? "@" : "", (int)len, host);
    int err = len == 0 ? refuse(why, "an empty seed") : parse_url(url, strlen(url), srv);
    free(url);
    if (!err && srv->db != 0)
        err = refuse(why, "a Redis Cluster has database 0 only");
    return err;
}

static int copy_str(const char *s, char **out)
{
    *out = s ? strdup(s) : NULL;
    return s && !*out ? ENOMEM : 0;
}

/* The first seed again, as the configuration's one server. */
static int first_seed(const nm_server_t *s, nm_urls_t *out)
{
    if (!(out->servers = calloc(1, sizeof *out->servers)))
        return ENOMEM;
    out->n = 1;
    out->servers->port = s->port;
    out->servers->tls = s->tls;
    int err = copy_str(s->host, &out->servers->host);
    if (!err)
        err = copy_str(s->user, &out->servers->user);
    if (!err)
        err = copy_str(s->password, &out->servers->password);
    return err;
}

static int parse_cluster(const char *url, nm_urls_t *out, why_t *why)
{
    int tls = strncmp(url, NM_CLUSTER_TLS_SCHEME, strlen(NM_CLUSTER_TLS_SCHEME)) == 0;
    const char *rest = strstr(url, "://") + 3;
    const char *at = strrchr(rest, '@'), *hosts = at ? at + 1 : rest;
    size_t ui_len = at ? (size_t)(at - rest) : 0, count = 1;
    int err = 0;

    if (strstr(rest, "://"))
        return refuse(why, "a redis-cluster:// URL cannot be part of a list: quorum mode "
                           "with a Redis Cluster is not supported");
    if (at && memchr(rest, ',', ui_len))
        return refuse(why, "a ',' in the credentials must be written %2C");
    for (const char *p = hosts; *p; p++)
        count += *p == ',';
    if (count > NM_CLUSTER_SEEDS_MAX)
        return refuse(why, "more than 16 seeds");
    if (!(out->seeds = calloc(count, sizeof *out->seeds)))
        return ENOMEM;
    for (const char *p = hosts; out->nseeds < count && !err; out->nseeds++) {
        size_t len = strcspn(p, ",");
        err = parse_seed(at ? rest : NULL, ui_len, p, len, tls, &out->seeds[out->nseeds], why);
        p += len + 1;
    }
    return err ? err : first_seed(&out->seeds[0], out);
}

/* ---- any form ------------------------------------------------------------ */

int nm_url_is_sentinel(const char *urls)
{
    return urls && (strncmp(urls, NM_SENTINEL_SCHEME, strlen(NM_SENTINEL_SCHEME)) == 0 ||
                    strncmp(urls, NM_SENTINEL_TLS_SCHEME, strlen(NM_SENTINEL_TLS_SCHEME)) == 0);
}

static int is_cluster(const char *urls)
{
    return strncmp(urls, NM_CLUSTER_SCHEME, strlen(NM_CLUSTER_SCHEME)) == 0 ||
           strncmp(urls, NM_CLUSTER_TLS_SCHEME, strlen(NM_CLUSTER_TLS_SCHEME)) == 0;
}

int nm_url_parse(const char *urls, nm_urls_t *out, char *why_buf, size_t size)
{
    why_t why = { why_buf, size };
    int err;

    memset(out, 0, sizeof *out);
    if (size)
        why_buf[0] = '\0';
    if (urls == NULL || *urls == '\0')
        return EINVAL;
    if (nm_url_is_sentinel(urls)) { /* one server; its commas are its own */
        out->servers = calloc(1, sizeof *out->servers);
        out->n = out->servers ? 1 : 0;
        err = out->servers ? parse_sentinel(urls, out->servers, &why) : ENOMEM;
    } else {
        err = is_cluster(urls) ? parse_cluster(urls, out, &why) : parse_list(urls, out, &why);
    }
    if (err)
        nm_urls_free(out);
    return err;
}
