/*
 * test_cache.c -- lease caching: after the last local unlock a process keeps
 * the Redis lease while no other process wants the name, and locks again
 * without a round trip.
 *
 * What must hold, case by case:
 *   - exclusion is exact across processes with caching on (a counter in a
 *     shared file, several processes x threads, lock/timedlock/trylock);
 *   - a cached re-lock sends no script to the server (INFO commandstats),
 *     and with caching off (attribute, configuration, NETMUTEX_CACHE=0) every
 *     cycle does;
 *   - another process's lock, timedlock or trylock takes the lease back: at
 *     once from an idle cache, at the unlock from a holding thread; trylock
 *     then gets 0 from an idle cache and EBUSY from a real holder; a process
 *     that unlocks and locks again at once never overtakes a process that
 *     waits (one turn, a few turns, 200 fast turns between two others);
 *   - fences: the same while the lease stays in one process, strictly
 *     greater at every change of process;
 *   - kill -9 of a caching process frees the lock within the lease, without
 *     EOWNERDEAD; of a robust holder, with it (robust mutexes never cache);
 *   - a lease lost while cached (netmutex_break, a raw DEL, the process
 *     stopped past its lease, the server restarted empty) is never used
 *     again: the next lock goes to the network, waits for the new holder
 *     and gets a new fence;
 *   - idle leases go back after cache_idle_ms (not a timer tick later);
 *     exit(), netmutex_shutdown(), netmutex_configure() and
 *     netmutex_destroy() give them back at once;
 *   - a forked child inherits nothing cached;
 *   - netmutex_status() says cached; robust, autorenew-off and quorum-mode
 *     mutexes never cache; bad arguments get EINVAL.
 *
 * Time bounds are generous and scaled by nm_ms(): where a case must tell
 * revocation from another way of freeing the lock, the other way (idle
 * give-back, lease expiry) is made far slower than the bound (60 s idle,
 * 30 s lease) instead of the bound tight.  Speed is the benchmark's
 * business (bench/scenarios_cache.c).
 */
#include "ac_config.h"

#include "fixture.h"
#include "proxy.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static NmRedis *redis;

#define PROMPT_MS nm_ms(30000)
/* How long a revocation, a give-back or a wake-up may take here: far
 * below the idle period and lease that would otherwise free the lock. */
#define BOUND_MS nm_ms(5000)
/* An idle period and a lease that cannot explain a prompt release. */
#define LONG_IDLE_MS 60000u
#define LONG_LEASE_MS 30000u
/* How long a call that must keep waiting is watched. */
#define STILL_WAITING_MS nm_ms(300)
/* A request published to a caching holder reaches it within this (it is
 * the time between Redis running a waiter's request and the holder's
 * background thread reading it, normally well under a millisecond). */
#define DELIVERY_MS nm_ms(100)

/* Requests wait long for an answer here: a revocation that is never
 * answered shows as a call that takes longer than BOUND_MS, not as one
 * that returns after the default 2 s I/O timeout (and still well within
 * PROMPT_MS, after which the fixture would abort the program). */
#define IO_TIMEOUT_MS 10000u
static const char *const long_idle_env[] = { "NETMUTEX_CACHE_IDLE_MS=60000",
                                             "NETMUTEX_IO_TIMEOUT_MS=10000", NULL };
static const char *const cache_off_env[] = { "NETMUTEX_CACHE=0", NULL };

/* ---- helpers ------------------------------------------------------------- */

/* netmutex_configure with this program's server and CACHE_IDLE_MS (0: the
 * default; NETMUTEX_CACHE_OFF: no caching). */
static void configure_idle(unsigned int cache_idle_ms)
{
    netmutex_config_t cfg = {
        .cache_idle_ms = cache_idle_ms,
        .io_timeout_ms = IO_TIMEOUT_MS,
    };

    nm_configure_with(redis, cfg);
}

typedef struct MutexOpts {
    unsigned int lease_ms; /* 0: configured default */
    int cache;             /* netmutex_attr_setcache */
    int robust;
    int autorenew;
} MutexOpts;

#define CACHED { 0, 1, 0, 1 }

