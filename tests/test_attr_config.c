/*
 * test_attr_config.c -- mutex attributes and the global configuration:
 * accessors and their bounds, URL parsing (many malformed URLs, the
 * accepted forms), a lock actually going through a TCP URL and landing in
 * the database the URL names, key prefix and lease limits, the environment
 * fallback, and reconfiguring (refused while something is held; each
 * thread re-dials with the new settings).
 */
#include "ac_config.h"

#include "fixture.h"

#include <limits.h>
#include <string.h>

static NmRedis *redis;

/* ---- attributes ---------------------------------------------------------- */

static void test_attr_defaults(void)
{
    netmutex_attr_t attr;
    int type = -1;
    unsigned int lease = 1;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_gettype(&attr, &type), 0);
    g_assert_cmpint(type, ==, NETMUTEX_DEFAULT);
    nm_assert_rc(netmutex_attr_getlease(&attr, &lease), 0);
    g_assert_cmpuint(lease, ==, 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
}

static void test_attr_null(void)
{
    netmutex_attr_t attr;
    int type;
    unsigned int lease;

    nm_assert_rc(netmutex_attr_init(NULL), EINVAL);
    nm_assert_rc(netmutex_attr_destroy(NULL), EINVAL);
    nm_assert_rc(netmutex_attr_settype(NULL, NETMUTEX_NORMAL), EINVAL);
    nm_assert_rc(netmutex_attr_gettype(NULL, &type), EINVAL);
    nm_assert_rc(netmutex_attr_setlease(NULL, 1000), EINVAL);
    nm_assert_rc(netmutex_attr_getlease(NULL, &lease), EINVAL);
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_gettype(&attr, NULL), EINVAL);
    nm_assert_rc(netmutex_attr_getlease(&attr, NULL), EINVAL);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
}

static void test_attr_type(void)
{
    static const int good[] = { NETMUTEX_NORMAL, NETMUTEX_ERRORCHECK,
                                NETMUTEX_RECURSIVE, NETMUTEX_DEFAULT };
    static const int bad[] = { -1, 3, 42, INT_MAX, INT_MIN };
    netmutex_attr_t attr;
    int type;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    for (gsize i = 0; i < G_N_ELEMENTS(good); i++) {
        nm_assert_rc(netmutex_attr_settype(&attr, good[i]), 0);
        nm_assert_rc(netmutex_attr_gettype(&attr, &type), 0);
        g_assert_cmpint(type, ==, good[i]);
    }
    nm_assert_rc(netmutex_attr_settype(&attr, NETMUTEX_RECURSIVE), 0);
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_test_message("type %d", bad[i]);
        nm_assert_rc(netmutex_attr_settype(&attr, bad[i]), EINVAL);
        /* A refused value leaves the attribute as it was. */
        nm_assert_rc(netmutex_attr_gettype(&attr, &type), 0);
        g_assert_cmpint(type, ==, NETMUTEX_RECURSIVE);
    }
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
}

static void test_attr_lease(void)
{
    static const unsigned int good[] = { 0, NETMUTEX_LEASE_MIN_MS, 1000,
                                         NETMUTEX_LEASE_MAX_MS };
    static const unsigned int bad[] = { 1, NETMUTEX_LEASE_MIN_MS - 1,
                                        NETMUTEX_LEASE_MAX_MS + 1, UINT_MAX };
    netmutex_attr_t attr;
    unsigned int lease;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    for (gsize i = 0; i < G_N_ELEMENTS(good); i++) {
        nm_assert_rc(netmutex_attr_setlease(&attr, good[i]), 0);
        nm_assert_rc(netmutex_attr_getlease(&attr, &lease), 0);
        g_assert_cmpuint(lease, ==, good[i]);
    }
    nm_assert_rc(netmutex_attr_setlease(&attr, 1234), 0);
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_test_message("lease %u", bad[i]);
        nm_assert_rc(netmutex_attr_setlease(&attr, bad[i]), EINVAL);
        nm_assert_rc(netmutex_attr_getlease(&attr, &lease), 0);
        g_assert_cmpuint(lease, ==, 1234);
    }
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
}

/* ---- URLs ----------------------------------------------------------------- */

static netmutex_config_t url_config(const char *url)
{
    netmutex_config_t cfg = { .url = url };

    return cfg;
}

static int configure_url(const char *url)
{
    netmutex_config_t cfg = url_config(url);

    return netmutex_configure(&cfg);
}

