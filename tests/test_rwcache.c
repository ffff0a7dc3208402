/*
 * test_rwcache.c -- lease caching of read-write locks' read shares
 * (netmutex_rwlockattr_setcache): after the last local reader's unlock a
 * process keeps its read share while no writer wants the lock, and reads
 * again, from any thread, without a round trip.
 *
 * What must hold, case by case:
 *   - the attribute's argument checks, and its default (off);
 *   - a cached re-read sends no script to the server (INFO commandstats),
 *     and with caching off (the attribute, the configuration) every cycle
 *     does; several threads read at once through the one cached share;
 *   - a writer of another process gets in while the caching process idles
 *     with its share cached (far sooner than the share's idle time or
 *     lease could explain), and the next read there goes to the server;
 *   - a writer of another process is not starved by threads of a caching
 *     process that read in a loop, overlapping, so that some local reader
 *     is always in the cached share: new local readers stop joining it;
 *   - a writer of the caching process itself gets in at once;
 *   - a forked child inherits no cached share: its read is a share of its
 *     own, and its write makes the parent give its share back;
 *   - netmutex_shutdown(), netmutex_rwlock_destroy() and exit() give the
 *     cached share back: nothing of the lock is left on the server.
 *
 * Each case first checks that the share is really cached (it stays on the
 * server after the unlock), so none passes with caching broken or off.
 * Where a case must tell revocation from another way of freeing the lock,
 * that other way (idle give-back, lease expiry) is made far slower than
 * the bound (60 s idle, 30 s lease).  No timing is asserted: speed is the
 * benchmark's business (bench/scenarios_rwlock.c).
 */
#include "ac_config.h"

#include "fixture.h"
#include "keytag.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static NmRedis *redis;

#define PROMPT_MS nm_ms(30000)
/* How long a revocation or a give-back may take here: far below the idle
 * time and the lease that would otherwise free the lock. */
#define BOUND_MS nm_ms(5000)
#define LONG_IDLE_MS 60000u
#define LONG_LEASE_MS 30000u
#define CYCLES 1000

/* ---- helpers ------------------------------------------------------------ */

/* netmutex_configure with this program's server and a 60 s idle time
 * (NETMUTEX_CACHE_OFF: caching off for the process). */
static void configure_idle(unsigned int cache_idle_ms)
{
    netmutex_config_t cfg = { .cache_idle_ms = cache_idle_ms };
    nm_configure_with(redis, cfg);
}

/* The key <prefix>{r<tag>}NAME SUFFIX of rwlock NAME (lib.lua). */
static char *rw_key(const char *name, const char *suffix)
{
    char tag[NM_TEST_TAG_LEN + 1];
    nm_test_key_tag(name, strlen(name), tag);
    return g_strdup_printf("netmutex:{r%s}%s%s", tag, name, suffix);
}

/* Read shares of NAME on the server. */
static long long shares_of(const char *name)
{
    char *s = rw_key(name, ":s");
    redisReply *r = nm_redis_cmd(redis, "ZCARD %s", s);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    g_free(s);
    return n;
}

/* Polls until no key of any rwlock is left, within BOUND_MS (well below
 * the lease: a share that was only left to expire is not "given back"). */
static bool wait_nothing_left(void)
{
    gint64 until = nmt_now_ms() + BOUND_MS;
    while (nm_redis_kind_keys(redis, 'r') != 0 && nmt_now_ms() < until)
        nmt_sleep_ms(5);
    if (nm_redis_kind_keys(redis, 'r') == 0)
        return true;
    redisReply *r = nm_redis_cmd(redis, "KEYS netmutex:{r*");
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
        g_test_message("left: %s", r->element[i]->str);
    freeReplyObject(r);
    return false;
}

/* Script calls the server ran so far (INFO commandstats): every request
 * of the library is one. */
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
            g_str_has_prefix(cmd, "eval"))
            total += calls;
    }
    freeReplyObject(r);
    return total;
}

