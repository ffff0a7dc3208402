/*
 * test_lockdep.c -- lock-order checking (NETMUTEX_LOCKDEP=1): two
 * processes that take two names in opposite orders, never at the same
 * time, make one warning in the whole cluster, naming both names, both
 * pids and both call sites; one order taken twice makes none; checking is
 * off by default (no key, no line); the orders' keys expire once their
 * processes are gone; a mutex and a read-write lock of one name are two
 * locks; on a Redis Cluster as on one server.
 *
 * The call sites of the porting layer's calls: with NETMUTEX_CALL_SITES
 * (sites_on.c) the inversion names that file and the lines of the calls,
 * a condition wait's retaking of its mutex included; without it
 * (sites_off.c) a return address, as for the native calls; a site named
 * by a call that took no hold goes to no later hold.
 *
 * The workers are this program exec'd anew (lockdep_worker), so that each
 * reads NETMUTEX_LOCKDEP at its own start, as a program does; each writes
 * the lines its logger receives to a file the test reads.
 */
#include "ac_config.h"

#include "fixture.h"
#include "sites.h"
#include "topo_cluster.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NETMUTEX_PTHREAD_DECLARE_ONLY /* the types and calls, nothing renamed */
#include <netmutex/pthread.h>

#define WORKER_FLAG "--lockdep-worker"
/* The workers' lease: the orders' keys live three half-leases. */
#define LEASE_MS 1000

static NmRedis *redis;
static char *self_path;
/* Where the workers go (NULL: REDIS), and the servers whose keys count. */
static char *worker_url;
static NmRedis *count_on[NM_TOPO_NODES];
static int n_count_on;

/* ---- the worker ---------------------------------------------------------- */

static void to_file(int level, const char *message, void *arg)
{
    FILE *f = arg;
    (void)level;
    fprintf(f, "%s\n", message);
    fflush(f);
}

typedef union prim {
    netmutex_t m;
    netmutex_rwlock_t rw;
} prim_t;

/* Takes each "m:NAME" (mutex) or "r:NAME" (rwlock, write) of SPEC, a
 * comma-separated list, in order, then gives them back in reverse. */
static int take_in_order(const char *spec)
{
    char **items = g_strsplit(spec, ",", 0);
    guint n = g_strv_length(items);
    prim_t *p = g_new0(prim_t, n);
    int rc = 0;
    for (guint i = 0; i < n && !rc; i++)
        rc = items[i][0] == 'm' ? netmutex_init(&p[i].m, items[i] + 2, NULL)
                                : netmutex_rwlock_init(&p[i].rw, items[i] + 2, NULL);
    for (guint i = 0; i < n && !rc; i++)
        rc = items[i][0] == 'm' ? netmutex_lock(&p[i].m) : netmutex_rwlock_wrlock(&p[i].rw);
    for (guint i = n; i > 0 && !rc; i--)
        rc = items[i - 1][0] == 'm' ? netmutex_unlock(&p[i - 1].m)
                                    : netmutex_rwlock_unlock(&p[i - 1].rw);
    for (guint i = 0; i < n && !rc; i++)
        rc = items[i][0] == 'm' ? netmutex_destroy(&p[i].m) : netmutex_rwlock_destroy(&p[i].rw);
    g_free(p);
    g_strfreev(items);
    return rc;
}

/* A round of the porting layer's calls (sites.h): SPEC is
 * "sites,HOW,A,B", HOW one of on-forward, on-reverse, on-cond (A then B,
 * B then A, A then B then a wait on A, named sites), off-forward,
 * off-reverse (no sites), stale (B, then calls that name sites and take
 * no hold, then A).  The lines sites.h's calls store are added to SAID. */
