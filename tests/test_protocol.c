/*
 * test_protocol.c -- what the library leaves in Redis, checked with raw
 * hiredis commands: the key schema (<prefix>{<name>} holding a fresh
 * 32-hex token and the fence with a PX lease, nothing kept once released),
 * binary-safe names, the compare-before-delete release (ENOLCK, and the
 * foreign key left alone), and reloading the scripts after SCRIPT FLUSH.
 */
#include "ac_config.h"

#include "fixture.h"

#include <string.h>
#include <unistd.h>

static NmRedis *redis;

#define PROMPT_MS nm_ms(20000)

/* Locks a fresh NORMAL mutex named after the test (with LEASE_MS) and
 * returns the token Redis holds for it, asserting it has the right form. */
static char *lock_and_get_token(netmutex_t *m, char **name, unsigned int lease_ms)
{
    char *token;

    *name = nm_mutex_init(m, "m", NETMUTEX_NORMAL, lease_ms);
    nm_assert_rc(netmutex_lock(m), 0);
    token = nm_token_of(redis, *name);
    g_assert_nonnull(token);
    g_assert_true(nm_is_token(token));
    return token;
}

static void unlock_destroy(netmutex_t *m, char *name)
{
    nm_assert_rc(netmutex_unlock(m), 0);
    nm_assert_rc(netmutex_destroy(m), 0);
    g_free(name);
}

static void assert_no_key(const char *name)
{
    char *token = nm_token_of(redis, name);

    g_assert_null(token);
}

/* ---- the lock key ------------------------------------------------------- */

static void test_key_holds_token(void)
{
    netmutex_t m;
    char *name;
    char *token = lock_and_get_token(&m, &name, 0);

    unlock_destroy(&m, name);
    g_free(token);
}

static void test_key_deleted_on_unlock(void)
{
    netmutex_t m;
    char *name;
    char *token = lock_and_get_token(&m, &name, 0);
    char *saved = g_strdup(name);

    unlock_destroy(&m, name);
    assert_no_key(saved);
    g_free(saved);
    g_free(token);
}

static void test_fresh_token_per_acquisition(void)
{
    GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    char *name = nm_test_name("m");
    netmutex_t m;

    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    for (int i = 0; i < 8; i++) {
        char *token;

        /* Every way of acquiring makes a new token. */
        if (i % 2)
            nm_assert_rc(netmutex_trylock(&m), 0);
        else
            nm_assert_rc(netmutex_lock(&m), 0);
        token = nm_token_of(redis, name);
        g_assert_true(nm_is_token(token));
        g_assert_false(g_hash_table_contains(seen, token));
        g_hash_table_add(seen, token);
        nm_assert_rc(netmutex_unlock(&m), 0);
    }
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_hash_table_destroy(seen);
    g_free(name);
}

/* 0 < PTTL <= LEASE for a mutex locked with LEASE_MS (0: the default). */
static void check_pttl(unsigned int lease_ms, unsigned int expected_max)
{
    netmutex_t m;
    char *name;
    char *token = lock_and_get_token(&m, &name, lease_ms);
    char *key = nm_lock_key(name);
    long long pttl = nm_redis_pttl(redis, key);

    g_assert_cmpint(pttl, >, 0);
    g_assert_cmpint(pttl, <=, expected_max);
    unlock_destroy(&m, name);
    g_free(key);
    g_free(token);
}

static void test_pttl_attr_lease(void)
{
    check_pttl(5000, 5000);
}

static void test_pttl_default_lease(void)
{
    /* The documented default, netmutex_config_t.lease_ms = 30000. */
    check_pttl(0, 30000);
}

static void test_fence_increments(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *key = nm_lock_key(name);
    long long last = 0;

    for (int i = 0; i < 4; i++) {
        long long fence;

        nm_assert_rc(netmutex_lock(&m), 0);
        fence = nm_redis_fence(redis, key);
        g_assert_cmpint(fence, >, last);
        last = fence;
        nm_assert_rc(netmutex_unlock(&m), 0);
        /* Nothing is kept of a released lock: the next fence comes from
         * the server's clock, which has moved on. */
        g_assert_null(nm_redis_get(redis, 0, key, strlen(key)));
    }
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(key);
    g_free(name);
}

/* ---- netmutex_status ------------------------------------------------------ */

/* While held: our host and pid as the holder, the fence the holder got,
 * a ttl within the lease; after unlock: free, the fence kept. */
