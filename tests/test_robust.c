/*
 * test_robust.c -- what a mutex does when its holder died holding it, as
 * pthread's robust mutexes: with NETMUTEX_ROBUST the next locker gets
 * EOWNERDEAD (and owns the mutex) once the dead holder's lease ran out,
 * netmutex_consistent() repairs it, and unlocking without repairing leaves
 * it ENOTRECOVERABLE for everybody (other processes, waiters already
 * queued, every kind of lock call) until netmutex_break(); with the default
 * NETMUTEX_STALLED the next locker simply gets it.  A clean release never
 * produces EOWNERDEAD, however many processes and threads take turns.  And
 * the error cases of netmutex_consistent and netmutex_break.
 *
 * A "dead holder" is another process (nm_remote: fork + exec) that locks
 * with a short lease and is killed with SIGKILL.  Every test configures the
 * library itself and ends with netmutex_shutdown (asserting 0).
 */
#include "ac_config.h"

#include "fixture.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static NmRedis *redis;

#define PROMPT_MS nm_ms(30000)
/* The dead holder's lease, and how much later than its end the next
 * locker may get the mutex (generous: never a speed claim). */
#define DEAD_LEASE_MS nm_ms(500)
#define WAKE_BOUND_MS nm_ms(5000)

/* ---- helpers ------------------------------------------------------------- */