static int take_sites(const char *spec, GString *said)
{
    char **items = g_strsplit(spec, ",", 0);
    netmutex_pthread_mutex_t a = NETMUTEX_PTHREAD_INITIALIZER;
    netmutex_pthread_mutex_t b = NETMUTEX_PTHREAD_INITIALIZER;
    const char *how = items[1];
    int line = 0, wait_line = 0, rc = g_strv_length(items) == 4 ? 0 : -1;
    if (!rc)
        rc = netmutex_pthread_setname(&a, items[2]);
    if (!rc)
        rc = netmutex_pthread_setname(&b, items[3]);
    if (rc)
        ;
    else if (strcmp(how, "on-forward") == 0)
        rc = sites_on_forward(&a, &b, &line);
    else if (strcmp(how, "on-reverse") == 0)
        rc = sites_on_reverse(&a, &b, &line);
    else if (strcmp(how, "on-cond") == 0)
        rc = sites_on_cond(&a, &b, &line, &wait_line);
    else if (strcmp(how, "off-forward") == 0)
        rc = sites_off_forward(&a, &b, &line);
    else if (strcmp(how, "off-reverse") == 0)
        rc = sites_off_reverse(&a, &b, &line);
    else if (strcmp(how, "stale") == 0) {
        if (!(rc = sites_off_lock(&b))) {
            if (!(rc = sites_on_no_hold(&b)) && !(rc = sites_off_lock(&a)))
                rc = sites_off_unlock(&a);
            int rb = sites_off_unlock(&b);
            rc = rc ? rc : rb;
        }
    } else
        rc = -1;
    if (line)
        g_string_append_printf(said, " %d", line);
    if (wait_line)
        g_string_append_printf(said, " %d", wait_line);
    int ra = netmutex_pthread_mutex_destroy(&a), rb = netmutex_pthread_mutex_destroy(&b);
    g_strfreev(items);
    return rc ? rc : ra ? ra : rb;
}

/* argv: flag, url, log file, then one spec per round (see take_in_order
 * and take_sites).  Says "ready" after its rounds, with the lines the
 * rounds of take_sites stored, then waits for its stdin to close. */
static int lockdep_worker(int argc, char **argv)
{
    FILE *log = fopen(argv[3], "a");
    netmutex_config_t cfg = { 0 };
    GString *said = g_string_new("ready");
    char buf[16];
    if (!log || netmutex_set_log(NETMUTEX_LOG_WARN, to_file, log) != 0)
        return 2;
    cfg.url = argv[2];
    cfg.lease_ms = LEASE_MS;
    if (netmutex_configure(&cfg) != 0)
        return 3;
    for (int i = 4; i < argc; i++)
        if ((g_str_has_prefix(argv[i], "sites,") ? take_sites(argv[i], said)
                                                  : take_in_order(argv[i])) != 0)
            return 4;
    printf("%s\n", said->str);
    g_string_free(said, TRUE);
    fflush(stdout);
    while (read(0, buf, sizeof buf) > 0)
        ;
    return netmutex_shutdown() == 0 ? 0 : 5;
}

/* ---- the test's side ------------------------------------------------------ */

typedef struct worker {
    GPid pid;
    int in, out;
    int lines[2]; /* what it said after "ready" (take_sites), or 0 */
} worker_t;

/* Starts a worker with NETMUTEX_LOCKDEP=LOCKDEP (NULL: unset) running the
 * rounds of SPECS (NULL-terminated), logging to LOG_PATH; returns once it
 * is ready. */
static worker_t start_worker(const char *lockdep, const char *log_path, const char *const *specs)
{
    worker_t w;
    GPtrArray *args = g_ptr_array_new();
    char *url = worker_url ? g_strdup(worker_url) : nm_redis_url(redis);
    g_ptr_array_add(args, self_path);
    g_ptr_array_add(args, (char *)WORKER_FLAG);
    g_ptr_array_add(args, url);
    g_ptr_array_add(args, (char *)log_path);
    for (; *specs; specs++)
        g_ptr_array_add(args, (char *)*specs);
    g_ptr_array_add(args, NULL);
    char **env = g_get_environ();
    env = lockdep ? g_environ_setenv(env, "NETMUTEX_LOCKDEP", lockdep, TRUE)
                  : g_environ_unsetenv(env, "NETMUTEX_LOCKDEP");
    /* A worker takes locks in opposite orders on purpose (the cond case
     * in one thread: the wait re-takes A while B is held): under TSan,
     * whose own lock-order check would stop it, that check is off for
     * the workers (the test process keeps it). */
    const char *tsan = g_environ_getenv(env, "TSAN_OPTIONS");
    char *tsan_opts = g_strdup_printf("%s%sdetect_deadlocks=0", tsan ? tsan : "",
                                      tsan && *tsan ? ":" : "");
    env = g_environ_setenv(env, "TSAN_OPTIONS", tsan_opts, TRUE);
    g_free(tsan_opts);
    GError *error = NULL;
    gboolean ok = g_spawn_async_with_pipes(NULL, (char **)args->pdata, env,
                                           G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &w.pid,
                                           &w.in, &w.out, NULL, &error);
    g_assert_no_error(error);
    g_assert_true(ok);
    char line[64] = "";
    size_t got = 0;
    while (got < sizeof line - 1 && !strchr(line, '\n')) {
        ssize_t n = read(w.out, line + got, sizeof line - 1 - got);
        g_assert_cmpint(n, >, 0);
        got += (size_t)n;
    }
    g_assert_true(g_str_has_prefix(line, "ready"));
    w.lines[0] = w.lines[1] = 0;
    (void)sscanf(line, "ready %d %d", &w.lines[0], &w.lines[1]);
    g_strfreev(env);
    g_ptr_array_unref(args);
    g_free(url);
    return w;
}

