/*
 * test_watchdog.c -- the background thread that keeps leases alive, seen
 * from outside: a lock held far longer than its lease stays ours at the
 * server; without renewal it runs out (the lost-lease callback fires once,
 * validity/extend/unlock say ENOLCK) unless netmutex_extend pushes it; a
 * server paused past the lease makes the callback fire before the server
 * can have expired the key, and the late unlock deletes nothing that is not
 * ours; killed connections are redialled without losing a lease; fences
 * only grow across processes, dead holders and expiries; a forked child
 * cannot touch its parent's lock, whose lease keeps being renewed; 10,000
 * locks held at once all survive; netmutex_shutdown stops cleanly.
 *
 * Every test configures the library itself and ends with netmutex_shutdown
 * (asserting 0: nothing left held), so a test that forks worker processes
 * forks a single-threaded parent.
 */
#include "ac_config.h"

#include "fixture.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static NmRedis *redis;
/* Threads of this process without the library's (ThreadSanitizer's
 * runtime starts one of its own with the first pthread_create). */
static int baseline_threads;

#define PROMPT_MS nm_ms(30000)

/* ---- helpers ------------------------------------------------------------- */

/* A mutex named after the test, with a lease, automatic renewal on or off
 * and (LOST not NULL) a lost-lease callback recording into LOST. */
static char *init_mutex(netmutex_t *m, const char *suffix, int autorenew,
                        unsigned int lease_ms, NmLost *lost)
{
    char *name = nm_test_name(suffix);
    netmutex_attr_t attr;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setlease(&attr, lease_ms), 0);
    nm_assert_rc(netmutex_attr_setautorenew(&attr, autorenew), 0);
    if (lost)
        nm_assert_rc(netmutex_attr_setlostfn(&attr, nm_lost_record, lost), 0);
    nm_assert_rc(netmutex_init(m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    return name;
}

/* Asserts that NAME's key holds TOKEN and still has time to live. */
static void assert_held_by(const char *name, const char *token)
{
    char *key = nm_lock_key(name);
    char *now = nm_token_of(redis, name);
    long long pttl = nm_redis_pttl(redis, key);

    g_assert_cmpstr(now, ==, token);
    g_assert_cmpint(pttl, >, 0);
    g_free(now);
    g_free(key);
}

/* Asserts that M is ours by netmutex_validity, with time left (at most
 * MAX_MS). */
static void assert_valid(netmutex_t *m, unsigned int max_ms)
{
    uint64_t left = 0;

    nm_assert_rc(netmutex_validity(m, &left), 0);
    g_assert_cmpuint(left, >, 0);
    g_assert_cmpuint(left, <=, max_ms);
}

/* Polls until NAME's key is gone; false if it is still there after
 * TIMEOUT_MS (not scaled). */
static bool wait_key_gone(const char *name, unsigned int timeout_ms)
{
    gint64 end = nmt_now_ms() + timeout_ms;

    for (;;) {
        char *token = nm_token_of(redis, name);
        bool gone = token == NULL;

        g_free(token);
        if (gone)
            return true;
        if (nmt_now_ms() > end)
            return false;
        nmt_sleep_ms(5);
    }
}

/* In a child, the check of one call: on failure say which. */
static int child_expect(int got, int want, const char *what)
{
    if (got == want)
        return 0;
    g_printerr("child %d: %s returned %s, expected %s\n", (int)getpid(), what,
               nm_errname(got), nm_errname(want));
    return 1;
}

/* ---- renewal ------------------------------------------------------------- */

/* Held three times longer than its lease: all along the key holds our
 * token with time to live, netmutex_validity says 0 with time left, the
 * callback never fires, and the unlock is a clean 0. */
static void test_renewal_held_3x_lease(void)
{
    unsigned int lease = nm_ms(500);
    NmLost lost;
    netmutex_t m;
    char *name, *token, *after;
    gint64 end;
    int checks = 0;

    nm_lost_init(&lost);
    nm_configure(redis);
    name = init_mutex(&m, "m", 1, lease, &lost);

    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_token_of(redis, name);
    g_assert_true(nm_is_token(token));
    end = nmt_now_ms() + 3 * (gint64)lease;
    while (nmt_now_ms() < end) {
        assert_held_by(name, token);
        assert_valid(&m, lease);
        checks++;
        nmt_sleep_ms(lease / 10);
    }
    g_assert_cmpint(checks, >=, 3);
    assert_held_by(name, token);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    after = nm_token_of(redis, name);
    g_assert_null(after);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    g_free(token);
    g_free(name);
}

/* Renewal off: the key runs out after the lease, the callback fires once
 * (with the mutex's name), and validity, extend and unlock all say ENOLCK
 * afterwards.  The mutex is usable again at once. */
static void test_autorenew_off_expires(void)
{
    unsigned int lease = nm_ms(400);
    NmLost lost;
    netmutex_t m;
    char *name, *key, *token, *after;
    uint64_t left = 0;
    long long pttl;

    nm_lost_init(&lost);
    nm_configure(redis);
    name = init_mutex(&m, "m", 0, lease, &lost);
    key = nm_lock_key(name);

    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_token_of(redis, name);
    g_assert_true(nm_is_token(token));
    pttl = nm_redis_pttl(redis, key);
    g_assert_cmpint(pttl, >, 0);
    g_assert_cmpint(pttl, <=, lease);
    assert_valid(&m, lease);

    g_assert_true(wait_key_gone(name, lease + nm_ms(5000)));
    g_assert_cmpint(nm_lost_wait(&lost, nm_ms(5000)), ==, 1);
    pthread_mutex_lock(&lost.lock);
    g_assert_cmpstr(lost.name, ==, name);
    pthread_mutex_unlock(&lost.lock);
    nm_assert_rc(netmutex_validity(&m, &left), ENOLCK);
    nm_assert_rc(netmutex_extend(&m, 10 * lease), ENOLCK);
    after = nm_token_of(redis, name);
    g_assert_null(after); /* extend did not bring it back */
    /* Once, not again. */
    nmt_sleep_ms(lease);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 1);
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 1);

    /* The loss was this hold's, not the mutex's. */
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    g_free(token);
    g_free(key);
    g_free(name);
}

