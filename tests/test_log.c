/*
 * test_log.c -- what the library tells a person, and how: a server it
 * cannot use is named (password masked) with the cause, once per outage,
 * and its return once; a lost lease is reported; an application's logger
 * receives everything instead of stderr; netmutex_strerror gives the
 * meaning of every errno the API returns.
 */
#include "ac_config.h"

#include "fixture.h"

#include <glib/gstdio.h>
#include <string.h>

static NmRedis *redis;

/* The messages a test's logger received, under a pthread mutex (the
 * library may call the logger from its background thread). */
typedef struct Captured {
    pthread_mutex_t lock;
    GPtrArray *lines;
} Captured;

static Captured captured = { PTHREAD_MUTEX_INITIALIZER, NULL };

static void capture(int level, const char *message, void *arg)
{
    Captured *c = arg;
    pthread_mutex_lock(&c->lock);
    g_ptr_array_add(c->lines, g_strdup_printf("%d %s", level, message));
    pthread_mutex_unlock(&c->lock);
}

static void capture_start(int level)
{
    pthread_mutex_lock(&captured.lock);
    if (captured.lines)
        g_ptr_array_unref(captured.lines);
    captured.lines = g_ptr_array_new_with_free_func(g_free);
    pthread_mutex_unlock(&captured.lock);
    nm_assert_rc(netmutex_set_log(level, capture, &captured), 0);
}

/* How many captured lines contain every one of the NULL-terminated
 * strings given. */
static guint count_lines(const char *first, ...)
{
    guint n = 0;
    pthread_mutex_lock(&captured.lock);
    for (guint i = 0; i < captured.lines->len; i++) {
        const char *line = g_ptr_array_index(captured.lines, i);
        gboolean all = TRUE;
        va_list ap;
        va_start(ap, first);
        for (const char *s = first; s && all; s = va_arg(ap, const char *))
            all = strstr(line, s) != NULL;
        va_end(ap);
        n += all;
    }
    pthread_mutex_unlock(&captured.lock);
    return n;
}

/* Every captured line, as test messages: what a failed count saw. */
static void show_lines(void)
{
    pthread_mutex_lock(&captured.lock);
    for (guint i = 0; i < captured.lines->len; i++)
        g_test_message("captured: %s", (const char *)g_ptr_array_index(captured.lines, i));
    pthread_mutex_unlock(&captured.lock);
}

/* A server that is not there: named with its masked URL and the cause,
 * once however many calls fail; its return is reported once at info. */
static void test_outage_reported_once(void)
{
    char *dir = g_dir_make_tmp("netmutex-log-XXXXXX", NULL);
    char *url = g_strdup_printf("unix://:hunter2@%s/absent.sock", dir);
    netmutex_config_t cfg = { .url = url, .connect_timeout_ms = nm_ms(200),
                              .io_timeout_ms = nm_ms(200) };
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    capture_start(NETMUTEX_LOG_INFO);
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_trylock(&m), EAGAIN);
    nm_assert_rc(netmutex_trylock(&m), EAGAIN);
    g_assert_cmpuint(count_lines("2 ", "unix://:***@", "absent.sock",
                                 "No such file or directory", NULL), ==, 1);
    g_assert_cmpuint(count_lines("hunter2", NULL), ==, 0);
    nm_configure(redis);
    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_cmpuint(count_lines("3 ", "reachable again", NULL), ==, 1);
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_rmdir(dir);
    g_free(name);
    g_free(url);
    g_free(dir);
}

/* A server that stops answering while a lock waits on it: said within a
 * few seconds, once, and its return too.  allow_eviction skips the INFO of
 * a new connection, so the silence is met by requests, not by dialing.
 * Not cached: a lease kept after the first unlock would let the second
 * lock succeed with no request at all, and the background thread's
 * renewal, not the lock, would meet the stall and later its end, after
 * the counts below were taken (seen on a loaded machine). */