static void test_status_held_and_free(void)
{
    netmutex_t m;
    netmutex_status_t st;
    uint64_t fence;
    char host[256], *prefix;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 5000);

    nm_assert_rc(netmutex_status(name, &st), 0);
    g_assert_cmpint(st.held, ==, 0);
    g_assert_cmpint(st.ttl_ms, ==, -1);
    g_assert_cmpuint(st.fence, ==, 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_fence(&m, &fence), 0);
    nm_assert_rc(netmutex_status(name, &st), 0);
    g_assert_cmpint(st.held, ==, 1);
    gethostname(host, sizeof host);
    prefix = g_strdup_printf("%s:%ld:", host, (long)getpid());
    g_assert_true(g_str_has_prefix(st.holder, prefix));
    g_assert_cmpuint(st.fence, ==, fence);
    g_assert_cmpint(st.ttl_ms, >, 0);
    g_assert_cmpint(st.ttl_ms, <=, 5000);
    g_assert_cmpint(st.since_ms, >, 0);
    g_assert_cmpint(st.unrecoverable, ==, 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_status(name, &st), 0);
    g_assert_cmpint(st.held, ==, 0);
    g_assert_cmpstr(st.holder, ==, "");
    g_assert_cmpuint(st.fence, ==, 0); /* nothing is kept of a released lock */
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(prefix);
    g_free(name);
}

/* The configured holder description replaces host:pid (netmutex(1) names
 * its command's pid this way); a bad one is refused. */
static void test_status_configured_holder(void)
{
    char *url = nm_redis_url(redis);
    char *too_long = g_strnfill(257, 'h');
    netmutex_config_t cfg = { .url = url, .holder = "box7:4242" };
    netmutex_status_t st;
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_status(name, &st), 0);
    g_assert_true(g_str_has_prefix(st.holder, "box7:4242:"));
    nm_assert_rc(netmutex_unlock(&m), 0);
    const char *bad[] = { "", too_long, "tab\there", "nl\n" };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        cfg.holder = bad[i];
        nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    }
    nm_configure(redis);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(too_long);
    g_free(name);
    g_free(url);
}

static void test_status_bad_arguments(void)
{
    netmutex_status_t st;
    char *long_name = g_malloc(NETMUTEX_NAME_MAX + 2);

    memset(long_name, 'x', NETMUTEX_NAME_MAX + 1);
    long_name[NETMUTEX_NAME_MAX + 1] = '\0';
    nm_assert_rc(netmutex_status(NULL, &st), EINVAL);
    nm_assert_rc(netmutex_status("x", NULL), EINVAL);
    nm_assert_rc(netmutex_status("", &st), EINVAL);
    nm_assert_rc(netmutex_status(long_name, &st), EINVAL);
    g_free(long_name);
}

/* A server that is down: EAGAIN, not a hang and not a crash. */
static void test_status_unreachable(void)
{
    netmutex_config_t cfg = { .url = "redis://127.0.0.1:1", .io_timeout_ms = 200,
                              .connect_timeout_ms = 200 };
    netmutex_status_t st;

    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_status("x", &st), EAGAIN);
    nm_configure(redis);
}

/* RECURSIVE: one Redis key, depth kept locally -- relocking neither
 * changes the token nor counts as an acquisition. */
static void test_recursive_one_key(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_RECURSIVE, 0);
    char *key = nm_lock_key(name);
    char *first, *again;
    long long fence;

    nm_assert_rc(netmutex_lock(&m), 0);
    first = nm_token_of(redis, name);
    fence = nm_redis_fence(redis, key);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_trylock(&m), 0);
    again = nm_token_of(redis, name);
    g_assert_cmpstr(again, ==, first);
    g_assert_cmpint(nm_redis_fence(redis, key), ==, fence);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_free(again);
    again = nm_token_of(redis, name);
    g_assert_cmpstr(again, ==, first);
    nm_assert_rc(netmutex_unlock(&m), 0);
    assert_no_key(name);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(again);
    g_free(first);
    g_free(key);
    g_free(name);
}

/* ---- releasing a lease that is no longer ours ------------------------------ */

#define FOREIGN_TOKEN "0123456789abcdef0123456789abcdef"