static int call_extend(void *m)
{
    return netmutex_extend(m, 60000);
}

/* Renewal off, extended before it runs out: PTTL grows, and the lock
 * stays ours well past the original lease. */
static void test_extend_pushes_expiry(void)
{
    unsigned int lease = nm_ms(400);
    NmLost lost;
    netmutex_t m;
    char *name, *key, *token;
    long long before, after;
    uint64_t left = 0;
    gint64 start;

    nm_lost_init(&lost);
    nm_configure(redis);
    name = init_mutex(&m, "m", 0, lease, &lost);
    key = nm_lock_key(name);

    nm_assert_rc(netmutex_extend(&m, 4 * lease), EPERM); /* not held */
    start = nmt_now_ms();
    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_token_of(redis, name);
    before = nm_redis_pttl(redis, key);
    g_assert_cmpint(before, >, 0);
    g_assert_cmpint(before, <=, lease);
    nm_assert_rc(netmutex_extend(&m, NETMUTEX_LEASE_MIN_MS - 1), EINVAL);
    nm_assert_rc(netmutex_extend(&m, NETMUTEX_LEASE_MAX_MS + 1), EINVAL);
    nm_assert_rc(nm_call_run(call_extend, &m, PROMPT_MS), EPERM); /* not the owner */

    nm_assert_rc(netmutex_extend(&m, 4 * lease), 0);
    after = nm_redis_pttl(redis, key);
    g_assert_cmpint(after, >, before);
    g_assert_cmpint(after, >, lease);
    g_assert_cmpint(after, <=, 4 * lease);
    /* validity follows the new expiry. */
    nm_assert_rc(netmutex_validity(&m, &left), 0);
    g_assert_cmpuint(left, >, lease);
    g_assert_cmpuint(left, <=, 4 * lease);

    /* Twice the original lease later: still ours. */
    nmt_sleep_ms((unsigned int)MAX(0, start + 2 * (gint64)lease - nmt_now_ms()));
    assert_held_by(name, token);
    nm_assert_rc(netmutex_validity(&m, &left), 0);
    g_assert_cmpuint(left, >, 0);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    g_free(token);
    g_free(key);
    g_free(name);
}

