/*
 * test_sentinel.c -- redis-sentinel:// URLs and replica acknowledgement,
 * against a real master, replicas and three sentinels (topo_sentinel.h).
 *
 * Covered: locking through the sentinel URL (the key lives on the master);
 * a read-write lock there, its holds acknowledged by the replica;
 * malformed URLs refused with EINVAL and a line that says why, passwords
 * masked; a stopped or silent (SIGSTOP) sentinel skipped within trylock's
 * bound, and EAGAIN when none answers; WAIT met with a live replica (the
 * key is on the replica when lock returns) and missed with the replica
 * paused: trylock EAGAIN and timedlock ETIMEDOUT in bounded time with no
 * key left on the master, lock waiting until the replica is back; the
 * settings' validation; a lease the new master lost in a failover reported
 * through the lost callback and unlock's ENOLCK; SENTINEL FAILOVER while
 * processes lock, which resume within a few seconds with no overlap that
 * was not reported to the holder that was overlapped; condition variables
 * across a failover, a waiter's registration lost: every wait ends, none
 * hangs, and signals work on the new master; netmutex(1) running a
 * command, and listing, through the sentinels, passwords masked.
 *
 * Every test ends with netmutex_shutdown (nm_test_finish does for the
 * last), so no thread of the library runs when a test forks.
 */
#include "ac_config.h"

#include "keytag.h"
#include "topo_sentinel.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

/* Bound for things expected to finish promptly: generous, never a speed
 * claim. */
#define PROMPT_MS nm_ms(30000)
/* The library's own timeouts: short, so that the tests are too. */
#define CONNECT_MS nm_ms(1000)
#define IO_MS nm_ms(1000)

/* ---- captured log lines ------------------------------------------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static GString *log_text;

static void capture(int level, const char *message, void *arg)
{
    (void)level;
    (void)arg;
    pthread_mutex_lock(&log_lock);
    g_string_append_printf(log_text, "%s\n", message);
    pthread_mutex_unlock(&log_lock);
}

static void capture_start(void)
{
    pthread_mutex_lock(&log_lock);
    if (log_text)
        g_string_free(log_text, TRUE);
    log_text = g_string_new("");
    pthread_mutex_unlock(&log_lock);
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_INFO, capture, NULL), 0);
}

/* Whether a captured line holds WORDS; the capture ends. */
static bool captured(const char *words)
{
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL), 0);
    pthread_mutex_lock(&log_lock);
    bool found = strstr(log_text->str, words) != NULL;
    if (!found)
        g_printerr("# captured, without '%s':\n%s", words, log_text->str);
    pthread_mutex_unlock(&log_lock);
    return found;
}

/* ---- helpers ------------------------------------------------------------ */

static void configure(NmTopo *t, unsigned int lease_ms, unsigned int min_replicas,
                      unsigned int replica_timeout_ms)
{
    char *url = nm_topo_url(t);
    netmutex_config_t cfg = {
        .url = url, .connect_timeout_ms = CONNECT_MS, .io_timeout_ms = IO_MS,
        .lease_ms = lease_ms, .min_replicas = min_replicas,
        .replica_timeout_ms = replica_timeout_ms,
    };
    nm_assert_rc(netmutex_configure(&cfg), 0);
    g_free(url);
}

/* How many lock keys (the default prefix) NODE holds. */
static long long lock_keys(NmRedis *node)
{
    /* The keys of names ({<16 hex digits>}), not the slots' fence floors. */
    redisReply *r = nm_redis_cmd(node, "KEYS netmutex:{????????????????}*");
    g_assert_cmpint(r->type, ==, REDIS_REPLY_ARRAY);
    long long n = (long long)r->elements;
    freeReplyObject(r);
    return n;
}

/* A mutex whose unlock always releases at the server (no lease caching):
 * for the cases that read the master right after an unlock.  With
 * caching, an unlock made once the process had subscribed keeps the lease
 * (a TSan run's /sentinel/lock found the key still there). */
