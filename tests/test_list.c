/*
 * test_list.c -- netmutex_list(3): the held names under the prefix, on one
 * server, on a quorum list (a key on a minority is no held lock; one server
 * down of three is enough, two are not) and on a Redis Cluster (every
 * master); a pattern on the whole name, the prefix taken literally, the
 * order, a callback that stops, and the bad input it refuses.
 */
#include "ac_config.h"

#include "fixture.h"
#include "topo_cluster.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static NmRedis *redis;

/* What the callback saw: the names, space-separated, and each status. */
typedef struct seen {
    GString *names;
    unsigned int count, stop_after;
    uint64_t fence_sum;
} seen_t;

static int collect(const char *name, const netmutex_status_t *st, void *arg)
{
    seen_t *s = arg;
    g_assert_true(st->held);
    g_assert_cmpstr(st->holder, !=, "");
    g_assert_cmpint(st->ttl_ms, >, 0);
    g_assert_cmpuint(st->fence, >, 0);
    if (s->names->len > 0)
        g_string_append_c(s->names, ' ');
    g_string_append(s->names, name);
    s->fence_sum += st->fence;
    return ++s->count == s->stop_after;
}

/* netmutex_list(PATTERN) into *S (fresh); its result. */
static int list(const char *pattern, seen_t *s, netmutex_list_info_t *info)
{
    if (s->names == NULL)
        s->names = g_string_new("");
    g_string_truncate(s->names, 0);
    s->count = 0;
    s->fence_sum = 0;
    return netmutex_list(pattern, collect, s, info);
}

/* The names PATTERN lists, as one string (asserting success). */
static char *names_of(const char *pattern)
{
    seen_t s = { 0 };
    netmutex_list_info_t info;
    nm_assert_rc(list(pattern, &s, &info), 0);
    g_assert_cmpuint(info.answered, >=, info.needed);
    return g_string_free(s.names, FALSE);
}

static void lock_all(netmutex_t *m, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        nm_assert_rc(netmutex_init(&m[i], names[i], NULL), 0);
        nm_assert_rc(netmutex_lock(&m[i]), 0);
    }
}

static void unlock_all(netmutex_t *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        nm_assert_rc(netmutex_unlock(&m[i]), 0);
        nm_assert_rc(netmutex_destroy(&m[i]), 0);
    }
}

/* ---- one server ------------------------------------------------------------ */

static void test_single(void)
{
    static const char *const names[] = { "list-beta", "list-alpha", "list-x{y}:q", "list-\xc3\xa9" };
    netmutex_t m[4];
    seen_t s = { 0 };
    netmutex_list_info_t info;

    nm_configure(redis);
    char *none = names_of("list-*");
    g_assert_cmpstr(none, ==, "");
    g_free(none);

    lock_all(m, names, 4);
    /* A name locked and released leaves its fence key: not listed. */
    netmutex_t gone;
    nm_assert_rc(netmutex_init(&gone, "list-gone", NULL), 0);
    nm_assert_rc(netmutex_lock(&gone), 0);
    nm_assert_rc(netmutex_unlock(&gone), 0);
    nm_assert_rc(netmutex_destroy(&gone), 0);

    nm_assert_rc(list("list-*", &s, &info), 0);
    g_assert_cmpstr(s.names->str, ==, "list-alpha list-beta list-x{y}:q list-\xc3\xa9");
    g_assert_cmpuint(info.servers, ==, 1);
    g_assert_cmpuint(info.answered, ==, 1);
    g_assert_cmpuint(info.needed, ==, 1);
    g_assert_cmpint(info.cluster, ==, 0);

    /* The status handed out is netmutex_status's. */
    netmutex_status_t st;
    uint64_t sum = 0;
    for (size_t i = 0; i < 4; i++) {
        nm_assert_rc(netmutex_status(names[i], &st), 0);
        sum += st.fence;
    }
    g_assert_cmpuint(s.fence_sum, ==, sum);

    /* NULL: every name; a glob on the whole name. */
    char *all = names_of(NULL);
    g_assert_cmpstr(all, ==, "list-alpha list-beta list-x{y}:q list-\xc3\xa9");
    g_free(all);
    char *one = names_of("list-b?ta");
    g_assert_cmpstr(one, ==, "list-beta");
    g_free(one);
    char *set = names_of("list-[ab]*");
    g_assert_cmpstr(set, ==, "list-alpha list-beta");
    g_free(set);
    char *quoted = names_of("list-x\\{y}:q");
    g_assert_cmpstr(quoted, ==, "list-x{y}:q");
    g_free(quoted);
    char *part = names_of("list-alph");
    g_assert_cmpstr(part, ==, "");
    g_free(part);

    /* A callback that stops: ECANCELED after the names it took. */
    s.stop_after = 2;
    nm_assert_rc(list("list-*", &s, NULL), ECANCELED);
    g_assert_cmpuint(s.count, ==, 2);
    g_assert_cmpstr(s.names->str, ==, "list-alpha list-beta");
    s.stop_after = 0;

    unlock_all(m, 4);
    char *after = names_of("list-*");
    g_assert_cmpstr(after, ==, "");
    g_free(after);
    g_string_free(s.names, TRUE);
}