/* ---- losing the lease to a stalled server -------------------------------- */

/* The server is SIGSTOPped right after the lock and stays stopped longer
 * than the lease.  The callback must fire before the server can have
 * expired the key: before (the acquisition's send time + lease), read on
 * this host's monotonic clock.  The acquisition left after START, so START
 * + lease is a bound the library must beat.  (Renewal is set to 80% so no
 * renewal can get through before the pause; should the pause come that
 * late anyway, the bound is the pause + lease.)  After SIGCONT another
 * process takes the expired lock, and our late unlock says ENOLCK and
 * leaves the other owner's key alone. */
static void test_paused_server_callback_before_expiry(void)
{
    /* The library's safety margin is 5% of this: long enough that the
     * watchdog being scheduled a little late cannot fail the test. */
    unsigned int lease = nm_ms(2000);
    unsigned int renew_at = lease * 80 / 100;
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url, .renew_percent = 80 };
    NmLost lost;
    netmutex_t m;
    char *name, *token, *theirs, *after;
    gint64 start, paused_at, bound, fired_at;
    uint64_t left = 0;
    NmRemote *other;

    nm_lost_init(&lost);
    nm_assert_rc(netmutex_configure(&cfg), 0);
    name = init_mutex(&m, "m", 1, lease, &lost);
    /* A first cycle, so the lock below needs no dialing. */
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);

    start = nmt_now_ms();
    nm_assert_rc(netmutex_lock(&m), 0);
    paused_at = nmt_now_ms();
    nm_redis_pause(redis);
    bound = paused_at - start < renew_at ? start + lease : paused_at + lease;

    g_assert_cmpint(nm_lost_wait(&lost, lease + nm_ms(10000)), ==, 1);
    pthread_mutex_lock(&lost.lock);
    fired_at = lost.first_at;
    pthread_mutex_unlock(&lost.lock);
    g_test_message("callback %" G_GINT64_FORMAT " ms after the lock started, "
                   "bound %" G_GINT64_FORMAT " ms", fired_at - start, bound - start);
    g_assert_cmpint(fired_at, <, bound);
    nm_assert_rc(netmutex_validity(&m, &left), ENOLCK);

    /* Keep it stopped until the key has certainly expired at the server. */
    nmt_sleep_ms((unsigned int)MAX(0, paused_at + lease + nm_ms(100) - nmt_now_ms()));
    nm_redis_resume(redis);
    token = nm_token_of(redis, name);
    g_assert_null(token); /* expired, and no late renewal revived it */

    other = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);
    nm_assert_rc(nm_remote(other, 'l'), 0);
    theirs = nm_token_of(redis, name);
    g_assert_true(nm_is_token(theirs));
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    after = nm_token_of(redis, name);
    g_assert_cmpstr(after, ==, theirs);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 1);
    nm_assert_rc(nm_remote(other, 'u'), 0);
    nm_remote_stop(other);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    g_free(after);
    g_free(theirs);
    g_free(url);
    g_free(name);
}

/* ---- killed connections ---------------------------------------------------- */

/* Every normal client but the killer is killed again and again while a
 * short lease is held: the watchdog redials and keeps renewing, so the
 * lock is still ours after three lease periods.  Kills come every quarter
 * of a lease, renewals every third, so nearly every renewal redials; the
 * lease is long enough that a loaded machine's redial fits its margin (at
 * 500 ms, a full run at load 4 lost it once). */