/* netmutex_rwlock_init of RW named NAME with caching CACHE and a lease of
 * LEASE_MS (0: the default). */
static int rw_open(netmutex_rwlock_t *rw, const char *name, int cache, unsigned int lease_ms)
{
    netmutex_rwlockattr_t a;
    int err = netmutex_rwlockattr_init(&a);
    if (!err)
        err = netmutex_rwlockattr_setcache(&a, cache);
    if (!err)
        err = netmutex_rwlockattr_setlease(&a, lease_ms);
    if (!err)
        err = netmutex_rwlock_init(rw, name, &a);
    netmutex_rwlockattr_destroy(&a);
    return err;
}

static char *rw_init(netmutex_rwlock_t *rw, const char *suffix, int cache)
{
    char *name = nm_test_name(suffix);
    nm_assert_rc(rw_open(rw, name, cache, LONG_LEASE_MS), 0);
    return name;
}

/* A process keeps its share only once it listens for writers, a moment
 * after its first read: rdlock+unlock until the share stays after the
 * unlock (bounded).  True when it did. */
static bool cache_share(netmutex_rwlock_t *rw, const char *name)
{
    gint64 until = nmt_now_ms() + BOUND_MS;
    do {
        if (netmutex_rwlock_rdlock(rw) != 0 || netmutex_rwlock_unlock(rw) != 0)
            return false;
        if (shares_of(name) == 1)
            return true;
        nmt_sleep_ms(2);
    } while (nmt_now_ms() < until);
    return false;
}

static int timed_op(netmutex_rwlock_t *rw, char op, unsigned int ms)
{
    struct timespec deadline;
    nm_deadline(&deadline, CLOCK_REALTIME, ms);
    return op == 'w' ? netmutex_rwlock_timedwrlock(rw, &deadline)
                     : netmutex_rwlock_timedrdlock(rw, &deadline);
}

/* Shared memory of a test's processes (mmap'ed before they fork). */
typedef struct Shared {
    int go;           /* the child may go on */
    int ready;        /* the child holds what it was told to */
    int done;         /* the child is through */
    uint64_t fence;   /* the child writer's fence */
} Shared;

static Shared *shared_new(void)
{
    Shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    return sh;
}

static void shared_free(Shared *sh)
{
    munmap(sh, sizeof *sh);
}

static bool wait_flag(int *flag)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!__atomic_load_n(flag, __ATOMIC_SEQ_CST) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    return __atomic_load_n(flag, __ATOMIC_SEQ_CST);
}

typedef struct Proc {
    Shared *sh;
    const char *name;
} Proc;

/* Children fork from a process with no thread of the library's (see
 * nm_fork_with_threads_is_safe): this one lets its background thread go. */
static void quiesce(void)
{
    nm_assert_rc(netmutex_shutdown(), 0);
}

/* A writer in another process: waits for "go", then takes the write lock
 * within BOUND_MS (far less than the reader's idle time and lease), reports
 * its fence and leaves.  Exit status 0, or what failed. */
static int proc_writer(void *p)
{
    const Proc *pr = p;
    netmutex_rwlock_t rw;
    nm_configure(redis);
    int err = rw_open(&rw, pr->name, 0, 0);
    if (err || !wait_flag(&pr->sh->go))
        return 10 + err;
    err = timed_op(&rw, 'w', BOUND_MS);
    if (err) {
        g_printerr("writer: %s\n", nm_errname(err));
        return 20 + err;
    }
    netmutex_rwlock_fence(&rw, &pr->sh->fence);
    err = netmutex_rwlock_unlock(&rw);
    __atomic_store_n(&pr->sh->done, 1, __ATOMIC_SEQ_CST);
    netmutex_rwlock_destroy(&rw);
    netmutex_shutdown();
    return err ? 30 + err : 0;
}

/* ---- attribute ---------------------------------------------------------- */

