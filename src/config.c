/*
 * config.c -- URL and environment parsing, and the current configuration.
 *
 * The parser is strict on purpose: a typo in a URL should fail loudly at
 * netmutex_configure() with EINVAL, not turn into a lock that silently talks
 * to the wrong server or database.
 */
#include "nm.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "cluster.h"
#include "config.h"
#include "log.h"
#include "sentinel.h"

/* ---- small string helpers ------------------------------------------ */

static char *dup_range(const char *s, size_t len)
{
    char *p = malloc(len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

/* Parses all of [S, S+LEN) as a decimal number in [MIN, MAX]. */
static int parse_uint_range(const char *s, size_t len, long min, long max, long *out)
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
        if (parse_uint_range(port, (size_t)(p - port), 1, 65535, &v))
            return EINVAL;
        srv->port = (int)v;
    }
    if (p < end && *p == '/') {
        p++;
        if (p < end) {
            if (parse_uint_range(p, (size_t)(end - p), 0, INT_MAX, &v))
                return EINVAL;
            srv->db = (int)v;
        }
        p = end;
    }
    if (p != end)
        return EINVAL;
    srv->host = dup_range(host, hlen);
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
            parse_uint_range(q + 4, qlen - 3, 0, INT_MAX, &v))
            return EINVAL;
        srv->db = (int)v;
    }
    srv->path = dup_range(s, plen);
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
    else
        return EINVAL;
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
    nm_sentinel_free(srv->sentinel);
    free(srv->host);
    free(srv->path);
    free(srv->user);
    free(srv->password);
    memset(srv, 0, sizeof *srv);
}

void nm_servers_free(nm_server_t *servers, size_t n)
{
    for (size_t i = 0; i < n; i++)
        server_clear(&servers[i]);
    free(servers);
}

int nm_config_parse_urls(const char *urls, nm_server_t **servers, size_t *n)
{
    size_t count = 1, i = 0;
    int err = 0;

    if (urls == NULL || *urls == '\0')
        return EINVAL;
    if (nm_sentinel_is_url(urls)) /* one server; its commas are its own */
        return nm_sentinel_parse(urls, servers, n);
    for (const char *p = urls; *p; p++)
        count += *p == ',';
    if (count > NETMUTEX_SERVERS_MAX || strlen(urls) > NETMUTEX_SERVERS_MAX * NM_URL_MAX)
        return EINVAL;
    nm_server_t *list = calloc(count, sizeof *list);
    if (!list)
        return ENOMEM;
    for (const char *p = urls; i < count && !err; i++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        err = parse_url(p, len, &list[i]);
        p += len + 1;
    }
    if (err) {
        nm_servers_free(list, count);
        return err;
    }
    *servers = list;
    *n = count;
    return 0;
}

/* ---- building a configuration ---------------------------------------- */

/* A bounded text buffer for messages: what does not fit is cut. */
typedef struct msgbuf_t {
    char buf[512];
    size_t len;
} msgbuf_t;

static void out_append(msgbuf_t *out, const char *s, size_t n)
{
    n = NM_MIN(n, sizeof out->buf - 1 - out->len);
    memcpy(out->buf + out->len, s, n);
    out->len += n;
    out->buf[out->len] = '\0';
}

/* Says which setting is wrong and why: "EINVAL" alone leaves a user to
 * guess among a dozen variables.  ENV is the variable's name; the field of
 * netmutex_config_t is named alike ("NETMUTEX_LEASE_MS": lease_ms).  VALUE
 * is the text given, or NULL when the API's number was wrong. */
