/*
 * config.c -- building a configuration (settings.h) from the API, the
 * environment and the defaults, and the current configuration.  URLs are
 * url.c's; the state a cluster or a sentinel configuration needs is
 * cluster_state.c's and sentinel.c's.
 *
 * Strict on purpose: a setting that is set must be valid, or
 * netmutex_configure() fails with EINVAL and says which and why, rather
 * than fall back to a default nobody asked for.
 */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_state.h"
#include "config.h"
#include "log.h"
#include "sentinel.h"
#include "tls.h"
#include "tls_config.h"
#include "url.h"

/* ---- building a configuration ---------------------------------------- */

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
        if (nm_parse_uint(s, strlen(s), min, max, &v))
            return bad_setting(env, s, "not a whole number from %u to %u", min, max);
        *out = (unsigned int)v;
    } else {
        *out = dflt;
    }
    if (*out < min || *out > max)
        return bad_setting(env, NULL, "%u is not from %u to %u", *out, min, max);
    return 0;
}

/* A malformed URL, named in a message with every password masked, with
 * WHY (the parser's reason, may be "") and the grammar it should follow. */
static int bad_url(const char *url, const char *why, int from_api)
{
    char shown[512];
    nm_url_mask(url, shown, sizeof shown);
    netmutex_log(NETMUTEX_LOG_ERROR, "%s '%s': %s%s%s",
                 from_api ? "netmutex_config_t.url" : "NETMUTEX_URL", shown, why,
                 *why ? "; " : "", nm_url_grammar(url));
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
    *out = strndup(api, len);
    return *out ? 0 : ENOMEM;
}

static const char *pick_str(const char *api, const char *env, const char *dflt)
{
    const char *s = getenv(env);
    if (api != NULL)
        return api;
    return s != NULL && *s != '\0' ? s : dflt;
}

int nm_config_valid_prefix(const char *prefix)
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

/* The servers URL names, with the state their kind needs: a cluster's
 * (which takes the seeds) and a sentinel's. */
static int use_urls(const char *url, int from_api, nm_config_t *cfg)
{
    char why[160];
    nm_urls_t urls;
    int err = nm_url_parse(url, &urls, why, sizeof why);
    if (err)
        return err == EINVAL ? bad_url(url, why, from_api) : err;
    err = nm_cluster_attach(&urls, &cfg->cluster);
    cfg->servers = urls.servers;
    cfg->nservers = urls.n;
    urls.servers = NULL;
    urls.n = 0;
    nm_urls_free(&urls);
    if (!err)
        err = nm_sentinel_attach(cfg->servers, cfg->nservers);
    return err;
}

/* TLS (tls_config.c): the cluster's seeds dial as its first server. */
static int use_tls(const netmutex_config_t *u, nm_config_t *cfg)
{
    return nm_tls_configure(u, cfg->servers, cfg->nservers, &cfg->tls);
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
    err = use_urls(url, u->url != NULL, cfg);
    if (!err)
        err = use_tls(u, cfg);
    if (err)
        return err;
    prefix = pick_str(u->key_prefix, "NETMUTEX_PREFIX", NM_DEFAULT_PREFIX);
    if (!nm_config_valid_prefix(prefix))
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
    cfg->prefix = strndup(prefix, cfg->prefix_len);
    return cfg->prefix ? 0 : ENOMEM;
}

static void config_free(nm_config_t *cfg)
{
    nm_cluster_free(cfg->cluster);
    for (size_t i = 0; cfg->servers && i < cfg->nservers; i++)
        nm_sentinel_free(cfg->servers[i].sentinel);
    nm_servers_free(cfg->servers, cfg->nservers);
    nm_tls_unref(cfg->tls);
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

int nm_config_prefix(char **out)
{
    const char *prefix;
    int err = 0;
    pthread_mutex_lock(&current_lock);
    prefix = current ? current->prefix : pick_str(NULL, "NETMUTEX_PREFIX", NM_DEFAULT_PREFIX);
    *out = NULL;
    if (!nm_config_valid_prefix(prefix))
        err = EINVAL;
    else if (!(*out = strdup(prefix)))
        err = ENOMEM;
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