static void test_attr(void)
{
    netmutex_rwlockattr_t a;
    int on = -1;
    nm_assert_rc(netmutex_rwlockattr_setcache(NULL, 1), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_getcache(NULL, &on), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_init(&a), 0);
    nm_assert_rc(netmutex_rwlockattr_getcache(&a, NULL), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_getcache(&a, &on), 0);
    g_assert_cmpint(on, ==, 0);
    nm_assert_rc(netmutex_rwlockattr_setcache(&a, 2), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_setcache(&a, -1), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_setcache(&a, 1), 0);
    nm_assert_rc(netmutex_rwlockattr_getcache(&a, &on), 0);
    g_assert_cmpint(on, ==, 1);
    nm_assert_rc(netmutex_rwlockattr_setcache(&a, 0), 0);
    nm_assert_rc(netmutex_rwlockattr_getcache(&a, &on), 0);
    g_assert_cmpint(on, ==, 0);
    nm_assert_rc(netmutex_rwlockattr_destroy(&a), 0);
    nm_assert_rc(netmutex_rwlockattr_setcache(&a, 1), EINVAL);
}

/* ---- re-reading without a round trip ------------------------------------ */

static void test_reread_no_round_trip(void)
{
    netmutex_rwlock_t rw;
    configure_idle(LONG_IDLE_MS);
    char *name = rw_init(&rw, "rw", 1);
    g_assert_true(cache_share(&rw, name));
    uint64_t fence = 0, again = 0;
    unsigned long long before = script_calls();
    for (int i = 0; i < CYCLES; i++) {
        nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0);
        if (i == 0)
            nm_assert_rc(netmutex_rwlock_fence(&rw, &fence), 0);
        nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0); /* a reader's second read */
        nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
        nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    }
    unsigned long long calls = script_calls() - before;
    g_test_message("%d cached cycles: %llu script calls", CYCLES, calls);
    /* A renewal or two may fall in; a round trip per cycle may not. */
    g_assert_cmpuint(calls, <=, 10);
    g_assert_cmpint(shares_of(name), ==, 1);
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_fence(&rw, &again), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    g_assert_cmpuint(fence, >, 0);
    g_assert_cmpuint(again, ==, fence); /* the same share */
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* Caching off (DATA 0: the attribute; 1: the process's configuration):
 * every cycle goes to the server, and nothing stays after the unlock. */
static void test_reread_off(gconstpointer data)
{
    netmutex_rwlock_t rw;
    int by_config = GPOINTER_TO_INT(data);
    configure_idle(by_config ? NETMUTEX_CACHE_OFF : LONG_IDLE_MS);
    char *name = rw_init(&rw, "rw", by_config);
    for (int i = 0; i < 5; i++) {
        nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0);
        nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
        nmt_sleep_ms(20);
    }
    g_assert_cmpint(shares_of(name), ==, 0);
    unsigned long long before = script_calls();
    for (int i = 0; i < 100; i++) {
        nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0);
        nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    }
    g_assert_cmpuint(script_calls() - before, >=, 200);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    configure_idle(LONG_IDLE_MS);
    g_free(name);
}

/* Several threads read at once through the one cached share. */
#define READERS 4

typedef struct Reader {
    netmutex_rwlock_t *rw;
    int *inside;      /* atomic: readers inside now */
    int err;
} Reader;