/* Closes the worker's stdin and waits (bounded) for it to exit 0. */
static void stop_worker(worker_t *w)
{
    close(w->in);
    close(w->out);
    nm_child_wait_ok(w->pid, nm_ms(20000));
}

/* How many keys match PATTERN, over the servers of count_on. */
static long long count_keys(const char *pattern)
{
    long long n = 0;
    for (int i = 0; i < n_count_on; i++) {
        redisReply *r = nm_redis_cmd(count_on[i], "KEYS %s", pattern);
        g_assert_cmpint(r->type, ==, REDIS_REPLY_ARRAY);
        n += (long long)r->elements;
        freeReplyObject(r);
    }
    return n;
}

/* Polls until the keys matching PATTERN are N; false after BOUND_MS
 * (scaled). */
static gboolean wait_keys(const char *pattern, long long n, unsigned int bound_ms)
{
    gint64 until = nmt_now_ms() + nm_ms(bound_ms);
    while (count_keys(pattern) != n) {
        if (nmt_now_ms() > until)
            return FALSE;
        nmt_sleep_ms(20);
    }
    return TRUE;
}

/* The lines of the file at PATH that contain "lock order inversion". */
static GPtrArray *inversions(const char *path)
{
    GPtrArray *lines = g_ptr_array_new_with_free_func(g_free);
    char *text = NULL;
    if (g_file_get_contents(path, &text, NULL, NULL)) {
        char **all = g_strsplit(text, "\n", 0);
        for (char **l = all; *l; l++)
            if (strstr(*l, "lock order inversion"))
                g_ptr_array_add(lines, g_strdup(*l));
        g_strfreev(all);
    }
    g_free(text);
    return lines;
}

static gboolean wait_inversions(const char *path, guint n, unsigned int bound_ms)
{
    gint64 until = nmt_now_ms() + nm_ms(bound_ms);
    for (;;) {
        GPtrArray *l = inversions(path);
        guint have = l->len;
        g_ptr_array_unref(l);
        if (have >= n)
            return TRUE;
        if (nmt_now_ms() > until)
            return FALSE;
        nmt_sleep_ms(20);
    }
}

static char *log_file(const char *tag)
{
    return g_build_filename(nm_redis_dir(redis), tag, NULL);
}

/* Two processes, A then B and B then A, one after the other: one line,
 * naming both names, pids and sites; the keys go once both have left. */