static char *init_mutex(netmutex_t *m, const char *name, int robust)
{
    netmutex_attr_t attr;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setrobust(&attr, robust), 0);
    nm_assert_rc(netmutex_init(m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    return g_strdup(name);
}

/* Another process locks NAME with a short lease; returns it, holding.
 * *FENCE is the fence of its hold.  Its mutex is robust, as every user of
 * a robust name must be (see docs/porting.md, "What differs from
 * pthreads"). */
static NmRemote *doomed_holder_of(const char *name, int type, long long *fence)
{
    NmRemote *rem = nm_remote_start(redis, name, type, DEAD_LEASE_MS);
    char *key = nm_lock_key(name);

    nm_assert_rc(nm_remote(rem, 'l'), 0);
    *fence = nm_redis_fence(redis, key);
    g_assert_cmpint(*fence, >, 0);
    g_free(key);
    return rem;
}

static NmRemote *doomed_holder(const char *name, long long *fence)
{
    return doomed_holder_of(name, NETMUTEX_NORMAL | NM_REMOTE_ROBUST, fence);
}

static int call_consistent(void *m)
{
    return netmutex_consistent(m);
}

static int call_trylock_unlock(void *m)
{
    return nm_call_trylock_unlock(m);
}

/* What must hold once the calling thread got M with EOWNERDEAD after a
 * holder with fence DEAD_FENCE died: it owns M (another process and
 * another thread are refused), its fence is newer, consistent() repairs,
 * unlock is clean, and the next lock hears nothing of it. */
static void repair_and_check(netmutex_t *m, const char *name, long long dead_fence)
{
    uint64_t fence = 0;

    nm_assert_rc(netmutex_fence(m, &fence), 0);
    g_assert_cmpuint(fence, >, (uint64_t)dead_fence);
    nm_assert_rc(nm_probe_trylock(redis, name, NETMUTEX_NORMAL), EBUSY);
    nm_assert_rc(nm_call_run(call_trylock_unlock, m, PROMPT_MS), EBUSY);
    /* Only the owner may declare it consistent. */
    nm_assert_rc(nm_call_run(call_consistent, m, PROMPT_MS), EPERM);
    nm_assert_rc(netmutex_consistent(m), 0);
    nm_assert_rc(netmutex_consistent(m), EINVAL); /* repaired already */
    nm_assert_rc(netmutex_unlock(m), 0);
    nm_assert_rc(netmutex_lock(m), 0);
    nm_assert_rc(netmutex_unlock(m), 0);
    nm_assert_rc(nm_probe_trylock(redis, name, NETMUTEX_NORMAL), 0);
    nm_assert_rc(netmutex_trylock(m), 0);
    nm_assert_rc(netmutex_unlock(m), 0);
}

/* ---- EOWNERDEAD ------------------------------------------------------------ */

/* The next locker was already waiting (queued in Redis) when the holder
 * was killed: it gets EOWNERDEAD within the lease plus a bound. */
static void test_ownerdead_waiting_locker(void)
{
    char *name = nm_test_name("m");
    netmutex_t m;
    long long dead_fence;
    NmKiller k = { .redis = redis, .name = name };
    NmCall *killer;
    gint64 got_at;

    nm_configure(redis);
    g_free(init_mutex(&m, name, NETMUTEX_ROBUST));
    k.victim = doomed_holder(name, &dead_fence);
    killer = nm_call_start(nm_kill_when_queued, &k);
    nm_assert_rc(netmutex_lock(&m), EOWNERDEAD);
    got_at = nmt_now_ms();
    nm_assert_rc(nm_call_wait(killer, PROMPT_MS), 0);
    g_test_message("EOWNERDEAD %" G_GINT64_FORMAT " ms after the kill (lease %u ms)",
                   got_at - k.killed_at, DEAD_LEASE_MS);
    g_assert_cmpint(got_at - k.killed_at, <=, DEAD_LEASE_MS + WAKE_BOUND_MS);
    repair_and_check(&m, name, dead_fence);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
}

/* The holder is killed first; the next locker calls lock afterwards. */
static void test_ownerdead_next_locker(void)
{
    char *name = nm_test_name("m");
    netmutex_t m;
    long long dead_fence;
    NmRemote *doomed;
    gint64 killed_at, got_at;

    nm_configure(redis);
    g_free(init_mutex(&m, name, NETMUTEX_ROBUST));
    doomed = doomed_holder(name, &dead_fence);
    killed_at = nmt_now_ms();
    nm_remote_kill(doomed);
    nm_assert_rc(netmutex_lock(&m), EOWNERDEAD);
    got_at = nmt_now_ms();
    g_assert_cmpint(got_at - killed_at, <=, DEAD_LEASE_MS + WAKE_BOUND_MS);
    repair_and_check(&m, name, dead_fence);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
}

/* trylock, polled until the dead holder's lease ran out: EBUSY until
 * then, EOWNERDEAD after, never 0. */
static void test_ownerdead_trylock(void)
{
    char *name = nm_test_name("m");
    netmutex_t m;
    long long dead_fence;
    NmRemote *doomed;
    gint64 end;
    int rc;

    nm_configure(redis);
    g_free(init_mutex(&m, name, NETMUTEX_ROBUST));
    doomed = doomed_holder(name, &dead_fence);
    nm_remote_kill(doomed);
    end = nmt_now_ms() + DEAD_LEASE_MS + WAKE_BOUND_MS;
    while ((rc = netmutex_trylock(&m)) == EBUSY && nmt_now_ms() < end)
        nmt_sleep_ms(10);
    nm_assert_rc(rc, EOWNERDEAD);
    repair_and_check(&m, name, dead_fence);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
}

/* The dead holder's key is made to expire at once while our waiter sleeps
 * (its lease looked long), and another process's trylock then finds the
 * lock free: the acquire script hands it to the head of the queue -- us --
 * and pushes the grant to the list we block on.  The waiter must report
 * EOWNERDEAD whether it learns of the grant that way or by its own next
 * attempt; the other process gets EBUSY. */
typedef struct Expirer {
    const char *name;
    NmRemote *prober;
    int probe_rc;
} Expirer;

static int expire_then_probe(void *p)
{
    Expirer *x = p;
    bool queued = nm_wait_queue_len(redis, x->name, 1, nm_ms(10000));
    char *key = nm_lock_key(x->name);

    nmt_sleep_ms(20);
    nm_redis_ok(redis, "PEXPIRE %s 1", key);
    nmt_sleep_ms(5);
    x->probe_rc = nm_remote(x->prober, 't');
    g_free(key);
    return queued ? 0 : 1;
}

static void test_ownerdead_granted_from_queue(void)
{
    char *name = nm_test_name("m");
    char *key = nm_lock_key(name);
    netmutex_t m;
    long long dead_fence;
    NmRemote *doomed;
    Expirer x = { .name = name };
    NmCall *helper;

    nm_configure(redis);
    g_free(init_mutex(&m, name, NETMUTEX_ROBUST));
    x.prober = nm_remote_start(redis, name, NETMUTEX_NORMAL | NM_REMOTE_ROBUST, 0);
    doomed = doomed_holder(name, &dead_fence);
    nm_remote_kill(doomed);
    /* The dead holder's lease looks long now: the waiter sleeps. */
    nm_redis_ok(redis, "PEXPIRE %s 60000", key);
    helper = nm_call_start(expire_then_probe, &x);
    nm_assert_rc(netmutex_lock(&m), EOWNERDEAD);
    nm_assert_rc(nm_call_wait(helper, PROMPT_MS), 0);
    nm_assert_rc(x.probe_rc, EBUSY);
    repair_and_check(&m, name, dead_fence);
    nm_remote_stop(x.prober);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(key);
    g_free(name);
}

/* ---- ENOTRECOVERABLE ------------------------------------------------------- */

static int call_lock_unlock(void *m)
{
    return nm_call_lock_unlock(m);
}

/* EOWNERDEAD (through timedlock), then unlocked without consistent():
 * a waiter of another process already queued, and every later lock,
 * trylock, timedlock and clocklock, here and in other processes and
 * threads, get ENOTRECOVERABLE -- at once, not at their deadline.
 * netmutex_break clears it; the fence keeps growing across it. */
static void test_not_recoverable_until_break(void)
{
    char *name = nm_test_name("m");
    char *key = nm_lock_key(name);
    netmutex_t m;
    long long dead_fence;
    NmRemote *doomed, *waiter, *later;
    NmCall *local;
    struct timespec deadline, now;
    uint64_t before = 0, after = 0;

    nm_configure(redis);
    g_free(init_mutex(&m, name, NETMUTEX_ROBUST));
    doomed = doomed_holder(name, &dead_fence);
    nm_remote_kill(doomed);
    nm_deadline(&deadline, CLOCK_REALTIME, DEAD_LEASE_MS + WAKE_BOUND_MS);
    nm_assert_rc(netmutex_timedlock(&m, &deadline), EOWNERDEAD);
    nm_assert_rc(netmutex_fence(&m, &before), 0);
    g_assert_cmpuint(before, >, (uint64_t)dead_fence);

    /* Another process queues for it meanwhile. */
    waiter = nm_remote_start(redis, name, NETMUTEX_NORMAL | NM_REMOTE_ROBUST, 0);
    nm_remote_send(waiter, 'l');
    g_assert_true(nm_wait_queue_len(redis, name, 1, nm_ms(10000)));

    /* ...and so does a thread of this process (it must not be handed the
     * unrepaired lock without a word). */
    local = nm_call_start(call_lock_unlock, &m);
    nmt_sleep_ms(50);
    nm_assert_rc(netmutex_unlock(&m), 0); /* without consistent() */
    nm_assert_rc(nm_remote_result(waiter), ENOTRECOVERABLE);
    nm_assert_rc(nm_call_wait(local, PROMPT_MS), ENOTRECOVERABLE);

    nm_assert_rc(netmutex_lock(&m), ENOTRECOVERABLE);
    nm_assert_rc(netmutex_trylock(&m), ENOTRECOVERABLE);
    nm_deadline(&deadline, CLOCK_REALTIME, nm_ms(60000));
    nm_assert_rc(netmutex_timedlock(&m, &deadline), ENOTRECOVERABLE);
    clock_gettime(CLOCK_REALTIME, &now);
    g_assert_cmpint(nm_timespec_cmp(&now, &deadline), <, 0); /* not a timeout */
    nm_deadline(&deadline, CLOCK_MONOTONIC, nm_ms(60000));
    nm_assert_rc(netmutex_clocklock(&m, CLOCK_MONOTONIC, &deadline), ENOTRECOVERABLE);
    nm_assert_rc(netmutex_consistent(&m), EPERM); /* nobody holds it */
    nm_assert_rc(nm_call_run(call_lock_unlock, &m, PROMPT_MS), ENOTRECOVERABLE);
    nm_assert_rc(nm_remote(waiter, 'l'), ENOTRECOVERABLE);
    nm_assert_rc(nm_remote(waiter, 't'), ENOTRECOVERABLE);
    nm_assert_rc(nm_probe_trylock(redis, name, NETMUTEX_RECURSIVE), ENOTRECOVERABLE);

    /* The administrator clears it; the mutex works again, cleanly. */
    nm_assert_rc(netmutex_break(name), 0);
    nm_assert_rc(netmutex_break(name), ENOENT); /* nothing left to clear */
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_fence(&m, &after), 0);
    g_assert_cmpuint(after, >, before);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(nm_remote(waiter, 'l'), 0);
    nm_assert_rc(nm_remote(waiter, 'u'), 0);
    later = nm_remote_start(redis, name, NETMUTEX_NORMAL | NM_REMOTE_ROBUST, 0);
    nm_assert_rc(nm_remote(later, 't'), 0);
    nm_assert_rc(nm_remote(later, 'u'), 0);
    nm_remote_stop(later);
    nm_remote_stop(waiter);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(key);
    g_free(name);
}

