/*
 * test_stats.c -- per-name statistics (netmutex_stats): exact counts for
 * scripted sequences of every kind, contention here and in another
 * process, hold times at least the sleep, renewals, a lost lease (its key
 * deleted), a cached lease revoked by another process, argument errors,
 * reset, off means no records, and NETMUTEX_STATS=1's table at exit (a
 * child run with the variable, its stderr read).  No upper time bounds.
 */
#include "ac_config.h"

#include "fixture.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static NmRedis *redis;
static const char *self_path;

#define BOUND_MS nm_ms(10000)

/* ---- reading the numbers ----------------------------------------------------- */

typedef struct Find {
    const char *name;
    int kind;
    bool found;
    netmutex_stats_t st;
    unsigned int calls;
    uint64_t last_wait;
    bool sorted;
} Find;

static int find_cb(const char *name, const netmutex_stats_t *st, void *arg)
{
    Find *f = arg;
    if (f->calls++ > 0 && st->wait.total_ns > f->last_wait)
        f->sorted = false;
    f->last_wait = st->wait.total_ns;
    if (strcmp(name, f->name) == 0 && st->kind == f->kind) {
        g_assert_false(f->found);
        f->found = true;
        f->st = *st;
    }
    return 0;
}

/* NAME's numbers as KIND, or false if it has none. */
static bool stats_of(const char *name, int kind, netmutex_stats_t *st)
{
    Find f = { .name = name, .kind = kind, .sorted = true };
    nm_assert_rc(netmutex_stats(find_cb, &f), 0);
    g_assert_true(f.sorted);
    if (f.found)
        *st = f.st;
    return f.found;
}

static netmutex_stats_t must(const char *name, int kind)
{
    netmutex_stats_t st;
    g_assert_true(stats_of(name, kind, &st));
    g_assert_cmpint(st.kind, ==, kind);
    g_assert_cmpuint(st.processes, ==, 1);
    for (size_t i = 0; i < G_N_ELEMENTS(st.nm_reserved); i++)
        g_assert_cmpuint(st.nm_reserved[i], ==, 0);
    return st;
}

static void on(void)
{
    nm_assert_rc(netmutex_set_stats(NETMUTEX_STATS_ON), 0);
}

/* ---- arguments, off, reset ------------------------------------------------------ */

static int stop_cb(const char *name, const netmutex_stats_t *st, void *arg)
{
    (void)name;
    (void)st;
    ++*(int *)arg;
    return 1;
}

