/* url_text.c -- servers and URLs in messages, passwords masked (url.h). */
#include "nm.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "netmutex.h"
#include "url.h"

/* Appends to BUF what FMT says, at LEN; the new length (past SIZE once
 * cut, so that later appends do nothing). */
static size_t putf(char *buf, size_t size, size_t len, const char *fmt, ...)
{
    va_list ap;
    if (len >= size)
        return len;
    va_start(ap, fmt);
    len += (size_t)vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
    return len;
}

static size_t put_host(char *buf, size_t size, size_t len, const char *sep,
                       const nm_server_t *s)
{
    return putf(buf, size, len, strchr(s->host, ':') ? "%s[%s]:%d" : "%s%s:%d", sep, s->host,
                s->port);
}

static const char *auth_shown(const nm_server_t *srv)
{
    return srv->password ? ":***@" : srv->user ? "@" : "";
}

static void describe_sentinel(const nm_server_t *srv, char *buf, size_t size)
{
    int tls = srv->nsentinels && srv->sentinels[0].tls;
    size_t len = putf(buf, size, 0, "%s%s%s", tls ? NM_SENTINEL_TLS_SCHEME : NM_SENTINEL_SCHEME,
                      srv->user ? srv->user : "", auth_shown(srv));
    for (size_t i = 0; i < srv->nsentinels; i++)
        len = put_host(buf, size, len, i ? "," : "", &srv->sentinels[i]);
    if (srv->db)
        len = putf(buf, size, len, "/%d", srv->db);
    if (srv->nsentinels && srv->sentinels[0].password)
        len = putf(buf, size, len, "?sentinel_password=***");
    if (srv->tls != tls)
        len = putf(buf, size, len, "%cmaster_tls=%s", strchr(buf, '?') ? '&' : '?',
                   srv->tls ? "yes" : "no");
    putf(buf, size, len, "#%s", srv->master_name);
}

void nm_url_describe(const nm_server_t *srv, char *buf, size_t size)
{
    const char *user = srv->user ? srv->user : "";
    if (size)
        buf[0] = '\0';
    if (srv->master_name)
        describe_sentinel(srv, buf, size);
    else if (srv->is_unix)
        putf(buf, size, 0, "unix://%s%s%s", user, auth_shown(srv), srv->path);
    else
        put_host(buf, size, putf(buf, size, 0, "%s://%s%s", srv->tls ? "rediss" : "redis", user,
                                 auth_shown(srv)), "", srv);
}

/* A bounded text buffer for messages: what does not fit is cut. */
typedef struct msgbuf {
    char *buf;
    size_t size, len;
} msgbuf_t;

static void out_append(msgbuf_t *out, const char *s, size_t n)
{
    if (out->size == 0)
        return;
    n = NM_MIN(n, out->size - 1 - out->len);
    memcpy(out->buf + out->len, s, n);
    out->len += n;
    out->buf[out->len] = '\0';
}

/* Appends URL[0..LEN) to OUT with its credentials masked: what lies
 * between "//" and the last "@" shows as "***". */
static void append_masked(msgbuf_t *out, const char *url, size_t len)
{
    const char *slash = NULL, *at = NULL;
    for (size_t i = 0; i + 1 < len && !slash; i++)
        slash = url[i] == '/' && url[i + 1] == '/' ? url + i + 2 : NULL;
    for (size_t i = 0; i < len; i++)
        at = url[i] == '@' ? url + i : at;
    if (slash && at && slash < at) {
        out_append(out, url, (size_t)(slash - url));
        out_append(out, "***", 3);
        out_append(out, at, len - (size_t)(at - url));
    } else {
        out_append(out, url, len);
    }
}

/* Whether P starts a URL: a scheme, then "://". */
static int starts_url(const char *p)
{
    size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789+-.");
    return n > 0 && strncmp(p + n, "://", 3) == 0;
}

/* A redis-sentinel:// URL with the data nodes' password (up to the last
 * '@' before the query) and the sentinels' masked. */
static void mask_sentinel(const char *url, msgbuf_t *out)
{
    const char *host = strstr(url, "://") + 3, *q = strchr(host, '?');
    const char *at = NULL, *colon;
    for (const char *p = host; *p && p != q; p++)
        at = *p == '@' ? p : at;
    colon = at ? memchr(host, ':', (size_t)(at - host)) : NULL;
    out_append(out, url, (size_t)((colon ? colon + 1 : host) - url));
    if (colon)
        out_append(out, "***", 3);
    const char *rest = colon ? at : host;
    const char *pw = q ? strstr(q, "sentinel_password=") : NULL;
    if (pw) {
        pw += strlen("sentinel_password=");
        out_append(out, rest, (size_t)(pw - rest));
        out_append(out, "***", 3);
        rest = pw + strcspn(pw, "&#");
    }
    out_append(out, rest, strlen(rest));
}

/* A list is split only at commas that start another URL: a comma elsewhere
 * (a cluster's seeds, or a raw one in a password) stays in its URL, whose
 * password is masked up to its last '@'. */
void nm_url_mask(const char *urls, char *buf, size_t size)
{
    msgbuf_t out = { buf, size, 0 };
    if (size)
        buf[0] = '\0';
    if (nm_url_is_sentinel(urls)) {
        mask_sentinel(urls, &out);
        return;
    }
    for (const char *p = urls; *p;) {
        size_t len = 0;
        while (p[len] && !(len > 0 && p[len - 1] == ',' && starts_url(p + len)))
            len++;
        append_masked(&out, p, len);
        p += len;
    }
}

#define STR_(x) #x
#define STR(x) STR_(x)

const char *nm_url_grammar(const char *urls)
{
    if (nm_url_is_sentinel(urls))
        return "the form is "
               "redis[s]-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]"
               "[?sentinel_user=U&sentinel_password=P&master_tls=yes|no]#MASTERNAME";
    return "not a list of 1 to " STR(NETMUTEX_SERVERS_MAX) " URLs of the forms "
           "redis[s]://[[user]:password@]host[:port][/db] and "
           "unix://[[user]:password@]/path[?db=N], nor one redis[s]-sentinel:// URL, "
           "nor one redis[s]-cluster://[[user]:password@]host[:port][,host[:port]...]";
}