static void test_inversion(void)
{
    char *a = nm_test_name("inv-a"), *b = nm_test_name("inv-b");
    char *ab = g_strdup_printf("m:%s,m:%s", a, b), *ba = g_strdup_printf("m:%s,m:%s", b, a);
    char *path = log_file("inversion.log");
    const char *first[] = { ab, NULL }, *second[] = { ba, NULL };

    worker_t w1 = start_worker("1", path, first);
    g_assert_true(wait_keys("netmutex:{o*", 1, 10000));
    worker_t w2 = start_worker("1", path, second);
    g_assert_true(wait_keys("netmutex:{o*", 2, 10000));
    g_assert_true(wait_inversions(path, 1, 10000));
    g_assert_true(wait_keys("netmutex:{i*", 1, 10000));
    /* Both have looked: any second line would come within a few periods. */
    nmt_sleep_ms(nm_ms(3 * LEASE_MS));
    GPtrArray *lines = inversions(path);
    g_assert_cmpuint(lines->len, ==, 1);
    const char *line = g_ptr_array_index(lines, 0);
    char *pid1 = g_strdup_printf(":%d ", (int)w1.pid), *pid2 = g_strdup_printf(":%d ", (int)w2.pid);
    char *qa = g_strdup_printf("mutex \"%s\"", a), *qb = g_strdup_printf("mutex \"%s\"", b);
    g_test_message("%s", line);
    g_assert_nonnull(strstr(line, qa));
    g_assert_nonnull(strstr(line, qb));
    g_assert_nonnull(strstr(line, pid1));
    g_assert_nonnull(strstr(line, pid2));
    /* Both sites: this program's take_in_order, as module+offset. */
    const char *site = strstr(line, "test_lockdep+0x");
    g_assert_nonnull(site);
    g_assert_nonnull(strstr(site + 1, "test_lockdep+0x"));

    stop_worker(&w1);
    stop_worker(&w2);
    g_assert_true(wait_keys("netmutex:{o*", 0, 10000));
    g_assert_true(wait_keys("netmutex:{i*", 0, 10000));
    g_ptr_array_unref(lines);
    g_free(pid1), g_free(pid2), g_free(qa), g_free(qb);
    g_free(a), g_free(b), g_free(ab), g_free(ba), g_free(path);
}

/* On a Redis Cluster: the orders and the claim on the masters of their
 * slots, one line, and the keys gone after the workers. */
static void test_cluster(void)
{
    NmTopo *t = nm_topo_start();
    worker_url = nm_topo_url(t);
    n_count_on = 0;
    for (int i = 0; i < NM_TOPO_NODES; i++)
        if (nm_topo_is_master(t->node[i]))
            count_on[n_count_on++] = t->node[i];
    char *a = nm_test_name("cl-a"), *b = nm_test_name("cl-b");
    char *ab = g_strdup_printf("m:%s,m:%s", a, b), *ba = g_strdup_printf("m:%s,m:%s", b, a);
    char *path = log_file("cluster.log");
    const char *first[] = { ab, NULL }, *second[] = { ba, NULL };

    worker_t w1 = start_worker("1", path, first);
    g_assert_true(wait_keys("netmutex:{o*", 1, 10000));
    worker_t w2 = start_worker("1", path, second);
    g_assert_true(wait_inversions(path, 1, 10000));
    g_assert_true(wait_keys("netmutex:{o*", 2, 10000));
    g_assert_true(wait_keys("netmutex:{i*", 1, 10000));
    nmt_sleep_ms(nm_ms(3 * LEASE_MS));
    GPtrArray *lines = inversions(path);
    g_assert_cmpuint(lines->len, ==, 1);
    char *pid1 = g_strdup_printf(":%d ", (int)w1.pid), *pid2 = g_strdup_printf(":%d ", (int)w2.pid);
    g_assert_nonnull(strstr(g_ptr_array_index(lines, 0), pid1));
    g_assert_nonnull(strstr(g_ptr_array_index(lines, 0), pid2));
    stop_worker(&w1);
    stop_worker(&w2);
    g_assert_true(wait_keys("netmutex:{[oi]*", 0, 10000));

    g_ptr_array_unref(lines);
    g_free(pid1), g_free(pid2);
    g_free(a), g_free(b), g_free(ab), g_free(ba), g_free(path);
    g_free(worker_url);
    worker_url = NULL;
    count_on[0] = redis;
    n_count_on = 1;
    nm_topo_free(t);
}

/* One order in two processes, and twice in one: published, never logged. */
static void test_same_order(void)
{
    char *a = nm_test_name("same-a"), *b = nm_test_name("same-b");
    char *ab = g_strdup_printf("m:%s,m:%s", a, b);
    char *path = log_file("same.log");
    const char *rounds[] = { ab, ab, NULL };

    worker_t w1 = start_worker("1", path, rounds);
    worker_t w2 = start_worker("1", path, rounds);
    g_assert_true(wait_keys("netmutex:{o*", 1, 10000));
    nmt_sleep_ms(nm_ms(3 * LEASE_MS));
    GPtrArray *lines = inversions(path);
    g_assert_cmpuint(lines->len, ==, 0);
    g_assert_cmpint(count_keys("netmutex:{i*"), ==, 0);
    stop_worker(&w1);
    stop_worker(&w2);
    g_assert_true(wait_keys("netmutex:{o*", 0, 10000));
    g_ptr_array_unref(lines);
    g_free(a), g_free(b), g_free(ab), g_free(path);
}