/* A lock key's value as a holder elsewhere leaves it (src/lua/lib.lua). */
#define FOREIGN_VALUE "0123456789abcdef0123456789abcdef-- 7 elsewhere:1:1"

/* The prefix is matched literally, glob characters and all. */
static void test_prefix_literal(void)
{
    netmutex_config_t starred = { .key_prefix = "t*x:" }, plain = { .key_prefix = "tax:" };
    char *key = nm_key_of("t*x:", "other", "");

    nm_redis_ok(redis, "SET %s %s PX 60000", key, FOREIGN_VALUE);
    nm_configure_with(redis, starred);
    char *mine = names_of(NULL);
    g_assert_cmpstr(mine, ==, "other");
    g_free(mine);
    nm_configure_with(redis, plain);
    char *none = names_of(NULL);
    g_assert_cmpstr(none, ==, "");
    g_free(none);
    nm_redis_ok(redis, "DEL %s", key);
    g_free(key);
}

/* ---- bad input ------------------------------------------------------------ */

static void test_bad_input(void)
{
    seen_t s = { 0 };
    netmutex_list_info_t info;
    char *big = g_malloc(2 * NETMUTEX_NAME_MAX + 2);

    nm_configure(redis);
    memset(&info, 0xff, sizeof info);
    nm_assert_rc(netmutex_list(NULL, NULL, NULL, &info), EINVAL);
    g_assert_cmpuint(info.servers, ==, 0); /* zeroed, even then */
    g_assert_null(info.nm_reserved[7]);
    nm_assert_rc(list("", &s, NULL), EINVAL);
    nm_assert_rc(list("abc\\", &s, NULL), EINVAL);
    nm_assert_rc(list("a[bc", &s, NULL), EINVAL);
    nm_assert_rc(list("a[b\\]", &s, NULL), EINVAL);
    memset(big, '*', 2 * NETMUTEX_NAME_MAX + 1);
    big[2 * NETMUTEX_NAME_MAX + 1] = '\0';
    nm_assert_rc(list(big, &s, NULL), EINVAL);
    big[2 * NETMUTEX_NAME_MAX] = '\0';
    nm_assert_rc(list(big, &s, NULL), 0);
    /* Quoted brackets and backslashes are fine. */
    nm_assert_rc(list("a\\[b", &s, NULL), 0);
    nm_assert_rc(list("a[\\]]", &s, NULL), 0);
    nm_assert_rc(list("a\\\\", &s, NULL), 0);
    g_assert_cmpuint(s.count, ==, 0);
    g_free(big);

    /* Not configured: the environment, as every call reads it. */
    nm_assert_rc(netmutex_shutdown(), 0);
    g_setenv("NETMUTEX_URL", "redis://host:notaport", TRUE);
    nm_assert_rc(list(NULL, &s, NULL), EINVAL);
    char *url = nm_redis_url(redis);
    g_setenv("NETMUTEX_URL", url, TRUE);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_assert_rc(list(NULL, &s, &info), 0);
    g_assert_cmpuint(info.answered, ==, 1);
    g_unsetenv("NETMUTEX_URL");
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(url);

    /* Unreachable: EAGAIN, and INFO says so. */
    netmutex_config_t cfg = { .url = "unix:///nonexistent/list.sock",
                              .connect_timeout_ms = nm_ms(500) };
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(list(NULL, &s, &info), EAGAIN);
    g_assert_cmpuint(info.servers, ==, 1);
    g_assert_cmpuint(info.answered, ==, 0);
    g_string_free(s.names, TRUE);
}

/* ---- quorum ------------------------------------------------------------- */