static void test_unlock_foreign_token(void)
{
    netmutex_t m;
    char *name;
    char *token = lock_and_get_token(&m, &name, 0);
    char *key = nm_lock_key(name);
    char *after;
    long long pttl;

    /* Someone else's acquisition after ours expired. */
    nm_redis_ok(redis, "SET %s %s PX 3600000", key, FOREIGN_TOKEN);
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    after = nm_token_of(redis, name);
    g_assert_cmpstr(after, ==, FOREIGN_TOKEN);
    pttl = nm_redis_pttl(redis, key);
    g_assert_cmpint(pttl, >, 0);
    g_assert_cmpint(pttl, <=, 3600000);
    /* Whatever unlock returned, we no longer hold it... */
    nm_assert_rc(netmutex_unlock(&m), EPERM);
    /* ...and the other owner still does. */
    nm_assert_rc(netmutex_trylock(&m), EBUSY);
    nm_redis_ok(redis, "DEL %s", key);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(after);
    g_free(key);
    g_free(token);
    g_free(name);
}

/* Our key vanished (expired or deleted): ENOLCK, and nothing is created. */
static void run_key_gone(const char *how)
{
    netmutex_t m;
    char *name;
    char *token = lock_and_get_token(&m, &name, 0);
    char *key = nm_lock_key(name);

    if (strcmp(how, "expire") == 0) {
        nm_redis_ok(redis, "PEXPIRE %s 1", key);
        /* PTTL -2 once Redis has expired it. */
        while (nm_redis_pttl(redis, key) != -2)
            nmt_sleep_ms(5);
    } else {
        nm_redis_ok(redis, "DEL %s", key);
    }
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    assert_no_key(name);
    nm_assert_rc(netmutex_unlock(&m), EPERM);
    /* Free for the next acquirer. */
    nm_assert_rc(netmutex_trylock(&m), 0);
    unlock_destroy(&m, name);
    g_free(key);
    g_free(token);
}

static void test_unlock_key_deleted(void)
{
    run_key_gone("del");
}

static void test_unlock_key_expired(void)
{
    run_key_gone("expire");
}

/* ---- scripts -------------------------------------------------------------- */

static void test_script_flush_between_lock_and_unlock(void)
{
    netmutex_t m;
    char *name;
    char *token = lock_and_get_token(&m, &name, 0);
    char *saved = g_strdup(name);

    nm_redis_ok(redis, "SCRIPT FLUSH");
    unlock_destroy(&m, name);
    assert_no_key(saved);
    g_free(saved);
    g_free(token);
}

static void test_script_flush_before_lock(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    /* Make sure this thread has loaded the scripts before they vanish. */
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_redis_ok(redis, "SCRIPT FLUSH");
    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_redis_ok(redis, "SCRIPT FLUSH");
    nm_assert_rc(netmutex_lock(&m), 0);
    unlock_destroy(&m, name);
}

/* ---- unexpected data under our prefix -------------------------------------- */

/* The lock key is a list: the acquire script fails inside Redis.  That is
 * EPROTO, promptly, for lock as well as trylock (no endless retry), and
 * the list is left as it was. */
static void test_wrong_type_eproto(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *key = nm_lock_key(name);

    nm_redis_ok(redis, "RPUSH %s not-a-lock", key);
    nm_assert_rc(netmutex_trylock(&m), EPROTO);
    nm_assert_rc(nm_call_run(nm_call_lock_unlock, &m, PROMPT_MS), EPROTO);
    g_assert_cmpint(nm_redis_pttl(redis, key), ==, -1);
    nm_redis_ok(redis, "DEL %s", key);
    nm_assert_rc(netmutex_lock(&m), 0);
    unlock_destroy(&m, name);
    g_free(key);
}

/* ---- names ------------------------------------------------------------------ */

typedef struct NameCase {
    const char *label;
    const char *name;
} NameCase;

static const NameCase name_cases[] = {
    { "spaces", "test_protocol name with spaces" },
    { "newlines", "test_protocol\nname\r\nwith newlines\n" },
    { "braces", "test_protocol}{name}{with{braces}" },
    { "quotes-and-glob", "test_protocol \"*?[x]\\' %s %n" },
    { "utf8", "test_protocol/\xc3\xa9t\xc3\xa9/\xe2\x9c\x93" },
    { "high-bytes", "test_protocol/\x80\x81\xfe\xff\xc0\xaf" },
};

/* Locks NAME, checks that exactly "<prefix>{NAME}" (byte for byte) holds
 * a token and that no other lock key appeared, unlocks, checks it is gone. */