static void init_with(netmutex_t *m, const char *name, const MutexOpts *o)
{
    netmutex_attr_t attr;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setlease(&attr, o->lease_ms), 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, o->cache), 0);
    nm_assert_rc(netmutex_attr_setrobust(&attr, o->robust ? NETMUTEX_ROBUST
                                                          : NETMUTEX_STALLED), 0);
    nm_assert_rc(netmutex_attr_setautorenew(&attr, o->autorenew), 0);
    nm_assert_rc(netmutex_init(m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
}

/* A mutex with default attributes but the lease: caching on. */
static char *init_cached(netmutex_t *m, const char *suffix, unsigned int lease_ms)
{
    char *name = nm_test_name(suffix);
    MutexOpts o = CACHED;

    o.lease_ms = lease_ms;
    init_with(m, name, &o);
    return name;
}

static NmRemote *remote(const char *name, int type, unsigned int lease_ms,
                        const char *const *env)
{
    char *url = nm_redis_url(redis);
    NmRemote *rem = nm_remote_start_url(url, env, name, type, lease_ms);

    g_free(url);
    return rem;
}

/* Does NAME's lock key exist on SERVER (its lease is held or cached)? */
static bool key_exists_on(NmRedis *server, const char *name)
{
    char *key = nm_lock_key(name);
    long long pttl = nm_redis_pttl(server, key);

    g_free(key);
    return pttl != -2;
}

static bool key_exists(const char *name)
{
    return key_exists_on(redis, name);
}

/* Polls until NAME's key is gone; the time that took in ms, or -1 if it
 * was still there after TIMEOUT_MS. */
static gint64 wait_key_gone(const char *name, unsigned int timeout_ms)
{
    gint64 start = nmt_now_ms();

    while (key_exists(name)) {
        if (nmt_now_ms() - start > timeout_ms)
            return -1;
        nmt_sleep_ms(5);
    }
    return nmt_now_ms() - start;
}

/* For a failure's message: NAME's lock key and queue as the server has
 * them. */
static void describe_lock(const char *name)
{
    char *key = nm_lock_key(name);
    char *value = nm_redis_get(redis, 0, key, strlen(key));

    g_test_message("lock key %s: %s, pttl %lld; %lld queued", key, value ? value : "(none)",
                   nm_redis_pttl(redis, key), nm_queue_len(redis, name));
    g_free(value);
    g_free(key);
}

/* Script calls the server has run so far (EVAL, EVALSHA, their _RO forms,
 * FCALL), from INFO commandstats: every netmutex request is one. */
static unsigned long long script_calls(void)
{
    redisReply *r = nm_redis_cmd(redis, "INFO commandstats");
    unsigned long long total = 0;

    g_assert_cmpint(r->type, ==, REDIS_REPLY_STRING);
    for (const char *line = r->str; line; line = strchr(line, '\n')) {
        char cmd[64];
        unsigned long long calls;

        line += *line == '\n';
        if (sscanf(line, "cmdstat_%63[^:]:calls=%llu", cmd, &calls) == 2 &&
            (g_str_has_prefix(cmd, "eval") || g_str_has_prefix(cmd, "fcall")))
            total += calls;
    }
    freeReplyObject(r);
    return total;
}

/* nm_cycles in a remote, one call per request. */
static int remote_cycles(NmRemote *rem, int n)
{
    for (int i = 0; i < n; i++) {
        int rc = nm_remote(rem, 'l');

        if (rc == 0)
            rc = nm_remote(rem, 'u');
        if (rc != 0)
            return rc;
    }
    return 0;
}

static uint64_t fence_of(netmutex_t *m)
{
    uint64_t fence = 0;

    nm_assert_rc(netmutex_fence(m, &fence), 0);
    g_assert_cmpuint(fence, >, 0);
    return fence;
}

static uint64_t remote_fence(NmRemote *rem)
{
    uint64_t fence = 0;

    nm_assert_rc(nm_remote_fence(rem, &fence), 0);
    g_assert_cmpuint(fence, >, 0);
    return fence;
}

/* A process keeps a lease only while it listens for requests for the
 * name, which takes a moment after its first acquisition of it: until
 * then an unlock gives the lease back.  So: lock+unlock M until the lease
 * stays after the unlock (bounded); the fence of the lease it keeps. */
static uint64_t cache_lease(netmutex_t *m, const char *name)
{
    gint64 end = nmt_now_ms() + BOUND_MS;
    uint64_t fence = 0;

    do {
        nm_assert_rc(netmutex_lock(m), 0);
        fence = fence_of(m);
        nm_assert_rc(netmutex_unlock(m), 0);
        if (key_exists(name))
            return fence;
        nmt_sleep_ms(2);
    } while (nmt_now_ms() < end);
    describe_lock(name);
    g_assert_true(key_exists(name));
    return fence;
}

/* The same in a remote. */
static uint64_t remote_cache_lease(NmRemote *rem, const char *name)
{
    gint64 end = nmt_now_ms() + BOUND_MS;
    uint64_t fence = 0;

    do {
        nm_assert_rc(nm_remote(rem, 'l'), 0);
        fence = remote_fence(rem);
        nm_assert_rc(nm_remote(rem, 'u'), 0);
        if (key_exists(name))
            return fence;
        nmt_sleep_ms(2);
    } while (nmt_now_ms() < end);
    describe_lock(name);
    g_assert_true(key_exists(name));
    return fence;
}

static int timedlock_ms(netmutex_t *m, unsigned int ms)
{
    struct timespec deadline;

    nm_deadline(&deadline, CLOCK_REALTIME, ms);
    return netmutex_timedlock(m, &deadline);
}

/* See nm_fork_with_threads_is_safe. */
static void skip_fork_with_threads(void)
{
    g_test_skip("the sanitizer's allocator is not fork-safe while other threads run");
}

/* ---- 1. exact counter across processes ----------------------------------- */

#define PROCS 4
#define THREADS 3
#define ITERATIONS 100

/* The shared file: what the protected resource remembers. */
enum { OFF_COUNTER = 0, OFF_FENCE = 8, OFF_PID = 16, FILE_SIZE = 24 };

typedef struct Counter {
    const char *path;
    const char *name;
    int start_fd;  /* read end: EOF means "go" */
    int start_out; /* write end: each child closes its copy */
    int fd;        /* in a child: the file */
    gint failures;
} Counter;

static long long pread_ll(int fd, off_t off)
{
    long long v = 0;

    return pread(fd, &v, sizeof v, off) == sizeof v ? v : -1;
}

static bool pwrite_ll(int fd, off_t off, long long v)
{
    return pwrite(fd, &v, sizeof v, off) == sizeof v;
}

/* The critical section as the resource sees it: a read-modify-write that
 * dawdles, and the fence check a fenced resource would do.  The lease may
 * stay in one process for many holds (same fence); a new process must
 * bring a greater one. */
static bool touch(Counter *c, netmutex_t *m)
{
    long long counter = pread_ll(c->fd, OFF_COUNTER);
    long long last = pread_ll(c->fd, OFF_FENCE), last_pid = pread_ll(c->fd, OFF_PID);
    uint64_t fence = 0;
    bool ok = counter >= 0 && netmutex_fence(m, &fence) == 0;

    if ((long long)fence < last || (last_pid != getpid() && (long long)fence == last)) {
        g_printerr("fence went from %lld (pid %lld) to %llu (pid %d)\n", last, last_pid,
                   (unsigned long long)fence, (int)getpid());
        ok = false;
    }
    ok = ok && pwrite_ll(c->fd, OFF_FENCE, (long long)fence) &&
         pwrite_ll(c->fd, OFF_PID, getpid());
    g_usleep(50);
    return ok && pwrite_ll(c->fd, OFF_COUNTER, counter + 1);
}

/* Every way of taking the lock, in turn; trylock retries on EBUSY. */
static int take(netmutex_t *m, int i)
{
    int rc;

    switch (i % 3) {
    case 0: return netmutex_lock(m);
    case 1: return timedlock_ms(m, PROMPT_MS);
    default:
        while ((rc = netmutex_trylock(m)) == EBUSY)
            g_usleep(200);
        return rc;
    }
}

static void *counter_thread(void *p)
{
    Counter *c = p;
    netmutex_t m;

    if (netmutex_init(&m, c->name, NULL) != 0)
        g_atomic_int_inc(&c->failures);
    for (int i = 0; i < ITERATIONS; i++) {
        int rc = take(&m, i);

        if (rc != 0) {
            g_printerr("take %d: %s\n", i % 3, nm_errname(rc));
            g_atomic_int_inc(&c->failures);
            continue;
        }
        if (!touch(c, &m))
            g_atomic_int_inc(&c->failures);
        if ((rc = netmutex_unlock(&m)) != 0) {
            g_printerr("unlock: %s\n", nm_errname(rc));
            g_atomic_int_inc(&c->failures);
        }
    }
    if (netmutex_destroy(&m) != 0)
        g_atomic_int_inc(&c->failures);
    return NULL;
}

static int counter_process(void *p)
{
    Counter *c = p;
    pthread_t t[THREADS];
    char go;

    close(c->start_out);
    nm_configure(redis); /* caching on: the default */
    c->fd = open(c->path, O_RDWR);
    if (c->fd < 0 || read(c->start_fd, &go, 1) != 0)
        return 10;
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, counter_thread, c) != 0)
            return 12;
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    close(c->fd);
    if (netmutex_shutdown() != 0)
        return 13;
    return g_atomic_int_get(&c->failures) == 0 ? 0 : 14;
}

static void test_counter_exact(void)
{
    char *path = g_build_filename(nm_redis_dir(redis), "counter", NULL);
    char *name = nm_test_name("counter");
    Counter c = { .path = path, .name = name };
    char zero[FILE_SIZE] = { 0 };
    pid_t pids[PROCS];
    int start[2], fd;

    /* The workers are forked: this process must have no threads then, so
     * the library's background thread is stopped first. */
    nm_assert_rc(netmutex_shutdown(), 0);
    g_assert_true(g_file_set_contents(path, zero, sizeof zero, NULL));
    g_assert_cmpint(pipe(start), ==, 0);
    c.start_fd = start[0];
    c.start_out = start[1];
    for (int i = 0; i < PROCS; i++)
        pids[i] = nm_fork_run(counter_process, &c);
    close(start[0]);
    close(start[1]); /* go */
    for (int i = 0; i < PROCS; i++)
        nm_child_wait_ok(pids[i], nm_ms(120000));
    fd = open(path, O_RDONLY);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread_ll(fd, OFF_COUNTER), ==, PROCS * THREADS * ITERATIONS);
    close(fd);
    g_free(name);
    g_free(path);
}

/* ---- 2. a cached re-lock does not talk to Redis --------------------------- */

#define CYCLES 1000