static int bad_setting(const char *env, const char *value, const char *why, ...)
{
    char field[64], reason[160];
    va_list ap;
    size_t i = 0;
    for (const char *p = env + strlen("NETMUTEX_"); *p && i < sizeof field - 1; p++)
        field[i++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    field[i] = '\0';
    va_start(ap, why);
    vsnprintf(reason, sizeof reason, why, ap);
    va_end(ap);
    if (value)
        netmutex_log(NETMUTEX_LOG_ERROR, "%s=%s: %s", env, value, reason);
    else
        netmutex_log(NETMUTEX_LOG_ERROR, "netmutex_config_t.%s: %s", field, reason);
    return EINVAL;
}

/* The API value when given, else the environment variable, else DEFAULT.
 * A variable that is set must be valid: EINVAL, never a silent default. */
static int pick_uint(unsigned int api, const char *env, unsigned int dflt,
                     unsigned int min, unsigned int max, unsigned int *out)
{
    const char *s = getenv(env);
    long v;

    if (api != 0) {
        *out = api;
    } else if (s != NULL && *s != '\0') {
        if (parse_uint_range(s, strlen(s), min, max, &v))
            return bad_setting(env, s, "not a whole number from %u to %u", min, max);
        *out = (unsigned int)v;
    } else {
        *out = dflt;
    }
    if (*out < min || *out > max)
        return bad_setting(env, NULL, "%u is not from %u to %u", *out, min, max);
    return 0;
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

/* A malformed URL list, named in a message with every password masked.
 * The list is split only at commas that start another URL: a comma
 * elsewhere (a cluster's seeds, or a raw one in a password) stays in its
 * URL, whose password is masked up to its last '@'. */
static int bad_url(const char *url, int from_api)
{
    msgbuf_t shown = { { 0 }, 0 };
    if (nm_sentinel_is_url(url))
        return nm_sentinel_bad_url(url, from_api);
    for (const char *p = url; *p;) {
        size_t len = 0;
        while (p[len] && !(len > 0 && p[len - 1] == ',' && starts_url(p + len)))
            len++;
        append_masked(&shown, p, len);
        p += len;
    }
    netmutex_log(NETMUTEX_LOG_ERROR, "%s '%s': not a list of 1 to %d URLs of the forms "
                 "redis://[[user]:password@]host[:port][/db] and "
                 "unix://[[user]:password@]/path[?db=N], nor one redis-sentinel:// URL, "
                 "nor one redis-cluster://[[user]:password@]host[:port][,host[:port]...]",
                 from_api ? "netmutex_config_t.url" : "NETMUTEX_URL", shown.buf,
                 NETMUTEX_SERVERS_MAX);
    return EINVAL;
}

/* A 0/1 switch: the API's 1, else the variable ("0" or "1"), else 0. */
static int pick_flag(int api, const char *env, int *out)
{
    const char *s = getenv(env);
    if (api != 0 && api != 1)
        return bad_setting(env, NULL, "%d is neither 0 nor 1", api);
    if (api || !s || !*s) {
        *out = api;
        return 0;
    }
    if (strcmp(s, "0") != 0 && strcmp(s, "1") != 0)
        return bad_setting(env, s, "neither 0 nor 1");
    *out = *s == '1';
    return 0;
}

/* The holder description: printable, short enough to leave room for the
 * thread id within NETMUTEX_HOLDER_MAX. */
static int pick_holder(const char *api, char **out)
{
    size_t len;
    *out = NULL;
    if (!api)
        return 0;
    len = strnlen(api, NM_HOLDER_MAX + 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)api[i] < 0x20 || api[i] == 0x7f)
            len = 0;
    if (len == 0 || len > NM_HOLDER_MAX)
        return bad_setting("NETMUTEX_HOLDER", NULL, "1 to %u printable bytes", NM_HOLDER_MAX);
    *out = dup_range(api, len);
    return *out ? 0 : ENOMEM;
}

static const char *pick_str(const char *api, const char *env, const char *dflt)
{
    const char *s = getenv(env);
    if (api != NULL)
        return api;
    return s != NULL && *s != '\0' ? s : dflt;
}

static int valid_prefix(const char *prefix)
{
    size_t len = strnlen(prefix, NM_PREFIX_MAX + 1);
    /* Braces would move the {<tag>} hash tag that keeps a mutex's keys in
     * one cluster slot (keys.h). */
    return len <= NM_PREFIX_MAX && !strpbrk(prefix, "{}");
}

/* Cohort hand-off: 0 turns disables it, which the API spells with the
 * sentinel NETMUTEX_COHORT_OFF because 0 means "the default" there. */
static int pick_cohort(const netmutex_config_t *u, nm_config_t *cfg)
{
    unsigned int api = u->cohort_max == NETMUTEX_COHORT_OFF ? 0 : u->cohort_max;
    const char *env = getenv("NETMUTEX_COHORT_MAX");
    int err;

    if (u->cohort_max == NETMUTEX_COHORT_OFF || (!u->cohort_max && env && !strcmp(env, "0"))) {
        cfg->cohort_max = 0;
        err = 0;
    } else {
        err = pick_uint(api, "NETMUTEX_COHORT_MAX", NM_DEFAULT_COHORT_MAX, 1, 1000000,
                        &cfg->cohort_max);
    }
    if (!err)
        err = pick_uint(u->cohort_ms, "NETMUTEX_COHORT_MS", NM_DEFAULT_COHORT_MS, 1, 60000,
                        &cfg->cohort_ms);
    return err;
}

/* Lease caching: off with NETMUTEX_CACHE_OFF or NETMUTEX_CACHE=0 (which a
 * program's own setting does not override: it is the switch for running
 * an unchanged program without caching); else the idle time. */
static int pick_cache(const netmutex_config_t *u, nm_config_t *cfg)
{
    const char *env = getenv("NETMUTEX_CACHE");
    if (env && *env && strcmp(env, "0") != 0 && strcmp(env, "1") != 0)
        return bad_setting("NETMUTEX_CACHE", env, "neither 0 nor 1");
    cfg->cache = u->cache_idle_ms != NETMUTEX_CACHE_OFF && !(env && strcmp(env, "0") == 0);
    if (!cfg->cache)
        return 0;
    return pick_uint(u->cache_idle_ms, "NETMUTEX_CACHE_IDLE_MS", NM_DEFAULT_CACHE_IDLE_MS, 1,
                     NM_TIMEOUT_MAX_MS, &cfg->cache_idle_ms);
}

static int pick_double(double api, const char *env, double dflt, double min, double max,
                       double *out)
{
    const char *s = getenv(env);
    char *end;

    if (api != 0) {
        *out = api;
    } else if (s != NULL && *s != '\0') {
        errno = 0;
        *out = strtod(s, &end);
        if (errno || end == s || *end != '\0' || !(*out > min && *out <= max))
            return bad_setting(env, s, "not a number above %g and at most %g", min, max);
    } else {
        *out = dflt;
    }
    if (!(*out > min && *out <= max))
        return bad_setting(env, NULL, "%g is not above %g and at most %g", *out, min, max);
    return 0;
}

/* Quorum mode's timing: the per-server bound defaults to a fiftieth of the
 * lease, so a slow server costs little of a grant's validity. */
static int pick_quorum(const netmutex_config_t *u, nm_config_t *cfg)
{
    unsigned int dflt = NM_MIN(NM_MAX(cfg->lease_ms / 50, 10u), cfg->io_timeout_ms);
    int err = pick_uint(u->server_timeout_ms, "NETMUTEX_SERVER_TIMEOUT_MS", dflt, 1,
                        NM_TIMEOUT_MAX_MS, &cfg->server_timeout_ms);
    if (!err)
        err = pick_double(u->drift_factor, "NETMUTEX_DRIFT_FACTOR", NM_DEFAULT_DRIFT_FACTOR,
                          0.0, 0.25, &cfg->drift_factor);
    if (!err)
        err = pick_uint(u->drift_ms, "NETMUTEX_DRIFT_MS", NM_DEFAULT_DRIFT_MS, 1, 60000,
                        &cfg->drift_ms);
    cfg->quorum = cfg->nservers / 2 + 1;
    return err;
}

/* Replica acknowledgement (replicas.h): WAIT is per connection, so it
 * applies to one server, not to quorum mode's independent masters. */
static int pick_replicas(const netmutex_config_t *u, nm_config_t *cfg)
{
    const char *env = getenv("NETMUTEX_MIN_REPLICAS");
    int err = pick_uint(u->min_replicas, "NETMUTEX_MIN_REPLICAS", 0, 0, NM_MIN_REPLICAS_MAX,
                        &cfg->min_replicas);
    if (!err)
        err = pick_uint(u->replica_timeout_ms, "NETMUTEX_REPLICA_TIMEOUT_MS",
                        NM_DEFAULT_REPLICA_TIMEOUT_MS, 1, NM_TIMEOUT_MAX_MS,
                        &cfg->replica_timeout_ms);
    if (!err && cfg->min_replicas && cfg->nservers > 1)
        err = bad_setting("NETMUTEX_MIN_REPLICAS", u->min_replicas ? NULL : env,
                          "replica acknowledgement needs one server, not a quorum list");
    return err;
}

/* Whether the room kept for later versions' settings is zero, as it must
 * be: a later library will read a setting there, and garbage left by a
 * program that did not zero the struct would then become one. */
static int reserved_zero(const netmutex_config_t *u)
{
    for (size_t i = 0; i < sizeof u->nm_reserved / sizeof u->nm_reserved[0]; i++)
        if (u->nm_reserved[i] != NULL) {
            netmutex_log(NETMUTEX_LOG_ERROR, "netmutex_config_t.nm_reserved: must be zero");
            return 0;
        }
    return 1;
}

static int fill_config(const netmutex_config_t *u, nm_config_t *cfg)
{
    static const netmutex_config_t none;
    const char *prefix;
    int err;

    if (u == NULL)
        u = &none;
    if (!reserved_zero(u))
        return EINVAL;
    const char *url = pick_str(u->url, "NETMUTEX_URL", NM_DEFAULT_URL);
    err = nm_cluster_parse_url(url, &cfg->servers, &cfg->nservers, &cfg->cluster);
    if (err == ENOENT && (err = nm_config_parse_urls(url, &cfg->servers, &cfg->nservers)) == 0)
        err = nm_cluster_attach(cfg->servers, cfg->nservers, &cfg->cluster);
    if (err == EINVAL)
        return bad_url(url, u->url != NULL);
    if (err)
        return err;
    prefix = pick_str(u->key_prefix, "NETMUTEX_PREFIX", NM_DEFAULT_PREFIX);
    if (!valid_prefix(prefix))
        return bad_setting("NETMUTEX_PREFIX", u->key_prefix ? NULL : prefix,
                           "at most %u bytes, without { or }", NM_PREFIX_MAX);
    err = pick_uint(u->connect_timeout_ms, "NETMUTEX_CONNECT_TIMEOUT_MS",
                    NM_DEFAULT_CONNECT_TIMEOUT_MS, 1, NM_TIMEOUT_MAX_MS,
                    &cfg->connect_timeout_ms);
    if (!err)
        err = pick_uint(u->io_timeout_ms, "NETMUTEX_IO_TIMEOUT_MS",
                        NM_DEFAULT_IO_TIMEOUT_MS, 1, NM_TIMEOUT_MAX_MS,
                        &cfg->io_timeout_ms);
    if (!err)
        err = pick_uint(u->lease_ms, "NETMUTEX_LEASE_MS", NM_DEFAULT_LEASE_MS,
                        NETMUTEX_LEASE_MIN_MS, NETMUTEX_LEASE_MAX_MS, &cfg->lease_ms);
    if (!err)
        err = pick_uint(u->renew_percent, "NETMUTEX_RENEW_PERCENT", NM_DEFAULT_RENEW_PERCENT,
                        5, 80, &cfg->renew_percent);
    if (!err)
        err = pick_cohort(u, cfg);
    if (!err)
        err = pick_quorum(u, cfg);
    if (!err)
        err = pick_flag(u->allow_eviction, "NETMUTEX_ALLOW_EVICTION", &cfg->allow_eviction);
    if (!err)
        err = pick_holder(u->holder, &cfg->holder);
    if (!err)
        err = pick_cache(u, cfg);
    if (!err)
        err = pick_replicas(u, cfg);
    if (err)
        return err;
    cfg->on_lost = u->on_lost;
    cfg->on_lost_arg = u->on_lost_arg;
    cfg->prefix_len = strlen(prefix);
    cfg->prefix = dup_range(prefix, cfg->prefix_len);
    return cfg->prefix ? 0 : ENOMEM;
}

static void config_free(nm_config_t *cfg)
{
    nm_cluster_free(cfg->cluster);
    nm_servers_free(cfg->servers, cfg->nservers);
    free(cfg->prefix);
    free(cfg->holder);
    free(cfg);
}

int nm_config_build(const netmutex_config_t *user, nm_config_t **out)
{
    static uint64_t next_generation; /* atomic */
    nm_config_t *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return ENOMEM;
    int err = fill_config(user, cfg);
    if (err) {
        config_free(cfg);
        return err;
    }
    cfg->refs = 1;
    cfg->generation = __atomic_add_fetch(&next_generation, 1, __ATOMIC_RELAXED);
    *out = cfg;
    return 0;
}

nm_config_t *nm_config_ref(nm_config_t *cfg)
{
    __atomic_add_fetch(&cfg->refs, 1, __ATOMIC_RELAXED);
    return cfg;
}

void nm_config_unref(nm_config_t *cfg)
{
    if (cfg && __atomic_sub_fetch(&cfg->refs, 1, __ATOMIC_ACQ_REL) == 0)
        config_free(cfg);
}

/* ---- the current configuration ---------------------------------------- */

static pthread_mutex_t current_lock = PTHREAD_MUTEX_INITIALIZER;
static nm_config_t *current;          /* guarded by current_lock */
static uint64_t current_generation;   /* atomic copy of current->generation */

static void set_current(nm_config_t *cfg)
{
    current = cfg;
    __atomic_store_n(&current_generation, cfg ? cfg->generation : 0, __ATOMIC_RELEASE);
}

int nm_config_current(nm_config_t **out)
{
    int err = 0;
    pthread_mutex_lock(&current_lock);
    if (current == NULL) {
        nm_config_t *cfg;
        err = nm_config_build(NULL, &cfg);
        if (!err)
            set_current(cfg);
    }
    if (!err)
        *out = nm_config_ref(current);
    pthread_mutex_unlock(&current_lock);
    return err;
}

uint64_t nm_config_current_generation(void)
{
    return __atomic_load_n(&current_generation, __ATOMIC_ACQUIRE);
}

int nm_config_replace(nm_config_t *cfg, int (*busy)(void))
{
    nm_config_t *old;
    pthread_mutex_lock(&current_lock);
    if (busy()) {
        pthread_mutex_unlock(&current_lock);
        nm_config_unref(cfg);
        return EBUSY;
    }
    old = current;
    set_current(cfg);
    pthread_mutex_unlock(&current_lock);
    nm_config_unref(old);
    return 0;
}

/* pthread_atfork: the watchdog thread takes current_lock when it follows a
 * new configuration; a fork at that moment must not leave it locked in the
 * child. */
void nm_config_before_fork(void) { pthread_mutex_lock(&current_lock); }
void nm_config_after_fork(void) { pthread_mutex_unlock(&current_lock); }