static void test_url_malformed(void)
{
    static const char *const bad[] = {
        "",
        "127.0.0.1:6379",                   /* no scheme */
        "//127.0.0.1:6379",
        "http://127.0.0.1:6379",            /* unknown scheme */
        "redis:/127.0.0.1:6379",
        "redis://",                         /* empty host */
        "redis://:6379",
        "redis://user:pw@:6379",
        "redis://127.0.0.1:",               /* empty port */
        "redis://127.0.0.1:0",              /* port out of range */
        "redis://127.0.0.1:65536",
        "redis://127.0.0.1:70000",
        "redis://127.0.0.1:-1",
        "redis://127.0.0.1:abc",
        "redis://127.0.0.1:63 79",
        "redis://127.0.0.1:6379/-1",        /* bad db */
        "redis://127.0.0.1:6379/x",
        "redis://127.0.0.1:6379/1x",
        "redis://127.0.0.1:6379/99999999999999999999",
        "redis://127.0.0.1:6379/0/1",       /* trailing garbage */
        "redis://127.0.0.1:6379/0 ",
        "redis://127.0.0.1:6379 ",
        "redis://[::1",                     /* unclosed IPv6 bracket */
        "redis://[::1]x:6379",
        "redis://u:%zz@127.0.0.1",          /* bad escapes */
        "redis://u:%4@127.0.0.1",
        "redis://u:%@127.0.0.1",
        "unix://",                          /* empty path */
        "unix://relative/path.sock",        /* relative path */
        "unix://./redis.sock",
        "unix:///tmp/x.sock?db=",           /* bad db parameter */
        "unix:///tmp/x.sock?db=x",
        "unix:///tmp/x.sock?db=-1",
        "unix:///tmp/x.sock?db=1x",
        "unix:///tmp/x.sock?bogus=1",
        NULL,
    };

    for (const char *const *url = bad; *url; url++) {
        g_test_message("url \"%s\"", *url);
        nm_assert_rc(configure_url(*url), EINVAL);
    }
}

/* Longer than any path a unix socket can have, and a very long host. */
static void test_url_too_long(void)
{
    char *path = g_strnfill(200, 'p');
    char *unix_url = g_strdup_printf("unix:///tmp/%s.sock", path);
    char *host = g_strnfill(100000, 'h');
    char *tcp_url = g_strdup_printf("redis://%s:6379", host);

    nm_assert_rc(configure_url(unix_url), EINVAL);
    nm_assert_rc(configure_url(tcp_url), EINVAL);
    g_free(tcp_url);
    g_free(host);
    g_free(unix_url);
    g_free(path);
}

/* Well-formed URLs are accepted without dialing (the hosts need not
 * exist: each thread dials on its next call). */
static void test_url_accepted(void)
{
    static const char *const good[] = {
        "redis://127.0.0.1",
        "redis://127.0.0.1:6379",
        "redis://127.0.0.1:65535/15",
        "redis://localhost:6379/0",
        "redis://redis.example.invalid:6379",
        "redis://[::1]:6379/2",
        "redis://user:pass@127.0.0.1:6379/3",
        "redis://:pass@127.0.0.1",
        "redis://us%65r:p%40ss@127.0.0.1:6379",
        "unix:///tmp/redis.sock",
        "unix:///tmp/redis.sock?db=3",
        "unix://:pass@/tmp/redis.sock",
        "unix://user:pass@/tmp/redis.sock?db=0",
        NULL,
    };

    for (const char *const *url = good; *url; url++) {
        g_test_message("url \"%s\"", *url);
        nm_assert_rc(configure_url(*url), 0);
    }
    nm_configure(redis);
}

/* Quorum lists: 2 to NETMUTEX_SERVERS_MAX valid URLs; one bad URL or one
 * too many spoils the list.  The servers need not be up to configure. */
static void test_url_quorum_list(void)
{
    GString *many = g_string_new("unix:///tmp/s0.sock");

    nm_assert_rc(configure_url("unix:///tmp/a.sock,unix:///tmp/b.sock"), 0);
    nm_assert_rc(configure_url("unix:///tmp/a.sock,redis://127.0.0.1:1,redis://[::1]:2"), 0);
    nm_assert_rc(configure_url("unix:///tmp/a.sock,,unix:///tmp/b.sock"), EINVAL);
    nm_assert_rc(configure_url("unix:///tmp/a.sock,http://x"), EINVAL);
    nm_assert_rc(configure_url("unix:///tmp/a.sock,"), EINVAL);
    for (int i = 1; i < NETMUTEX_SERVERS_MAX; i++)
        g_string_append_printf(many, ",unix:///tmp/s%d.sock", i);
    nm_assert_rc(configure_url(many->str), 0);
    g_string_append(many, ",unix:///tmp/one-too-many.sock");
    nm_assert_rc(configure_url(many->str), EINVAL);
    nm_configure(redis);
    g_string_free(many, TRUE);
}