static void *reader_thread(void *p)
{
    Reader *r = p;
    r->err = netmutex_rwlock_rdlock(r->rw);
    if (r->err)
        return NULL;
    __atomic_add_fetch(r->inside, 1, __ATOMIC_SEQ_CST);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (__atomic_load_n(r->inside, __ATOMIC_SEQ_CST) < READERS && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    nmt_sleep_ms(20); /* all inside while the test counts the shares */
    r->err = netmutex_rwlock_unlock(r->rw);
    return NULL;
}

static void test_threads_share(void)
{
    netmutex_rwlock_t rw;
    pthread_t t[READERS];
    Reader r[READERS];
    int inside = 0;
    configure_idle(LONG_IDLE_MS);
    char *name = rw_init(&rw, "rw", 1);
    g_assert_true(cache_share(&rw, name));
    unsigned long long before = script_calls();
    for (int i = 0; i < READERS; i++) {
        r[i] = (Reader){ .rw = &rw, .inside = &inside };
        g_assert_cmpint(pthread_create(&t[i], NULL, reader_thread, &r[i]), ==, 0);
    }
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (__atomic_load_n(&inside, __ATOMIC_SEQ_CST) < READERS && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    g_assert_cmpint(__atomic_load_n(&inside, __ATOMIC_SEQ_CST), ==, READERS);
    g_assert_cmpint(shares_of(name), ==, 1);
    for (int i = 0; i < READERS; i++) {
        g_assert_cmpint(pthread_join(t[i], NULL), ==, 0);
        nm_assert_rc(r[i].err, 0);
    }
    g_assert_cmpuint(script_calls() - before, <=, 5);
    g_assert_cmpint(shares_of(name), ==, 1);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_free(name);
}

/* ---- writers ------------------------------------------------------------ */

/* A writer of another process gets in while this one idles with its share
 * cached: 60 s idle, 30 s lease, the writer's bound 5 s. */
static void test_writer_revokes_idle(void)
{
    netmutex_rwlock_t rw;
    Shared *sh = shared_new();
    char *name = nm_test_name("rw");
    Proc pr = { .sh = sh, .name = name };
    uint64_t fence = 0;
    quiesce();
    pid_t pid = nm_fork_run(proc_writer, &pr);
    configure_idle(LONG_IDLE_MS);
    nm_assert_rc(rw_open(&rw, name, 1, LONG_LEASE_MS), 0);
    g_assert_true(cache_share(&rw, name));
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    nm_child_wait_ok(pid, PROMPT_MS);
    g_assert_cmpuint(sh->fence, >, 0);
    /* The next read is a new share, after the writer. */
    nm_assert_rc(timed_op(&rw, 'r', BOUND_MS), 0);
    nm_assert_rc(netmutex_rwlock_fence(&rw, &fence), 0);
    g_assert_cmpuint(fence, >, sh->fence);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    shared_free(sh);
    g_free(name);
}

/* Threads of this process read in a loop, overlapping: a reader leaves
 * only while another is inside, so the cached share always has a local
 * reader in it and never goes idle.  The last one inside leaves anyway
 * once another has been in its rdlock for STUCK_MS: it is kept out (queued
 * at the server behind the writer).  A writer of another process must
 * still get in within its bound: new local readers stop joining the
 * share once the writer asks for it. */
#define LOOPERS 3
#define STUCK_MS 50

typedef struct Loop {
    int stop;                    /* atomic */
    int inside;                  /* atomic: readers inside */
    gint64 calling[LOOPERS];     /* atomic: since when in rdlock, or 0 */
} Loop;

typedef struct Looper {
    netmutex_rwlock_t *rw;
    Loop *loop;
    int me;
    long rounds;
    int err;
} Looper;

/* Whether another looper than ME is stuck in its rdlock. */
static bool other_stuck(Loop *lp, int me)
{
    gint64 now = nmt_now_ms();
    for (int i = 0; i < LOOPERS; i++) {
        gint64 since = __atomic_load_n(&lp->calling[i], __ATOMIC_SEQ_CST);
        if (i != me && since && now - since >= STUCK_MS)
            return true;
    }
    return false;
}

/* Leaves the readers inside: at once if another stays, else once the loop
 * stops or another is stuck. */
static void leave_inside(Loop *lp, int me)
{
    for (;;) {
        int n = __atomic_load_n(&lp->inside, __ATOMIC_SEQ_CST);
        if (n > 1 && __atomic_compare_exchange_n(&lp->inside, &n, n - 1, 0, __ATOMIC_SEQ_CST,
                                                  __ATOMIC_SEQ_CST))
            return;
        if (n <= 1 && (__atomic_load_n(&lp->stop, __ATOMIC_SEQ_CST) || other_stuck(lp, me))) {
            __atomic_sub_fetch(&lp->inside, 1, __ATOMIC_SEQ_CST);
            return;
        }
        nmt_sleep_ms(1);
    }
}

static void *looper_thread(void *p)
{
    Looper *l = p;
    Loop *lp = l->loop;
    while (!__atomic_load_n(&lp->stop, __ATOMIC_SEQ_CST)) {
        __atomic_store_n(&lp->calling[l->me], nmt_now_ms(), __ATOMIC_SEQ_CST);
        l->err = timed_op(l->rw, 'r', PROMPT_MS);
        __atomic_store_n(&lp->calling[l->me], 0, __ATOMIC_SEQ_CST);
        if (l->err)
            return NULL;
        __atomic_add_fetch(&lp->inside, 1, __ATOMIC_SEQ_CST);
        nmt_sleep_ms(1);
        leave_inside(lp, l->me);
        l->err = netmutex_rwlock_unlock(l->rw);
        if (l->err)
            return NULL;
        l->rounds++;
    }
    return NULL;
}

static void test_writer_not_starved(void)
{
    netmutex_rwlock_t rw;
    Shared *sh = shared_new();
    char *name = nm_test_name("rw");
    Proc pr = { .sh = sh, .name = name };
    pthread_t t[LOOPERS];
    Looper l[LOOPERS];
    Loop lp = { 0 };
    quiesce();
    pid_t pid = nm_fork_run(proc_writer, &pr);
    configure_idle(LONG_IDLE_MS);
    nm_assert_rc(rw_open(&rw, name, 1, LONG_LEASE_MS), 0);
    g_assert_true(cache_share(&rw, name));
    for (int i = 0; i < LOOPERS; i++) {
        l[i] = (Looper){ .rw = &rw, .loop = &lp, .me = i };
        g_assert_cmpint(pthread_create(&t[i], NULL, looper_thread, &l[i]), ==, 0);
    }
    nmt_sleep_ms(50);
    /* The loop reads through the cached share: one share for them all. */
    g_assert_cmpint(shares_of(name), ==, 1);
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    bool done = wait_flag(&sh->done);
    __atomic_store_n(&lp.stop, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < LOOPERS; i++) {
        g_assert_cmpint(pthread_join(t[i], NULL), ==, 0);
        nm_assert_rc(l[i].err, 0);
        g_test_message("reader %d: %ld rounds", i, l[i].rounds);
    }
    g_assert_true(done);
    nm_child_wait_ok(pid, PROMPT_MS);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    shared_free(sh);
    g_free(name);
}

/* A writer of this process: the cached share no thread is in goes back
 * first, without waiting for its idle time. */
static void test_own_writer(void)
{
    netmutex_rwlock_t rw;
    configure_idle(LONG_IDLE_MS);
    char *name = rw_init(&rw, "rw", 1);
    g_assert_true(cache_share(&rw, name));
    nm_assert_rc(timed_op(&rw, 'w', BOUND_MS), 0);
    g_assert_cmpint(shares_of(name), ==, 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* ---- fork, exit, shutdown ----------------------------------------------- */

typedef struct ForkCase {
    netmutex_rwlock_t *rw;
    Shared *sh;
} ForkCase;

/* The parent's cached share is the parent's: the child's read is a share
 * of its own (the parent checks: two on the server), and its write makes
 * the parent give its share back. */
static int fork_child(void *p)
{
    ForkCase *f = p;
    int err = timed_op(f->rw, 'r', BOUND_MS);
    if (err)
        return 10 + err;
    __atomic_store_n(&f->sh->ready, 1, __ATOMIC_SEQ_CST);
    if (!wait_flag(&f->sh->go))
        return 2;
    err = netmutex_rwlock_unlock(f->rw);
    if (!err)
        err = timed_op(f->rw, 'w', BOUND_MS);
    if (!err)
        err = netmutex_rwlock_unlock(f->rw);
    if (!err)
        err = netmutex_rwlock_destroy(f->rw);
    if (!err)
        err = netmutex_shutdown();
    return err ? 20 + err : 0;
}

static void test_fork_inherits_nothing(void)
{
    netmutex_rwlock_t rw;
    Shared *sh = shared_new();
    ForkCase f = { .rw = &rw, .sh = sh };
    if (!nm_fork_with_threads_is_safe()) {
        g_test_skip("the sanitizer's allocator is not fork-safe while other threads run");
        shared_free(sh);
        return;
    }
    configure_idle(LONG_IDLE_MS);
    char *name = rw_init(&rw, "rw", 1);
    g_assert_true(cache_share(&rw, name));
    pid_t pid = nm_fork_run_unchecked(fork_child, &f);
    g_assert_true(wait_flag(&sh->ready));
    g_assert_cmpint(shares_of(name), ==, 2);
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    nm_child_wait_ok(pid, PROMPT_MS);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(timed_op(&rw, 'r', BOUND_MS), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    shared_free(sh);
    g_free(name);
}

static void test_shutdown_gives_back(void)
{
    netmutex_rwlock_t rw;
    configure_idle(LONG_IDLE_MS);
    char *name = rw_init(&rw, "rw", 1);
    g_assert_true(cache_share(&rw, name));
    nm_assert_rc(netmutex_shutdown(), 0);
    g_assert_cmpint(nm_redis_kind_keys(redis, 'r'), ==, 0);
    configure_idle(LONG_IDLE_MS);
    g_assert_true(cache_share(&rw, name));
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_cmpint(nm_redis_kind_keys(redis, 'r'), ==, 0);
    g_free(name);
}

/* A process that caches a share and exits without a word gives it back. */
static int proc_cache_and_exit(void *p)
{
    const Proc *pr = p;
    netmutex_rwlock_t rw;
    netmutex_config_t cfg = { .cache_idle_ms = LONG_IDLE_MS };
    nm_configure_with(redis, cfg);
    if (rw_open(&rw, pr->name, 1, LONG_LEASE_MS) != 0 || !cache_share(&rw, pr->name))
        return 1;
    __atomic_store_n(&pr->sh->ready, 1, __ATOMIC_SEQ_CST);
    exit(0); /* the library's exit handler runs (nm_fork_run's _exit would not) */
}

static void test_exit_gives_back(void)
{
    Shared *sh = shared_new();
    char *name = nm_test_name("rw");
    Proc pr = { .sh = sh, .name = name };
    quiesce();
    pid_t pid = nm_fork_run_unchecked(proc_cache_and_exit, &pr);
    nm_child_wait_ok(pid, PROMPT_MS);
    g_assert_true(sh->ready);
    g_assert_cmpint(nm_redis_kind_keys(redis, 'r'), ==, 0);
    configure_idle(LONG_IDLE_MS);
    shared_free(sh);
    g_free(name);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    configure_idle(LONG_IDLE_MS);

    g_test_add_func("/rwcache/attr", test_attr);
    g_test_add_func("/rwcache/reread/no-round-trip", test_reread_no_round_trip);
    g_test_add_data_func("/rwcache/reread/attr-off", GINT_TO_POINTER(0), test_reread_off);
    g_test_add_data_func("/rwcache/reread/config-off", GINT_TO_POINTER(1), test_reread_off);
    g_test_add_func("/rwcache/reread/threads-share", test_threads_share);
    g_test_add_func("/rwcache/writer/revokes-idle", test_writer_revokes_idle);
    g_test_add_func("/rwcache/writer/not-starved", test_writer_not_starved);
    g_test_add_func("/rwcache/writer/own", test_own_writer);
    g_test_add_func("/rwcache/fork", test_fork_inherits_nothing);
    g_test_add_func("/rwcache/shutdown", test_shutdown_gives_back);
    g_test_add_func("/rwcache/exit", test_exit_gives_back);

    int rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