/* ---- STALLED ------------------------------------------------------------------- */

/* The default: the same death, and the next locker simply gets it. */
static void test_stalled_dead_holder(void)
{
    char *name = nm_test_name("m");
    netmutex_t m, by_attr;
    long long dead_fence;
    NmRemote *doomed;
    uint64_t fence = 0;
    gint64 killed_at;
    int robust = -1;
    netmutex_attr_t attr;

    nm_configure(redis);
    nm_assert_rc(netmutex_init(&m, name, NULL), 0); /* default attributes */
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_getrobust(&attr, &robust), 0);
    g_assert_cmpint(robust, ==, NETMUTEX_STALLED);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);

    doomed = doomed_holder_of(name, NETMUTEX_NORMAL, &dead_fence);
    killed_at = nmt_now_ms();
    nm_remote_kill(doomed);
    nm_assert_rc(netmutex_lock(&m), 0);
    g_assert_cmpint(nmt_now_ms() - killed_at, <=, DEAD_LEASE_MS + WAKE_BOUND_MS);
    nm_assert_rc(netmutex_fence(&m, &fence), 0);
    g_assert_cmpuint(fence, >, (uint64_t)dead_fence);
    nm_assert_rc(netmutex_consistent(&m), EINVAL); /* nothing to repair */
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);

    /* Explicitly STALLED, with trylock this time. */
    g_free(init_mutex(&by_attr, name, NETMUTEX_STALLED));
    doomed = doomed_holder_of(name, NETMUTEX_NORMAL, &dead_fence);
    nm_remote_kill(doomed);
    {
        gint64 end = nmt_now_ms() + DEAD_LEASE_MS + WAKE_BOUND_MS;
        int rc;

        while ((rc = netmutex_trylock(&by_attr)) == EBUSY && nmt_now_ms() < end)
            nmt_sleep_ms(10);
        nm_assert_rc(rc, 0);
    }
    nm_assert_rc(netmutex_unlock(&by_attr), 0);

    nm_assert_rc(netmutex_destroy(&by_attr), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
}