/* Locks a mutex named after SUFFIX through URL and, while it is held,
 * returns its token as stored in DB (NULL if not there).  If OTHER_DB >= 0,
 * also asserts that the key is not in OTHER_DB. */
static char *lock_through(const char *url, const char *suffix, int db, int other_db)
{
    netmutex_t m;
    char *name = nm_test_name(suffix);
    char *key = nm_lock_key(name);
    char *token;

    g_test_message("url %s", url);
    nm_assert_rc(configure_url(url), 0);
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_redis_get(redis, db, key, strlen(key));
    if (token && strlen(token) > 32)
        token[32] = '\0'; /* the value starts with the token (lib.lua) */
    if (other_db >= 0)
        g_assert_null(nm_redis_get(redis, other_db, key, strlen(key)));
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_configure(redis);
    g_free(key);
    g_free(name);
    return token;
}

static void test_url_tcp_lock_works(void)
{
    char *url = nm_redis_tcp_url(redis, -1);
    char *token = lock_through(url, "tcp", 0, -1);

    g_assert_true(nm_is_token(token));
    g_free(token);
    g_free(url);
}

static void test_url_tcp_db(void)
{
    char *url = nm_redis_tcp_url(redis, 5);

    char *token = lock_through(url, "tcp-db5", 5, 0);

    g_assert_true(nm_is_token(token));
    g_free(token);
    g_free(url);
}

static void test_url_unix_db(void)
{
    char *url = g_strdup_printf("unix://%s?db=3", nm_redis_socket(redis));

    char *token = lock_through(url, "unix-db3", 3, 0);

    g_assert_true(nm_is_token(token));
    g_free(token);
    g_free(url);
}

/* ---- other configuration values ------------------------------------------ */

static void test_prefix_limits(void)
{
    char *url = nm_redis_url(redis);
    char *max = g_strnfill(256, 'p');
    char *over = g_strnfill(257, 'p');
    static const char *const bad[] = { "a{b", "a}b", "{", "}", "x{y}:", NULL };
    netmutex_config_t cfg = { .url = url };

    for (const char *const *p = bad; *p; p++) {
        cfg.key_prefix = *p;
        g_test_message("prefix \"%s\"", *p);
        nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    }
    cfg.key_prefix = over;
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    cfg.key_prefix = max;
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_configure(redis);
    g_free(over);
    g_free(max);
    g_free(url);
}

/* The room kept for later settings must be zero: a later library would
 * read garbage there as a setting. */
static void test_reserved_nonzero(void)
{
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url };
    size_t n = sizeof cfg.nm_reserved / sizeof cfg.nm_reserved[0];

    for (size_t i = 0; i < n; i++) {
        cfg.nm_reserved[i] = &cfg;
        nm_assert_rc(netmutex_configure(&cfg), EINVAL);
        cfg.nm_reserved[i] = NULL;
    }
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_configure(redis);
    g_free(url);
}

static void test_lease_limits(void)
{
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url };

    cfg.lease_ms = NETMUTEX_LEASE_MIN_MS - 1;
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    cfg.lease_ms = NETMUTEX_LEASE_MAX_MS + 1;
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    cfg.lease_ms = NETMUTEX_LEASE_MAX_MS;
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_configure(redis);
    g_free(url);
}

static void test_renew_percent_limits(void)
{
    static const unsigned int good[] = { 0, 5, 33, 80 };
    static const unsigned int bad[] = { 1, 4, 81, 100, 1000 };
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url };

    for (gsize i = 0; i < G_N_ELEMENTS(good); i++) {
        cfg.renew_percent = good[i];
        nm_assert_rc(netmutex_configure(&cfg), 0);
    }
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_test_message("renew_percent %u", bad[i]);
        cfg.renew_percent = bad[i];
        nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    }
    nm_configure(redis);
    g_free(url);
}