static void test_client_kill_renewals_continue(void)
{
    unsigned int lease = nm_ms(1500);
    NmLost lost;
    netmutex_t m;
    char *name, *token;
    long long killed = 0;
    int rounds = 0;
    gint64 end;

    nm_lost_init(&lost);
    nm_configure(redis);
    name = init_mutex(&m, "m", 1, lease, &lost);

    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_token_of(redis, name);
    end = nmt_now_ms() + 3 * (gint64)lease;
    while (nmt_now_ms() < end) {
        redisReply *reply = nm_redis_cmd(redis, "CLIENT KILL TYPE normal SKIPME yes");

        g_assert_cmpint(reply->type, ==, REDIS_REPLY_INTEGER);
        killed += reply->integer;
        freeReplyObject(reply);
        rounds++;
        nmt_sleep_ms(lease / 4);
        assert_held_by(name, token);
    }
    g_test_message("%d kill rounds, %lld connections killed", rounds, killed);
    /* The caller's connection once, and the watchdog's again and again. */
    g_assert_cmpint(killed, >=, 3);
    /* A last period without kills: renewals still go through. */
    nmt_sleep_ms(lease);
    assert_held_by(name, token);
    assert_valid(&m, lease);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    g_free(token);
    g_free(name);
}

/* ---- fences ---------------------------------------------------------------- */

#define FENCE_PROCS 3
#define FENCE_CYCLES 20

/* The protected resource, in memory shared by all processes. */
typedef struct FenceBoard {
    uint64_t last;    /* the highest fence the resource accepted */
    int violations;   /* fences that did not exceed it */
} FenceBoard;

typedef struct FenceWork {
    const char *name;
    FenceBoard *board;
    int out; /* pipe: every fence seen, as uint64_t */
} FenceWork;

