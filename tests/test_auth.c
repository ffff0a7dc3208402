/*
 * test_auth.c -- credentials and database selection against a server
 * started with --requirepass: the right password works (unix and TCP), ACL
 * users work, percent-escaped credentials are decoded, and every refusal
 * (wrong or missing password, disabled user, refused SELECT) is EACCES,
 * returned promptly by trylock, lock and timedlock alike: retrying cannot
 * help, so lock must not hang on it.
 */
#include "ac_config.h"

#include "fixture.h"

#include <string.h>

#define PASSWORD "secret"

static NmRedis *redis;

/* A refusal must come back well before this (and long before a timedlock
 * deadline a minute away): generous, but it catches a retry loop. */
#define PROMPT_MS nm_ms(15000)

static int configure_url(const char *url)
{
    netmutex_config_t cfg = { .url = url };

    return netmutex_configure(&cfg);
}

static int call_timedlock_unlock(void *m)
{
    struct timespec deadline;
    int rc;

    nm_deadline(&deadline, CLOCK_REALTIME, nm_ms(60000));
    rc = netmutex_timedlock(m, &deadline);
    return rc ? rc : netmutex_unlock(m);
}

/* With URL configured, a lock/unlock cycle works and the key is there. */
static void expect_works(const char *url)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *token;

    g_test_message("url %s", url);
    nm_assert_rc(configure_url(url), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_token_of(redis, name);
    g_assert_true(nm_is_token(token));
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_configure(redis);
    g_free(token);
    g_free(name);
}

/* With URL configured, every way of locking is refused with EACCES within
 * PROMPT_MS, and nothing is left in Redis. */
static void expect_refused(const char *url)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *token;

    g_test_message("url %s", url);
    nm_assert_rc(configure_url(url), 0);
    nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &m, PROMPT_MS), EACCES);
    nm_assert_rc(nm_call_run(nm_call_lock_unlock, &m, PROMPT_MS), EACCES);
    nm_assert_rc(nm_call_run(call_timedlock_unlock, &m, PROMPT_MS), EACCES);
    /* The same on this (main) thread, which keeps its connection state. */
    nm_assert_rc(netmutex_trylock(&m), EACCES);
    nm_assert_rc(netmutex_unlock(&m), EPERM);
    token = nm_token_of(redis, name);
    g_assert_null(token);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_configure(redis);
    g_free(name);
}

static char *unix_url(const char *userinfo, const char *query)
{
    return g_strdup_printf("unix://%s%s%s%s", userinfo ? userinfo : "",
                           userinfo ? "@" : "", nm_redis_socket(redis),
                           query ? query : "");
}

static char *tcp_url(const char *userinfo, const char *path)
{
    return g_strdup_printf("redis://%s%s127.0.0.1:%d%s", userinfo ? userinfo : "",
                           userinfo ? "@" : "", nm_redis_port(redis),
                           path ? path : "");
}

/* ---- the requirepass password ------------------------------------------- */

static void test_password_correct(void)
{
    char *u = unix_url(":" PASSWORD, NULL);
    char *t = tcp_url(":" PASSWORD, NULL);
    /* requirepass is the password of the user "default". */
    char *d = tcp_url("default:" PASSWORD, "/0");

    expect_works(u);
    expect_works(t);
    expect_works(d);
    g_free(d);
    g_free(t);
    g_free(u);
}

static void test_password_wrong(void)
{
    char *u = unix_url(":wrong", NULL);
    char *t = tcp_url(":wrong", NULL);

    expect_refused(u);
    expect_refused(t);
    g_free(t);
    g_free(u);
}

/* No credentials at all: the server answers NOAUTH, also a refusal. */
static void test_password_missing(void)
{
    char *u = unix_url(NULL, NULL);

    expect_refused(u);
    g_free(u);
}

/* ---- ACL users ------------------------------------------------------------ */

static void test_acl_user(void)
{
    char *ok_tcp = tcp_url("alice:pw", "/0");
    char *ok_unix = unix_url("alice:pw", "?db=0");
    char *bad = tcp_url("alice:nope", NULL);

    nm_redis_ok(redis, "ACL SETUSER alice on >pw ~* +@all");
    expect_works(ok_tcp);
    expect_works(ok_unix);
    expect_refused(bad);
    g_free(bad);
    g_free(ok_unix);
    g_free(ok_tcp);
}

static void test_acl_user_disabled(void)
{
    char *url = tcp_url("carol:pw", NULL);

    nm_redis_ok(redis, "ACL SETUSER carol off >pw ~* +@all");
    expect_refused(url);
    g_free(url);
}

/* User and password with every character that has a meaning in a URL,
 * given as %XX escapes. */
static void test_acl_percent_escaped(void)
{
    char *url = tcp_url("d%40ve%3Ax:p%40ss%3Aw%2Frd%25%23%3F%20x", "/0");
    char *unix_u = unix_url("d%40ve%3Ax:p%40ss%3Aw%2Frd%25%23%3F%20x", NULL);
    const char *argv[] = { "ACL", "SETUSER", "d@ve:x", "on",
                           ">p@ss:w/rd%#? x", "~*", "+@all" };
    redisContext *c = nm_redis_connect(redis, 0);
    redisReply *reply = redisCommandArgv(c, G_N_ELEMENTS(argv), argv, NULL);

    g_assert_nonnull(reply);
    g_assert_cmpint(reply->type, ==, REDIS_REPLY_STATUS);
    freeReplyObject(reply);
    redisFree(c);
    expect_works(url);
    expect_works(unix_u);
    g_free(unix_u);
    g_free(url);
}

/* ---- SELECT ------------------------------------------------------------------ */

/* The server has 16 databases: SELECT 99 is refused. */
static void test_select_refused(void)
{
    char *t = tcp_url(":" PASSWORD, "/99");
    char *u = unix_url(":" PASSWORD, "?db=99");

    expect_refused(t);
    expect_refused(u);
    g_free(u);
    g_free(t);
}

int main(int argc, char **argv)
{
    const NmRedisOpts opts = { .tcp = true, .requirepass = PASSWORD };
    int rc;

    nm_test_init(&argc, &argv);
    redis = nm_redis_start(&opts);
    nm_configure(redis);

    g_test_add_func("/auth/password/correct-works", test_password_correct);
    g_test_add_func("/auth/password/wrong-eacces-promptly", test_password_wrong);
    g_test_add_func("/auth/password/missing-eacces-promptly", test_password_missing);
    g_test_add_func("/auth/acl/user-password-works-wrong-eacces", test_acl_user);
    g_test_add_func("/auth/acl/disabled-user-eacces", test_acl_user_disabled);
    g_test_add_func("/auth/acl/percent-escaped-credentials", test_acl_percent_escaped);
    g_test_add_func("/auth/select/out-of-range-db-eacces", test_select_refused);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