/* A then B, B then C, C then A: three orders, no pair inverted.  A cycle
 * of three is not looked for (docs/design.md): nothing is logged. */
static void test_three_cycle(void)
{
    char *a = nm_test_name("cyc-a"), *b = nm_test_name("cyc-b"), *c = nm_test_name("cyc-c");
    char *ab = g_strdup_printf("m:%s,m:%s", a, b), *bc = g_strdup_printf("m:%s,m:%s", b, c);
    char *ca = g_strdup_printf("m:%s,m:%s", c, a);
    char *path = log_file("cycle.log");
    const char *rounds[] = { ab, bc, ca, NULL };

    worker_t w = start_worker("1", path, rounds);
    g_assert_true(wait_keys("netmutex:{o*", 3, 10000));
    nmt_sleep_ms(nm_ms(2 * LEASE_MS));
    GPtrArray *lines = inversions(path);
    g_assert_cmpuint(lines->len, ==, 0);
    stop_worker(&w);
    g_assert_true(wait_keys("netmutex:{o*", 0, 10000));
    g_ptr_array_unref(lines);
    g_free(a), g_free(b), g_free(c), g_free(ab), g_free(bc), g_free(ca), g_free(path);
}

/* Off by default, and off for any value but 1 (said once): the inverted
 * orders leave no key and no line. */
static void test_off(gconstpointer data)
{
    const char *value = data;
    char *a = nm_test_name("off-a"), *b = nm_test_name("off-b");
    char *ab = g_strdup_printf("m:%s,m:%s", a, b), *ba = g_strdup_printf("m:%s,m:%s", b, a);
    char *path = log_file(value ? "off-value.log" : "off.log");
    const char *rounds[] = { ab, ba, NULL };

    worker_t w = start_worker(value, path, rounds);
    nmt_sleep_ms(nm_ms(2 * LEASE_MS));
    g_assert_cmpint(count_keys("netmutex:{o*"), ==, 0);
    g_assert_cmpint(count_keys("netmutex:{i*"), ==, 0);
    GPtrArray *lines = inversions(path);
    g_assert_cmpuint(lines->len, ==, 0);
    stop_worker(&w);
    if (value) {
        char *text = NULL;
        g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
        g_assert_nonnull(strstr(text, "NETMUTEX_LOCKDEP"));
        g_free(text);
    }
    g_ptr_array_unref(lines);
    g_free(a), g_free(b), g_free(ab), g_free(ba), g_free(path);
}

/* A mutex and a read-write lock of one name are two locks: mutex A then
 * rwlock A is an order, and the same name's two kinds inverted against
 * another name count as kinds apart. */
static void test_kinds(void)
{
    char *a = nm_test_name("kind-a"), *b = nm_test_name("kind-b");
    /* mutex A, rwlock A: one order between two locks of one name */
    char *mr = g_strdup_printf("m:%s,r:%s", a, a);
    /* mutex A then mutex B, and rwlock A then ... B then rwlock A:
     * B before rwlock A inverts nothing of mutex A's */
    char *ab = g_strdup_printf("m:%s,m:%s", a, b), *bra = g_strdup_printf("m:%s,r:%s", b, a);
    char *path = log_file("kinds.log");
    const char *rounds[] = { mr, ab, bra, NULL };

    worker_t w = start_worker("1", path, rounds);
    g_assert_true(wait_keys("netmutex:{o*", 3, 10000));
    char *mr_key = g_strdup_printf("netmutex:{o*}m:%s>r:%s", a, a);
    g_assert_cmpint(count_keys(mr_key), ==, 1);
    nmt_sleep_ms(nm_ms(2 * LEASE_MS));
    GPtrArray *lines = inversions(path);
    g_assert_cmpuint(lines->len, ==, 0);
    stop_worker(&w);
    g_assert_true(wait_keys("netmutex:{o*", 0, 10000));
    g_ptr_array_unref(lines);
    g_free(mr_key);
    g_free(a), g_free(b), g_free(mr), g_free(ab), g_free(bra), g_free(path);
}