static void test_stall_reported(void)
{
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url, .connect_timeout_ms = nm_ms(300),
                              .io_timeout_ms = nm_ms(300), .allow_eviction = 1 };
    netmutex_t m;
    netmutex_attr_t attr;
    char *name = nm_test_name("m");
    gint64 until;
    NmCall *locker;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, 0), 0);
    nm_assert_rc(netmutex_init(&m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);

    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(nm_call_lock_unlock(&m), 0);
    /* From here on: an earlier test's outage ended with the call above. */
    capture_start(NETMUTEX_LOG_INFO);
    nm_redis_pause(redis);
    locker = nm_call_start(nm_call_lock_unlock, &m);
    until = nmt_now_ms() + nm_ms(5000);
    while (count_lines("2 ", url + strlen("unix://"), "cannot use the server", NULL) == 0 &&
           nmt_now_ms() < until)
        nmt_sleep_ms(20);
    nm_redis_resume(redis);
    nm_assert_rc(nm_call_wait(locker, nm_ms(30000)), 0);
    show_lines();
    g_assert_cmpuint(count_lines("2 ", "cannot use the server", NULL), ==, 1);
    g_assert_cmpuint(count_lines("3 ", "reachable again", NULL), ==, 1);
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL), 0);
    nm_configure(redis);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
    g_free(url);
}

/* Refused credentials: the server's own words, not a generic text. */
static void test_refusal_cause(void)
{
    char *url = nm_redis_url(redis);
    char *bad = g_strdup_printf("unix://alice:wrongpass@%s", url + strlen("unix://"));
    netmutex_config_t cfg = { .url = bad };
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    nm_redis_ok(redis, "ACL SETUSER alice on >rightpass ~* &* +@all");
    capture_start(NETMUTEX_LOG_WARN);
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_trylock(&m), EACCES);
    nm_redis_ok(redis, "ACL DELUSER alice");
    g_assert_cmpuint(count_lines("refused", "WRONGPASS", "alice:***@", NULL), ==, 1);
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL), 0);
    nm_configure(redis);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
    g_free(bad);
    g_free(url);
}

/* A request the server refuses (an ACL user without EVALSHA): the server's
 * own words, once. */
static void test_request_refusal_cause(void)
{
    char *url = nm_redis_url(redis);
    char *bob = g_strdup_printf("unix://bob:pw@%s", url + strlen("unix://"));
    netmutex_config_t cfg = { .url = bob };
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    nm_redis_ok(redis, "ACL SETUSER bob on >pw ~* &* +@all -evalsha");
    nm_assert_rc(netmutex_configure(&cfg), 0);
    capture_start(NETMUTEX_LOG_WARN);
    nm_assert_rc(netmutex_trylock(&m), EACCES);
    nm_assert_rc(netmutex_trylock(&m), EACCES);
    nm_redis_ok(redis, "ACL DELUSER bob");
    g_assert_cmpuint(count_lines("2 ", "bob:***@", "refused", "NOPERM", NULL), ==, 1);
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL), 0);
    nm_configure(redis);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
    g_free(bob);
    g_free(url);
}

/* A lease lost while held is reported with the mutex's name. */
static void test_lost_lease_reported(void)
{
    netmutex_t m;
    /* A short lease: the background thread renews it, and so finds out,
     * within a third of it. */
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 300);
    char *key = nm_lock_key(name);
    gint64 until;

    capture_start(NETMUTEX_LOG_WARN);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_redis_ok(redis, "SET %s someone-else", key);
    until = nmt_now_ms() + nm_ms(5000);
    while (count_lines("lease of", name, "lost", NULL) == 0 && nmt_now_ms() < until)
        nmt_sleep_ms(20);
    g_assert_cmpuint(count_lines("lease of", name, "lost", NULL), ==, 1);
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    nm_redis_ok(redis, "DEL %s", key);
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(key);
    g_free(name);
}

/* A bad setting is named, with the value given and what is allowed; a bad
 * URL is shown with its passwords masked. */
static void test_bad_settings_named(void)
{
    netmutex_config_t bad_url = { .url = "redis://bob:s3cret@host:notaport" };
    netmutex_config_t bad_lease = { .lease_ms = 5 };

    capture_start(NETMUTEX_LOG_ERROR);
    nm_assert_rc(netmutex_configure(&bad_url), EINVAL);
    g_assert_cmpuint(count_lines("1 ", "netmutex_config_t.url", "redis://***@host:notaport",
                                 NULL), ==, 1);
    g_assert_cmpuint(count_lines("s3cret", NULL), ==, 0);
    nm_assert_rc(netmutex_configure(&bad_lease), EINVAL);
    g_assert_cmpuint(count_lines("netmutex_config_t.lease_ms", "5 is not from 10", NULL), ==, 1);
    g_setenv("NETMUTEX_IO_TIMEOUT_MS", "soon", TRUE);
    nm_assert_rc(netmutex_configure(NULL), EINVAL);
    g_unsetenv("NETMUTEX_IO_TIMEOUT_MS");
    g_assert_cmpuint(count_lines("NETMUTEX_IO_TIMEOUT_MS=soon", "whole number", NULL), ==, 1);
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL), 0);
    nm_configure(redis);
}