/* cfg.lease_ms is the default lease; an attribute's lease overrides it. */
static void test_default_lease_applies(void)
{
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url, .lease_ms = 7000 };
    netmutex_t plain, leased;
    char *plain_name, *leased_name, *key;
    long long pttl;

    nm_assert_rc(netmutex_configure(&cfg), 0);
    plain_name = nm_mutex_init(&plain, "plain", NETMUTEX_NORMAL, 0);
    leased_name = nm_mutex_init(&leased, "leased", NETMUTEX_NORMAL, 3000);
    nm_assert_rc(netmutex_lock(&plain), 0);
    nm_assert_rc(netmutex_lock(&leased), 0);

    key = nm_lock_key(plain_name);
    pttl = nm_redis_pttl(redis, key);
    g_assert_cmpint(pttl, >, 3000); /* > the other lease: not a coincidence */
    g_assert_cmpint(pttl, <=, 7000);
    g_free(key);
    key = nm_lock_key(leased_name);
    pttl = nm_redis_pttl(redis, key);
    g_assert_cmpint(pttl, >, 0);
    g_assert_cmpint(pttl, <=, 3000);
    g_free(key);

    nm_assert_rc(netmutex_unlock(&leased), 0);
    nm_assert_rc(netmutex_unlock(&plain), 0);
    nm_assert_rc(netmutex_destroy(&leased), 0);
    nm_assert_rc(netmutex_destroy(&plain), 0);
    nm_configure(redis);
    g_free(leased_name);
    g_free(plain_name);
    g_free(url);
}

/* ---- environment ------------------------------------------------------------ */

static void lock_unlock_once(const char *suffix)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, suffix, NETMUTEX_NORMAL, 0);

    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_env_url(void)
{
    char *url = nm_redis_url(redis);

    g_setenv("NETMUTEX_URL", url, TRUE);
    nm_assert_rc(netmutex_configure(NULL), 0);
    lock_unlock_once("m");
    g_setenv("NETMUTEX_URL", "bogus://", TRUE);
    nm_assert_rc(netmutex_configure(NULL), EINVAL);
    g_unsetenv("NETMUTEX_URL");
    nm_configure(redis);
    g_free(url);
}

static void test_env_prefix(void)
{
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url };
    netmutex_t m;
    char *name, *key, *token;

    g_setenv("NETMUTEX_PREFIX", "envpfx:", TRUE);
    nm_assert_rc(netmutex_configure(&cfg), 0);
    name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    key = nm_key_of("envpfx:", name, "");
    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_redis_get(redis, 0, key, strlen(key));
    g_assert_true(nm_is_token(token));
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_unsetenv("NETMUTEX_PREFIX");
    nm_configure(redis);
    g_free(token);
    g_free(key);
    g_free(name);
    g_free(url);
}

/* The quorum timing settings: API fields, then the environment; a value out
 * of range is EINVAL wherever it comes from. */
static void test_quorum_timing_settings(void)
{
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url };
    static const char *const bad_factor[] = { "0", "-0.1", "0.3", "x", "0.01x", NULL };

    cfg.drift_factor = 0.05;
    cfg.drift_ms = 5;
    cfg.server_timeout_ms = 20;
    nm_assert_rc(netmutex_configure(&cfg), 0);
    cfg.drift_factor = 0.5;
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    cfg.drift_factor = -1;
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    /* Fields left 0 fall back to the environment. */
    cfg.drift_factor = 0;
    cfg.drift_ms = 0;
    cfg.server_timeout_ms = 0;
    for (const char *const *v = bad_factor; *v; v++) {
        g_setenv("NETMUTEX_DRIFT_FACTOR", *v, TRUE);
        nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    }
    g_setenv("NETMUTEX_DRIFT_FACTOR", "0.02", TRUE);
    g_setenv("NETMUTEX_DRIFT_MS", "70000", TRUE);
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    g_setenv("NETMUTEX_DRIFT_MS", "3", TRUE);
    g_setenv("NETMUTEX_SERVER_TIMEOUT_MS", "0", TRUE);
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    g_setenv("NETMUTEX_SERVER_TIMEOUT_MS", "30", TRUE);
    nm_assert_rc(netmutex_configure(&cfg), 0);
    g_unsetenv("NETMUTEX_DRIFT_FACTOR");
    g_unsetenv("NETMUTEX_DRIFT_MS");
    g_unsetenv("NETMUTEX_SERVER_TIMEOUT_MS");
    lock_unlock_once("m");
    nm_configure(redis);
    g_free(url);
}

/* After shutdown the configuration is forgotten: the next call configures
 * itself from the environment. */
static void test_shutdown_reconfigures_from_env(void)
{
    char *url = nm_redis_url(redis);

    nm_assert_rc(netmutex_shutdown(), 0);
    g_setenv("NETMUTEX_URL", url, TRUE);
    lock_unlock_once("m");
    g_unsetenv("NETMUTEX_URL");
    nm_configure(redis);
    g_free(url);
}