static void test_args(void)
{
    int calls = 0;
    netmutex_t m;

    nm_assert_rc(netmutex_stats(NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_set_stats(-1), EINVAL);
    nm_assert_rc(netmutex_set_stats(3), EINVAL);
    on();
    char *name = nm_mutex_init(&m, "args", NETMUTEX_DEFAULT, 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_stats(stop_cb, &calls), ECANCELED);
    g_assert_cmpint(calls, ==, 1);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_off_no_records(void)
{
    netmutex_t m;
    netmutex_stats_t st;

    nm_assert_rc(netmutex_set_stats(NETMUTEX_STATS_OFF), 0);
    char *name = nm_mutex_init(&m, "off", NETMUTEX_DEFAULT, 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_false(stats_of(name, NETMUTEX_KIND_MUTEX, &st));
    nm_assert_rc(netmutex_destroy(&m), 0);
    on();
    g_free(name);
}

static void test_reset_and_destroyed(void)
{
    netmutex_t m;
    netmutex_stats_t st;

    on();
    char *name = nm_mutex_init(&m, "reset", NETMUTEX_DEFAULT, 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    /* Destroyed, still reported. */
    st = must(name, NETMUTEX_KIND_MUTEX);
    g_assert_cmpuint(st.acquisitions, ==, 1);
    nm_assert_rc(netmutex_stats_reset(), 0);
    g_assert_false(stats_of(name, NETMUTEX_KIND_MUTEX, &st));
    /* Used again after the reset: counted from zero. */
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    st = must(name, NETMUTEX_KIND_MUTEX);
    g_assert_cmpuint(st.acquisitions, ==, 1);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- a mutex ---------------------------------------------------------------------- */

static void test_mutex_counts(void)
{
    netmutex_t m;
    const unsigned int n = 7;

    on();
    char *name = nm_mutex_init(&m, "counts", NETMUTEX_RECURSIVE, 0);
    for (unsigned int i = 0; i < n; i++) {
        nm_assert_rc(netmutex_lock(&m), 0);
        nm_assert_rc(netmutex_lock(&m), 0); /* a relock is no acquisition */
        nm_assert_rc(netmutex_unlock(&m), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
    }
    nm_assert_rc(netmutex_lock(&m), 0);
    nmt_sleep_ms(30);
    nm_assert_rc(netmutex_unlock(&m), 0);
    netmutex_stats_t st = must(name, NETMUTEX_KIND_MUTEX);
    g_assert_cmpuint(st.acquisitions, ==, n + 1);
    g_assert_cmpuint(st.contended, ==, 0);
    g_assert_cmpuint(st.shared, ==, 0);
    g_assert_cmpuint(st.lost, ==, 0);
    g_assert_cmpuint(st.deadlocks, ==, 0);
    /* The thread's first connection, if this case runs alone (-p). */
    g_assert_cmpuint(st.reconnects, <=, 1);
    /* Caching is off: every acquisition and hold paid a round trip, so
     * every one was timed. */
    g_assert_cmpuint(st.wait.count, ==, n + 1);
    g_assert_cmpuint(st.hold.count, ==, n + 1);
    g_assert_cmpuint(st.hold.max_ns, >=, 30 * 1000000ull);
    g_assert_cmpuint(st.hold.total_ns, >=, st.hold.max_ns);
    g_assert_cmpuint(st.hold.p50_ns, <=, st.hold.p99_ns);
    g_assert_cmpuint(st.hold.p99_ns, <=, st.hold.max_ns);
    g_assert_cmpuint(st.wait.total_ns, >, 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

typedef struct Locker {
    netmutex_t *m;
    int rc;
} Locker;

static void *lock_unlock(void *arg)
{
    Locker *l = arg;
    l->rc = netmutex_lock(l->m);
    if (l->rc == 0)
        l->rc = netmutex_unlock(l->m);
    return NULL;
}

static void test_mutex_contended_locally(void)
{
    netmutex_t m;
    pthread_t t;
    Locker l;

    on();
    char *name = nm_mutex_init(&m, "local", NETMUTEX_DEFAULT, 0);
    l.m = &m;
    nm_assert_rc(netmutex_lock(&m), 0);
    g_assert_cmpint(pthread_create(&t, NULL, lock_unlock, &l), ==, 0);
    nmt_sleep_ms(50);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_cmpint(pthread_join(t, NULL), ==, 0);
    nm_assert_rc(l.rc, 0);
    netmutex_stats_t st = must(name, NETMUTEX_KIND_MUTEX);
    g_assert_cmpuint(st.acquisitions, ==, 2);
    g_assert_cmpuint(st.contended, ==, 1);
    g_assert_cmpuint(st.handoffs, <=, 1);
    g_assert_cmpuint(st.wait.max_ns, >=, 40 * 1000000ull);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_mutex_contended_by_process(void)
{
    netmutex_t m;
    pthread_t t;
    Locker l;

    on();
    char *name = nm_mutex_init(&m, "remote", NETMUTEX_DEFAULT, 0);
    NmRemote *rem = nm_remote_start(redis, name, NETMUTEX_DEFAULT, 0);
    nm_assert_rc(nm_remote(rem, 'l'), 0);
    l.m = &m;
    g_assert_cmpint(pthread_create(&t, NULL, lock_unlock, &l), ==, 0);
    nmt_sleep_ms(100);
    nm_assert_rc(nm_remote(rem, 'u'), 0);
    g_assert_cmpint(pthread_join(t, NULL), ==, 0);
    nm_assert_rc(l.rc, 0);
    netmutex_stats_t st = must(name, NETMUTEX_KIND_MUTEX);
    g_assert_cmpuint(st.acquisitions, ==, 1);
    g_assert_cmpuint(st.contended, ==, 1);
    g_assert_cmpuint(st.wait.max_ns, >=, 50 * 1000000ull);
    nm_remote_stop(rem);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* The server closes every client's connection: the next lock dials. */
static void test_mutex_reconnect(void)
{
    netmutex_t m;

    on();
    char *name = nm_mutex_init(&m, "reconnect", NETMUTEX_DEFAULT, 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    netmutex_stats_t before = must(name, NETMUTEX_KIND_MUTEX);
    nm_redis_ok(redis, "CLIENT KILL TYPE normal SKIPME yes");
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    netmutex_stats_t st = must(name, NETMUTEX_KIND_MUTEX);
    g_assert_cmpuint(st.acquisitions, ==, 2);
    g_assert_cmpuint(st.reconnects, >=, before.reconnects + 1);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_mutex_renewals(void)
{
    netmutex_t m;
    const unsigned int lease = 300;

    on();
    char *name = nm_mutex_init(&m, "renew", NETMUTEX_DEFAULT, lease);
    nm_assert_rc(netmutex_lock(&m), 0);
    gint64 end = nmt_now_ms() + BOUND_MS;
    netmutex_stats_t st;
    do {
        nmt_sleep_ms(50);
        st = must(name, NETMUTEX_KIND_MUTEX);
    } while (st.renewals < 3 && nmt_now_ms() < end);
    g_assert_cmpuint(st.renewals, >=, 3);
    g_assert_cmpuint(st.lost, ==, 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_mutex_lost(void)
{
    netmutex_t m;
    uint64_t left;

    on();
    char *name = nm_mutex_init(&m, "lost", NETMUTEX_DEFAULT, 300);
    nm_assert_rc(netmutex_lock(&m), 0);
    char *key = nm_lock_key(name);
    nm_redis_ok(redis, "DEL %s", key);
    g_free(key);
    gint64 end = nmt_now_ms() + BOUND_MS;
    int rc;
    while ((rc = netmutex_validity(&m, &left)) == 0 && nmt_now_ms() < end)
        nmt_sleep_ms(10);
    nm_assert_rc(rc, ENOLCK);
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    netmutex_stats_t st = must(name, NETMUTEX_KIND_MUTEX);
    g_assert_cmpuint(st.acquisitions, ==, 1);
    g_assert_cmpuint(st.lost, ==, 1);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* A cached lease asked back by another process: one revocation. */
static void test_mutex_revoked(void)
{
    netmutex_t m;
    netmutex_attr_t attr;
    netmutex_config_t cfg = { .cache_idle_ms = 60000, .io_timeout_ms = 10000 };

    on();
    g_unsetenv("NETMUTEX_CACHE");
    nm_configure_with(redis, cfg);
    char *name = nm_test_name("revoked");
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, 1), 0);
    nm_assert_rc(netmutex_init(&m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    /* Cached once the holder listens for requests: lock until it is. */
    gint64 end = nmt_now_ms() + BOUND_MS;
    netmutex_status_t s;
    do {
        nm_assert_rc(netmutex_lock(&m), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
        nm_assert_rc(netmutex_status(name, &s), 0);
    } while (!s.cached && nmt_now_ms() < end);
    g_assert_true(s.cached);
    netmutex_stats_t before = must(name, NETMUTEX_KIND_MUTEX);
    g_assert_cmpuint(before.revocations, ==, 0);
    NmRemote *rem = nm_remote_start(redis, name, NETMUTEX_DEFAULT, 0);
    nm_assert_rc(nm_remote(rem, 'l'), 0);
    nm_assert_rc(nm_remote(rem, 'u'), 0);
    nm_remote_stop(rem);
    netmutex_stats_t st = must(name, NETMUTEX_KIND_MUTEX);
    g_assert_cmpuint(st.revocations, ==, 1);
    g_assert_cmpuint(st.acquisitions, ==, before.acquisitions);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_test_cache_off();
    nm_configure(redis);
    g_free(name);
}

/* ---- the other kinds ------------------------------------------------------------------ */

static void test_rwlock(void)
{
    netmutex_rwlock_t rw;

    on();
    char *name = nm_test_name("rw");
    nm_assert_rc(netmutex_rwlock_init(&rw, name, NULL), 0);
    for (int i = 0; i < 2; i++) {
        nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0);
        nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    }
    nm_assert_rc(netmutex_rwlock_wrlock(&rw), 0);
    nmt_sleep_ms(20);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    netmutex_stats_t st = must(name, NETMUTEX_KIND_RWLOCK);
    g_assert_cmpuint(st.acquisitions, ==, 3);
    g_assert_cmpuint(st.shared, ==, 2);
    g_assert_cmpuint(st.contended, ==, 0);
    g_assert_cmpuint(st.hold.count, ==, 3);
    g_assert_cmpuint(st.hold.max_ns, >=, 20 * 1000000ull);
    /* A mutex of the same name is another lock. */
    netmutex_stats_t other;
    g_assert_false(stats_of(name, NETMUTEX_KIND_MUTEX, &other));
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_free(name);
}

static void test_sem(void)
{
    netmutex_sem_t s;

    on();
    char *name = nm_test_name("sem");
    nm_assert_rc(netmutex_sem_init(&s, name, 2, NULL), 0);
    for (int i = 0; i < 3; i++) {
        nm_assert_rc(netmutex_sem_wait(&s), 0);
        nm_assert_rc(netmutex_sem_wait(&s), 0);
        nm_assert_rc(netmutex_sem_post(&s), 0);
        nm_assert_rc(netmutex_sem_post(&s), 0);
    }
    netmutex_stats_t st = must(name, NETMUTEX_KIND_SEM);
    g_assert_cmpuint(st.acquisitions, ==, 6);
    g_assert_cmpuint(st.hold.count, ==, 6);
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    g_free(name);
}

typedef struct Waiter {
    netmutex_t *m;
    netmutex_cond_t *c;
    volatile int go;
    int rc;
} Waiter;

static void *cond_waiter(void *arg)
{
    Waiter *w = arg;
    int rc = netmutex_lock(w->m);
    while (rc == 0 && !__atomic_load_n(&w->go, __ATOMIC_ACQUIRE))
        rc = netmutex_cond_wait(w->c, w->m);
    if (rc == 0)
        rc = netmutex_unlock(w->m);
    w->rc = rc;
    return NULL;
}

static void test_cond(void)
{
    netmutex_t m;
    netmutex_cond_t c;
    struct timespec ts;

    on();
    char *mname = nm_mutex_init(&m, "condmu", NETMUTEX_DEFAULT, 0);
    char *name = nm_test_name("cond");
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_deadline(&ts, CLOCK_REALTIME, 30);
    nm_assert_rc(netmutex_cond_timedwait(&c, &m, &ts), ETIMEDOUT);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_cond_broadcast(&c), 0);

    Waiter w = { .m = &m, .c = &c };
    pthread_t t;
    g_assert_cmpint(pthread_create(&t, NULL, cond_waiter, &w), ==, 0);
    __atomic_store_n(&w.go, 1, __ATOMIC_RELEASE);
    /* Signal until the waiter is gone (it may not be waiting yet). */
    unsigned int signals = 0;
    gint64 end = nmt_now_ms() + BOUND_MS;
    netmutex_stats_t st;
    for (;;) {
        nm_assert_rc(netmutex_lock(&m), 0);
        nm_assert_rc(netmutex_cond_signal(&c), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
        signals++;
        if (pthread_tryjoin_np(t, NULL) == 0)
            break;
        g_assert_cmpint(nmt_now_ms(), <, end);
        nmt_sleep_ms(20);
    }
    nm_assert_rc(w.rc, 0);
    st = must(name, NETMUTEX_KIND_COND);
    g_assert_cmpuint(st.timeouts, ==, 1);
    g_assert_cmpuint(st.broadcasts, ==, 1);
    g_assert_cmpuint(st.signals, ==, signals);
    g_assert_cmpuint(st.acquisitions, ==, 1 + st.wakeups);
    g_assert_cmpuint(st.wait.count, ==, st.acquisitions);
    g_assert_cmpuint(st.wait.max_ns, >=, 20 * 1000000ull);
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
    g_free(mname);
}

/* ---- NETMUTEX_STATS in the environment ------------------------------------------------------ */

/* The child's part (this program run with --stats-child URL NAME): three
 * locks, then a forked grandchild that uses no lock exits, then exit. */
static int stats_child(const char *url, const char *name)
{
    netmutex_config_t cfg = { .url = url };
    netmutex_t m;
    if (netmutex_configure(&cfg) != 0 || netmutex_init(&m, name, NULL) != 0)
        return 2;
    for (int i = 0; i < 3; i++)
        if (netmutex_lock(&m) != 0 || netmutex_unlock(&m) != 0)
            return 3;
    /* The grandchild, which used no lock, must print nothing at its
     * exit.  Not under a sanitizer: its allocator does not survive a fork
     * while the background thread runs (nm_fork_with_threads_is_safe);
     * the grandchild's exit hung there. */
    if (!nm_fork_with_threads_is_safe())
        return 0;
    pid_t pid = fork();
    if (pid == 0)
        exit(0);
    int status;
    waitpid(pid, &status, 0);
    return 0;
}

static char *run_child(const char *value, const char *name)
{
    char *url = nm_redis_url(redis);
    char *argv[] = { (char *)self_path, "--stats-child", url, (char *)name, NULL };
    char **envp = g_get_environ();
    envp = g_environ_setenv(envp, "NETMUTEX_STATS", value, TRUE);
    char *out = NULL, *err = NULL;
    int status = -1;
    GError *error = NULL;
    g_assert_true(g_spawn_sync(NULL, argv, envp, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                               &status, &error));
    g_assert_no_error(error);
    g_assert_true(g_spawn_check_wait_status(status, NULL));
    g_strfreev(envp);
    g_free(url);
    g_free(out);
    return err;
}

static void test_env_print_at_exit(void)
{
    char *name = nm_test_name("atexit");
    char *err = run_child("1", name);
    g_test_message("child's stderr:\n%s", err);
    /* One table: the grandchild used no lock and printed none. */
    const char *table = strstr(err, "netmutex: statistics of pid");
    g_assert_nonnull(table);
    g_assert_null(strstr(table + 1, "netmutex: statistics of pid"));
    char *row = strstr(err, name);
    g_assert_nonnull(row);
    char **f = g_strsplit_set(row, " \n", -1);
    /* name, kind, acquired, contended, ... (collapsing the spaces) */
    char *words[4] = { 0 };
    for (int i = 0, k = 0; f[i] && k < 4; i++)
        if (*f[i])
            words[k++] = f[i];
    g_assert_cmpstr(words[1], ==, "mutex");
    g_assert_cmpstr(words[2], ==, "3");
    g_assert_cmpstr(words[3], ==, "0");
    g_strfreev(f);
    g_free(err);

    err = run_child("0", name);
    g_assert_null(strstr(err, "statistics of pid"));
    g_free(err);
    err = run_child("bogus", name);
    g_assert_nonnull(strstr(err, "NETMUTEX_STATS=bogus"));
    g_assert_null(strstr(err, "statistics of pid"));
    g_free(err);
    g_free(name);
}

int main(int argc, char **argv)
{
    int rc;

    if (argc == 4 && strcmp(argv[1], "--stats-child") == 0)
        return stats_child(argv[2], argv[3]);
    self_path = argv[0];
    nm_test_init(&argc, &argv);
    nm_test_cache_off();
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/stats/args", test_args);
    g_test_add_func("/stats/off/no-records", test_off_no_records);
    g_test_add_func("/stats/reset/destroyed-kept-until-reset", test_reset_and_destroyed);
    g_test_add_func("/stats/mutex/counts-and-hold", test_mutex_counts);
    g_test_add_func("/stats/mutex/contended-locally", test_mutex_contended_locally);
    g_test_add_func("/stats/mutex/contended-by-another-process", test_mutex_contended_by_process);
    g_test_add_func("/stats/mutex/reconnect", test_mutex_reconnect);
    g_test_add_func("/stats/mutex/renewals", test_mutex_renewals);
    g_test_add_func("/stats/mutex/lost-key-deleted", test_mutex_lost);
    g_test_add_func("/stats/mutex/revoked-by-another-process", test_mutex_revoked);
    g_test_add_func("/stats/rwlock/reads-and-writes", test_rwlock);
    g_test_add_func("/stats/sem/permits", test_sem);
    g_test_add_func("/stats/cond/waits-signals-timeouts", test_cond);
    g_test_add_func("/stats/env/print-at-exit", test_env_print_at_exit);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