/* netmutex_log goes through the same channel, filtered by level. */
static void test_set_log_levels(void)
{
    capture_start(NETMUTEX_LOG_WARN);
    netmutex_log(NETMUTEX_LOG_WARN, "shown %d", 1);
    netmutex_log(NETMUTEX_LOG_INFO, "hidden %d", 2);
    netmutex_log(NETMUTEX_LOG_OFF, "never");
    g_assert_cmpuint(count_lines("2 shown 1", NULL), ==, 1);
    g_assert_cmpuint(count_lines("hidden", NULL), ==, 0);
    g_assert_cmpuint(count_lines("never", NULL), ==, 0);
    capture_start(NETMUTEX_LOG_OFF);
    netmutex_log(NETMUTEX_LOG_ERROR, "silenced");
    g_assert_cmpuint(count_lines("silenced", NULL), ==, 0);
    nm_assert_rc(netmutex_set_log(-1, NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_DEBUG + 1, NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL), 0);
}

static void test_strerror(void)
{
    const int codes[] = { 0, EINVAL, ENOMEM, EBUSY, EDEADLK, EOWNERDEAD, ENOTRECOVERABLE,
                          EAGAIN, ETIMEDOUT, EPERM, ENOLCK, EIO, ENOENT, EACCES, ENOTSUP,
                          EPROTO };
    for (size_t i = 0; i < G_N_ELEMENTS(codes); i++) {
        const char *text = netmutex_strerror(codes[i]);
        g_assert_nonnull(text);
        g_assert_cmpstr(text, !=, "unknown error");
    }
    g_assert_nonnull(strstr(netmutex_strerror(ENOLCK), "lease"));
    g_assert_nonnull(strstr(netmutex_strerror(EAGAIN), "unreachable"));
    g_assert_nonnull(strstr(netmutex_strerror(ENOTSUP), "evict"));
    g_assert_cmpstr(netmutex_strerror(123456), ==, "unknown error");
    g_assert_cmpstr(netmutex_strerror(-1), ==, "unknown error");
}

/* A user without channel rights: its subscriptions are refused, so no
 * other process could ask it for a cached lease.  It must not cache (each
 * unlock frees the key), and it says why, once. */
static void test_subscribe_refused_no_caching(void)
{
    char *url = nm_redis_url(redis);
    char *carol = g_strdup_printf("unix://carol:pw@%s", url + strlen("unix://"));
    netmutex_config_t cfg = { .url = carol };
    netmutex_status_t st;
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    gint64 end = nmt_now_ms() + nm_ms(10000);

    nm_redis_ok(redis, "ACL SETUSER carol on >pw ~* resetchannels +@all");
    nm_assert_rc(netmutex_configure(&cfg), 0);
    capture_start(NETMUTEX_LOG_WARN);
    while (count_lines("refused a subscription", "NOPERM", NULL) == 0 && nmt_now_ms() < end) {
        nm_assert_rc(netmutex_lock(&m), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
        nmt_sleep_ms(10);
    }
    g_assert_cmpuint(count_lines("refused a subscription", "NOPERM", NULL), ==, 1);
    for (int i = 0; i < 3; i++) {
        nm_assert_rc(netmutex_lock(&m), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
        nm_assert_rc(netmutex_status(name, &st), 0);
        g_assert_cmpint(st.held, ==, 0);
    }
    g_assert_cmpuint(count_lines("refused a subscription", NULL), ==, 1);
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL), 0);
    nm_configure(redis);
    nm_redis_ok(redis, "ACL DELUSER carol");
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
    g_free(carol);
    g_free(url);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/log/outage/reported-once-masked", test_outage_reported_once);
    g_test_add_func("/log/outage/refusal-cause", test_refusal_cause);
    g_test_add_func("/log/outage/stall-reported", test_stall_reported);
    g_test_add_func("/log/lost-lease", test_lost_lease_reported);
    g_test_add_func("/log/outage/request-refusal-cause", test_request_refusal_cause);
    g_test_add_func("/log/config/bad-settings-named", test_bad_settings_named);
    g_test_add_func("/log/cache/subscribe-refused-no-caching", test_subscribe_refused_no_caching);
    g_test_add_func("/log/set-log/levels", test_set_log_levels);
    g_test_add_func("/log/strerror", test_strerror);

    int rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    pthread_mutex_lock(&captured.lock);
    if (captured.lines)
        g_ptr_array_unref(captured.lines);
    pthread_mutex_unlock(&captured.lock);
    return rc;
}