/* ---- reconfiguring ------------------------------------------------------------ */

static void test_configure_busy_while_held(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url };

    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_configure(&cfg), EBUSY);
    nm_assert_rc(netmutex_shutdown(), EBUSY);
    /* The refusals did not disturb the held lock. */
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(url);
    g_free(name);
}

/* The worker's lock lands in DB while held; then it unlocks. */
static void worker_lock_in_db(NmWorker *w, const char *key, int db)
{
    char *token;

    nm_assert_rc(nm_worker(w, 'l'), 0);
    token = nm_redis_get(redis, db, key, strlen(key));
    g_assert_true(nm_is_token(token));
    nm_assert_rc(nm_worker(w, 'u'), 0);
    g_free(token);
}

static void test_reconfigure_thread_redials(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *key = nm_lock_key(name);
    char *db0 = nm_redis_tcp_url(redis, 0);
    char *db7 = nm_redis_tcp_url(redis, 7);
    NmWorker *w;

    nm_assert_rc(configure_url(db0), 0);
    w = nm_worker_start(&m);
    worker_lock_in_db(w, key, 0);
    /* Nothing is held now: reconfiguring is allowed, and the worker's
     * existing connection must not be reused for the new settings. */
    nm_assert_rc(configure_url(db7), 0);
    worker_lock_in_db(w, key, 7);
    nm_worker_stop(w);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_configure(redis);
    g_free(db7);
    g_free(db0);
    g_free(key);
    g_free(name);
}

static void test_configure_unreachable_accepted(void)
{
    nm_assert_rc(configure_url("redis://127.0.0.1:1"), 0);
    nm_configure(redis);
}

/* ---- netmutex_acl_rule --------------------------------------------------- */

/* The rule for the default prefix, as netmutex_acl_rule(3) prints it. */
#define ACL_COMMANDS                                                          \
    "-@all +ping +info +select +evalsha +script|load +get +set +del "        \
    "+pexpire +pttl +time +rpush +lpop +lrem +llen +hget +hset +hdel +hlen " \
    "+lrange +hexists +publish +spublish +cluster|keyslot +zadd +zscore "    \
    "+zrem +zrange +zremrangebyscore +zcard +incr +sadd +srem +smembers +blpop +subscribe " \
    "+unsubscribe +ssubscribe +sunsubscribe +wait +role +scan +cluster|slots +asking"

static char *acl_patterns(const char *keys, const char *channels)
{
    return g_strdup_printf("resetkeys %s resetchannels %s " ACL_COMMANDS, keys, channels);
}

static void assert_rule(const char *prefix, const char *keys, const char *channels)
{
    char buf[NETMUTEX_ACL_RULE_MAX];
    char *want = acl_patterns(keys, channels);

    nm_assert_rc(netmutex_acl_rule(prefix, buf, sizeof buf), 0);
    g_assert_cmpstr(buf, ==, want);
    g_free(want);
}

static void test_acl_rule_default(void)
{
    assert_rule("netmutex:", "~netmutex:*", "&netmutex:*");
    assert_rule(NULL, "~netmutex:*", "&netmutex:*");
    assert_rule("", "~*", "&*");
}

/* NULL: the configured prefix, else the environment's, else the default. */
static void test_acl_rule_which_prefix(void)
{
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url, .key_prefix = "cfg:" };
    char buf[NETMUTEX_ACL_RULE_MAX];

    nm_assert_rc(netmutex_configure(&cfg), 0);
    assert_rule(NULL, "~cfg:*", "&cfg:*");
    g_setenv("NETMUTEX_PREFIX", "envpfx:", TRUE);
    assert_rule(NULL, "~cfg:*", "&cfg:*"); /* configured: the environment is not read */
    nm_assert_rc(netmutex_shutdown(), 0);
    assert_rule(NULL, "~envpfx:*", "&envpfx:*");
    g_setenv("NETMUTEX_PREFIX", "bad{", TRUE);
    nm_assert_rc(netmutex_acl_rule(NULL, buf, sizeof buf), EINVAL);
    g_unsetenv("NETMUTEX_PREFIX");
    assert_rule(NULL, "~netmutex:*", "&netmutex:*");
    nm_configure(redis);
    g_free(url);
}

/* Glob characters quoted; white space, which Redis refuses in a pattern,
 * matched by '?'; quotes and other bytes in a quoted argument. */