/* Inverted within one process (two rounds): one line, one pid twice. */
static void test_one_process(void)
{
    char *a = nm_test_name("one-a"), *b = nm_test_name("one-b");
    char *ab = g_strdup_printf("r:%s,m:%s", a, b), *ba = g_strdup_printf("m:%s,r:%s", b, a);
    char *path = log_file("one.log");
    const char *rounds[] = { ab, ba, NULL };

    worker_t w = start_worker("1", path, rounds);
    g_assert_true(wait_inversions(path, 1, 10000));
    nmt_sleep_ms(nm_ms(2 * LEASE_MS));
    GPtrArray *lines = inversions(path);
    g_assert_cmpuint(lines->len, ==, 1);
    const char *line = g_ptr_array_index(lines, 0);
    char *qa = g_strdup_printf("rwlock \"%s\"", a);
    g_assert_nonnull(strstr(line, qa));
    stop_worker(&w);
    g_assert_true(wait_keys("netmutex:{[oi]*", 0, 10000));
    g_ptr_array_unref(lines);
    g_free(qa), g_free(a), g_free(b), g_free(ab), g_free(ba), g_free(path);
}

/* ---- call sites (the porting layer's NETMUTEX_CALL_SITES) ----------------- */

/* How many times LINE names FILE (its last path component) and a line: at
 * N when N is not 0, at any line otherwise. */
static int count_sites(const char *line, const char *file, int n)
{
    int count = 0;
    size_t len = strlen(file);
    for (const char *p = strstr(line, file); p; p = strstr(p + 1, file)) {
        char *end;
        if ((p > line && p[-1] != '/' && p[-1] != ' ') || p[len] != ':')
            continue;
        long at = strtol(p + len + 1, &end, 10);
        if (end != p + len + 1 && (n == 0 || at == n))
            count++;
    }
    return count;
}

static int count_of(const char *line, const char *needle)
{
    int count = 0;
    for (const char *p = strstr(line, needle); p; p = strstr(p + 1, needle))
        count++;
    return count;
}

/* Runs worker 1 with the round HOW1 and worker 2 with HOW2 (each a
 * take_sites round of the names A and B), and returns the one line they
 * logged; *W1 and *W2 get the workers, stopped, and their lines. */
static char *sites_pair(const char *how1, const char *how2, worker_t *w1, worker_t *w2)
{
    char *a = nm_test_name("a"), *b = nm_test_name("b");
    char *r1 = g_strdup_printf("sites,%s,%s,%s", how1, a, b);
    char *r2 = g_strdup_printf("sites,%s,%s,%s", how2, a, b);
    char *tag = g_strdup_printf("sites-%s-%s.log", how1, how2);
    char *path = log_file(tag);
    const char *first[] = { r1, NULL }, *second[] = { r2, NULL };

    *w1 = start_worker("1", path, first);
    g_assert_true(wait_keys("netmutex:{o*", 1, 10000));
    *w2 = start_worker("1", path, second);
    g_assert_true(wait_inversions(path, 1, 10000));
    g_assert_true(wait_keys("netmutex:{i*", 1, 10000));
    nmt_sleep_ms(nm_ms(3 * LEASE_MS));
    GPtrArray *lines = inversions(path);
    g_assert_cmpuint(lines->len, ==, 1);
    char *line = g_strdup(g_ptr_array_index(lines, 0));
    g_test_message("%s", line);
    char *pid1 = g_strdup_printf(":%d ", (int)w1->pid), *pid2 = g_strdup_printf(":%d ", (int)w2->pid);
    g_assert_nonnull(strstr(line, pid1));
    g_assert_nonnull(strstr(line, pid2));
    stop_worker(w1);
    stop_worker(w2);
    g_assert_true(wait_keys("netmutex:{[oi]*", 0, 10000));
    g_ptr_array_unref(lines);
    g_free(pid1), g_free(pid2);
    g_free(a), g_free(b), g_free(r1), g_free(r2), g_free(tag), g_free(path);
    return line;
}

/* With NETMUTEX_CALL_SITES, A then B and B then A: both sites are
 * sites_on.c at the lines of the second lock calls. */