/* Every mutex type: a recursive one also goes twice deep each cycle. */
static void test_relock_no_round_trip(gconstpointer data)
{
    int type = GPOINTER_TO_INT(data);
    netmutex_t m;
    char *name;
    unsigned long long before;

    configure_idle(LONG_IDLE_MS);
    name = nm_mutex_init(&m, "m", type, 0);
    cache_lease(&m, name);
    before = script_calls();
    nm_assert_rc(nm_cycles(&m, CYCLES), 0);
    if (type == NETMUTEX_RECURSIVE) {
        for (int i = 0; i < CYCLES; i++) {
            nm_assert_rc(netmutex_lock(&m), 0);
            nm_assert_rc(netmutex_lock(&m), 0);
            nm_assert_rc(netmutex_unlock(&m), 0);
            nm_assert_rc(netmutex_unlock(&m), 0);
        }
    }
    g_test_message("%d cached cycles: %llu script calls", CYCLES, script_calls() - before);
    /* A renewal or two may fall in; a round trip per cycle may not. */
    g_assert_cmpuint(script_calls() - before, <=, 10);
    g_assert_true(key_exists(name));
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* Caching off for the mutex: two requests per cycle, as before caching. */
static void test_relock_attr_off(void)
{
    netmutex_t m;
    char *name = nm_test_name("m");
    MutexOpts o = CACHED;
    unsigned long long before;

    configure_idle(LONG_IDLE_MS);
    o.cache = 0;
    init_with(&m, name, &o);
    nm_assert_rc(nm_cycles(&m, 1), 0);
    before = script_calls();
    nm_assert_rc(nm_cycles(&m, CYCLES), 0);
    g_assert_cmpuint(script_calls() - before, >=, 2 * CYCLES);
    g_assert_false(key_exists(name));
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* Caching off for the process, by configuration. */
static void test_relock_config_off(void)
{
    netmutex_t m;
    char *name;
    unsigned long long before;

    configure_idle(NETMUTEX_CACHE_OFF);
    name = init_cached(&m, "m", 0);
    nm_assert_rc(nm_cycles(&m, 1), 0);
    before = script_calls();
    nm_assert_rc(nm_cycles(&m, CYCLES), 0);
    g_assert_cmpuint(script_calls() - before, >=, 2 * CYCLES);
    g_assert_false(key_exists(name));
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* Caching off for the process, by NETMUTEX_CACHE=0; and the same remote
 * program with caching left on, as the control. */
static void test_relock_env_off(void)
{
    char *name = nm_test_name("m");
    NmRemote *off = remote(name, NETMUTEX_NORMAL, 0, cache_off_env);
    NmRemote *on;
    unsigned long long before;

    nm_assert_rc(remote_cycles(off, 1), 0);
    before = script_calls();
    nm_assert_rc(remote_cycles(off, CYCLES), 0);
    g_assert_cmpuint(script_calls() - before, >=, 2 * CYCLES);
    g_assert_false(key_exists(name));
    nm_remote_stop(off);

    on = remote(name, NETMUTEX_NORMAL, 0, long_idle_env);
    remote_cache_lease(on, name);
    before = script_calls();
    nm_assert_rc(remote_cycles(on, CYCLES), 0);
    g_assert_cmpuint(script_calls() - before, <=, 10);
    g_assert_true(key_exists(name));
    nm_remote_stop(on);
    g_free(name);
}

/* ---- 3. revocation while a thread holds it ------------------------------- */

/* A thread that takes the lock (lock or timedlock), says so, and holds it
 * until told to unlock. */
typedef struct Locker {
    netmutex_t *m;
    bool timed;
    gint holding;
    gint release;
} Locker;

static int lock_hold_unlock(void *p)
{
    Locker *l = p;
    int rc = l->timed ? timedlock_ms(l->m, BOUND_MS) : netmutex_lock(l->m);

    if (rc != 0)
        return rc;
    g_atomic_int_set(&l->holding, 1);
    while (!g_atomic_int_get(&l->release))
        nmt_sleep_ms(1);
    return netmutex_unlock(l->m);
}

static bool holding_within(Locker *l, unsigned int ms)
{
    gint64 end = nmt_now_ms() + ms;

    while (!g_atomic_int_get(&l->holding) && nmt_now_ms() < end)
        nmt_sleep_ms(2);
    return g_atomic_int_get(&l->holding);
}

/* REM's trylock while this process holds the lock: EBUSY, promptly. */
static void assert_remote_try_busy(NmRemote *rem)
{
    int rc;

    nm_remote_send(rem, 't');
    g_assert_true(nm_remote_poll(rem, BOUND_MS));
    rc = nm_remote_result(rem);
    nm_assert_rc(rc, EBUSY);
    if (rc == 0) /* two holders: the remote's hold must end too */
        nm_assert_rc(nm_remote(rem, 'u'), 0);
}

/* REM's pending lock returned 0 within the bound.  False (the test has
 * failed) if it has not returned: it may never, so no result is awaited. */
static bool remote_served(NmRemote *rem)
{
    bool ready = nm_remote_poll(rem, BOUND_MS);

    g_assert_true(ready);
    if (ready)
        nm_assert_rc(nm_remote_result(rem), 0);
    return ready;
}

/* After a failure: whatever A holds or waits for, it ends now. */
static void abandon(NmRemote *a, const char *name)
{
    nm_remote_kill(a);
    netmutex_break(name);
}

/* Another process holds the lock and would keep it cached for a minute:
 * our waiter gets it when that process unlocks, not when its cache idles
 * out, and that process then sees it held (EBUSY).  Afterwards it is cached
 * here, and the other process's lock takes it back. */
static void test_revoke_at_unlock(gconstpointer data)
{
    netmutex_t m;
    char *name;
    NmRemote *a;
    Locker l = { .m = &m, .timed = GPOINTER_TO_INT(data) };
    NmCall *c;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LONG_LEASE_MS);
    a = remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, long_idle_env);
    nm_assert_rc(nm_remote(a, 'l'), 0);
    c = nm_call_start(lock_hold_unlock, &l);
    nmt_sleep_ms(STILL_WAITING_MS);
    g_assert_false(nm_call_done(c));
    nm_assert_rc(nm_remote(a, 'u'), 0);
    g_assert_true(holding_within(&l, BOUND_MS));
    assert_remote_try_busy(a);
    g_atomic_int_set(&l.release, 1);
    /* Late (A's cache idled out) is a failure, not a reason to abort. */
    nm_assert_rc(nm_call_wait(c, LONG_IDLE_MS + PROMPT_MS), 0);
    /* Cached idle here (taken again, should A's trylock have had us give
     * it back at the unlock): A's lock revokes it. */
    cache_lease(&m, name);
    nm_remote_send(a, 'l');
    g_assert_true(nm_remote_poll(a, BOUND_MS));
    nm_assert_rc(nm_remote_result(a), 0);
    nm_assert_rc(netmutex_trylock(&m), EBUSY);
    nm_assert_rc(nm_remote(a, 'u'), 0);
    nm_remote_stop(a);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* The caching process unlocks while another process waits, and locks again
 * at once: the give-back at the unlock must not be overtaken by its own
 * next lock (the waiter is first in line, as without caching) -- but while
 * the waiter's request is still on its way to us. */
static void test_unlock_relock_does_not_overtake(gconstpointer data)
{
    netmutex_t m;
    char *name;
    NmRemote *a;
    int rc;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LONG_LEASE_MS);
    a = remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, long_idle_env);
    /* With history: each process has had the lease cached before. */
    for (int i = 0; i < GPOINTER_TO_INT(data); i++) {
        cache_lease(&m, name);
        remote_cache_lease(a, name);
    }
    cache_lease(&m, name);
    nm_assert_rc(netmutex_lock(&m), 0); /* from our cache */
    nm_remote_send(a, 'l');
    g_assert_true(nm_wait_queue_len(redis, name, 1, BOUND_MS));
    nm_assert_rc(netmutex_unlock(&m), 0);
    gint64 delivered_by = nmt_now_ms() + DELIVERY_MS;
    while ((rc = timedlock_ms(&m, STILL_WAITING_MS)) == 0 && nmt_now_ms() < delivered_by) {
        /* A's request was still on its way at our unlock (docs/deployment.md,
         * "Lease caching"): we may get in again until it arrives, not after. */
        g_test_message("overtaken while the request was on its way");
        nm_assert_rc(netmutex_unlock(&m), 0);
    }
    nm_assert_rc(rc, ETIMEDOUT);
    if (rc == 0) { /* still overtaking: A may wait a long time now */
        describe_lock(name);
        nm_assert_rc(netmutex_unlock(&m), 0);
    }
    if (remote_served(a)) {
        nm_assert_rc(nm_remote(a, 'u'), 0);
        nm_assert_rc(timedlock_ms(&m, BOUND_MS), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
        nm_remote_stop(a);
    } else {
        abandon(a, name);
    }
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* The lock changes process at every turn, each process unlocking while the
 * other waits and locking again at once: neither relock may overtake the
 * waiter.  (A local Locker thread stands for this process.) */
#define TURNS 3

static Locker *locker_start(netmutex_t *m, NmCall **call)
{
    Locker *l = g_new0(Locker, 1);

    l->m = m;
    *call = nm_call_start(lock_hold_unlock, l);
    return l;
}

static void locker_release(Locker *l, NmCall *call)
{
    g_atomic_int_set(&l->release, 1);
    nm_assert_rc(nm_call_wait(call, LONG_IDLE_MS + PROMPT_MS), 0);
    g_free(l);
}

/* One turn each; false after a failure (A is gone then). */
static bool one_turn_each(netmutex_t *m, NmRemote *a, const char *name)
{
    NmCall *c1, *c2;
    Locker *l1 = locker_start(m, &c1), *l2;
    bool ok;

    g_assert_true(holding_within(l1, BOUND_MS));
    nm_remote_send(a, 'l');
    g_assert_true(nm_wait_queue_len(redis, name, 1, BOUND_MS));
    locker_release(l1, c1);
    l2 = locker_start(m, &c2); /* our relock: A is first in line */
    if (!nm_remote_poll(a, STILL_WAITING_MS) && holding_within(l2, 0)) {
        /* A's request was on its way at our unlock; it has arrived by
         * now, so our next unlock gives way. */
        g_test_message("overtaken while the request was on its way");
        locker_release(l2, c2);
        l2 = locker_start(m, &c2);
    }
    ok = remote_served(a);
    if (ok) {
        g_assert_false(holding_within(l2, STILL_WAITING_MS));
        /* Our relock queued before A's unlock, or A's relock might take
         * it again, as ours might above (its request on its way). */
        g_assert_true(nm_wait_queue_len(redis, name, 1, BOUND_MS));
        nm_assert_rc(nm_remote(a, 'u'), 0);
        nm_remote_send(a, 'l'); /* A's relock: now we are first in line */
        ok = holding_within(l2, BOUND_MS);
        g_assert_true(ok);
    }
    if (ok)
        g_assert_false(nm_remote_poll(a, STILL_WAITING_MS));
    else
        abandon(a, name);
    locker_release(l2, c2);
    if (ok && !(ok = remote_served(a)))
        abandon(a, name);
    else if (ok)
        nm_assert_rc(nm_remote(a, 'u'), 0);
    return ok;
}

static void test_turns(void)
{
    netmutex_t m;
    char *name;
    NmRemote *a;
    bool ok = true;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LONG_LEASE_MS);
    a = remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, long_idle_env);
    for (int turn = 0; turn < TURNS && ok; turn++)
        ok = one_turn_each(&m, a, name);
    if (ok)
        nm_remote_stop(a);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* The same between two other processes, many times and as fast as they
 * go: the holder unlocks and at once locks again while the other waits
 * (queued in Redis); the waiter must get it every time, within the bound.
 * A request still on its way to the holder at its unlock may let it in
 * again until it arrives (docs/deployment.md, "Lease caching"), never after. */
#define FAST_TURNS 200

static void test_fast_turns(void)
{
    char *name = nm_test_name("m");
    NmRemote *p[2] = {
        remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, long_idle_env),
        remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, long_idle_env),
    };
    int turn = 0, overtakes = 0;
    bool served = true;

    nm_assert_rc(nm_remote(p[0], 'l'), 0);
    nm_remote_send(p[1], 'l');
    for (; turn < FAST_TURNS && served; turn++) {
        NmRemote *holder = p[turn % 2], *waiter = p[1 - turn % 2];

        g_assert_true(nm_wait_queue_len(redis, name, 1, BOUND_MS));
        nm_assert_rc(nm_remote(holder, 'u'), 0);
        nm_remote_send(holder, 'l');
        served = nm_remote_poll(waiter, STILL_WAITING_MS);
        if (!served && nm_remote_poll(holder, 0)) {
            /* The request was still on its way at the unlock: the holder
             * got in again.  It has arrived by now, so the holder's next
             * unlock gives way. */
            overtakes++;
            nm_assert_rc(nm_remote_result(holder), 0);
            nm_assert_rc(nm_remote(holder, 'u'), 0);
            nm_remote_send(holder, 'l');
        }
        served = served || nm_remote_poll(waiter, BOUND_MS);
        if (served)
            nm_assert_rc(nm_remote_result(waiter), 0);
    }
    g_test_message("%d turns, %d overtakes while a request was on its way%s", turn, overtakes,
                   served ? "" : ", the last one's waiter never served");
    if (!served)
        describe_lock(name);
    g_assert_true(served);
    if (!served) { /* a lock call may never return: no orderly stop */
        nm_remote_kill(p[0]);
        nm_remote_kill(p[1]);
    } else { /* one holds, the other waits for it */
        nm_assert_rc(nm_remote(p[turn % 2], 'u'), 0);
        nm_assert_rc(nm_remote_result(p[1 - turn % 2]), 0);
        nm_assert_rc(nm_remote(p[1 - turn % 2], 'u'), 0);
        nm_remote_stop(p[0]);
        nm_remote_stop(p[1]);
    }
    g_free(name);
}