static void test_acl_rule_quoting(void)
{
    assert_rule("a*b?[c]\\:", "~a\\*b\\?\\[c\\]\\\\:*", "&a\\*b\\?\\[c\\]\\\\:*");
    assert_rule("sp ace\t:", "~sp?ace?:*", "&sp?ace?:*");
    assert_rule("q\"x'", "\"~q\\\"x'*\"", "\"&q\\\"x'*\"");
    assert_rule("\x01\xff\\", "\"~\\x01\\xff\\\\\\\\*\"", "\"&\\x01\\xff\\\\\\\\*\"");
}

static void test_acl_rule_errors(void)
{
    char buf[NETMUTEX_ACL_RULE_MAX], *max = g_strnfill(256, '\x01');
    char *over = g_strnfill(257, 'p');
    size_t len;

    nm_assert_rc(netmutex_acl_rule("p:", NULL, 10), EINVAL);
    nm_assert_rc(netmutex_acl_rule("a{", buf, sizeof buf), EINVAL);
    nm_assert_rc(netmutex_acl_rule("a}", buf, sizeof buf), EINVAL);
    nm_assert_rc(netmutex_acl_rule(over, buf, sizeof buf), EINVAL);
    /* The longest rule there is fits in NETMUTEX_ACL_RULE_MAX. */
    nm_assert_rc(netmutex_acl_rule(max, buf, sizeof buf), 0);
    nm_assert_rc(netmutex_acl_rule("p:", buf, sizeof buf), 0);
    len = strlen(buf);
    nm_assert_rc(netmutex_acl_rule("p:", buf, len + 1), 0);
    g_assert_cmpuint(strlen(buf), ==, len);
    nm_assert_rc(netmutex_acl_rule("p:", buf, len), ERANGE);
    g_assert_cmpstr(buf, ==, "");
    nm_assert_rc(netmutex_acl_rule("p:", buf, 0), ERANGE);
    g_free(over);
    g_free(max);
}

int main(int argc, char **argv)
{
    const NmRedisOpts opts = { .tcp = true };
    int rc;

    nm_test_init(&argc, &argv);
    redis = nm_redis_start(&opts);
    nm_configure(redis);

    g_test_add_func("/attr/defaults-normal-and-lease-0", test_attr_defaults);
    g_test_add_func("/attr/null-pointers-einval", test_attr_null);
    g_test_add_func("/attr/type/valid-stored-invalid-einval", test_attr_type);
    g_test_add_func("/attr/lease/bounds", test_attr_lease);
    g_test_add_func("/config/url/malformed-einval", test_url_malformed);
    g_test_add_func("/config/url/too-long-einval", test_url_too_long);
    g_test_add_func("/config/url/well-formed-accepted", test_url_accepted);
    g_test_add_func("/config/url/server-list", test_url_quorum_list);
    g_test_add_func("/config/quorum/timing-settings", test_quorum_timing_settings);
    g_test_add_func("/config/url/unreachable-server-accepted", test_configure_unreachable_accepted);
    g_test_add_func("/config/url/tcp-lock-works", test_url_tcp_lock_works);
    g_test_add_func("/config/url/tcp-db-number-used", test_url_tcp_db);
    g_test_add_func("/config/url/unix-db-parameter-used", test_url_unix_db);
    g_test_add_func("/config/prefix/limits", test_prefix_limits);
    g_test_add_func("/config/reserved/nonzero-einval", test_reserved_nonzero);
    g_test_add_func("/config/lease/limits", test_lease_limits);
    g_test_add_func("/config/lease/default-and-attr-override", test_default_lease_applies);
    g_test_add_func("/config/renew-percent/limits", test_renew_percent_limits);
    g_test_add_func("/config/env/url-used-when-cfg-null", test_env_url);
    g_test_add_func("/config/env/prefix-used-when-field-null", test_env_prefix);
    g_test_add_func("/config/shutdown/next-call-uses-env", test_shutdown_reconfigures_from_env);
    g_test_add_func("/config/reconfigure/ebusy-while-held", test_configure_busy_while_held);
    g_test_add_func("/config/reconfigure/threads-redial", test_reconfigure_thread_redials);
    g_test_add_func("/config/acl-rule/default", test_acl_rule_default);
    g_test_add_func("/config/acl-rule/which-prefix", test_acl_rule_which_prefix);
    g_test_add_func("/config/acl-rule/quoting", test_acl_rule_quoting);
    g_test_add_func("/config/acl-rule/errors", test_acl_rule_errors);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