static void test_sites_named(void)
{
    worker_t w1, w2;
    char *line = sites_pair("on-forward", "on-reverse", &w1, &w2);
    g_assert_cmpint(w1.lines[0], >, 0);
    g_assert_cmpint(w2.lines[0], >, 0);
    g_assert_cmpint(w1.lines[0], !=, w2.lines[0]);
    g_assert_cmpint(count_sites(line, "sites_on.c", w1.lines[0]), ==, 1);
    g_assert_cmpint(count_sites(line, "sites_on.c", w2.lines[0]), ==, 1);
    g_assert_cmpint(count_of(line, "test_lockdep+0x"), ==, 0);
    g_free(line);
}

/* Without it: no file, a return address in this program, twice. */
static void test_sites_unnamed(void)
{
    worker_t w1, w2;
    char *line = sites_pair("off-forward", "off-reverse", &w1, &w2);
    g_assert_cmpint(count_sites(line, "sites_off.c", 0), ==, 0);
    g_assert_cmpint(count_of(line, ".c:"), ==, 0);
    g_assert_cmpint(count_of(line, "test_lockdep+0x"), ==, 2);
    g_free(line);
}

/* Sites named by calls that took no hold (a process-local mutex, a
 * trylock that failed) go to no later hold: the second worker's order,
 * taken without a site, is a return address, not sites_on.c. */
static void test_sites_stale(void)
{
    worker_t w1, w2;
    char *line = sites_pair("on-forward", "stale", &w1, &w2);
    g_assert_cmpint(count_sites(line, "sites_on.c", w1.lines[0]), ==, 1);
    g_assert_cmpint(count_sites(line, "sites_on.c", 0), ==, 1);
    g_assert_cmpint(count_of(line, "test_lockdep+0x"), ==, 1);
    g_free(line);
}

/* A condition wait takes its mutex again under its own site: A then B at
 * B's lock, B then A at the wait, in one process. */
static void test_sites_cond(void)
{
    char *a = nm_test_name("a"), *b = nm_test_name("b");
    char *round = g_strdup_printf("sites,on-cond,%s,%s", a, b);
    char *path = log_file("sites-cond.log");
    const char *rounds[] = { round, NULL };

    worker_t w = start_worker("1", path, rounds);
    g_assert_cmpint(w.lines[0], >, 0);
    g_assert_cmpint(w.lines[1], >, w.lines[0]);
    g_assert_true(wait_inversions(path, 1, 10000));
    nmt_sleep_ms(nm_ms(2 * LEASE_MS));
    GPtrArray *lines = inversions(path);
    g_assert_cmpuint(lines->len, ==, 1);
    const char *line = g_ptr_array_index(lines, 0);
    g_test_message("%s", line);
    g_assert_cmpint(count_sites(line, "sites_on.c", w.lines[0]), ==, 1);
    g_assert_cmpint(count_sites(line, "sites_on.c", w.lines[1]), ==, 1);
    stop_worker(&w);
    g_assert_true(wait_keys("netmutex:{[oi]*", 0, 10000));
    g_ptr_array_unref(lines);
    g_free(a), g_free(b), g_free(round), g_free(path);
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], WORKER_FLAG) == 0)
        return lockdep_worker(argc, argv);
    nm_test_init(&argc, &argv);
    self_path = g_file_read_link("/proc/self/exe", NULL);
    redis = nm_redis_start(NULL);
    count_on[0] = redis;
    n_count_on = 1;
    g_test_add_func("/lockdep/inversion", test_inversion);
    g_test_add_func("/lockdep/same-order", test_same_order);
    g_test_add_func("/lockdep/three-cycle", test_three_cycle);
    g_test_add_data_func("/lockdep/off/default", NULL, test_off);
    g_test_add_data_func("/lockdep/off/other-value", "yes", test_off);
    g_test_add_func("/lockdep/kinds", test_kinds);
    g_test_add_func("/lockdep/one-process", test_one_process);
    g_test_add_func("/lockdep/sites/named", test_sites_named);
    g_test_add_func("/lockdep/sites/unnamed", test_sites_unnamed);
    g_test_add_func("/lockdep/sites/stale", test_sites_stale);
    g_test_add_func("/lockdep/sites/cond", test_sites_cond);
    g_test_add_func("/lockdep/cluster", test_cluster);
    int rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    g_free(self_path);
    return rc;
}