/* ---- clean releases ------------------------------------------------------------ */

#define CLEAN_PROCS 4
#define CLEAN_THREADS 2
#define CLEAN_CYCLES 50

typedef struct CleanShared {
    gint acquisitions;
    gint bad;       /* results other than 0 (EBUSY from trylock aside) */
    gint ownerdead; /* of which EOWNERDEAD */
} CleanShared;

typedef struct CleanWork {
    const char *name;
    CleanShared *shared; /* MAP_SHARED */
} CleanWork;

static void note_result(CleanShared *s, int rc, const char *what)
{
    if (rc == 0)
        return;
    g_printerr("pid %d: %s returned %s\n", (int)getpid(), what, nm_errname(rc));
    g_atomic_int_inc(&s->bad);
    if (rc == EOWNERDEAD)
        g_atomic_int_inc(&s->ownerdead);
}

static void *clean_thread(void *p)
{
    const CleanWork *w = p;
    netmutex_attr_t attr;
    netmutex_t m;
    int rc;

    netmutex_attr_init(&attr);
    netmutex_attr_setrobust(&attr, NETMUTEX_ROBUST);
    rc = netmutex_init(&m, w->name, &attr);
    netmutex_attr_destroy(&attr);
    note_result(w->shared, rc, "init");
    for (int i = 0; rc == 0 && i < CLEAN_CYCLES; i++) {
        struct timespec deadline;

        /* Every kind of acquisition takes a turn. */
        switch (i % 3) {
        case 0:
            rc = netmutex_lock(&m);
            note_result(w->shared, rc, "lock");
            break;
        case 1:
            while ((rc = netmutex_trylock(&m)) == EBUSY)
                g_usleep(1000);
            note_result(w->shared, rc, "trylock");
            break;
        default:
            nm_deadline(&deadline, CLOCK_REALTIME, nm_ms(60000));
            rc = netmutex_timedlock(&m, &deadline);
            note_result(w->shared, rc, "timedlock");
            break;
        }
        if (rc != 0 && rc != EOWNERDEAD)
            break;
        if (rc == EOWNERDEAD)
            netmutex_consistent(&m);
        g_atomic_int_inc(&w->shared->acquisitions);
        rc = netmutex_unlock(&m);
        note_result(w->shared, rc, "unlock");
    }
    note_result(w->shared, netmutex_destroy(&m), "destroy");
    return NULL;
}