/* ---- 4. trylock against a cached lease ----------------------------------- */

/* Runs TRY (0 when it got the lock) and checks its result and duration. */
static void assert_try(int rc, gint64 started, int want)
{
    gint64 took = nmt_now_ms() - started;

    nm_assert_rc(rc, want);
    g_test_message("trylock: %s in %" G_GINT64_FORMAT " ms", nm_errname(rc), took);
    g_assert_cmpint(took, <=, BOUND_MS);
}

/* Whichever process caches the idle lease, the other's trylock gets it,
 * promptly. */
static void test_trylock_idle(void)
{
    netmutex_t m;
    char *name;
    NmRemote *a;
    gint64 t0;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LONG_LEASE_MS);
    a = remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, long_idle_env);
    remote_cache_lease(a, name); /* cached idle in A */
    t0 = nmt_now_ms();
    assert_try(netmutex_trylock(&m), t0, 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    cache_lease(&m, name); /* cached idle here */
    t0 = nmt_now_ms();
    assert_try(nm_remote(a, 't'), t0, 0);
    nm_assert_rc(nm_remote(a, 'u'), 0);
    t0 = nmt_now_ms();
    assert_try(netmutex_trylock(&m), t0, 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_remote_stop(a);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* A thread of the caching process holds it: the other's trylock gets
 * EBUSY, promptly, whether the holder took the lease from a free name or
 * from the other's cache. */
static void test_trylock_held(void)
{
    netmutex_t m;
    char *name;
    NmRemote *a;
    gint64 t0;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LONG_LEASE_MS);
    a = remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, long_idle_env);
    cache_lease(&m, name);
    nm_assert_rc(netmutex_lock(&m), 0); /* from our cache */
    assert_remote_try_busy(a);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(nm_remote(a, 'l'), 0); /* revokes our cache */
    t0 = nmt_now_ms();
    assert_try(netmutex_trylock(&m), t0, EBUSY);
    nm_assert_rc(nm_remote(a, 'u'), 0);
    remote_cache_lease(a, name);
    nm_assert_rc(netmutex_lock(&m), 0); /* revokes A's cache */
    assert_remote_try_busy(a);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_remote_stop(a);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* The answer to a trylock (the asker's grant list, "0": a thread holds
 * it) goes with its expiry in one request: a holder whose connection is
 * lost right after its push -- the proxy closes it before a PEXPIRE sent
 * by itself would reach the server, as a kill would -- leaves no list
 * that never expires.  The asker plays one that died after it asked: its
 * request is published by hand, and nobody pops the answer. */
static void test_trylock_answer_expires(void)
{
    static const char asker[] = "0123456789abcdef0123456789abcdef";
    NmProxy *p = nm_proxy_start(redis);
    char *url = nm_redis_proxy_url(redis, nm_proxy_port(p));
    netmutex_config_t cfg = { .url = url, .cache_idle_ms = LONG_IDLE_MS,
                              .io_timeout_ms = IO_TIMEOUT_MS };
    netmutex_t m;

    nm_assert_rc(netmutex_configure(&cfg), 0);
    char *name = init_cached(&m, "m", LONG_LEASE_MS);
    char *key = nm_lock_key(name), *grant = g_strdup_printf("%s:g:%s", key, asker);
    cache_lease(&m, name);
    nm_assert_rc(netmutex_lock(&m), 0); /* from our cache: a thread holds it */
    char *holder = nm_token_of(redis, name);
    g_assert_nonnull(holder);
    nm_proxy_cut_request(p, "\r\nPEXPIRE\r\n");
    char *ask = g_strdup_printf("%s t%s", holder, asker); /* lib.lua, R */
    nm_redis_ok(redis, "PUBLISH %s:r %s", key, ask);
    g_free(ask);
    gint64 end = nmt_now_ms() + BOUND_MS;
    long long pttl;
    while ((pttl = nm_redis_pttl(redis, grant)) == -2 && nmt_now_ms() < end)
        nmt_sleep_ms(2);
    g_test_message("the answer's list: pttl %lld, %u cut", pttl, nm_proxy_cuts(p));
    g_assert_cmpint(pttl, >, 0); /* answered, and expiring */
    g_assert_cmpint(nm_redis_keys_without_expiry(redis), ==, 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_proxy_free(p);
    g_free(holder);
    g_free(grant);
    g_free(key);
    g_free(name);
    g_free(url);
}

/* A single server needs no +cluster|keyslot: the scripts' question
 * whether they run on a Cluster node, refused to such a user, is answered
 * by INFO.  Every script path that asks works: a trylock answered by a
 * caching holder (its request PUBLISHed), a hand-off to a queued waiter
 * (the grant pushed by the release), a break. */
static void test_acl_without_keyslot(void)
{
    char *base = nm_redis_url(redis), *url = nm_url_as_user(base, "noslot", "pw");
    netmutex_config_t cfg = { .url = url, .cache_idle_ms = LONG_IDLE_MS,
                              .io_timeout_ms = IO_TIMEOUT_MS };
    netmutex_t m;

    nm_redis_add_user(redis, "noslot", "pw", "-cluster|keyslot");
    nm_assert_rc(netmutex_configure(&cfg), 0);
    char *name = init_cached(&m, "m", LONG_LEASE_MS);
    NmRemote *a = nm_remote_start_url(url, long_idle_env, name, NETMUTEX_NORMAL,
                                      LONG_LEASE_MS);
    cache_lease(&m, name);
    nm_assert_rc(netmutex_lock(&m), 0); /* from our cache */
    assert_remote_try_busy(a);
    nm_remote_send(a, 'l');
    g_assert_true(nm_wait_queue_len(redis, name, 1, BOUND_MS));
    nm_assert_rc(netmutex_unlock(&m), 0);
    if (remote_served(a)) {
        nm_assert_rc(netmutex_break(name), 0); /* A's hold */
        nm_assert_rc(nm_remote(a, 'u'), ENOLCK);
    }
    nm_remote_stop(a);
    nm_assert_rc(netmutex_destroy(&m), 0);
    configure_idle(LONG_IDLE_MS);
    nm_redis_ok(redis, "ACL DELUSER noslot");
    g_free(name);
    g_free(url);
    g_free(base);
}

/* ---- 5. fences ------------------------------------------------------------- */

/* Cached re-acquisitions share the fence; every change of process brings
 * a greater one, whichever process takes it (two remotes and this one).
 * (A process's first unlocks after it took the lease may give it back --
 * see cache_lease -- and its next lock then brings a greater fence too.) */
static void test_fences(void)
{
    netmutex_t m;
    char *name;
    NmRemote *a, *b;
    uint64_t last = 0, f;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", 0);
    a = remote(name, NETMUTEX_NORMAL, 0, long_idle_env);
    b = remote(name, NETMUTEX_NORMAL, 0, long_idle_env);
    for (int round = 0; round < 5; round++) {
        NmRemote *r = round % 2 ? b : a;

        nm_assert_rc(nm_remote(r, 'l'), 0);
        g_assert_cmpuint((f = remote_fence(r)), >, last);
        nm_assert_rc(nm_remote(r, 'u'), 0);
        g_assert_cmpuint((last = remote_cache_lease(r, name)), >=, f);
        for (int i = 0; i < 3; i++) { /* from its cache: the same fence */
            nm_assert_rc(nm_remote(r, 'l'), 0);
            g_assert_cmpuint(remote_fence(r), ==, last);
            nm_assert_rc(nm_remote(r, 'u'), 0);
        }
        nm_assert_rc(netmutex_lock(&m), 0);
        g_assert_cmpuint((f = fence_of(&m)), >, last);
        nm_assert_rc(netmutex_unlock(&m), 0);
        g_assert_cmpuint((last = cache_lease(&m, name)), >=, f);
        nm_assert_rc(netmutex_lock(&m), 0);
        g_assert_cmpuint(fence_of(&m), ==, last);
        nm_assert_rc(netmutex_unlock(&m), 0);
    }
    nm_remote_stop(a);
    nm_remote_stop(b);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- 6. kill -9 ------------------------------------------------------------ */

#define DEAD_LEASE_MS nm_ms(500)

static char *init_robust(netmutex_t *m, const char *suffix)
{
    char *name = nm_test_name(suffix);
    MutexOpts o = CACHED;

    o.robust = 1;
    init_with(m, name, &o);
    return name;
}

/* A caching process killed while the lease is only cached: the lock is
 * free once the lease ran out, and nobody hears of a dead owner. */
static void test_kill_idle(void)
{
    netmutex_t m;
    char *name;
    NmRemote *a;
    gint64 killed_at;

    configure_idle(LONG_IDLE_MS);
    name = init_robust(&m, "m");
    a = remote(name, NETMUTEX_NORMAL, DEAD_LEASE_MS, long_idle_env);
    remote_cache_lease(a, name);
    killed_at = nmt_now_ms();
    nm_remote_kill(a);
    nm_assert_rc(timedlock_ms(&m, DEAD_LEASE_MS + BOUND_MS), 0);
    g_test_message("free %" G_GINT64_FORMAT " ms after the kill (lease %u ms)",
                   nmt_now_ms() - killed_at, DEAD_LEASE_MS);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* A robust mutex never caches: its key goes at every unlock, every cycle
 * is two requests, so a process killed after a clean unlock leaves no
 * EOWNERDEAD, and one killed holding does. */
static void test_kill_robust(void)
{
    netmutex_t m;
    char *name;
    NmRemote *a;
    unsigned long long before;

    configure_idle(LONG_IDLE_MS);
    name = init_robust(&m, "m");
    a = remote(name, NETMUTEX_NORMAL | NM_REMOTE_ROBUST, DEAD_LEASE_MS, long_idle_env);
    before = script_calls();
    nm_assert_rc(remote_cycles(a, 20), 0);
    g_assert_cmpuint(script_calls() - before, >=, 40);
    g_assert_false(key_exists(name));
    nm_remote_kill(a);
    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);

    a = remote(name, NETMUTEX_NORMAL | NM_REMOTE_ROBUST, DEAD_LEASE_MS, long_idle_env);
    nm_assert_rc(nm_remote(a, 'l'), 0);
    nm_remote_kill(a);
    nm_assert_rc(timedlock_ms(&m, DEAD_LEASE_MS + BOUND_MS), EOWNERDEAD);
    nm_assert_rc(netmutex_consistent(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_false(key_exists(name)); /* and it did not cache either */
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- 7. a lease lost while cached ---------------------------------------- */

/* The lease, short so the background thread checks it often. */
#define LOST_LEASE_MS 300u

/* How the cached lease goes away, from outside this process. */
typedef enum { LOSE_BREAK, LOSE_DEL } LoseHow;

/* The lease is cached idle here when it is taken away, and another
 * process takes the lock.  After one lease -- time for the background
 * thread's renewal to find the key gone, as a raw DEL is seen no sooner --
 * our next lock must wait for that holder, and then bring a new fence. */
static void test_lost_while_cached(gconstpointer data)
{
    netmutex_t m;
    char *name, *key;
    NmRemote *b;
    uint64_t mine, theirs;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LOST_LEASE_MS);
    key = nm_lock_key(name);
    b = remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, long_idle_env);
    mine = cache_lease(&m, name);
    if (GPOINTER_TO_INT(data) == LOSE_BREAK)
        nm_assert_rc(nm_remote(b, 'b'), 0);
    else
        nm_redis_ok(redis, "DEL %s", key);
    nmt_sleep_ms(nm_ms(LOST_LEASE_MS));
    nm_assert_rc(nm_remote(b, 'l'), 0);
    theirs = remote_fence(b);
    g_assert_cmpuint(theirs, >, mine);
    nm_assert_rc(timedlock_ms(&m, STILL_WAITING_MS), ETIMEDOUT);
    nm_assert_rc(nm_remote(b, 'u'), 0);
    nm_assert_rc(timedlock_ms(&m, BOUND_MS), 0);
    g_assert_cmpuint(fence_of(&m), >, theirs);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_remote_stop(b);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(key);
    g_free(name);
}

/* The same without a second process: the next lock after the key was
 * deleted is a new acquisition (new fence, our token in the key). */
static void test_deleted_then_relock(void)
{
    netmutex_t m;
    char *name, *key, *token;
    uint64_t mine;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LOST_LEASE_MS);
    key = nm_lock_key(name);
    mine = cache_lease(&m, name);
    nm_redis_ok(redis, "DEL %s", key);
    nmt_sleep_ms(nm_ms(LOST_LEASE_MS));
    nm_assert_rc(netmutex_lock(&m), 0);
    g_assert_cmpuint(fence_of(&m), >, mine);
    token = nm_token_of(redis, name);
    g_assert_nonnull(token); /* the lock is really held at the server */
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(token);
    g_free(key);
    g_free(name);
}

/* A caching process is stopped (SIGSTOP) past its lease while the lease is
 * cached idle; another process takes the lock and holds it.  Resumed, the
 * first process must not lock from its stale cache: its lock waits for the
 * holder and then brings a greater fence. */
static void test_stopped_past_lease(void)
{
    char *name = nm_test_name("m");
    NmRemote *a = remote(name, NETMUTEX_NORMAL, LOST_LEASE_MS, long_idle_env);
    NmRemote *b = remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, long_idle_env);
    uint64_t first, theirs;

    first = remote_cache_lease(a, name);
    g_assert_cmpint(kill(nm_remote_pid(a), SIGSTOP), ==, 0);
    nm_assert_rc(nm_remote(b, 'l'), 0); /* once A's lease ran out */
    theirs = remote_fence(b);
    g_assert_cmpuint(theirs, >, first);
    g_assert_cmpint(kill(nm_remote_pid(a), SIGCONT), ==, 0);
    nm_remote_send(a, 'l');
    g_assert_false(nm_remote_poll(a, STILL_WAITING_MS));
    nm_assert_rc(nm_remote(b, 'u'), 0);
    nm_assert_rc(nm_remote_result(a), 0);
    g_assert_cmpuint(remote_fence(a), >, theirs);
    nm_assert_rc(nm_remote(a, 'u'), 0);
    nm_remote_stop(a);
    nm_remote_stop(b);
    g_free(name);
}

/* The server restarts empty (a crash without persistence) while the lease
 * is cached here, and another process takes the lock on the new server:
 * our next lock must wait for it, and bring a greater fence. */
static void test_server_restart_while_cached(void)
{
    netmutex_t m;
    char *name;
    NmRemote *b;
    uint64_t mine, theirs;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LOST_LEASE_MS);
    mine = cache_lease(&m, name);
    nm_redis_stop(redis);
    nm_redis_restart(redis);
    nmt_sleep_ms(nm_ms(LOST_LEASE_MS)); /* as for a DEL: one lease to notice */
    b = remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, long_idle_env);
    nm_assert_rc(nm_remote(b, 'l'), 0);
    theirs = remote_fence(b);
    g_assert_cmpuint(theirs, >, mine);
    nm_assert_rc(timedlock_ms(&m, STILL_WAITING_MS), ETIMEDOUT);
    nm_assert_rc(nm_remote(b, 'u'), 0);
    nm_assert_rc(timedlock_ms(&m, BOUND_MS), 0);
    g_assert_cmpuint(fence_of(&m), >, theirs);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_remote_stop(b);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- 8. idle give-back ----------------------------------------------------- */

#define SHORT_IDLE_MS 200u

/* How late a give-back may be after the idle period: a scheduling delay,
 * not a timer tick of the background thread's (which would be a bug). */
#define IDLE_SLACK_MS nm_ms(500)

/* The key stays after the unlock, and goes once the idle period passed
 * (the lease is 30 s: expiry cannot be what removes it). */
static void assert_idles_out(const char *name, unsigned int idle_ms)
{
    gint64 took;

    g_assert_true(key_exists(name));
    took = wait_key_gone(name, nm_ms(idle_ms) + BOUND_MS);
    g_test_message("given back %" G_GINT64_FORMAT " ms after the unlock (idle %u ms)", took,
                   idle_ms);
    g_assert_cmpint(took, >=, 0);
    g_assert_cmpint(took, <=, idle_ms + IDLE_SLACK_MS);
}

static void test_idle_config(void)
{
    netmutex_t m;
    char *name;

    configure_idle(SHORT_IDLE_MS);
    name = init_cached(&m, "m", LONG_LEASE_MS);
    cache_lease(&m, name);
    assert_idles_out(name, SHORT_IDLE_MS);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* A lease taken anew after an idle give-back idles out the same way. */
static void test_idle_retaken(void)
{
    netmutex_t m;
    char *name;

    configure_idle(SHORT_IDLE_MS);
    name = init_cached(&m, "m", LONG_LEASE_MS);
    for (int i = 0; i < 3; i++) {
        cache_lease(&m, name);
        assert_idles_out(name, SHORT_IDLE_MS);
    }
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* A name used again after a pause: the process stopped listening for
 * requests for it (after about 2 s unused) but its subscription lingers
 * on the server a while longer, so taking it up again brings no fresh
 * confirmation -- the library must count the lingering one, or the name
 * is never cached again.  Where that window falls depends on the
 * background thread's timers, so several names are probed at staggered
 * times, each one once. */
#define PROBES 8
#define PROBE_FIRST_MS 2000
#define PROBE_STEP_MS 500

static void test_idle_relisten(void)
{
    netmutex_t m[PROBES];
    char *names[PROBES];

    configure_idle(SHORT_IDLE_MS);
    for (int i = 0; i < PROBES; i++) {
        char suffix[16];
        g_snprintf(suffix, sizeof suffix, "m%d", i);
        names[i] = init_cached(&m[i], suffix, LONG_LEASE_MS);
        cache_lease(&m[i], names[i]);
    }
    gint64 start = nmt_now_ms();
    for (int i = 0; i < PROBES; i++) {
        gint64 at = start + PROBE_FIRST_MS + (gint64)i * PROBE_STEP_MS;
        if (nmt_now_ms() < at)
            nmt_sleep_ms((unsigned int)(at - nmt_now_ms()));
        cache_lease(&m[i], names[i]);
    }
    for (int i = 0; i < PROBES; i++) {
        nm_assert_rc(netmutex_destroy(&m[i]), 0);
        g_free(names[i]);
    }
}

static void test_idle_env_and_default(void)
{
    static const char *const short_env[] = { "NETMUTEX_CACHE_IDLE_MS=200", NULL };
    char *name = nm_test_name("m");
    NmRemote *a = remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, short_env);
    NmRemote *b = remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, NULL);

    remote_cache_lease(a, name);
    assert_idles_out(name, SHORT_IDLE_MS);
    remote_cache_lease(b, name);
    assert_idles_out(name, 1000); /* the default */
    nm_remote_stop(a);
    nm_remote_stop(b);
    g_free(name);
}

/* ---- 9. exit(), shutdown and configure give it back at once -------------- */

static void test_exit_gives_back(void)
{
    netmutex_t m;
    char *name;
    NmRemote *a;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LONG_LEASE_MS);
    a = remote(name, NETMUTEX_NORMAL, LONG_LEASE_MS, long_idle_env);
    remote_cache_lease(a, name);
    nm_remote_exit(a); /* exit(0): reaped once its atexit handlers ran */
    g_assert_false(key_exists(name));
    nm_assert_rc(timedlock_ms(&m, BOUND_MS), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_shutdown_configure_give_back(void)
{
    netmutex_t m;
    char *name;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LONG_LEASE_MS);
    cache_lease(&m, name);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_assert_false(key_exists(name));

    configure_idle(LONG_IDLE_MS);
    cache_lease(&m, name);
    configure_idle(LONG_IDLE_MS);
    g_assert_false(key_exists(name));
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* A configure right after a name's first lock and unlock stops listening
 * for requests for it and frees its state, while the background thread
 * may still be answering the subscription's confirmation for it (with a
 * GET, when it came while the lease was held): the unsubscribe must wait
 * for that callback.  In CI, under ASan and load, netmutex(1) and two
 * test programs saw the callback read the freed state; the race needs the
 * two to overlap, so this tries many times (it did not catch the old code
 * on an idle machine: ASan and valgrind runs under load are its chance). */
#define FLUSH_ROUNDS 300

static void test_flush_while_subscribing(void)
{
    char *name = nm_test_name("m");
    MutexOpts o = CACHED;

    configure_idle(LONG_IDLE_MS);
    for (int round = 0; round < FLUSH_ROUNDS; round++) {
        netmutex_t m;
        init_with(&m, name, &o);
        nm_assert_rc(netmutex_lock(&m), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
        nm_assert_rc(netmutex_destroy(&m), 0);
        configure_idle(LONG_IDLE_MS);
    }
    g_assert_false(key_exists(name));
    g_free(name);
}

/* netmutex_destroy of the only handle gives its cached lease back. */
static void test_destroy_gives_back(void)
{
    netmutex_t m;
    char *name;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LONG_LEASE_MS);
    cache_lease(&m, name);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_assert_false(key_exists(name));
    g_free(name);
}

/* ---- 10. fork ------------------------------------------------------------- */

typedef struct ForkCase {
    netmutex_t *m;
    uint64_t parent_fence;
    int holding[2]; /* child -> parent: "I hold it" */
    int release[2]; /* parent -> child: "unlock" */
} ForkCase;

static int child_check(int got, int want, const char *what)
{
    if (got == want)
        return 0;
    g_printerr("child: %s returned %s, expected %s\n", what, nm_errname(got),
               nm_errname(want));
    return 1;
}

/* The parent's cached lease is the parent's: the child's lock takes it
 * over the network, with a greater fence, while the parent is locked out. */
static int fork_child(void *p)
{
    ForkCase *f = p;
    uint64_t fence = 0;
    int bad = child_check(timedlock_ms(f->m, BOUND_MS), 0, "timedlock");
    char c = 'h';

    bad |= child_check(netmutex_fence(f->m, &fence), 0, "fence");
    if (fence <= f->parent_fence) {
        g_printerr("child: fence %llu, not above the parent's %llu\n",
                   (unsigned long long)fence, (unsigned long long)f->parent_fence);
        bad = 1;
    }
    if (write(f->holding[1], &c, 1) != 1 || read(f->release[0], &c, 1) != 1)
        bad = 1;
    bad |= child_check(netmutex_unlock(f->m), 0, "unlock");
    bad |= child_check(netmutex_destroy(f->m), 0, "destroy");
    bad |= child_check(netmutex_shutdown(), 0, "shutdown"); /* gives it back */
    return bad;
}

static void test_fork_inherits_nothing_cached(void)
{
    netmutex_t m;
    char *name;
    ForkCase f = { .m = &m };
    char c;
    pid_t pid;

    configure_idle(LONG_IDLE_MS);
    name = init_cached(&m, "m", LONG_LEASE_MS);
    f.parent_fence = cache_lease(&m, name);
    g_assert_cmpint(pipe(f.holding), ==, 0);
    g_assert_cmpint(pipe(f.release), ==, 0);
    pid = nm_fork_run_unchecked(fork_child, &f);
    /* Only the child writes "holding": a child that died gives EOF. */
    close(f.holding[1]);
    close(f.release[0]);
    g_assert_cmpint(read(f.holding[0], &c, 1), ==, 1); /* the child holds it */
    nm_assert_rc(netmutex_trylock(&m), EBUSY);
    g_assert_cmpint(write(f.release[1], &c, 1), ==, 1);
    nm_child_wait_ok(pid, PROMPT_MS);
    nm_assert_rc(timedlock_ms(&m, BOUND_MS), 0);
    g_assert_cmpuint(fence_of(&m), >, f.parent_fence);
    nm_assert_rc(netmutex_unlock(&m), 0);
    close(f.holding[0]);
    close(f.release[1]);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- 11. netmutex_status ---------------------------------------------------- */

static void assert_status(const char *name, int held, int cached)
{
    netmutex_status_t st;

    nm_assert_rc(netmutex_status(name, &st), 0);
    g_assert_cmpint(st.held, ==, held);
    g_assert_cmpint(st.cached, ==, cached);
}

/* Polls netmutex_status until NAME's lease is idle (WANT 1) or not (0),
 * for at most MS; whether it came to that. */
static bool status_idle_becomes(const char *name, int want, unsigned int ms)
{
    gint64 end = nmt_now_ms() + ms;
    netmutex_status_t st;

    for (;;) {
        nm_assert_rc(netmutex_status(name, &st), 0);
        if (st.idle == want) {
            g_test_message("idle %d after %" G_GINT64_FORMAT " ms", want, nmt_now_ms() - end + ms);
            return true;
        }
        if (nmt_now_ms() >= end)
            return false;
        nmt_sleep_ms(10);
    }
}

static void test_status_cached(void)
{
    netmutex_t m, plain;
    char *name = nm_test_name("m");
    char *plain_name = nm_test_name("plain");
    MutexOpts o = CACHED;

    configure_idle(LONG_IDLE_MS);
    init_with(&m, name, &o);
    assert_status(name, 0, 0);
    cache_lease(&m, name);
    g_assert_true(status_idle_becomes(name, 1, BOUND_MS)); /* no thread in it */
    nm_assert_rc(netmutex_lock(&m), 0);
    assert_status(name, 1, 1); /* held by a process that caches it */
    g_assert_true(status_idle_becomes(name, 0, BOUND_MS)); /* a thread is in it */
    nm_assert_rc(netmutex_unlock(&m), 0);
    assert_status(name, 1, 1); /* cached */
    g_assert_true(status_idle_becomes(name, 1, BOUND_MS));
    configure_idle(LONG_IDLE_MS); /* gives it back */
    assert_status(name, 0, 0);

    o.cache = 0;
    init_with(&plain, plain_name, &o);
    nm_assert_rc(netmutex_lock(&plain), 0);
    assert_status(plain_name, 1, 0); /* a plain holder */
    nm_assert_rc(netmutex_unlock(&plain), 0);
    assert_status(plain_name, 0, 0);
    nm_assert_rc(netmutex_destroy(&plain), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(plain_name);
    g_free(name);
}

/* ---- never cached ------------------------------------------------------------ */

/* Each of these mutexes gives its key back at every unlock, also once the
 * process has had time to listen for requests (a cacheable mutex cycled
 * the same way keeps its lease: see the control in test_never_cached). */
#define SPACED_CYCLES 5
#define CYCLE_GAP_MS 20

static bool stays_after_spaced_cycles(netmutex_t *m, const char *name)
{
    bool kept = false;

    for (int i = 0; i < SPACED_CYCLES; i++) {
        nm_assert_rc(netmutex_lock(m), 0);
        g_assert_true(key_exists(name));
        nm_assert_rc(netmutex_unlock(m), 0);
        kept |= key_exists(name);
        nmt_sleep_ms(CYCLE_GAP_MS);
    }
    return kept;
}

static void assert_not_cached(const MutexOpts *o, const char *suffix)
{
    netmutex_t m;
    char *name = nm_test_name(suffix);

    init_with(&m, name, o);
    g_assert_false(stays_after_spaced_cycles(&m, name));
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_never_cached(void)
{
    MutexOpts robust = CACHED, manual = CACHED, off = CACHED, control = CACHED;
    char *name = nm_test_name("control");
    netmutex_t m;

    configure_idle(LONG_IDLE_MS);
    init_with(&m, name, &control);
    g_assert_true(stays_after_spaced_cycles(&m, name));
    nm_assert_rc(netmutex_destroy(&m), 0);
    robust.robust = 1;
    manual.autorenew = 0;
    manual.lease_ms = LONG_LEASE_MS;
    off.cache = 0;
    assert_not_cached(&robust, "robust");
    assert_not_cached(&manual, "autorenew-off");
    assert_not_cached(&off, "attribute-off");
    configure_idle(NETMUTEX_CACHE_OFF);
    assert_not_cached(&control, "config-off");
    g_free(name);
}

/* Quorum mode (three independent servers): nothing is kept on any. */
static void test_never_cached_quorum(void)
{
    NmRedis *more[2] = { nm_redis_start(NULL), nm_redis_start(NULL) };
    char *urls[4] = { nm_redis_url(redis), nm_redis_url(more[0]), nm_redis_url(more[1]), NULL };
    char *list = g_strjoinv(",", urls);
    netmutex_config_t cfg = { .url = list, .cache_idle_ms = LONG_IDLE_MS };
    netmutex_t m;
    char *name = nm_test_name("m");
    MutexOpts o = CACHED;

    nm_assert_rc(netmutex_configure(&cfg), 0);
    init_with(&m, name, &o);
    for (int i = 0; i < SPACED_CYCLES; i++) {
        nm_assert_rc(nm_cycles(&m, 1), 0);
        g_assert_false(key_exists_on(redis, name));
        g_assert_false(key_exists_on(more[0], name));
        g_assert_false(key_exists_on(more[1], name));
        nmt_sleep_ms(CYCLE_GAP_MS);
    }
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0); /* before its servers go */
    for (int i = 0; i < 3; i++)
        g_free(urls[i]);
    nm_redis_free(more[0]);
    nm_redis_free(more[1]);
    g_free(list);
    g_free(name);
}

/* ---- 12. bad input ------------------------------------------------------------ */

static void test_bad_input(void)
{
    netmutex_attr_t attr;
    int on = -7;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_getcache(&attr, &on), 0);
    g_assert_cmpint(on, ==, 1); /* the default */
    nm_assert_rc(netmutex_attr_setcache(&attr, 0), 0);
    nm_assert_rc(netmutex_attr_getcache(&attr, &on), 0);
    g_assert_cmpint(on, ==, 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, 2), EINVAL);
    nm_assert_rc(netmutex_attr_setcache(&attr, -1), EINVAL);
    nm_assert_rc(netmutex_attr_getcache(&attr, &on), 0);
    g_assert_cmpint(on, ==, 0); /* unchanged by the refused calls */
    nm_assert_rc(netmutex_attr_setcache(NULL, 1), EINVAL);
    nm_assert_rc(netmutex_attr_getcache(NULL, &on), EINVAL);
    nm_assert_rc(netmutex_attr_getcache(&attr, NULL), EINVAL);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    /* A destroyed (or never initialized) attribute object is refused. */
    nm_assert_rc(netmutex_attr_setcache(&attr, 1), EINVAL);
}

/* A variable that is set must be valid (netmutex_configure(3)). */
static void test_bad_environment(void)
{
    static const struct { const char *var, *value; } bad[] = {
        { "NETMUTEX_CACHE", "2" },
        { "NETMUTEX_CACHE", "yes" },
        { "NETMUTEX_CACHE_IDLE_MS", "soon" },
        { "NETMUTEX_CACHE_IDLE_MS", "-5" },
    };
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url };

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_test_message("%s=%s", bad[i].var, bad[i].value);
        g_assert_true(g_setenv(bad[i].var, bad[i].value, TRUE));
        nm_assert_rc(netmutex_configure(&cfg), EINVAL);
        g_unsetenv(bad[i].var);
    }
    nm_assert_rc(netmutex_configure(&cfg), 0);
    g_free(url);
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);

    /* Forks with the library shut down: no thread runs then, so ASan too. */
    g_test_add_func("/cache/counter/exact-across-processes", test_counter_exact);
    nm_test_add_for_types("/cache/relock/no-round-trip", test_relock_no_round_trip);
    g_test_add_func("/cache/relock/attribute-off", test_relock_attr_off);
    g_test_add_func("/cache/relock/config-off", test_relock_config_off);
    g_test_add_func("/cache/relock/environment-off", test_relock_env_off);
    g_test_add_data_func("/cache/revoke/at-unlock/lock", GINT_TO_POINTER(0),
                         test_revoke_at_unlock);
    g_test_add_data_func("/cache/revoke/at-unlock/timedlock", GINT_TO_POINTER(1),
                         test_revoke_at_unlock);
    g_test_add_data_func("/cache/revoke/unlock-relock-does-not-overtake/first",
                         GINT_TO_POINTER(0), test_unlock_relock_does_not_overtake);
    g_test_add_data_func("/cache/revoke/unlock-relock-does-not-overtake/after-turns",
                         GINT_TO_POINTER(2), test_unlock_relock_does_not_overtake);
    g_test_add_func("/cache/revoke/turns", test_turns);
    g_test_add_func("/cache/revoke/fast-turns", test_fast_turns);
    g_test_add_func("/cache/trylock/idle", test_trylock_idle);
    g_test_add_func("/cache/trylock/held", test_trylock_held);
    g_test_add_func("/cache/trylock/answer-expires-connection-lost",
                    test_trylock_answer_expires);
    g_test_add_func("/cache/acl/single-server-without-keyslot", test_acl_without_keyslot);
    g_test_add_func("/cache/fences/per-process", test_fences);
    g_test_add_func("/cache/kill/idle-no-ownerdead", test_kill_idle);
    g_test_add_func("/cache/kill/robust-not-cached", test_kill_robust);
    g_test_add_data_func("/cache/lost/break", GINT_TO_POINTER(LOSE_BREAK),
                         test_lost_while_cached);
    g_test_add_data_func("/cache/lost/raw-del", GINT_TO_POINTER(LOSE_DEL),
                         test_lost_while_cached);
    g_test_add_func("/cache/lost/raw-del-relock", test_deleted_then_relock);
    g_test_add_func("/cache/lost/stopped-past-lease", test_stopped_past_lease);
    g_test_add_func("/cache/lost/server-restart", test_server_restart_while_cached);
    g_test_add_func("/cache/idle/config", test_idle_config);
    g_test_add_func("/cache/idle/retaken", test_idle_retaken);
    g_test_add_func("/cache/idle/relisten", test_idle_relisten);
    g_test_add_func("/cache/idle/environment-and-default", test_idle_env_and_default);
    g_test_add_func("/cache/give-back/exit", test_exit_gives_back);
    g_test_add_func("/cache/give-back/shutdown-configure", test_shutdown_configure_give_back);
    g_test_add_func("/cache/give-back/destroy", test_destroy_gives_back);
    g_test_add_func("/cache/give-back/flush-while-subscribing", test_flush_while_subscribing);
    g_test_add_func("/cache/fork/inherits-nothing",
                    nm_fork_with_threads_is_safe() ? test_fork_inherits_nothing_cached
                                                   : skip_fork_with_threads);
    g_test_add_func("/cache/status/cached", test_status_cached);
    g_test_add_func("/cache/never/robust-autorenew-off", test_never_cached);
    g_test_add_func("/cache/never/quorum", test_never_cached_quorum);
    g_test_add_func("/cache/bad/attr", test_bad_input);
    g_test_add_func("/cache/bad/environment", test_bad_environment);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
