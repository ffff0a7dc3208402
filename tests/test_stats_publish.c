/*
 * test_stats_publish.c -- published statistics (NETMUTEX_STATS=publish)
 * and their reader, netmutex_stats_cluster: two child processes lock one
 * name, the reader sees both with the sums of their counts; a child that
 * exits deletes its key at once, a killed one's key expires within
 * seconds (polled, with a scaled bound); a pattern filters; bad
 * arguments.
 */
#include "ac_config.h"

#include "fixture.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static NmRedis *redis;
static const char *self_path;

#define LOCKS 20

/* A child: LOCKS locks of NAME, then it waits for its stdin to close. */
static int publish_child(const char *url, const char *name)
{
    netmutex_config_t cfg = { .url = url };
    netmutex_t m;
    char c;
    if (netmutex_configure(&cfg) != 0 || netmutex_init(&m, name, NULL) != 0)
        return 2;
    for (int i = 0; i < LOCKS; i++) {
        if (netmutex_lock(&m) != 0)
            return 3;
        usleep(1000);
        if (netmutex_unlock(&m) != 0)
            return 3;
    }
    while (read(0, &c, 1) > 0)
        ;
    return 0;
}

typedef struct Child {
    GPid pid;
    int in;
} Child;

static Child start_child(const char *name)
{
    char *url = nm_redis_url(redis);
    char *argv[] = { (char *)self_path, "--publish-child", url, (char *)name, NULL };
    char **envp = g_environ_setenv(g_get_environ(), "NETMUTEX_STATS", "publish", TRUE);
    GError *error = NULL;
    Child c = { 0, -1 };
    g_assert_true(g_spawn_async_with_pipes(NULL, argv, envp, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                           NULL, &c.pid, &c.in, NULL, NULL, &error));
    g_assert_no_error(error);
    g_strfreev(envp);
    g_free(url);
    return c;
}

static int wait_child(Child *c)
{
    int status;
    if (c->in >= 0)
        close(c->in);
    c->in = -1;
    g_assert_cmpint(waitpid(c->pid, &status, 0), ==, c->pid);
    return status;
}

typedef struct Seen {
    const char *name;
    unsigned int calls, found;
    uint64_t last_wait;
    bool sorted;
    netmutex_stats_t st;
} Seen;

static int seen_cb(const char *name, const netmutex_stats_t *st, void *arg)
{
    Seen *s = arg;
    if (s->calls++ > 0 && st->wait.total_ns > s->last_wait)
        s->sorted = false;
    s->last_wait = st->wait.total_ns;
    if (strcmp(name, s->name) == 0 && st->kind == NETMUTEX_KIND_MUTEX) {
        s->found++;
        s->st = *st;
    }
    return 0;
}

/* NAME's merged numbers now (PATTERN: the reader's); false if none. */
static bool read_name(const char *pattern, const char *name, netmutex_stats_t *st,
                      unsigned int *calls)
{
    Seen s = { .name = name, .sorted = true };
    netmutex_list_info_t info;
    nm_assert_rc(netmutex_stats_cluster(pattern, seen_cb, &s, &info), 0);
    g_assert_true(s.sorted);
    g_assert_cmpuint(s.found, <=, 1);
    g_assert_cmpuint(info.answered, ==, 1);
    if (calls)
        *calls = s.calls;
    if (s.found)
        *st = s.st;
    return s.found;
}

/* Polls until NAME is reported by PROCESSES processes with ACQ
 * acquisitions in all (0 processes: until it is gone). */
static bool wait_for(const char *name, unsigned int processes, uint64_t acq,
                     netmutex_stats_t *st)
{
    gint64 end = g_get_monotonic_time() + (gint64)nm_ms(15000) * 1000;
    do {
        netmutex_stats_t now;
        bool found = read_name(NULL, name, &now, NULL);
        if (processes == 0 && !found)
            return true;
        if (found && now.processes == processes && now.acquisitions == acq) {
            if (st)
                *st = now;
            return true;
        }
        nmt_sleep_ms(100);
    } while (g_get_monotonic_time() < end);
    return false;
}

static void test_two_processes(void)
{
    char *name = nm_test_name("pub");
    Child a = start_child(name), b = start_child(name);
    netmutex_stats_t st;
    g_assert_true(wait_for(name, 2, 2 * LOCKS, &st));
    g_assert_cmpuint(st.kind, ==, NETMUTEX_KIND_MUTEX);
    g_assert_cmpuint(st.wait.count, ==, 2 * LOCKS);
    g_assert_cmpuint(st.contended, <=, 2 * LOCKS);

    /* The pattern: the name itself, a glob of it, and one that misses. */
    unsigned int calls;
    netmutex_stats_t got;
    g_assert_true(read_name(name, name, &got, &calls));
    g_assert_cmpuint(calls, ==, 1);
    char *glob = g_strdup_printf("%.*s*", (int)strlen(name) - 1, name);
    g_assert_true(read_name(glob, name, &got, NULL));
    g_assert_false(read_name("no-such-name-*", name, &got, &calls));
    g_assert_cmpuint(calls, ==, 0);
    g_free(glob);

    /* Killed: its key expires. */
    g_assert_cmpint(kill(a.pid, SIGKILL), ==, 0);
    wait_child(&a);
    g_assert_true(wait_for(name, 1, LOCKS, NULL));

    /* Exited: its key is deleted at exit, nothing to wait for. */
    int status = wait_child(&b);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_false(read_name(NULL, name, &got, NULL));
    g_free(name);
}

/* This process publishes too once switched, and stops when switched off. */
static void test_set_stats(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "self", NETMUTEX_DEFAULT, 0);
    nm_assert_rc(netmutex_set_stats(NETMUTEX_STATS_PUBLISH), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_true(wait_for(name, 1, 1, NULL));
    nm_assert_rc(netmutex_set_stats(NETMUTEX_STATS_OFF), 0);
    g_assert_true(wait_for(name, 0, 0, NULL));
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static int never(const char *name, const netmutex_stats_t *st, void *arg)
{
    (void)name, (void)st, (void)arg;
    return 1;
}

static void test_args(void)
{
    netmutex_list_info_t info;
    memset(&info, 0xff, sizeof info);
    nm_assert_rc(netmutex_stats_cluster(NULL, NULL, NULL, &info), EINVAL);
    g_assert_cmpuint(info.answered, ==, 0);
    nm_assert_rc(netmutex_stats_cluster("", never, NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_stats_cluster("a[", never, NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_stats_cluster("a\\", never, NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_stats_cluster("*", never, NULL, NULL), 0);
}

int main(int argc, char **argv)
{
    int rc;

    if (argc == 4 && strcmp(argv[1], "--publish-child") == 0)
        return publish_child(argv[2], argv[3]);
    self_path = argv[0];
    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/stats-publish/args", test_args);
    g_test_add_func("/stats-publish/two-processes", test_two_processes);
    g_test_add_func("/stats-publish/set-stats", test_set_stats);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