static int clean_process(void *p)
{
    const CleanWork *w = p;
    pthread_t t[CLEAN_THREADS];

    nm_configure(redis);
    for (int i = 0; i < CLEAN_THREADS; i++)
        if (pthread_create(&t[i], NULL, clean_thread, (void *)w) != 0)
            return 10;
    for (int i = 0; i < CLEAN_THREADS; i++)
        pthread_join(t[i], NULL);
    return netmutex_shutdown() == 0 ? 0 : 11;
}

/* Many lock/unlock cycles of a ROBUST mutex across processes and threads,
 * every one released cleanly: never EOWNERDEAD.  Nor after a process that
 * had unlocked is killed. */
static void test_clean_release_never_ownerdead(void)
{
    char *name = nm_test_name("m");
    CleanShared *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CleanWork w = { .name = name, .shared = shared };
    pid_t pids[CLEAN_PROCS];
    NmRemote *quitter;
    netmutex_t m;

    g_assert_true(shared != MAP_FAILED);
    memset(shared, 0, sizeof *shared);
    /* The parent uses no netmutex while its workers run. */
    for (int i = 0; i < CLEAN_PROCS; i++)
        pids[i] = nm_fork_run(clean_process, &w);
    for (int i = 0; i < CLEAN_PROCS; i++)
        nm_child_wait_ok(pids[i], nm_ms(120000));
    g_assert_cmpint(shared->ownerdead, ==, 0);
    g_assert_cmpint(shared->bad, ==, 0);
    g_assert_cmpint(shared->acquisitions, ==, CLEAN_PROCS * CLEAN_THREADS * CLEAN_CYCLES);

    /* A process that locked and unlocked, then died: nothing to report. */
    quitter = nm_remote_start(redis, name, NETMUTEX_NORMAL | NM_REMOTE_ROBUST, DEAD_LEASE_MS);
    nm_assert_rc(nm_remote(quitter, 'l'), 0);
    nm_assert_rc(nm_remote(quitter, 'u'), 0);
    nm_remote_kill(quitter);
    nmt_sleep_ms(DEAD_LEASE_MS);

    nm_configure(redis);
    g_free(init_mutex(&m, name, NETMUTEX_ROBUST));
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_consistent(&m), EINVAL);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    munmap(shared, sizeof *shared);
    g_free(name);
}

/* ---- error cases ------------------------------------------------------------------ */

/* netmutex_consistent: EPERM unless the caller holds the mutex, EINVAL
 * when it holds it but nothing is to be repaired (robust or not) or for a
 * bad mutex. */