static void test_quorum(void)
{
    NmRedis *b = nm_redis_start(NULL), *c = nm_redis_start(NULL);
    char *ua = nm_redis_url(redis), *ub = nm_redis_url(b), *uc = nm_redis_url(c);
    char *urls = g_strdup_printf("%s,%s,%s", ua, ub, uc);
    netmutex_config_t cfg = { .url = urls, .io_timeout_ms = nm_ms(500) };
    netmutex_list_info_t info;
    seen_t s = { 0 };
    netmutex_t q;

    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_init(&q, "quorum-held", NULL), 0);
    nm_assert_rc(netmutex_lock(&q), 0);
    /* A key on one server of three: no held lock. */
    char *stale = nm_lock_key("quorum-stale");
    nm_redis_ok(redis, "SET %s %s PX 60000", stale, FOREIGN_VALUE);
    nm_assert_rc(list("quorum-*", &s, &info), 0);
    g_assert_cmpstr(s.names->str, ==, "quorum-held");
    g_assert_cmpuint(info.servers, ==, 3);
    g_assert_cmpuint(info.answered, ==, 3);
    g_assert_cmpuint(info.needed, ==, 2);

    /* One silent of three: still listed; two: EAGAIN.  (Paused, not
     * stopped: a restart would lose the lease on a majority.) */
    nm_redis_pause(c);
    nm_assert_rc(list("quorum-*", &s, &info), 0);
    g_assert_cmpstr(s.names->str, ==, "quorum-held");
    g_assert_cmpuint(info.answered, ==, 2);
    nm_redis_pause(b);
    nm_assert_rc(list("quorum-*", &s, &info), EAGAIN);
    g_assert_cmpuint(info.answered, ==, 1);
    g_assert_cmpuint(info.needed, ==, 2);
    nm_redis_resume(b);
    nm_redis_resume(c);
    nm_assert_rc(netmutex_unlock(&q), 0);
    nm_assert_rc(netmutex_destroy(&q), 0);
    nm_redis_ok(redis, "DEL %s", stale);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(stale);
    g_free(urls);
    g_free(ua);
    g_free(ub);
    g_free(uc);
    nm_redis_free(b);
    nm_redis_free(c);
    g_string_free(s.names, TRUE);
}

/* ---- Redis Cluster ---------------------------------------------------------- */

static void test_cluster(void)
{
    NmTopo *t = nm_topo_start();
    char *urls[2] = { nm_topo_url(t), nm_topo_node_url(t, 0) };
    char *names[24];
    netmutex_t m[24];
    GString *want = g_string_new("");

    for (int i = 0; i < 24; i++)
        names[i] = g_strdup_printf("cl-%02d", i);
    for (int u = 0; u < 2; u++) {
        netmutex_config_t cfg = { .url = urls[u] };
        netmutex_list_info_t info;
        seen_t s = { 0 };
        nm_assert_rc(netmutex_configure(&cfg), 0);
        lock_all(m, (const char *const *)names, 24);
        nm_assert_rc(list("cl-*", &s, &info), 0);
        g_string_truncate(want, 0);
        for (int i = 0; i < 24; i++)
            g_string_append_printf(want, "%s%s", i ? " " : "", names[i]);
        /* 24 names spread over the three masters: all found. */
        g_assert_cmpstr(s.names->str, ==, want->str);
        g_assert_cmpint(info.cluster, ==, 1);
        g_assert_cmpuint(info.servers, ==, 3);
        g_assert_cmpuint(info.answered, ==, 3);
        g_assert_cmpuint(info.needed, ==, 3);
        unlock_all(m, 24);
        nm_assert_rc(list("cl-*", &s, NULL), 0);
        g_assert_cmpuint(s.count, ==, 0);
        g_string_free(s.names, TRUE);
        nm_assert_rc(netmutex_shutdown(), 0);
    }
    for (int i = 0; i < 24; i++)
        g_free(names[i]);
    g_string_free(want, TRUE);
    g_free(urls[0]);
    g_free(urls[1]);
    nm_topo_free(t);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    nm_test_cache_off(); /* an unlocked name must be free at once */
    redis = nm_redis_start(NULL);

    g_test_add_func("/list/single", test_single);
    g_test_add_func("/list/prefix-literal", test_prefix_literal);
    g_test_add_func("/list/bad-input", test_bad_input);
    g_test_add_func("/list/quorum", test_quorum);
    g_test_add_func("/list/cluster", test_cluster);

    int rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