static int fence_child(void *p)
{
    const FenceWork *w = p;
    netmutex_t m;
    int bad = 0;

    nm_configure(redis);
    bad |= child_expect(netmutex_init(&m, w->name, NULL), 0, "init");
    for (int i = 0; i < FENCE_CYCLES && !bad; i++) {
        uint64_t fence = 0;

        bad |= child_expect(netmutex_lock(&m), 0, "lock");
        if (bad)
            break;
        bad |= child_expect(netmutex_fence(&m, &fence), 0, "fence");
        /* Inside the critical section: the resource's view. */
        if (fence <= w->board->last) {
            g_printerr("child %d: fence %" G_GUINT64_FORMAT " after %" G_GUINT64_FORMAT "\n",
                       (int)getpid(), fence, w->board->last);
            w->board->violations++;
        }
        w->board->last = fence;
        if (write(w->out, &fence, sizeof fence) != sizeof fence)
            bad = 1;
        bad |= child_expect(netmutex_unlock(&m), 0, "unlock");
    }
    bad |= child_expect(netmutex_destroy(&m), 0, "destroy");
    bad |= child_expect(netmutex_shutdown(), 0, "shutdown");
    return bad;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static int call_fence(void *m)
{
    uint64_t fence = 0;

    return netmutex_fence(m, &fence);
}

/* Fences strictly increase: between processes taking turns (each
 * acquisition's fence exceeds every earlier one, as the resource sees
 * them, and none repeats), past a holder killed with SIGKILL whose lease
 * ran out, and past a lease that expired at the server.  A thread that
 * does not hold the mutex gets EPERM. */
static void test_fence_increases(void)
{
    char *name = nm_test_name("m");
    char *key;
    FenceBoard *board = mmap(NULL, sizeof *board, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    uint64_t fences[FENCE_PROCS * FENCE_CYCLES];
    uint64_t dead_fence, after_dead, expiring, after_expiry, now;
    pid_t pids[FENCE_PROCS];
    FenceWork w = { .name = name };
    int pipefd[2];
    size_t got = 0;
    ssize_t n;
    NmRemote *doomed;
    netmutex_t m, short_m;
    char *short_name;

    g_assert_true(board != MAP_FAILED);
    memset(board, 0, sizeof *board);
    g_assert_cmpint(pipe(pipefd), ==, 0);
    w.board = board;
    w.out = pipefd[1];

    /* Processes taking turns (the parent uses no netmutex meanwhile). */
    for (int i = 0; i < FENCE_PROCS; i++)
        pids[i] = nm_fork_run(fence_child, &w);
    close(pipefd[1]);
    while (got < sizeof fences &&
           (n = read(pipefd[0], (char *)fences + got, sizeof fences - got)) > 0)
        got += (size_t)n;
    close(pipefd[0]);
    for (int i = 0; i < FENCE_PROCS; i++)
        nm_child_wait_ok(pids[i], nm_ms(60000));
    g_assert_cmpuint(got, ==, sizeof fences);
    g_assert_cmpint(board->violations, ==, 0);
    qsort(fences, G_N_ELEMENTS(fences), sizeof fences[0], cmp_u64);
    g_assert_cmpuint(fences[0], >, 0);
    for (gsize i = 1; i < G_N_ELEMENTS(fences); i++)
        g_assert_cmpuint(fences[i], >, fences[i - 1]);
    g_assert_cmpuint(board->last, ==, fences[G_N_ELEMENTS(fences) - 1]);

    /* A holder killed with SIGKILL: its lease runs out, the next fence is
     * still greater. */
    key = nm_lock_key(name);
    nm_configure(redis);
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    doomed = nm_remote_start(redis, name, NETMUTEX_NORMAL, nm_ms(300));
    nm_assert_rc(nm_remote(doomed, 'l'), 0);
    dead_fence = (uint64_t)nm_redis_fence(redis, key);
    g_assert_cmpuint(dead_fence, >, board->last);
    nm_remote_kill(doomed);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_fence(&m, &after_dead), 0);
    g_assert_cmpuint(after_dead, >, dead_fence);
    g_assert_cmpint((long long)after_dead, ==, nm_redis_fence(redis, key));
    nm_assert_rc(nm_call_run(call_fence, &m, PROMPT_MS), EPERM); /* not the owner */
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_fence(&m, &now), EPERM); /* not held at all */

    /* A lease that expired at the server (no renewal). */
    short_name = init_mutex(&short_m, "m", 0, nm_ms(300), NULL);
    g_assert_cmpstr(short_name, ==, name);
    nm_assert_rc(netmutex_lock(&short_m), 0);
    nm_assert_rc(netmutex_fence(&short_m, &expiring), 0);
    g_assert_cmpuint(expiring, >, after_dead);
    g_assert_true(wait_key_gone(name, nm_ms(10000)));
    nm_assert_rc(netmutex_unlock(&short_m), ENOLCK);
    /* ...taken by another process, then by us. */
    nm_assert_rc(nm_probe_trylock(redis, name, NETMUTEX_NORMAL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_fence(&m, &after_expiry), 0);
    g_assert_cmpuint(after_expiry, >, expiring + 1);
    nm_assert_rc(netmutex_unlock(&m), 0);

    nm_assert_rc(netmutex_destroy(&short_m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    munmap(board, sizeof *board);
    g_free(short_name);
    g_free(key);
    g_free(name);
}

/* ---- fork while holding ------------------------------------------------------ */

typedef struct ForkWork {
    netmutex_t *m;
    unsigned int lease;
    /* the parent's; here so that they stay reachable in the child too */
    char *name;
    char *token;
} ForkWork;

static int fork_child(void *p)
{
    const ForkWork *w = p;
    uint64_t v = 0;
    int bad = 0;

    bad |= child_expect(netmutex_unlock(w->m), EPERM, "unlock parent's lock");
    bad |= child_expect(netmutex_trylock(w->m), EBUSY, "trylock parent's lock");
    bad |= child_expect(netmutex_fence(w->m, &v), EPERM, "fence of parent's lock");
    bad |= child_expect(netmutex_validity(w->m, &v), EPERM, "validity of parent's lock");
    nmt_sleep_ms(3 * w->lease);
    /* Three leases later the parent's watchdog has kept it alive. */
    bad |= child_expect(netmutex_trylock(w->m), EBUSY, "trylock after 3 leases");
    bad |= child_expect(netmutex_unlock(w->m), EPERM, "unlock after 3 leases");
    bad |= child_expect(netmutex_shutdown(), 0, "shutdown");
    return bad;
}

/* fork() while holding: the child cannot unlock (EPERM) nor take it
 * (EBUSY) and exits; all the while the parent's lease is renewed (the key
 * keeps the parent's token), and the parent's unlock is a clean 0. */
static void test_fork_while_holding(void)
{
    unsigned int lease = nm_ms(400);
    NmLost lost;
    netmutex_t m;
    ForkWork w = { .m = &m, .lease = lease };
    char *name, *token, *after;
    gint64 end;
    pid_t pid;

    nm_lost_init(&lost);
    nm_configure(redis);
    name = w.name = init_mutex(&m, "m", 1, lease, &lost);
    nm_assert_rc(netmutex_lock(&m), 0);
    token = w.token = nm_token_of(redis, name);

    pid = nm_fork_run(fork_child, &w);
    end = nmt_now_ms() + 3 * (gint64)lease;
    while (nmt_now_ms() < end) {
        assert_held_by(name, token);
        nmt_sleep_ms(lease / 8);
    }
    nm_child_wait_ok(pid, PROMPT_MS + 3 * lease);
    assert_held_by(name, token);
    assert_valid(&m, lease);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    after = nm_token_of(redis, name);
    g_assert_null(after);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    g_free(token);
    g_free(name);
}

/* ---- many locks ---------------------------------------------------------------- */

#define MANY 10000

/* 10,000 locks held at once with a short lease survive three lease
 * periods: no callback, every validity 0 with time left, every unlock 0. */
static void test_many_locks_survive(void)
{
    unsigned int lease = nm_ms(1500);
    netmutex_t *ms = g_new0(netmutex_t, MANY);
    NmLost lost;
    int lock_failures = 0, invalid = 0, unlock_failures = 0;
    gint64 end;
    redisReply *reply;

    nm_lost_init(&lost);
    nm_configure(redis);
    for (int i = 0; i < MANY; i++) {
        char *suffix = g_strdup_printf("m%05d", i);
        char *name = init_mutex(&ms[i], suffix, 1, lease, &lost);

        g_free(name);
        g_free(suffix);
    }
    for (int i = 0; i < MANY; i++) {
        int rc = netmutex_lock(&ms[i]);

        if (rc != 0 && lock_failures++ == 0)
            g_test_message("lock %d: %s", i, nm_errname(rc));
    }
    g_assert_cmpint(lock_failures, ==, 0);

    end = nmt_now_ms() + 3 * (gint64)lease;
    while (nmt_now_ms() < end) {
        nmt_sleep_ms(lease / 2);
        g_assert_cmpint(nm_lost_calls(&lost), ==, 0);
    }
    /* Every key is there (the test's keys are the only ones with PX). */
    reply = nm_redis_cmd(redis, "INFO keyspace");
    g_test_message("%s", reply->str);
    freeReplyObject(reply);

    for (int i = 0; i < MANY; i++) {
        uint64_t left = 0;

        if (netmutex_validity(&ms[i], &left) != 0 || left == 0)
            invalid++;
    }
    g_assert_cmpint(invalid, ==, 0);
    for (int i = 0; i < MANY; i++) {
        int rc = netmutex_unlock(&ms[i]);

        if (rc != 0 && unlock_failures++ == 0)
            g_test_message("unlock %d: %s", i, nm_errname(rc));
    }
    g_assert_cmpint(unlock_failures, ==, 0);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);

    for (int i = 0; i < MANY; i++)
        nm_assert_rc(netmutex_destroy(&ms[i]), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    g_free(ms);
}

/* ---- a loss, then the server gone ---------------------------------------------- */

/* A loss reported before the unlock is what the unlock says, even when
 * the server is gone by then: the give-back fails (it used to say EIO,
 * hiding the loss), the caller learns its hold was not protected. */
static void test_lost_then_server_gone(void)
{
    NmRedis *own = nm_redis_start(NULL);
    char *url = nm_redis_url(own);
    netmutex_config_t cfg = { .url = url, .connect_timeout_ms = nm_ms(500),
                              .io_timeout_ms = nm_ms(500) };
    NmLost lost;
    netmutex_t m;

    nm_lost_init(&lost);
    nm_assert_rc(netmutex_configure(&cfg), 0);
    char *name = init_mutex(&m, "gone", 1, nm_ms(1000), &lost);
    char *key = nm_lock_key(name);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_redis_ok(own, "DEL %s", key); /* the renewal finds it gone */
    g_assert_cmpint(nm_lost_wait(&lost, nm_ms(10000)), ==, 1);
    nm_redis_stop(own);
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    nm_redis_free(own);
    g_free(key);
    g_free(name);
    g_free(url);
}

/* ---- shutdown ------------------------------------------------------------------- */

/* With nothing held, netmutex_shutdown returns 0 and stops the background
 * thread; a later lock configures itself again (here from NETMUTEX_URL)
 * and works.  With a lock held, by this thread or another, it says EBUSY
 * and changes nothing. */
static void test_shutdown(void)
{
    char *url = nm_redis_url(redis);
    netmutex_t m;
    char *name, *token;
    NmHolder *h;

    nm_configure(redis);
    name = init_mutex(&m, "m", 1, nm_ms(1000), NULL);
    nm_assert_rc(netmutex_lock(&m), 0);
    /* A held lease needs the background thread to renew it. */
    g_assert_cmpint(nm_count_threads(), >, baseline_threads);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_assert_cmpint(nm_count_threads(), ==, baseline_threads);
    nm_assert_rc(netmutex_shutdown(), 0); /* again: still nothing to do */

    /* Configured anew from the environment by the next call. */
    g_setenv("NETMUTEX_URL", url, TRUE);
    nm_assert_rc(netmutex_lock(&m), 0);
    assert_valid(&m, nm_ms(1000));
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_unsetenv("NETMUTEX_URL");

    /* Held by this thread. */
    nm_configure(redis);
    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_token_of(redis, name);
    nm_assert_rc(netmutex_shutdown(), EBUSY);
    assert_valid(&m, nm_ms(1000));
    assert_held_by(name, token);
    nm_assert_rc(netmutex_unlock(&m), 0);

    /* Held by another thread. */
    h = nm_holder_start(&m);
    nm_assert_rc(netmutex_shutdown(), EBUSY);
    nm_assert_rc(nm_holder_release(h), 0);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_assert_cmpint(nm_count_threads(), ==, baseline_threads);
    g_free(token);
    g_free(url);
    g_free(name);
}

/* ---- main ----------------------------------------------------------------------- */

static int nothing(void *arg)
{
    (void)arg;
    return 0;
}

static void skip_fork_with_threads(void)
{
    g_test_skip("the sanitizer's allocator is not fork-safe while other threads run");
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    nm_test_cache_off();
    redis = nm_redis_start(NULL);
    g_assert_cmpint(nm_call_run(nothing, NULL, PROMPT_MS), ==, 0);
    baseline_threads = nm_count_threads();

    g_test_add_func("/watchdog/renewal/held-3x-lease", test_renewal_held_3x_lease);
    g_test_add_func("/watchdog/autorenew-off/expires-callback-once-enolck",
                    test_autorenew_off_expires);
    g_test_add_func("/watchdog/extend/pushes-expiry-past-lease", test_extend_pushes_expiry);
    g_test_add_func("/watchdog/paused-server/callback-before-expiry-unlock-enolck",
                    test_paused_server_callback_before_expiry);
    g_test_add_func("/watchdog/client-kill/renewals-continue-after-reconnect",
                    test_client_kill_renewals_continue);
    g_test_add_func("/watchdog/fence/increases-across-processes-death-and-expiry",
                    test_fence_increases);
    /* Forks while the library's watchdog thread runs: the sanitizers cannot
     * (see nm_fork_with_threads_is_safe); plain and valgrind run it. */
    g_test_add_func("/watchdog/fork/child-cannot-unlock-parent-lease-renewed",
                    nm_fork_with_threads_is_safe() ? test_fork_while_holding
                                                   : skip_fork_with_threads);
    g_test_add_func("/watchdog/many/10000-locks-survive-3-leases", test_many_locks_survive);
    g_test_add_func("/watchdog/lost/unlock-enolck-with-server-gone", test_lost_then_server_gone);
    g_test_add_func("/watchdog/shutdown/idle-ok-held-ebusy", test_shutdown);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