static void check_name_maps_to_key(const char *name)
{
    char *key = nm_lock_key(name);
    netmutex_t m;
    char *token;
    redisReply *keys;

    nm_redis_ok(redis, "FLUSHDB");
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_redis_get(redis, 0, key, strlen(key));
    g_assert_true(nm_is_token(token));
    /* The lock key and its slot's fence floor: nothing else. */
    keys = nm_redis_cmd(redis, "KEYS *");
    g_assert_cmpint(keys->type, ==, REDIS_REPLY_ARRAY);
    g_assert_cmpuint(keys->elements, <=, 2);
    freeReplyObject(keys);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_free(token);
    token = nm_redis_get(redis, 0, key, strlen(key));
    g_assert_null(token);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(key);
}

static void test_name_case(gconstpointer data)
{
    const NameCase *c = data;

    check_name_maps_to_key(c->name);
}

/* Every byte value except NUL, in one name. */
static void test_name_all_bytes(void)
{
    char name[256];

    for (int i = 1; i < 256; i++)
        name[i - 1] = (char)i;
    name[255] = '\0';
    check_name_maps_to_key(name);
}

/* Names that differ only in bytes a careless formatter would mangle are
 * different mutexes. */
static void test_names_distinct(void)
{
    netmutex_t a, b;

    nm_assert_rc(netmutex_init(&a, "test_protocol/distinct\x80", NULL), 0);
    nm_assert_rc(netmutex_init(&b, "test_protocol/distinct\x81", NULL), 0);
    nm_assert_rc(netmutex_lock(&a), 0);
    nm_assert_rc(netmutex_trylock(&b), 0);
    nm_assert_rc(netmutex_unlock(&b), 0);
    nm_assert_rc(netmutex_unlock(&a), 0);
    nm_assert_rc(netmutex_destroy(&a), 0);
    nm_assert_rc(netmutex_destroy(&b), 0);
}

/* ---- key prefix ------------------------------------------------------------- */

static void test_custom_prefix(void)
{
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url, .key_prefix = "tst:" };
    char *name = nm_test_name("m");
    char *key = nm_key_of("tst:", name, "");
    netmutex_t m;
    char *token;

    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_redis_get(redis, 0, key, strlen(key));
    g_assert_true(nm_is_token(token));
    g_assert_null(nm_token_of(redis, name)); /* not under the default prefix */
    g_assert_cmpint(nm_redis_fence(redis, key), >, 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_configure(redis);
    g_free(token);
    g_free(key);
    g_free(name);
    g_free(url);
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    nm_test_cache_off();
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/redis/key/holds-32-hex-token", test_key_holds_token);
    g_test_add_func("/redis/key/deleted-on-unlock", test_key_deleted_on_unlock);
    g_test_add_func("/redis/key/fresh-token-per-acquisition", test_fresh_token_per_acquisition);
    g_test_add_func("/redis/key/pttl-within-attr-lease", test_pttl_attr_lease);
    g_test_add_func("/redis/key/pttl-within-default-lease", test_pttl_default_lease);
    g_test_add_func("/redis/fence/incremented-per-acquisition", test_fence_increments);
    g_test_add_func("/redis/status/held-then-free", test_status_held_and_free);
    g_test_add_func("/redis/status/bad-arguments-einval", test_status_bad_arguments);
    g_test_add_func("/redis/status/configured-holder", test_status_configured_holder);
    g_test_add_func("/redis/status/unreachable-eagain", test_status_unreachable);
    g_test_add_func("/redis/recursive/one-key-one-acquisition", test_recursive_one_key);
    g_test_add_func("/redis/unlock/foreign-token-enolck-untouched", test_unlock_foreign_token);
    g_test_add_func("/redis/unlock/key-deleted-enolck", test_unlock_key_deleted);
    g_test_add_func("/redis/unlock/key-expired-enolck", test_unlock_key_expired);
    g_test_add_func("/redis/scripts/flushed-between-lock-and-unlock",
                    test_script_flush_between_lock_and_unlock);
    g_test_add_func("/redis/scripts/flushed-before-lock", test_script_flush_before_lock);
    g_test_add_func("/redis/meta/wrong-type-eproto", test_wrong_type_eproto);
    for (gsize i = 0; i < G_N_ELEMENTS(name_cases); i++) {
        char *path = g_strdup_printf("/redis/names/%s-map-to-exact-key", name_cases[i].label);
        g_test_add_data_func(path, &name_cases[i], test_name_case);
        g_free(path);
    }
    g_test_add_func("/redis/names/all-byte-values-map-to-exact-key", test_name_all_bytes);
    g_test_add_func("/redis/names/differ-in-high-bytes-are-distinct", test_names_distinct);
    g_test_add_func("/redis/prefix/custom-prefix-used-for-keys", test_custom_prefix);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