static char *uncached_init(netmutex_t *m, const char *suffix)
{
    netmutex_attr_t attr;
    char *name = nm_test_name(suffix);
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, 0), 0);
    nm_assert_rc(netmutex_init(m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    return name;
}

static int trylock_unlock(netmutex_t *m)
{
    int rc = netmutex_trylock(m);
    if (rc == 0)
        nm_assert_rc(netmutex_unlock(m), 0);
    return rc;
}

/* ---- locking through the sentinels --------------------------------------- */

static void test_lock(void)
{
    NmTopo *t = nm_topo_start(1);
    netmutex_t m;
    char *name = uncached_init(&m, "m");

    configure(t, 0, 0, 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    char *token = nm_token_of(t->node[0], name);
    g_assert_nonnull(token); /* on the master */
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_null(nm_token_of(t->node[0], name));
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(token);
    g_free(name);
    nm_topo_free(t);
}

static void expect_bad_url(const char *url, const char *why)
{
    netmutex_config_t cfg = { .url = url };
    capture_start();
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    g_assert_true(captured(why));
}

static void test_bad_urls(void)
{
    expect_bad_url("redis-sentinel://127.0.0.1:26379", "no #MASTERNAME");
    expect_bad_url("redis-sentinel://127.0.0.1:26379#", "no #MASTERNAME");
    expect_bad_url("redis-sentinel://#m", "no sentinel host");
    expect_bad_url("redis-sentinel://:pw@/2#m", "no sentinel host");
    expect_bad_url("redis-sentinel://a,,b#m", "an empty host");
    expect_bad_url("redis-sentinel://a:99999#m", "malformed sentinel host:port");
    expect_bad_url("redis-sentinel://a/x#m", "malformed credentials or db");
    expect_bad_url("redis-sentinel://a?password=x#m", "sentinel_user and sentinel_password");
    expect_bad_url("redis-sentinel://a?sentinel_user=u#m", "needs a sentinel_password");
    expect_bad_url("redis-sentinel://a#two words", "spaces");
    expect_bad_url("redis://a,redis-sentinel://b#m", "redis-sentinel://");
    /* Both passwords are masked in the message. */
    expect_bad_url("redis-sentinel://u:hunter2@a?sentinel_password=swordfish", "u:***@a");
    g_assert_true(strstr(log_text->str, "hunter2") == NULL);
    g_assert_true(strstr(log_text->str, "swordfish") == NULL);
    g_assert_true(strstr(log_text->str, "sentinel_password=***") != NULL);
}

/* ---- silent and missing sentinels ------------------------------------------ */

static void test_silent_sentinel(void)
{
    NmTopo *t = nm_topo_start(1);
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    /* Sentinels silent while the master works: the connection in use goes
     * on working, past several of the intervals at which the sentinels
     * would be asked again. */
    configure(t, 0, 0, 0);
    nm_assert_rc(trylock_unlock(&m), 0);
    for (int i = 0; i < NM_TOPO_SENTINELS; i++)
        nm_redis_pause(t->sentinel[i]);
    for (int i = 0; i < 8; i++) {
        nm_assert_rc(trylock_unlock(&m), 0);
        nmt_sleep_ms(200);
    }
    for (int i = 0; i < NM_TOPO_SENTINELS; i++)
        nm_redis_resume(t->sentinel[i]);
    nm_assert_rc(netmutex_shutdown(), 0);

    /* The first sentinel asked does not answer at all: trylock (bounded
     * by IO_MS as a whole) still finds the master through the next. */
    nm_redis_pause(t->sentinel[0]);
    configure(t, 0, 0, 0);
    nm_assert_rc(nm_call_run((NmCallFunc)trylock_unlock, &m, PROMPT_MS), 0);
    nm_assert_rc(netmutex_shutdown(), 0);

    /* Two stopped: refused at once, the third answers. */
    nm_redis_resume(t->sentinel[0]);
    nm_redis_pause(t->sentinel[1]);
    nm_redis_stop(t->sentinel[0]);
    configure(t, 0, 0, 0);
    nm_assert_rc(nm_call_run((NmCallFunc)trylock_unlock, &m, PROMPT_MS), 0);
    nm_assert_rc(netmutex_shutdown(), 0);

    /* None answers: EAGAIN, within the bound, and said why. */
    nm_redis_pause(t->sentinel[2]);
    configure(t, 0, 0, 0);
    capture_start();
    gint64 start = nmt_now_ms();
    nm_assert_rc(nm_call_run((NmCallFunc)trylock_unlock, &m, PROMPT_MS), EAGAIN);
    g_assert_cmpint(nmt_now_ms() - start, <, PROMPT_MS);
    g_assert_true(captured("cannot use the server"));
    nm_redis_resume(t->sentinel[1]);
    nm_redis_resume(t->sentinel[2]);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
    nm_topo_free(t);
}

/* ---- a read-write lock through the sentinels ------------------------------ */

static int wrlock_unlock(void *rw)
{
    int rc = netmutex_rwlock_wrlock(rw);
    return rc ? rc : netmutex_rwlock_unlock(rw);
}

/* A read-write lock on the master the sentinels name, its holds
 * acknowledged by the replica: a read share there, a writer that waits
 * for it and gets the lock at its unlock, nothing left on the master. */
static void test_rwlock(void)
{
    NmTopo *t = nm_topo_start(1);
    netmutex_rwlock_t rw;
    char *name = nm_test_name("rw");
    char tag[NM_TEST_TAG_LEN + 1];
    nm_test_key_tag(name, strlen(name), tag);
    char *shares = g_strdup_printf("netmutex:{r%s}%s:s", tag, name);

    configure(t, 0, 1, nm_ms(5000));
    nm_assert_rc(netmutex_rwlock_init(&rw, name, NULL), 0);
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0);
    for (int node = 0; node < 2; node++) { /* the master, and the replica (WAIT) */
        redisReply *r = nm_redis_cmd(t->node[node], "ZCARD %s", shares);
        g_assert_cmpint(r->integer, ==, 1);
        freeReplyObject(r);
    }
    NmCall *w = nm_call_start(wrlock_unlock, &rw);
    nmt_sleep_ms(nm_ms(100));
    g_assert_false(nm_call_done(w));
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(nm_call_wait(w, nm_ms(30000)), 0);
    gint64 until = nmt_now_ms() + nm_ms(30000);
    long long left;
    do {
        redisReply *r = nm_redis_cmd(t->node[0], "KEYS netmutex:{r*");
        left = (long long)r->elements;
        freeReplyObject(r);
    } while (left && nmt_now_ms() < until && (nmt_sleep_ms(20), 1));
    g_assert_cmpint(left, ==, 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(shares);
    g_free(name);
    nm_topo_free(t);
}

/* ---- replica acknowledgement --------------------------------------------- */

static void test_replicas_met(void)
{
    NmTopo *t = nm_topo_start(1);
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    configure(t, 0, 1, nm_ms(5000));
    nm_assert_rc(netmutex_lock(&m), 0);
    /* WAIT returned: the replica has the key already. */
    char *token = nm_token_of(t->node[1], name);
    g_assert_nonnull(token);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(token);
    g_free(name);
    nm_topo_free(t);
}

static int lock_unlock(void *m)
{
    int rc = netmutex_lock(m);
    return rc ? rc : netmutex_unlock(m);
}

static void test_replicas_short(void)
{
    NmTopo *t = nm_topo_start(1);
    netmutex_t m;
    struct timespec deadline, returned;
    char *name = uncached_init(&m, "m");

    configure(t, 0, 1, nm_ms(300));
    nm_redis_pause(t->node[1]);
    capture_start();
    nm_assert_rc(nm_call_run((NmCallFunc)trylock_unlock, &m, PROMPT_MS), EAGAIN);
    g_assert_cmpint(lock_keys(t->node[0]), ==, 0);
    g_assert_true(captured("only 0 of 1 replicas acknowledged"));

    nm_deadline(&deadline, CLOCK_REALTIME, nm_ms(1500));
    nm_assert_rc(netmutex_timedlock(&m, &deadline), ETIMEDOUT);
    clock_gettime(CLOCK_REALTIME, &returned);
    nm_assert_timed_out_at(&returned, &deadline, PROMPT_MS);
    g_assert_cmpint(lock_keys(t->node[0]), ==, 0);

    /* lock keeps trying, and succeeds once the replica answers again. */
    NmCall *c = nm_call_start(lock_unlock, &m);
    nmt_sleep_ms(nm_ms(700));
    g_assert_false(nm_call_done(c));
    nm_redis_resume(t->node[1]);
    nm_assert_rc(nm_call_wait(c, PROMPT_MS), 0);
    g_assert_cmpint(lock_keys(t->node[0]), ==, 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
    nm_topo_free(t);
}

static void expect_bad_env(const char *var, const char *value, const char *why)
{
    g_setenv(var, value, TRUE);
    capture_start();
    nm_assert_rc(netmutex_configure(NULL), EINVAL);
    g_assert_true(captured(why));
    g_unsetenv(var);
}

static void test_replicas_config(void)
{
    netmutex_config_t quorum = { .url = "redis://a,redis://b,redis://c", .min_replicas = 1 };
    capture_start();
    nm_assert_rc(netmutex_configure(&quorum), EINVAL);
    g_assert_true(captured("netmutex_config_t.min_replicas"));
    netmutex_config_t many = { .url = "redis://a", .min_replicas = 101 };
    nm_assert_rc(netmutex_configure(&many), EINVAL);
    expect_bad_env("NETMUTEX_MIN_REPLICAS", "one", "NETMUTEX_MIN_REPLICAS=one");
    expect_bad_env("NETMUTEX_REPLICA_TIMEOUT_MS", "0", "NETMUTEX_REPLICA_TIMEOUT_MS=0");
    g_setenv("NETMUTEX_URL", "redis://a,redis://b,redis://c", TRUE);
    expect_bad_env("NETMUTEX_MIN_REPLICAS", "2", "needs one server");
    g_unsetenv("NETMUTEX_URL");
    g_setenv("NETMUTEX_MIN_REPLICAS", "0", TRUE);
    nm_assert_rc(netmutex_configure(NULL), 0);
    g_unsetenv("NETMUTEX_MIN_REPLICAS");
    nm_assert_rc(netmutex_shutdown(), 0);
}

/* A node demoted under our connection answers writes with READONLY: that
 * counts as a broken connection (trylock EAGAIN, the next call re-dials),
 * not as a strange answer (EPROTO). */
static void test_readonly(void)
{
    NmRedisOpts tcp = { .tcp = true };
    NmRedis *a = nm_redis_start(&tcp), *b = nm_redis_start(&tcp);
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *url = nm_redis_tcp_url(a, -1);
    netmutex_config_t cfg = { .url = url, .connect_timeout_ms = CONNECT_MS,
                              .io_timeout_ms = IO_MS };

    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(trylock_unlock(&m), 0);
    nm_redis_ok(a, "REPLICAOF 127.0.0.1 %d", nm_redis_port(b));
    nm_assert_rc(trylock_unlock(&m), EAGAIN); /* on the connection it had */
    nm_redis_ok(a, "REPLICAOF NO ONE");
    nm_assert_rc(trylock_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(url);
    g_free(name);
    nm_redis_free(a);
    nm_redis_free(b);
}

/* ---- failovers ------------------------------------------------------------ */

static void test_failover_lost_lease(void)
{
    NmTopo *t = nm_topo_start(1);
    netmutex_t m;
    netmutex_attr_t attr;
    NmLost lost;
    char *name = nm_test_name("m");
    char *key = nm_lock_key(name);

    nm_lost_init(&lost);
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setlostfn(&attr, nm_lost_record, &lost), 0);
    nm_assert_rc(netmutex_init(&m, name, &attr), 0);
    configure(t, nm_ms(3000), 0, 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_topo_wait_synced(t);
    /* The grant never reached the replica: asynchronous replication lost
     * it, as when the master fails right after granting. */
    NmRedis *replica = nm_topo_replica(t);
    nm_redis_ok(replica, "CONFIG SET replica-read-only no");
    nm_redis_ok(replica, "DEL %b", key, strlen(key));
    nm_topo_failover(t);
    /* The holder's renewal, at the new master, finds the key gone. */
    g_assert_cmpint(nm_lost_wait(&lost, PROMPT_MS), ==, 1);
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    g_free(key);
    g_free(name);
    nm_topo_free(t);
}

/* What the workers of the failover test share (MAP_SHARED). */
typedef struct shared {
    int inside;             /* holders in the critical section now */
    long entries;           /* entries into it so far */
    long silent;            /* sections overlapped without being told */
    long reported;          /* sections whose lease was reported lost */
    long overlaps;          /* entries while someone else was inside */
    long before, after;     /* sections before the failover ended, after */
    long errors;            /* lock results other than 0 and ETIMEDOUT */
    gint64 failover_done;   /* nmt_now_ms() when it ended, 0 before */
    gint64 first_after;     /* nmt_now_ms() of the first section after */
} shared_t;

#define WORKERS 3
#define RUN_AFTER_MS 4000

typedef struct worker {
    shared_t *sh;
    const char *url;
    const char *name;
} worker_t;

static int losses; /* in a worker: lost-lease callbacks so far */

static void count_loss(const char *name, void *arg)
{
    (void)name;
    (void)arg;
    __atomic_add_fetch(&losses, 1, __ATOMIC_SEQ_CST);
}

/* One critical section: overlapped if someone else entered before we
 * left; that must be reported to us (unlock's ENOLCK, or the callback). */
static void section(shared_t *sh, netmutex_t *m)
{
    int lost_before = __atomic_load_n(&losses, __ATOMIC_SEQ_CST);
    long me = __atomic_add_fetch(&sh->entries, 1, __ATOMIC_SEQ_CST);
    if (__atomic_fetch_add(&sh->inside, 1, __ATOMIC_SEQ_CST) != 0)
        __atomic_add_fetch(&sh->overlaps, 1, __ATOMIC_SEQ_CST);
    nmt_sleep_ms(2);
    bool overlapped = __atomic_load_n(&sh->entries, __ATOMIC_SEQ_CST) != me;
    __atomic_sub_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST);
    int rc = netmutex_unlock(m);
    bool told = rc == ENOLCK || __atomic_load_n(&losses, __ATOMIC_SEQ_CST) != lost_before;
    if (told)
        __atomic_add_fetch(&sh->reported, 1, __ATOMIC_SEQ_CST);
    if (overlapped && !told)
        __atomic_add_fetch(&sh->silent, 1, __ATOMIC_SEQ_CST);
    if (rc != 0 && rc != ENOLCK && rc != EIO)
        __atomic_add_fetch(&sh->errors, 1, __ATOMIC_SEQ_CST);
}

static int failover_worker(void *p)
{
    worker_t *w = p;
    shared_t *sh = w->sh;
    netmutex_t m;
    netmutex_attr_t attr;
    netmutex_config_t cfg = {
        .url = w->url, .connect_timeout_ms = CONNECT_MS, .io_timeout_ms = IO_MS,
        .lease_ms = nm_ms(1000), .min_replicas = 1, .replica_timeout_ms = nm_ms(500),
    };
    gint64 stop_at = nmt_now_ms() + PROMPT_MS * 2;

    if (netmutex_configure(&cfg) || netmutex_attr_init(&attr) ||
        netmutex_attr_setlostfn(&attr, count_loss, NULL) || netmutex_init(&m, w->name, &attr))
        return 1;
    for (;;) {
        gint64 done = __atomic_load_n(&sh->failover_done, __ATOMIC_SEQ_CST);
        if ((done && nmt_now_ms() > done + nm_ms(RUN_AFTER_MS)) || nmt_now_ms() > stop_at)
            break;
        struct timespec deadline;
        nm_deadline(&deadline, CLOCK_REALTIME, nm_ms(500));
        int rc = netmutex_timedlock(&m, &deadline);
        if (rc == 0) {
            section(sh, &m);
            __atomic_add_fetch(done ? &sh->after : &sh->before, 1, __ATOMIC_SEQ_CST);
            gint64 none = 0, now = nmt_now_ms();
            if (done)
                __atomic_compare_exchange_n(&sh->first_after, &none, now, 0, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST);
        } else if (rc != ETIMEDOUT) {
            __atomic_add_fetch(&sh->errors, 1, __ATOMIC_SEQ_CST);
            nmt_sleep_ms(10);
        }
    }
    netmutex_destroy(&m);
    netmutex_attr_destroy(&attr);
    return netmutex_shutdown();
}

static void test_failover_counter(void)
{
    NmTopo *t = nm_topo_start(2);
    shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    g_assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    char *url = nm_topo_url(t);
    char *name = nm_test_name("counter");
    worker_t w = { sh, url, name };
    pid_t pids[WORKERS];

    for (int i = 0; i < WORKERS; i++)
        pids[i] = nm_fork_run(failover_worker, &w);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (__atomic_load_n(&sh->before, __ATOMIC_SEQ_CST) < 50 && nmt_now_ms() < until)
        nmt_sleep_ms(10);
    g_assert_cmpint(sh->before, >=, 50);
    nm_topo_failover(t);
    __atomic_store_n(&sh->failover_done, nmt_now_ms(), __ATOMIC_SEQ_CST);
    for (int i = 0; i < WORKERS; i++)
        nm_child_wait_ok(pids[i], PROMPT_MS * 3);
    g_test_message("sections: %ld before the failover, %ld after (the first %lld ms after it "
                   "ended); %ld overlaps, %ld reported lost, %ld silent, %ld errors",
                   sh->before, sh->after,
                   (long long)(sh->first_after ? sh->first_after - sh->failover_done : -1),
                   sh->overlaps, sh->reported, sh->silent, sh->errors);
    g_assert_cmpint(sh->silent, ==, 0);
    g_assert_cmpint(sh->after, >, 0); /* resumed */
    g_assert_cmpint(sh->errors, ==, 0);
    munmap(sh, sizeof *sh);
    g_free(name);
    g_free(url);
    nm_topo_free(t);
}

/* ---- condition variables across a failover -------------------------------- */

/* The key SUFFIX of condition NAME: {c<tag>} where NAME's lock key has
 * {<tag>}. */
static char *cond_key(const char *name, const char *suffix)
{
    char *lock = nm_lock_key(name);
    const char *brace = strchr(lock, '{');
    char *key = g_strdup_printf("%.*s{c%s%s", (int)(brace - lock), lock, brace + 1, suffix);
    g_free(lock);
    return key;
}

static long long cond_llen(NmRedis *node, const char *key)
{
    redisReply *r = nm_redis_cmd(node, "LLEN %s", key);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

static bool cond_waiters(NmRedis *node, const char *cw, long long n)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (cond_llen(node, cw) != n && nmt_now_ms() < until)
        nmt_sleep_ms(5);
    return cond_llen(node, cw) == n;
}

static long long cond_keys(NmRedis *node)
{
    redisReply *r = nm_redis_cmd(node, "KEYS netmutex:{c*");
    g_assert_cmpint(r->type, ==, REDIS_REPLY_ARRAY);
    long long n = (long long)r->elements;
    freeReplyObject(r);
    return n;
}

typedef struct CondWaiter {
    netmutex_cond_t *c;
    netmutex_t *m;
    unsigned int timeout_ms; /* 0: untimed */
} CondWaiter;

/* One wait; the mutex must be held again when it returns. */
static int cond_wait_once(void *p)
{
    CondWaiter *w = p;
    struct timespec deadline;
    int err = netmutex_lock(w->m);
    if (err)
        return 100 + err;
    if (w->timeout_ms) {
        nm_deadline(&deadline, CLOCK_REALTIME, w->timeout_ms);
        err = netmutex_cond_timedwait(w->c, w->m, &deadline);
    } else {
        err = netmutex_cond_wait(w->c, w->m);
    }
    int uerr = netmutex_unlock(w->m);
    return uerr ? 200 + uerr : err;
}

/* Waiters wait while the master fails over, one of them with its
 * registration lost (asynchronous replication: the replica never got it).
 * Every wait ends -- a spurious wake-up as the failover is noticed, or the
 * deadline -- with the mutex held again, none hangs; then signal and
 * broadcast work on the new master, and nothing is left there. */
static void test_failover_cond(void)
{
    enum { TIMED = 2 };
    NmTopo *t = nm_topo_start(1);
    netmutex_t m;
    netmutex_cond_t c;
    NmCall *calls[TIMED + 1];
    char *name = nm_test_name("c");
    char *mname = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *cw = cond_key(name, ":cw"), *ch = cond_key(name, ":ch");

    configure(t, nm_ms(3000), 0, 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    CondWaiter untimed = { &c, &m, 0 }, timed = { &c, &m, nm_ms(20000) };
    calls[0] = nm_call_start(cond_wait_once, &untimed);
    g_assert_true(cond_waiters(t->node[0], cw, 1));
    for (int i = 1; i <= TIMED; i++)
        calls[i] = nm_call_start(cond_wait_once, &timed);
    g_assert_true(cond_waiters(t->node[0], cw, TIMED + 1));
    nm_topo_wait_synced(t);
    /* The first waiter's registration never reached the replica. */
    NmRedis *replica = nm_topo_replica(t);
    nm_redis_ok(replica, "CONFIG SET replica-read-only no");
    redisReply *r = nm_redis_cmd(replica, "LPOP %s", cw);
    g_assert_cmpint(r->type, ==, REDIS_REPLY_STRING);
    nm_redis_ok(replica, "HDEL %s %s", ch, r->str);
    freeReplyObject(r);

    gint64 start = nmt_now_ms();
    NmRedis *master = nm_topo_failover(t);
    for (int i = 0; i <= TIMED; i++) {
        int rc = nm_call_wait(calls[i], PROMPT_MS);
        g_test_message("waiter %d: %s after %lld ms", i, netmutex_errname(rc),
                       (long long)(nmt_now_ms() - start));
        g_assert_true(rc == 0 || (i > 0 && rc == ETIMEDOUT));
    }

    /* Signal and broadcast on the new master. */
    calls[0] = nm_call_start(cond_wait_once, &untimed);
    g_assert_true(cond_waiters(master, cw, 1));
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    nm_assert_rc(nm_call_wait(calls[0], PROMPT_MS), 0);
    for (int i = 0; i < TIMED; i++)
        calls[i] = nm_call_start(cond_wait_once, &untimed);
    g_assert_true(cond_waiters(master, cw, TIMED));
    nm_assert_rc(netmutex_cond_broadcast(&c), 0);
    for (int i = 0; i < TIMED; i++)
        nm_assert_rc(nm_call_wait(calls[i], PROMPT_MS), 0);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (cond_keys(master) != 0 && nmt_now_ms() < until)
        nmt_sleep_ms(20);
    g_assert_cmpint(cond_keys(master), ==, 0);

    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(cw);
    g_free(ch);
    g_free(mname);
    g_free(name);
    nm_topo_free(t);
}

/* ---- netmutex(1) --------------------------------------------------------- */

/* Runs the tool with ARGS; its exit status, its output in *OUT and *ERR. */
static int run_cli(const char *const *args, char **out, char **err)
{
    const char *top = g_getenv("NM_TOP_BUILDDIR"); /* NETMUTEX_* is cleared */
    GPtrArray *argv = g_ptr_array_new();
    GError *error = NULL;
    int status;

    g_assert_nonnull(top);
    char *cli = g_build_filename(top, "tools", "netmutex", NULL);
    g_ptr_array_add(argv, cli);
    for (const char *const *a = args; *a; a++)
        g_ptr_array_add(argv, (char *)*a);
    g_ptr_array_add(argv, NULL);
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               out, err, &status, &error));
    g_assert_no_error(error);
    g_ptr_array_free(argv, TRUE);
    g_free(cli);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_cli(void)
{
    NmTopo *t = nm_topo_start(1);
    char *url = nm_topo_url(t), *out, *err;
    netmutex_t m;
    char *name = nm_mutex_init(&m, "held", NETMUTEX_NORMAL, 0);

    /* A command runs under a lock taken through the sentinels. */
    const char *run[] = { "-u", url, "clijob", "-c", "exit 3", NULL };
    g_assert_cmpint(run_cli(run, &out, &err), ==, 3);
    g_free(out);
    g_free(err);

    /* list finds the master through them too. */
    configure(t, 0, 0, 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    const char *list[] = { "-u", url, "list", NULL };
    g_assert_cmpint(run_cli(list, &out, &err), ==, 0);
    g_assert_nonnull(strstr(out, name));
    g_free(out);
    g_free(err);
    nm_assert_rc(netmutex_unlock(&m), 0);

    /* Unreachable sentinels: exit 69, both passwords masked. */
    const char *bad[] = { "-u", "redis-sentinel://u:hunter2@127.0.0.1:1?sentinel_password="
                          "swordfish#m", "list", NULL };
    g_assert_cmpint(run_cli(bad, &out, &err), ==, 69);
    g_assert_null(strstr(err, "hunter2"));
    g_assert_null(strstr(err, "swordfish"));
    g_assert_nonnull(strstr(err, "sentinel 127.0.0.1:1"));
    g_free(out);
    g_free(err);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
    g_free(url);
    nm_topo_free(t);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    g_test_add_func("/sentinel/bad-urls", test_bad_urls);
    g_test_add_func("/sentinel/lock", test_lock);
    g_test_add_func("/sentinel/rwlock", test_rwlock);
    g_test_add_func("/sentinel/silent-sentinel", test_silent_sentinel);
    g_test_add_func("/sentinel/readonly", test_readonly);
    g_test_add_func("/sentinel/replicas/config", test_replicas_config);
    g_test_add_func("/sentinel/replicas/met", test_replicas_met);
    g_test_add_func("/sentinel/replicas/short", test_replicas_short);
    g_test_add_func("/sentinel/failover/lost-lease", test_failover_lost_lease);
    g_test_add_func("/sentinel/failover/counter", test_failover_counter);
    g_test_add_func("/sentinel/failover/cond", test_failover_cond);
    /* Last: g_spawn may leave GLib threads behind, and no test forks after
     * this one. */
    g_test_add_func("/sentinel/tool/cli", test_cli);
    int rc = nm_test_finish(g_test_run());
    if (log_text)
        g_string_free(log_text, TRUE);
    return rc;
}