static void test_consistent_errors(void)
{
    char *name = nm_test_name("m");
    netmutex_t robust, stalled, never;
    NmHolder *h;

    nm_configure(redis);
    g_free(init_mutex(&robust, name, NETMUTEX_ROBUST));
    nm_assert_rc(netmutex_init(&stalled, name, NULL), 0);

    nm_assert_rc(netmutex_consistent(&robust), EPERM); /* not held */
    nm_assert_rc(netmutex_consistent(&stalled), EPERM);
    h = nm_holder_start(&robust); /* held by another thread */
    nm_assert_rc(netmutex_consistent(&robust), EPERM);
    nm_assert_rc(nm_holder_release(h), 0);
    nm_assert_rc(nm_probe_trylock(redis, name, NETMUTEX_NORMAL), 0);
    /* Held by another process. */
    {
        NmRemote *other = nm_remote_start(redis, name, NETMUTEX_NORMAL | NM_REMOTE_ROBUST, 0);

        nm_assert_rc(nm_remote(other, 'l'), 0);
        nm_assert_rc(netmutex_consistent(&robust), EPERM);
        nm_assert_rc(nm_remote(other, 'u'), 0);
        nm_remote_stop(other);
    }

    nm_assert_rc(netmutex_lock(&robust), 0);
    nm_assert_rc(netmutex_consistent(&robust), EINVAL); /* not inconsistent */
    nm_assert_rc(netmutex_unlock(&robust), 0);
    nm_assert_rc(netmutex_lock(&stalled), 0);
    nm_assert_rc(netmutex_consistent(&stalled), EINVAL);
    nm_assert_rc(netmutex_unlock(&stalled), 0);
    /* EINVAL on a clean unlock did not leave anything behind. */
    nm_assert_rc(netmutex_lock(&robust), 0);
    nm_assert_rc(netmutex_unlock(&robust), 0);

    nm_assert_rc(netmutex_consistent(NULL), EINVAL);
    memset(&never, 0, sizeof never);
    nm_assert_rc(netmutex_consistent(&never), EINVAL);

    nm_assert_rc(netmutex_destroy(&stalled), 0);
    nm_assert_rc(netmutex_destroy(&robust), 0);
    nm_assert_rc(netmutex_consistent(&robust), EINVAL); /* destroyed */
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
}

/* netmutex_break: EINVAL for a bad name, ENOENT when nothing is held (a
 * name never used, one locked and released, the longest valid name). */
static void test_break_errors(void)
{
    char *name = nm_test_name("m");
    char *unused = nm_test_name("never-used");
    char *huge = g_strnfill(NETMUTEX_NAME_MAX + 1, 'b');
    char *longest = g_strnfill(NETMUTEX_NAME_MAX, 'c');
    netmutex_t m;

    nm_configure(redis);
    nm_assert_rc(netmutex_break(NULL), EINVAL);
    nm_assert_rc(netmutex_break(""), EINVAL);
    nm_assert_rc(netmutex_break(huge), EINVAL);
    nm_assert_rc(netmutex_break(unused), ENOENT);
    nm_assert_rc(netmutex_break(longest), ENOENT);

    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_break(name), ENOENT);
    /* Breaking what was not held took nothing away. */
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(longest);
    g_free(huge);
    g_free(unused);
    g_free(name);
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    nm_test_cache_off();
    redis = nm_redis_start(NULL);

    g_test_add_func("/robust/owner-dead/waiting-locker-gets-eownerdead-consistent",
                    test_ownerdead_waiting_locker);
    g_test_add_func("/robust/owner-dead/next-locker-gets-eownerdead-consistent",
                    test_ownerdead_next_locker);
    g_test_add_func("/robust/owner-dead/trylock-gets-eownerdead-consistent",
                    test_ownerdead_trylock);
    g_test_add_func("/robust/owner-dead/granted-from-queue-gets-eownerdead",
                    test_ownerdead_granted_from_queue);
    g_test_add_func("/robust/not-recoverable/unlock-without-consistent-until-break",
                    test_not_recoverable_until_break);
    g_test_add_func("/robust/stalled/dead-holder-next-lock-succeeds", test_stalled_dead_holder);
    g_test_add_func("/robust/clean-release/never-eownerdead-across-processes",
                    test_clean_release_never_ownerdead);
    g_test_add_func("/robust/consistent/eperm-not-owner-einval-not-inconsistent",
                    test_consistent_errors);
    g_test_add_func("/robust/break/einval-bad-name-enoent-nothing-held", test_break_errors);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
