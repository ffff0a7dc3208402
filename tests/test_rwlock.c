/*
 * test_rwlock.c -- read-write locks across threads and processes
 * (netmutex_rwlock_*), against a private server.
 *
 * Covered: the argument checks and pthread's answers (EBUSY, ETIMEDOUT on
 * both clocks, EDEADLK, EPERM, EINVAL, EAGAIN's neighbour: a reader's
 * second read lock); many readers inside at once, threads and processes;
 * a writer excluding readers and writers across processes, checked by
 * counters in shared memory and a read-modify-write that would lose
 * updates; writer preference (a waiting writer keeps new readers out) and
 * reader preference; writers served in arrival order; a reader and a
 * writer killed with SIGKILL (their holds run out, the waiters go on, and
 * nothing is left on the server); a writer granted the lock after its
 * holder's lease ran out that is slow to confirm keeps its turn (no reader
 * behind it gets in), and one whose refresh came late is not taken for
 * a dead waiter by its own attempt; a reader stopped past its lease
 * reported lost; a process exiting while it waits leaves the queue; holds renewed
 * past their leases; a key of the wrong type (EPROTO); fences strictly
 * increasing across writers, a reader's between the writers around it;
 * the static initializer; netmutex_rwlock_status (a reader and a waiting
 * writer, then the writer) and netmutex_list_shared; quorum mode's ENOTSUP.
 */
#include "ac_config.h"

#include "fixture.h"
#include "keytag.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static NmRedis *redis;

#define PROMPT_MS nm_ms(30000)
/* How late past its deadline a timed lock may return: a loaded machine's
 * stall, as test_wait.c allows a mutex's (the same wait, lease.c). */
#define LATE_MS nm_ms(500)

/* ---- helpers ------------------------------------------------------------ */

/* The key <prefix>{r<tag>}NAME SUFFIX of rwlock NAME (lib.lua). */
static char *rw_key(const char *name, const char *suffix)
{
    char tag[NM_TEST_TAG_LEN + 1];
    nm_test_key_tag(name, strlen(name), tag);
    return g_strdup_printf("netmutex:{r%s}%s%s", tag, name, suffix);
}

static long long zcard(const char *key)
{
    redisReply *r = nm_redis_cmd(redis, "ZCARD %s", key);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

static long long llen(const char *key)
{
    redisReply *r = nm_redis_cmd(redis, "LLEN %s", key);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

/* Read shares of NAME on the server (live or not pruned yet). */
static long long shares_of(const char *name)
{
    char *s = rw_key(name, ":s");
    long long n = zcard(s);
    g_free(s);
    return n;
}

/* NAME's queued waiters: Q, and the readers that prefer readers, which W
 * lists ("=pn", "=p<i>": lib.lua) while their entries last. */
static long long queued_of(const char *name)
{
    char *q = rw_key(name, ":q"), *w = rw_key(name, ":w");
    long long n = llen(q);
    char *listed = nm_redis_string(redis, "HGET %s =pn", w);
    for (long long i = 1; listed && i <= g_ascii_strtoll(listed, NULL, 10); i++) {
        char *field = g_strdup_printf("=p%lld", i);
        char *t = nm_redis_string(redis, "HGET %s %s", w, field);
        redisReply *r = t ? nm_redis_cmd(redis, "HEXISTS %s %s", w, t) : NULL;
        n += r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        if (r)
            freeReplyObject(r);
        g_free(t);
        g_free(field);
    }
    g_free(listed);
    g_free(w);
    g_free(q);
    return n;
}

/* Polls until NAME has N waiters queued; false after the bound. */
static bool wait_queued(const char *name, long long n)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    bool ok;
    while (!(ok = queued_of(name) == n) && nmt_now_ms() < until)
        nmt_sleep_ms(2);
    return ok;
}

/* Polls until NAME holds N read shares. */
static bool wait_shares(const char *name, long long n)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    bool ok;
    while (!(ok = shares_of(name) == n) && nmt_now_ms() < until)
        nmt_sleep_ms(2);
    return ok;
}

/* Every key of every rwlock gone, within the bound (a queue's keys live
 * their refresh time after the last waiter left). */
static bool wait_nothing_left(void)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (nm_redis_kind_keys(redis, 'r') != 0 && nmt_now_ms() < until)
        nmt_sleep_ms(10);
    return nm_redis_kind_keys(redis, 'r') == 0;
}

/* netmutex_rwlock_init of RW named nm_test_name(SUFFIX), with KIND and
 * LEASE_MS (0: the default); asserts success.  Returns the name. */
static char *rw_init(netmutex_rwlock_t *rw, const char *suffix, int kind, unsigned int lease_ms)
{
    netmutex_rwlockattr_t a;
    char *name = nm_test_name(suffix);
    nm_assert_rc(netmutex_rwlockattr_init(&a), 0);
    nm_assert_rc(netmutex_rwlockattr_setkind(&a, kind), 0);
    nm_assert_rc(netmutex_rwlockattr_setlease(&a, lease_ms), 0);
    nm_assert_rc(netmutex_rwlock_init(rw, name, &a), 0);
    nm_assert_rc(netmutex_rwlockattr_destroy(&a), 0);
    return name;
}

/* A thread's lock of RW: 'r' rdlock, 'w' wrlock, 'R' / 'W' their tries;
 * HOLD_MS later it unlocks (unless the lock failed). */
typedef struct Locker {
    netmutex_rwlock_t *rw;
    char op;
    unsigned int hold_ms;
    int id;
    int *order;        /* appended to under the lock: who got in when */
    int *norder;
    int got;           /* atomic: the lock was granted */
    int release;       /* atomic: unlock now (hold_ms 0) */
} Locker;

static int lock_op(netmutex_rwlock_t *rw, char op)
{
    switch (op) {
    case 'r': return netmutex_rwlock_rdlock(rw);
    case 'w': return netmutex_rwlock_wrlock(rw);
    case 'R': return netmutex_rwlock_tryrdlock(rw);
    case 'W': return netmutex_rwlock_trywrlock(rw);
    default: return -1;
    }
}

static int locker_run(void *p)
{
    Locker *k = p;
    int err = lock_op(k->rw, k->op);
    if (err)
        return err;
    if (k->order)
        k->order[g_atomic_int_add(k->norder, 1)] = k->id;
    g_atomic_int_set(&k->got, 1);
    if (k->hold_ms) {
        nmt_sleep_ms(k->hold_ms);
    } else {
        gint64 until = nmt_now_ms() + PROMPT_MS;
        while (!g_atomic_int_get(&k->release) && nmt_now_ms() < until)
            nmt_sleep_ms(1);
    }
    return netmutex_rwlock_unlock(k->rw);
}

static bool wait_got(Locker *k)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!g_atomic_int_get(&k->got) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    return g_atomic_int_get(&k->got);
}

/* ---- arguments ---------------------------------------------------------- */

static void test_bad_arguments(void)
{
    netmutex_rwlock_t rw, zero;
    netmutex_rwlockattr_t a, zero_attr;
    struct timespec ts = { 0, 0 }, bad = { 0, 1000000000 };
    unsigned int ms;
    uint64_t fence;
    int kind;
    char *name = nm_test_name("rw");

    memset(&zero, 0, sizeof zero);
    memset(&zero_attr, 0, sizeof zero_attr);
    nm_assert_rc(netmutex_rwlockattr_init(NULL), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_setkind(&zero_attr, 0), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_getkind(&zero_attr, &kind), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_destroy(&zero_attr), EINVAL);
    nm_assert_rc(netmutex_rwlock_init(&rw, name, &zero_attr), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_init(&a), 0);
    nm_assert_rc(netmutex_rwlockattr_getkind(&a, &kind), 0);
    g_assert_cmpint(kind, ==, NETMUTEX_RWLOCK_PREFER_WRITER);
    nm_assert_rc(netmutex_rwlockattr_setkind(&a, 2), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_setkind(&a, -1), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_setkind(&a, NETMUTEX_RWLOCK_PREFER_READER), 0);
    nm_assert_rc(netmutex_rwlockattr_getkind(&a, &kind), 0);
    g_assert_cmpint(kind, ==, NETMUTEX_RWLOCK_PREFER_READER);
    nm_assert_rc(netmutex_rwlockattr_getkind(&a, NULL), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_setlease(&a, NETMUTEX_LEASE_MIN_MS - 1), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_setlease(&a, NETMUTEX_LEASE_MAX_MS + 1), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_setlease(&a, 5000), 0);
    nm_assert_rc(netmutex_rwlockattr_getlease(&a, &ms), 0);
    g_assert_cmpuint(ms, ==, 5000);
    nm_assert_rc(netmutex_rwlockattr_getlease(&a, NULL), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_setlostfn(NULL, NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_setlostfn(&a, NULL, NULL), 0);

    nm_assert_rc(netmutex_rwlock_init(NULL, name, NULL), EINVAL);
    nm_assert_rc(netmutex_rwlock_init(&rw, NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_rwlock_init(&rw, "", NULL), EINVAL);
    char *long_name = g_strnfill(NETMUTEX_NAME_MAX + 1, 'x');
    nm_assert_rc(netmutex_rwlock_init(&rw, long_name, NULL), EINVAL);
    g_free(long_name);
    nm_assert_rc(netmutex_rwlock_init(&rw, name, &a), 0);
    nm_assert_rc(netmutex_rwlockattr_destroy(&a), 0);
    nm_assert_rc(netmutex_rwlockattr_destroy(&a), EINVAL);
    nm_assert_rc(netmutex_rwlockattr_setkind(&a, 0), EINVAL);
    nm_assert_rc(netmutex_rwlock_init(&zero, name, &a), EINVAL); /* destroyed attr */

    /* Never initialized (zeroed) or NULL: EINVAL everywhere. */
    nm_assert_rc(netmutex_rwlock_rdlock(NULL), EINVAL);
    nm_assert_rc(netmutex_rwlock_rdlock(&zero), EINVAL);
    nm_assert_rc(netmutex_rwlock_tryrdlock(&zero), EINVAL);
    nm_assert_rc(netmutex_rwlock_wrlock(&zero), EINVAL);
    nm_assert_rc(netmutex_rwlock_trywrlock(&zero), EINVAL);
    nm_assert_rc(netmutex_rwlock_timedrdlock(&zero, &ts), EINVAL);
    nm_assert_rc(netmutex_rwlock_timedwrlock(&zero, &ts), EINVAL);
    nm_assert_rc(netmutex_rwlock_unlock(&zero), EINVAL);
    nm_assert_rc(netmutex_rwlock_unlock(NULL), EINVAL);
    nm_assert_rc(netmutex_rwlock_fence(&zero, &fence), EINVAL);
    nm_assert_rc(netmutex_rwlock_destroy(&zero), EINVAL);
    nm_assert_rc(netmutex_rwlock_destroy(NULL), EINVAL);

    /* Bad deadlines and clocks, checked before anything else. */
    nm_assert_rc(netmutex_rwlock_timedrdlock(&rw, NULL), EINVAL);
    nm_assert_rc(netmutex_rwlock_timedwrlock(&rw, NULL), EINVAL);
    nm_assert_rc(netmutex_rwlock_timedrdlock(&rw, &bad), EINVAL);
    nm_assert_rc(netmutex_rwlock_timedwrlock(&rw, &bad), EINVAL);
    nm_assert_rc(netmutex_rwlock_clockrdlock(&rw, CLOCK_PROCESS_CPUTIME_ID, &ts), EINVAL);
    nm_assert_rc(netmutex_rwlock_clockwrlock(&rw, CLOCK_PROCESS_CPUTIME_ID, &ts), EINVAL);

    /* Not held: EPERM; no place for the fence: EINVAL. */
    nm_assert_rc(netmutex_rwlock_unlock(&rw), EPERM);
    nm_assert_rc(netmutex_rwlock_fence(&rw, &fence), EPERM);
    nm_assert_rc(netmutex_rwlock_fence(&rw, NULL), EINVAL);

    /* Held: destroy says EBUSY. */
    nm_assert_rc(netmutex_rwlock_wrlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), EBUSY);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), EINVAL);
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), EINVAL);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* The static initializer: created on first use, shared with an inited
 * handle of the same name (one thread's hold through both). */
static void test_static_initializer(void)
{
    char *name = nm_test_name("rw");
    netmutex_rwlock_t st = NETMUTEX_RWLOCK_INITIALIZER(name), rw;
    netmutex_rwlock_t bad = NETMUTEX_RWLOCK_INITIALIZER(NULL);
    netmutex_rwlock_t empty = NETMUTEX_RWLOCK_INITIALIZER("");
    nm_assert_rc(netmutex_rwlock_init(&rw, name, NULL), 0);
    nm_assert_rc(netmutex_rwlock_rdlock(&st), 0);
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0); /* the same thread's share */
    g_assert_cmpint(shares_of(name), ==, 1);
    nm_assert_rc(netmutex_rwlock_wrlock(&rw), EDEADLK);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&st), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&st), EPERM);
    g_assert_cmpint(shares_of(name), ==, 0);
    nm_assert_rc(netmutex_rwlock_rdlock(&bad), EINVAL);
    nm_assert_rc(netmutex_rwlock_trywrlock(&empty), EINVAL);
    nm_assert_rc(netmutex_rwlock_destroy(&st), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* pthread's answers for a thread that holds the lock already. */
static void test_relock(void)
{
    netmutex_rwlock_t rw;
    struct timespec ts;
    char *name = rw_init(&rw, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);

    /* A reader reads again (one share on the server), and unlocks as often. */
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_tryrdlock(&rw), 0);
    nm_deadline(&ts, CLOCK_REALTIME, 100);
    nm_assert_rc(netmutex_rwlock_timedrdlock(&rw, &ts), 0);
    g_assert_cmpint(shares_of(name), ==, 1);
    /* It cannot write: that would wait for itself. */
    nm_assert_rc(netmutex_rwlock_wrlock(&rw), EDEADLK);
    nm_assert_rc(netmutex_rwlock_timedwrlock(&rw, &ts), EDEADLK);
    nm_assert_rc(netmutex_rwlock_trywrlock(&rw), EBUSY);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    g_assert_cmpint(shares_of(name), ==, 1);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    g_assert_cmpint(shares_of(name), ==, 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), EPERM);

    /* A writer neither writes nor reads again. */
    nm_assert_rc(netmutex_rwlock_wrlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_wrlock(&rw), EDEADLK);
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), EDEADLK);
    nm_deadline(&ts, CLOCK_MONOTONIC, 100);
    nm_assert_rc(netmutex_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, &ts), EDEADLK);
    nm_assert_rc(netmutex_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, &ts), EDEADLK);
    nm_assert_rc(netmutex_rwlock_trywrlock(&rw), EBUSY);
    nm_assert_rc(netmutex_rwlock_tryrdlock(&rw), EBUSY);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), EPERM);

    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* Another thread's hold: the tries say EBUSY where pthread does. */
static void test_try_busy(void)
{
    netmutex_rwlock_t rw;
    char *name = rw_init(&rw, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);
    Locker w = { .rw = &rw, .op = 'w' }, r = { .rw = &rw, .op = 'r' };

    NmCall *c = nm_call_start(locker_run, &w);
    g_assert_true(wait_got(&w));
    nm_assert_rc(netmutex_rwlock_tryrdlock(&rw), EBUSY);
    nm_assert_rc(netmutex_rwlock_trywrlock(&rw), EBUSY);
    g_atomic_int_set(&w.release, 1);
    nm_assert_rc(nm_call_wait(c, PROMPT_MS), 0);

    c = nm_call_start(locker_run, &r);
    g_assert_true(wait_got(&r));
    nm_assert_rc(netmutex_rwlock_trywrlock(&rw), EBUSY);
    nm_assert_rc(netmutex_rwlock_tryrdlock(&rw), 0); /* readers share */
    g_assert_cmpint(shares_of(name), ==, 2);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    g_atomic_int_set(&r.release, 1);
    nm_assert_rc(nm_call_wait(c, PROMPT_MS), 0);
    nm_assert_rc(netmutex_rwlock_trywrlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);

    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* A timed lock that cannot be had: ETIMEDOUT at its deadline, never
 * before, and its queue entry gone. */
static void test_timed_out(gconstpointer data)
{
    clockid_t clock = GPOINTER_TO_INT(data);
    netmutex_rwlock_t rw;
    struct timespec deadline, returned;
    char *name = rw_init(&rw, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);
    Locker w = { .rw = &rw, .op = 'w' }, r = { .rw = &rw, .op = 'r' };

    NmCall *c = nm_call_start(locker_run, &w);
    g_assert_true(wait_got(&w));
    nm_deadline(&deadline, clock, 200);
    nm_assert_rc(netmutex_rwlock_clockrdlock(&rw, clock, &deadline), ETIMEDOUT);
    clock_gettime(clock, &returned);
    nm_assert_timed_out_at(&returned, &deadline, LATE_MS);
    nm_deadline(&deadline, clock, 200);
    nm_assert_rc(netmutex_rwlock_clockwrlock(&rw, clock, &deadline), ETIMEDOUT);
    clock_gettime(clock, &returned);
    nm_assert_timed_out_at(&returned, &deadline, LATE_MS);
    if (clock == CLOCK_REALTIME) {
        nm_deadline(&deadline, clock, 100);
        nm_assert_rc(netmutex_rwlock_timedrdlock(&rw, &deadline), ETIMEDOUT);
        nm_deadline(&deadline, clock, 100);
        nm_assert_rc(netmutex_rwlock_timedwrlock(&rw, &deadline), ETIMEDOUT);
    }
    g_assert_cmpint(queued_of(name), ==, 0);
    g_atomic_int_set(&w.release, 1);
    nm_assert_rc(nm_call_wait(c, PROMPT_MS), 0);

    /* A reader in: a writer times out the same way. */
    c = nm_call_start(locker_run, &r);
    g_assert_true(wait_got(&r));
    nm_deadline(&deadline, clock, 200);
    nm_assert_rc(netmutex_rwlock_clockwrlock(&rw, clock, &deadline), ETIMEDOUT);
    clock_gettime(clock, &returned);
    nm_assert_timed_out_at(&returned, &deadline, LATE_MS);
    g_assert_cmpint(queued_of(name), ==, 0);
    /* The writer gone, readers come in again. */
    nm_assert_rc(netmutex_rwlock_tryrdlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    g_atomic_int_set(&r.release, 1);
    nm_assert_rc(nm_call_wait(c, PROMPT_MS), 0);

    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* ---- threads ---------------------------------------------------------------- */

/* N readers hold the lock at once: each waits, holding it, until all are
 * in. */
typedef struct Together {
    netmutex_rwlock_t *rw;
    int n;
    int *inside; /* atomic */
} Together;

static int together_run(void *p)
{
    Together *t = p;
    int err = netmutex_rwlock_rdlock(t->rw);
    if (err)
        return err;
    g_atomic_int_inc(t->inside);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (g_atomic_int_get(t->inside) < t->n && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    int all = g_atomic_int_get(t->inside) >= t->n;
    err = netmutex_rwlock_unlock(t->rw);
    return err ? err : all ? 0 : 1000;
}

static void test_readers_together_threads(void)
{
    enum { N = 4 };
    netmutex_rwlock_t rw;
    NmCall *calls[N];
    int inside = 0;
    char *name = rw_init(&rw, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);
    Together t = { .rw = &rw, .n = N, .inside = &inside };
    for (int i = 0; i < N; i++)
        calls[i] = nm_call_start(together_run, &t);
    for (int i = 0; i < N; i++)
        nm_assert_rc(nm_call_wait(calls[i], PROMPT_MS), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* ---- preference and order -------------------------------------------------- */

/* WAITER: another handle of NAME, of KIND (NETMUTEX_RWLOCK_PREFER_*). */
static void kind_init(netmutex_rwlock_t *waiter, const char *name, int kind)
{
    netmutex_rwlockattr_t a;
    nm_assert_rc(netmutex_rwlockattr_init(&a), 0);
    nm_assert_rc(netmutex_rwlockattr_setkind(&a, kind), 0);
    nm_assert_rc(netmutex_rwlock_init(waiter, name, &a), 0);
    nm_assert_rc(netmutex_rwlockattr_destroy(&a), 0);
}

/* The reader R (call CR) inside, writer W (call CW) queued: R leaves, W
 * gets in and leaves, and ORDER says the reader (3) came before it (2). */
static void reader_then_writer(Locker *r, NmCall *cr, Locker *w, NmCall *cw, const int *order)
{
    g_atomic_int_set(&r->release, 1);
    nm_assert_rc(nm_call_wait(cr, PROMPT_MS), 0);
    g_assert_true(wait_got(w));
    g_atomic_int_set(&w->release, 1);
    nm_assert_rc(nm_call_wait(cw, PROMPT_MS), 0);
    g_assert_cmpint(order[1], ==, 3);
    g_assert_cmpint(order[2], ==, 2);
}

/* A reader holds; a writer waits.  Preferring writers, a new reader waits
 * behind that writer; preferring readers, it comes in. */
static void test_preference(gconstpointer data)
{
    int kind = GPOINTER_TO_INT(data);
    netmutex_rwlock_t holder, waiter;
    struct timespec ts;
    int order[3] = { 0 }, n = 0;
    char *name = rw_init(&holder, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);
    kind_init(&waiter, name, kind);
    Locker r1 = { .rw = &holder, .op = 'r', .id = 1, .order = order, .norder = &n };
    Locker w = { .rw = &holder, .op = 'w', .id = 2, .order = order, .norder = &n };
    Locker r2 = { .rw = &waiter, .op = 'r', .id = 3, .order = order, .norder = &n };

    NmCall *c1 = nm_call_start(locker_run, &r1);
    g_assert_true(wait_got(&r1));
    NmCall *cw = nm_call_start(locker_run, &w);
    g_assert_true(wait_queued(name, 1));
    if (kind == NETMUTEX_RWLOCK_PREFER_WRITER) {
        nm_assert_rc(netmutex_rwlock_tryrdlock(&waiter), EBUSY);
        nm_deadline(&ts, CLOCK_MONOTONIC, 100);
        nm_assert_rc(netmutex_rwlock_clockrdlock(&waiter, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
        NmCall *c2 = nm_call_start(locker_run, &r2);
        g_assert_true(wait_queued(name, 2));
        nmt_sleep_ms(nm_ms(50));
        g_assert_false(g_atomic_int_get(&r2.got));
        g_atomic_int_set(&r1.release, 1);
        nm_assert_rc(nm_call_wait(c1, PROMPT_MS), 0);
        g_assert_true(wait_got(&w));
        nmt_sleep_ms(nm_ms(50));
        g_assert_false(g_atomic_int_get(&r2.got));
        g_atomic_int_set(&w.release, 1);
        nm_assert_rc(nm_call_wait(cw, PROMPT_MS), 0);
        g_assert_true(wait_got(&r2));
        g_atomic_int_set(&r2.release, 1);
        nm_assert_rc(nm_call_wait(c2, PROMPT_MS), 0);
        g_assert_cmpint(order[1], ==, 2);
        g_assert_cmpint(order[2], ==, 3);
    } else {
        nm_assert_rc(netmutex_rwlock_tryrdlock(&waiter), 0);
        g_assert_cmpint(shares_of(name), ==, 2);
        nm_assert_rc(netmutex_rwlock_unlock(&waiter), 0);
        NmCall *c2 = nm_call_start(locker_run, &r2);
        g_assert_true(wait_got(&r2));
        g_assert_false(g_atomic_int_get(&w.got));
        g_atomic_int_set(&r1.release, 1);
        g_atomic_int_set(&r2.release, 1);
        nm_assert_rc(nm_call_wait(c1, PROMPT_MS), 0);
        nm_assert_rc(nm_call_wait(c2, PROMPT_MS), 0);
        g_assert_true(wait_got(&w));
        g_atomic_int_set(&w.release, 1);
        nm_assert_rc(nm_call_wait(cw, PROMPT_MS), 0);
        g_assert_cmpint(order[2], ==, 2);
    }
    nm_assert_rc(netmutex_rwlock_destroy(&waiter), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&holder), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* Preferring readers, a reader queued behind a writer that held the lock
 * gets in when it is released, before the writers waiting. */
static void test_reader_preference_after_writer(void)
{
    netmutex_rwlock_t holder, waiter;
    int order[3] = { 0 }, n = 0;
    char *name = rw_init(&holder, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);
    kind_init(&waiter, name, NETMUTEX_RWLOCK_PREFER_READER);
    Locker w1 = { .rw = &holder, .op = 'w', .id = 1, .order = order, .norder = &n };
    Locker w2 = { .rw = &holder, .op = 'w', .id = 2, .order = order, .norder = &n };
    Locker r = { .rw = &waiter, .op = 'r', .id = 3, .order = order, .norder = &n };

    NmCall *c1 = nm_call_start(locker_run, &w1);
    g_assert_true(wait_got(&w1));
    NmCall *c2 = nm_call_start(locker_run, &w2);
    g_assert_true(wait_queued(name, 1));
    NmCall *c3 = nm_call_start(locker_run, &r);
    g_assert_true(wait_queued(name, 2));
    g_atomic_int_set(&w1.release, 1);
    nm_assert_rc(nm_call_wait(c1, PROMPT_MS), 0);
    g_assert_true(wait_got(&r));
    nmt_sleep_ms(nm_ms(50));
    g_assert_false(g_atomic_int_get(&w2.got));
    reader_then_writer(&r, c3, &w2, c2, order);
    nm_assert_rc(netmutex_rwlock_destroy(&waiter), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&holder), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* A read lock of RW that gives up after MS (a thread of its own). */
typedef struct TimedRead {
    netmutex_rwlock_t *rw;
    unsigned int ms;
} TimedRead;

static int timed_read(void *p)
{
    TimedRead *t = p;
    struct timespec ts;
    nm_deadline(&ts, CLOCK_MONOTONIC, t->ms);
    int err = netmutex_rwlock_clockrdlock(t->rw, CLOCK_MONOTONIC, &ts);
    return err ? err : netmutex_rwlock_unlock(t->rw) == 0 ? 0 : -1;
}

/* Readers that prefer readers wait apart from the queue of writers: one
 * that gives up while a writer holds the lock leaves, is counted by
 * status while it waits and not after, and never gets a share; the next
 * one gets in at the release, before the writer queued first. */
static void test_reader_preference_gives_up(void)
{
    netmutex_rwlock_t holder, waiter;
    netmutex_shared_status_t st;
    int order[3] = { 0 }, n = 0;
    char *name = rw_init(&holder, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);
    kind_init(&waiter, name, NETMUTEX_RWLOCK_PREFER_READER);
    Locker w1 = { .rw = &holder, .op = 'w', .id = 1, .order = order, .norder = &n };
    Locker w2 = { .rw = &holder, .op = 'w', .id = 2, .order = order, .norder = &n };
    Locker r = { .rw = &waiter, .op = 'r', .id = 3, .order = order, .norder = &n };
    TimedRead quitter = { .rw = &waiter, .ms = nm_ms(1500) };

    NmCall *c1 = nm_call_start(locker_run, &w1);
    g_assert_true(wait_got(&w1));
    NmCall *c2 = nm_call_start(locker_run, &w2);
    g_assert_true(wait_queued(name, 1));
    NmCall *q = nm_call_start(timed_read, &quitter);
    g_assert_true(wait_queued(name, 2));
    nm_assert_rc(netmutex_rwlock_status(name, &st), 0);
    g_assert_cmpuint(st.writers_waiting, ==, 1);
    g_assert_cmpuint(st.waiters, ==, 1);
    nm_assert_rc(nm_call_wait(q, PROMPT_MS), ETIMEDOUT);
    g_assert_cmpint(queued_of(name), ==, 1);
    nm_assert_rc(netmutex_rwlock_status(name, &st), 0);
    g_assert_cmpuint(st.waiters, ==, 0);
    NmCall *c3 = nm_call_start(locker_run, &r);
    g_assert_true(wait_queued(name, 2));
    g_atomic_int_set(&w1.release, 1);
    nm_assert_rc(nm_call_wait(c1, PROMPT_MS), 0);
    g_assert_true(wait_got(&r));
    /* The reader's share alone: the one that gave up got none. */
    g_assert_cmpint(shares_of(name), ==, 1);
    g_assert_false(g_atomic_int_get(&w2.got));
    reader_then_writer(&r, c3, &w2, c2, order);
    nm_assert_rc(netmutex_rwlock_destroy(&waiter), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&holder), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* Queues N writers that never come by hand, behind whatever Q holds:
 * entries live for an hour, in lib.lua's format. */
static const char fake_writers_lua[] =
    "local t = redis.call('TIME')\n"
    "local far = string.format('%.0f', tonumber(t[1]) * 1000 + 3600000)\n"
    "for i = 1, tonumber(ARGV[1]) do\n"
    "  local tok = string.format('%032x', i)\n"
    "  redis.call('HSET', KEYS[2], tok, far .. ':30000:w:fake:1:' .. i)\n"
    "  redis.call('RPUSH', KEYS[1], tok)\n"
    "end\n"
    "return redis.call('LLEN', KEYS[1])\n";

/* A reader that prefers readers, behind a writer that holds the lock and
 * a queue of more writers than a Lua call can take as arguments: the
 * release lets it in, and the writers keep their places.  (The reader's
 * serve once rebuilt the whole queue in one RPUSH: past about 8,000
 * waiters the release failed after it had deleted the queue.) */
static void test_reader_preference_long_queue(void)
{
    enum { WRITERS = 9000 };
    netmutex_rwlock_t holder, waiter;
    char *name = rw_init(&holder, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);
    char *q = rw_key(name, ":q"), *w = rw_key(name, ":w");
    kind_init(&waiter, name, NETMUTEX_RWLOCK_PREFER_READER);
    Locker r = { .rw = &waiter, .op = 'r' };

    nm_assert_rc(netmutex_rwlock_wrlock(&holder), 0);
    redisReply *made = nm_redis_cmd(redis, "EVAL %s 2 %s %s %d", fake_writers_lua, q, w, WRITERS);
    g_assert_cmpint(made->type, ==, REDIS_REPLY_INTEGER);
    g_assert_cmpint(made->integer, ==, WRITERS);
    freeReplyObject(made);
    NmCall *c = nm_call_start(locker_run, &r);
    g_assert_true(wait_queued(name, WRITERS + 1));
    nm_assert_rc(netmutex_rwlock_unlock(&holder), 0);
    g_assert_true(wait_got(&r));
    g_assert_cmpint(llen(q), ==, WRITERS);
    /* The writers that never come go before the reader's unlock would
     * grant the first of them the lock. */
    nm_redis_ok(redis, "DEL %s %s", q, w);
    g_atomic_int_set(&r.release, 1);
    nm_assert_rc(nm_call_wait(c, PROMPT_MS), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&waiter), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&holder), 0);
    g_assert_true(wait_nothing_left());
    g_free(w);
    g_free(q);
    g_free(name);
}

/* Writers get the lock in the order they asked for it; the readers queued
 * behind the first of them come in together after it. */
static void test_writers_fifo(void)
{
    enum { W = 4 };
    netmutex_rwlock_t rw;
    int order[W + 2] = { 0 }, n = 0;
    char *name = rw_init(&rw, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);
    Locker holder = { .rw = &rw, .op = 'r', .id = 0, .order = order, .norder = &n };
    Locker w[W];
    NmCall *calls[W];

    NmCall *ch = nm_call_start(locker_run, &holder);
    g_assert_true(wait_got(&holder));
    for (int i = 0; i < W; i++) {
        w[i] = (Locker){ .rw = &rw, .op = 'w', .id = i + 1, .order = order, .norder = &n,
                         .hold_ms = 20 };
        calls[i] = nm_call_start(locker_run, &w[i]);
        g_assert_true(wait_queued(name, i + 1));
    }
    g_atomic_int_set(&holder.release, 1);
    nm_assert_rc(nm_call_wait(ch, PROMPT_MS), 0);
    for (int i = 0; i < W; i++)
        nm_assert_rc(nm_call_wait(calls[i], PROMPT_MS), 0);
    for (int i = 0; i < W; i++)
        g_assert_cmpint(order[i + 1], ==, i + 1);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* ---- status ------------------------------------------------------------- */

static int count_rwlock(const char *name, int kind, const netmutex_shared_status_t *st,
                        void *arg)
{
    (void)name;
    (void)st;
    if (kind == NETMUTEX_KIND_RWLOCK)
        ++*(int *)arg;
    return 0;
}

/* netmutex_rwlock_status: a reader held while a writer waits, then the
 * writer's hold; nothing written; netmutex_list_shared finds the lock. */
static void test_status(void)
{
    netmutex_rwlock_t rw;
    netmutex_shared_status_t st;
    int listed = 0;
    char *name = rw_init(&rw, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);
    Locker reader = { .rw = &rw, .op = 'r' };
    Locker writer = { .rw = &rw, .op = 'w' };

    nm_assert_rc(netmutex_rwlock_status(NULL, &st), EINVAL);
    nm_assert_rc(netmutex_rwlock_status(name, NULL), EINVAL);
    nm_assert_rc(netmutex_rwlock_status(name, &st), 0);
    g_assert_cmpuint(st.shares, ==, 0);
    g_assert_cmpint(st.writer, ==, 0);
    g_assert_cmpint(st.ttl_ms, ==, -1);
    g_assert_cmpint(nm_redis_kind_keys(redis, 'r'), ==, 0); /* status writes nothing */

    NmCall *cr = nm_call_start(locker_run, &reader);
    g_assert_true(wait_got(&reader));
    NmCall *cw = nm_call_start(locker_run, &writer);
    g_assert_true(wait_queued(name, 1));
    long long keys = nm_redis_kind_keys(redis, 'r');
    nm_assert_rc(netmutex_rwlock_status(name, &st), 0);
    g_assert_cmpuint(st.shares, ==, 1);
    g_assert_cmpint(st.writer, ==, 0);
    g_assert_cmpuint(st.writers_waiting, ==, 1);
    g_assert_cmpuint(st.waiters, ==, 0);
    g_assert_cmpuint(st.permits, ==, 0);
    nm_assert_rc(netmutex_list_shared(NULL, count_rwlock, &listed, NULL), 0);
    g_assert_cmpint(listed, ==, 1);
    g_assert_cmpint(nm_redis_kind_keys(redis, 'r'), ==, keys);

    g_atomic_int_set(&reader.release, 1);
    nm_assert_rc(nm_call_wait(cr, PROMPT_MS), 0);
    g_assert_true(wait_got(&writer));
    nm_assert_rc(netmutex_rwlock_status(name, &st), 0);
    g_assert_cmpint(st.writer, ==, 1);
    g_assert_cmpuint(st.shares, ==, 0);
    g_assert_cmpuint(st.writers_waiting, ==, 0);
    g_assert_cmpint(st.ttl_ms, >, 0);
    g_assert_cmpuint(st.fence, >, 0);
    g_assert_cmpint(st.since_ms, >, 0);
    g_assert_cmpstr(st.holder, !=, "");
    g_atomic_int_set(&writer.release, 1);
    nm_assert_rc(nm_call_wait(cw, PROMPT_MS), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    listed = 0;
    nm_assert_rc(netmutex_list_shared(NULL, count_rwlock, &listed, NULL), 0);
    g_assert_cmpint(listed, ==, 0);
    g_free(name);
}

/* ---- processes -------------------------------------------------------------- */

/* Shared memory of the processes of a test (mmap'ed before they fork). */
typedef struct Shared {
    int readers, writers;      /* inside now (atomic) */
    int max_readers;           /* the most readers seen inside at once */
    int violations;            /* a writer with company, a reader with a writer */
    long counter;              /* read-modify-written by writers, slowly */
    int writes;                /* writes done (atomic) */
    int ready;                 /* a child holds what it was told to */
    int go;                    /* the child may go on */
    int lost;                  /* lost-hold callbacks the child saw */
    uint64_t fences[64];       /* fences reported by the children, per slot */
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

typedef struct Proc {
    Shared *sh;
    const char *name;
    int kind;            /* NETMUTEX_RWLOCK_PREFER_* */
    unsigned int lease_ms;
    int rounds;
    int writer_every;    /* every Nth round writes (0: never) */
    int slot;            /* where it reports its fence */
    char op;             /* hold_and_wait: 'r' or 'w' */
} Proc;

static void proc_configure(void)
{
    nm_configure(redis);
}

static void lost_count(const char *name, void *arg)
{
    (void)name;
    Shared *sh = arg;
    __atomic_add_fetch(&sh->lost, 1, __ATOMIC_SEQ_CST);
}

static int proc_open(const Proc *pr, netmutex_rwlock_t *rw)
{
    netmutex_rwlockattr_t a;
    netmutex_rwlockattr_init(&a);
    netmutex_rwlockattr_setkind(&a, pr->kind);
    netmutex_rwlockattr_setlease(&a, pr->lease_ms);
    netmutex_rwlockattr_setlostfn(&a, lost_count, pr->sh);
    int err = netmutex_rwlock_init(rw, pr->name, &a);
    netmutex_rwlockattr_destroy(&a);
    return err;
}

static void proc_close(netmutex_rwlock_t *rw)
{
    netmutex_rwlock_destroy(rw);
    netmutex_shutdown();
}

/* Rounds of reading and writing, every entry checked against the others
 * through the shared counters. */
static int proc_mix(void *p)
{
    const Proc *pr = p;
    Shared *sh = pr->sh;
    netmutex_rwlock_t rw;
    proc_configure();
    int err = proc_open(pr, &rw);
    for (int i = 0; !err && i < pr->rounds; i++) {
        int write = pr->writer_every && i % pr->writer_every == 0;
        err = write ? netmutex_rwlock_wrlock(&rw) : netmutex_rwlock_rdlock(&rw);
        if (err)
            break;
        if (write) {
            int w = __atomic_add_fetch(&sh->writers, 1, __ATOMIC_SEQ_CST);
            if (w != 1 || __atomic_load_n(&sh->readers, __ATOMIC_SEQ_CST) != 0)
                __atomic_add_fetch(&sh->violations, 1, __ATOMIC_SEQ_CST);
            long c = sh->counter;
            nmt_sleep_ms(1);
            sh->counter = c + 1;
            __atomic_add_fetch(&sh->writes, 1, __ATOMIC_SEQ_CST);
            __atomic_sub_fetch(&sh->writers, 1, __ATOMIC_SEQ_CST);
        } else {
            int r = __atomic_add_fetch(&sh->readers, 1, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(&sh->writers, __ATOMIC_SEQ_CST) != 0)
                __atomic_add_fetch(&sh->violations, 1, __ATOMIC_SEQ_CST);
            int m = __atomic_load_n(&sh->max_readers, __ATOMIC_SEQ_CST);
            while (r > m && !__atomic_compare_exchange_n(&sh->max_readers, &m, r, 0,
                                                         __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
                ;
            nmt_sleep_ms(2);
            __atomic_sub_fetch(&sh->readers, 1, __ATOMIC_SEQ_CST);
        }
        err = netmutex_rwlock_unlock(&rw);
    }
    proc_close(&rw);
    return err ? 20 + err : 0;
}

/* Children fork from a process with no thread of the library's (see
 * nm_fork_with_threads_is_safe): this one lets its background thread go. */
static void quiesce(void)
{
    nm_assert_rc(netmutex_shutdown(), 0);
}

static void test_exclusion_processes(void)
{
    enum { PROCS = 4, ROUNDS = 40 };
    pid_t pids[PROCS];
    Shared *sh = shared_new();
    char *name = nm_test_name("rw");
    quiesce();
    for (int i = 0; i < PROCS; i++) {
        Proc pr = { .sh = sh, .name = name, .rounds = ROUNDS, .writer_every = 4 + i % 2,
                    .kind = i % 2 ? NETMUTEX_RWLOCK_PREFER_READER
                                  : NETMUTEX_RWLOCK_PREFER_WRITER };
        pids[i] = nm_fork_run(proc_mix, &pr);
    }
    for (int i = 0; i < PROCS; i++)
        nm_child_wait_ok(pids[i], nm_ms(120000));
    g_test_message("writes %d, most readers at once %d", sh->writes, sh->max_readers);
    g_assert_cmpint(sh->violations, ==, 0);
    g_assert_cmpint(sh->counter, ==, sh->writes);
    g_assert_cmpint(sh->writes, >, 0);
    nm_configure(redis);
    g_assert_true(wait_nothing_left());
    shared_free(sh);
    g_free(name);
}

/* Readers of several processes inside at once. */
static int proc_together(void *p)
{
    const Proc *pr = p;
    Shared *sh = pr->sh;
    netmutex_rwlock_t rw;
    proc_configure();
    int err = proc_open(pr, &rw);
    if (!err)
        err = netmutex_rwlock_rdlock(&rw);
    if (err)
        return 20 + err;
    __atomic_add_fetch(&sh->readers, 1, __ATOMIC_SEQ_CST);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (__atomic_load_n(&sh->readers, __ATOMIC_SEQ_CST) < pr->rounds && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    int all = __atomic_load_n(&sh->readers, __ATOMIC_SEQ_CST) >= pr->rounds;
    err = netmutex_rwlock_unlock(&rw);
    proc_close(&rw);
    return err ? 40 + err : all ? 0 : 1;
}

static void test_readers_together_processes(void)
{
    enum { PROCS = 3 };
    pid_t pids[PROCS];
    Shared *sh = shared_new();
    char *name = nm_test_name("rw");
    Proc pr = { .sh = sh, .name = name, .rounds = PROCS };
    quiesce();
    for (int i = 0; i < PROCS; i++)
        pids[i] = nm_fork_run(proc_together, &pr);
    for (int i = 0; i < PROCS; i++)
        nm_child_wait_ok(pids[i], PROMPT_MS);
    nm_configure(redis);
    g_assert_true(wait_nothing_left());
    shared_free(sh);
    g_free(name);
}

/* A child that takes OP ('r' or 'w'), says so, reports its fence, and
 * waits to be told to go on (or to be killed or stopped meanwhile).  Its
 * exit status: 0, or the unlock's result plus 100 (ENOLCK expected when
 * pr->lease_ms ran out while it was stopped), or an error. */
static int proc_hold(void *p)
{
    const Proc *pr = p;
    Shared *sh = pr->sh;
    netmutex_rwlock_t rw;
    uint64_t fence = 0;
    proc_configure();
    int err = proc_open(pr, &rw);
    if (!err)
        err = pr->op == 'w' ? netmutex_rwlock_wrlock(&rw) : netmutex_rwlock_rdlock(&rw);
    if (!err)
        err = netmutex_rwlock_fence(&rw, &fence);
    if (err)
        return 20 + err;
    sh->fences[pr->slot] = fence;
    __atomic_store_n(&sh->ready, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&sh->go, __ATOMIC_SEQ_CST))
        nmt_sleep_ms(1);
    /* Stopped past its lease: the lost-hold callback comes first. */
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (pr->lease_ms && !__atomic_load_n(&sh->lost, __ATOMIC_SEQ_CST) &&
           nmt_now_ms() < until)
        nmt_sleep_ms(1);
    err = netmutex_rwlock_unlock(&rw);
    proc_close(&rw);
    return err ? 100 + err : 0;
}

static bool wait_ready(Shared *sh)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!__atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    return __atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST);
}

static void wait_status(pid_t pid, int want)
{
    int status = 0;
    gint64 until = nmt_now_ms() + PROMPT_MS;
    pid_t got;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && nmt_now_ms() < until)
        nmt_sleep_ms(5);
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        g_assert_not_reached();
    }
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, want);
}

/* A holder killed: its hold runs out, the waiters of this process get in,
 * and nothing is left on the server.  The writer queued first normally
 * gets in first, but need not: a waiter whose refreshes came late on a
 * loaded machine is passed over once its entry is stale, as a dead one
 * is (lib.lua, Grants), so the reader lets go by itself rather than wait
 * for the writer (prefer/writer and order/writers-fifo check the order). */
static void test_killed_holder(gconstpointer data)
{
    char op = (char)GPOINTER_TO_INT(data);
    netmutex_rwlock_t rw;
    Shared *sh = shared_new();
    char *name = nm_test_name("rw");
    Proc pr = { .sh = sh, .name = name, .lease_ms = nm_ms(2000), .op = op };
    quiesce();
    pid_t pid = nm_fork_run(proc_hold, &pr);
    g_assert_true(wait_ready(sh));
    nm_configure(redis);
    nm_assert_rc(netmutex_rwlock_init(&rw, name, NULL), 0);
    /* A waiter of each kind, then the holder dies. */
    Locker w = { .rw = &rw, .op = 'w' }, r = { .rw = &rw, .op = 'r', .hold_ms = 1 };
    NmCall *cw = nm_call_start(locker_run, &w);
    g_assert_true(wait_queued(name, 1));
    NmCall *cr = nm_call_start(locker_run, &r);
    g_assert_true(wait_queued(name, 2)); /* behind the writer, either way */
    if (op == 'r')
        g_assert_true(wait_shares(name, 1));
    g_assert_cmpint(kill(pid, SIGKILL), ==, 0);
    g_assert_cmpint(waitpid(pid, NULL, 0), ==, pid);
    g_assert_true(wait_got(&w));
    g_atomic_int_set(&w.release, 1);
    nm_assert_rc(nm_call_wait(cw, PROMPT_MS), 0);
    nm_assert_rc(nm_call_wait(cr, PROMPT_MS), 0);
    g_assert_true(g_atomic_int_get(&r.got));
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    shared_free(sh);
    g_free(name);
}

/* Polls until KEY is gone; false after the bound. */
static bool wait_gone(const char *key)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    bool gone;
    while (!(gone = nm_redis_pttl(redis, key) == -2) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    return gone;
}

/* One round of test_slow_granted_writer; false when the test itself
 * stalled past the writer's entry (not the interleaving wanted). */
static bool slow_granted_writer_round(void)
{
    netmutex_rwlock_t rw;
    Shared *held = shared_new(), *waits = shared_new();
    char *name = nm_test_name("rw");
    char *k = rw_key(name, ""), *q = rw_key(name, ":q"), *w = rw_key(name, ":w");
    Proc holder = { .sh = held, .name = name, .op = 'w' };
    Proc writer = { .sh = waits, .name = name, .op = 'w' };
    quiesce();
    pid_t hpid = nm_fork_run(proc_hold, &holder);
    g_assert_true(wait_ready(held));
    pid_t wpid = nm_fork_run(proc_hold, &writer);
    g_assert_true(wait_queued(name, 1));
    g_assert_cmpint(kill(hpid, SIGKILL), ==, 0);
    g_assert_cmpint(waitpid(hpid, NULL, 0), ==, hpid);

    /* The waiting writer stopped just after a refresh of its entry; then
     * the killed holder's lease runs out (K expires with it). */
    char *token = nm_redis_string(redis, "LINDEX %s 0", q);
    g_assert_nonnull(token);
    char *was = nm_redis_string(redis, "HGET %s %s", w, token);
    char *entry = nm_redis_wait_refresh(redis, w, token, was, PROMPT_MS);
    g_assert_nonnull(entry);
    g_assert_cmpint(kill(wpid, SIGSTOP), ==, 0);
    nm_redis_ok(redis, "DEL %s", k);

    /* A reader's try is the first request to find the lock free: it grants
     * the writer (K reserved for it) and stays out.  The writer does not
     * confirm within its claim, which runs out; a reader's next try finds
     * the lock free again, the writer still waiting and live. */
    nm_configure(redis);
    nm_assert_rc(netmutex_rwlock_init(&rw, name, NULL), 0);
    int first = netmutex_rwlock_tryrdlock(&rw), second = EBUSY;
    char *reserved = nm_redis_string(redis, "GET %s", k);
    if (first == EBUSY) {
        g_assert_true(wait_gone(k));
        second = netmutex_rwlock_tryrdlock(&rw);
    }
    long long age = nm_redis_time_ms(redis) - nm_entry_written_ms(entry);
    bool driven = age >= 0 && age < NM_TEST_ENTRY_LIFE_MS;
    if (driven) {
        /* It keeps its turn: granted again, and no reader gets in ahead. */
        nm_assert_rc(first, EBUSY);
        g_assert_true(reserved && g_str_has_prefix(reserved, token));
        nm_assert_rc(second, EBUSY);
        g_assert_cmpint(queued_of(name), ==, 1);
    } else {
        g_test_message("the test stalled %lld ms: round run again", age);
    }
    for (int i = 0; i < (first == 0) + (second == 0); i++)
        nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);

    /* Resumed, the writer gets the lock. */
    g_assert_cmpint(kill(wpid, SIGCONT), ==, 0);
    g_assert_true(wait_ready(waits));
    __atomic_store_n(&waits->go, 1, __ATOMIC_SEQ_CST);
    nm_child_wait_ok(wpid, PROMPT_MS);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    g_free(reserved);
    g_free(entry);
    g_free(was);
    g_free(token);
    g_free(w);
    g_free(q);
    g_free(k);
    shared_free(waits);
    shared_free(held);
    g_free(name);
    return driven;
}

/* A writer granted the lock after its holder was killed (the lease ran
 * out, nobody released it) that is slow to confirm -- stopped, or not
 * scheduled on a loaded machine -- past its grant's claim: it was dropped
 * from the queue when granted, so the readers queued behind it got in
 * first and the writer waited for all of them (test_killed_holder's
 * writer waited for its reader, which waited for it).  It must keep its
 * turn while it is live: granted again once (rwlock.lua, grant_write). */
static void test_slow_granted_writer(void)
{
    enum { ROUNDS = 5 };
    bool driven = false;
    /* The rounds act within the library's own window (a grant's 150 ms
     * claim), which no slowdown stretches:
     * under valgrind a child's steps alone take longer.  Plain, ASan and
     * TSan run it. */
    if (g_getenv("VALGRIND")) {
        g_test_skip("acts within the library's unscaled windows: not under valgrind");
        return;
    }
    for (int i = 0; i < ROUNDS && !driven && !g_test_failed(); i++)
        driven = slow_granted_writer_round();
    g_assert_true(driven);
}

/* Waiter TOKEN (process PID) stopped with SIGSTOP just after a refresh
 * of its queue entry in W; returns the entry's time (the server's ms). */
static long long stop_after_refresh(pid_t pid, const char *w, const char *token)
{
    char *was = nm_redis_string(redis, "HGET %s %s", w, token);
    char *entry = nm_redis_wait_refresh(redis, w, token, was, PROMPT_MS);
    g_assert_nonnull(entry);
    g_assert_cmpint(kill(pid, SIGSTOP), ==, 0);
    long long at = entry ? nm_entry_written_ms(entry) : 0;
    g_free(entry);
    g_free(was);
    return at;
}

/* Queue entry TOKEN of W ends a moment ago (lib.lua, Waiting), the rest
 * of it kept. */
static void make_stale(const char *w, const char *token)
{
    char *entry = nm_redis_string(redis, "HGET %s %s", w, token);
    g_assert_nonnull(entry);
    const char *rest = strchr(entry, ':');
    g_assert_nonnull(rest);
    char *stale = g_strdup_printf("%lld%s", nm_redis_time_ms(redis) - 1, rest);
    nm_redis_ok(redis, "HSET %s %s %s", w, token, stale);
    g_free(stale);
    g_free(entry);
}

/* One round of test_late_refresh; false when the test itself stalled
 * past the reader's entry (not the interleaving wanted). */
static bool late_refresh_round(void)
{
    Shared *held = shared_new(), *wsh = shared_new(), *rsh = shared_new();
    char *name = nm_test_name("rw");
    Proc holder = { .sh = held, .name = name, .op = 'w' };
    Proc writer = { .sh = wsh, .name = name, .op = 'w' };
    Proc reader = { .sh = rsh, .name = name, .op = 'r' };
    quiesce();
    pid_t hpid = nm_fork_run(proc_hold, &holder);
    g_assert_true(wait_ready(held));
    pid_t wpid = nm_fork_run(proc_hold, &writer);
    g_assert_true(wait_queued(name, 1));
    pid_t rpid = nm_fork_run(proc_hold, &reader);
    g_assert_true(wait_queued(name, 2));
    /* The keys' names only now: a child forked with one held in nothing
     * but a register of ours counts it lost under memcheck. */
    char *k = rw_key(name, ""), *q = rw_key(name, ":q"), *w = rw_key(name, ":w");
    g_assert_cmpint(kill(hpid, SIGKILL), ==, 0);
    g_assert_cmpint(waitpid(hpid, NULL, 0), ==, hpid);

    /* Both stopped just after a look; the writer's entry then made stale
     * (its end moved to the past: what a look that came late leaves), the
     * reader's live, when the holder's lease runs out (K expires with it)
     * and the writer, resumed, makes the first request after. */
    char *wtok = nm_redis_string(redis, "LINDEX %s 0", q);
    char *rtok = nm_redis_string(redis, "LINDEX %s 1", q);
    g_assert_nonnull(wtok);
    g_assert_nonnull(rtok);
    stop_after_refresh(wpid, w, wtok);
    long long rat = stop_after_refresh(rpid, w, rtok);
    make_stale(w, wtok);
    nm_redis_ok(redis, "DEL %s", k);
    g_assert_cmpint(kill(wpid, SIGCONT), ==, 0);
    g_assert_true(wait_ready(wsh));
    long long age = nm_redis_time_ms(redis) - rat;
    bool driven = age >= 0 && age < NM_TEST_ENTRY_LIFE_MS;
    if (driven) {
        /* The writer got in first, itself: the reader was not granted
         * (it is still queued, behind nobody). */
        g_assert_cmpint(queued_of(name), ==, 1);
        char *head = nm_redis_string(redis, "LINDEX %s 0", q);
        g_assert_cmpstr(head, ==, rtok);
        g_free(head);
    } else {
        g_test_message("the test stalled %lld ms: round run again", age);
    }

    __atomic_store_n(&wsh->go, 1, __ATOMIC_SEQ_CST);
    nm_child_wait_ok(wpid, PROMPT_MS);
    g_assert_cmpint(kill(rpid, SIGCONT), ==, 0);
    g_assert_true(wait_ready(rsh));
    __atomic_store_n(&rsh->go, 1, __ATOMIC_SEQ_CST);
    nm_child_wait_ok(rpid, PROMPT_MS);
    nm_configure(redis);
    g_assert_true(wait_nothing_left());
    g_free(rtok);
    g_free(wtok);
    g_free(w);
    g_free(q);
    g_free(k);
    shared_free(rsh);
    shared_free(wsh);
    shared_free(held);
    g_free(name);
    return driven;
}

/* A waiter whose refresh came late -- its entry older than an entry's
 * life, on a loaded machine where its wait's answer came late -- makes the
 * first request after the holder's lease ran out: it must not take itself
 * for a dead waiter.  Its own attempt dropped it from the queue and granted
 * the reader behind it, and the writer queued again behind that reader
 * (how test_killed_holder's writer once waited to its bound). */
static void test_late_refresh(void)
{
    enum { ROUNDS = 5 };
    bool driven = false;
    for (int i = 0; i < ROUNDS && !driven && !g_test_failed(); i++)
        driven = late_refresh_round();
    g_assert_true(driven);
}

/* A reader stopped (SIGSTOP) past its lease: a writer gets in once the
 * share ran out, and the reader, resumed, is told it lost its hold: the
 * lost-hold callback, then ENOLCK from its unlock. */
static void test_stopped_reader_lost(void)
{
    netmutex_rwlock_t rw;
    Shared *sh = shared_new();
    char *name = nm_test_name("rw");
    Proc pr = { .sh = sh, .name = name, .lease_ms = nm_ms(400), .op = 'r' };
    quiesce();
    pid_t pid = nm_fork_run(proc_hold, &pr);
    g_assert_true(wait_ready(sh));
    g_assert_cmpint(kill(pid, SIGSTOP), ==, 0);
    nm_configure(redis);
    nm_assert_rc(netmutex_rwlock_init(&rw, name, NULL), 0);
    nm_assert_rc(netmutex_rwlock_wrlock(&rw), 0);
    g_assert_cmpint(shares_of(name), ==, 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    g_assert_cmpint(kill(pid, SIGCONT), ==, 0);
    wait_status(pid, 100 + ENOLCK);
    g_assert_cmpint(sh->lost, ==, 1);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    shared_free(sh);
    g_free(name);
}

/* Fences: every writer's greater than every earlier one's, in any process;
 * a reader's between the writers around it. */
static void test_fences(void)
{
    netmutex_rwlock_t rw;
    uint64_t w1, r1, r2, w2, w3;
    Shared *sh = shared_new();
    char *name = rw_init(&rw, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);

    nm_assert_rc(netmutex_rwlock_wrlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_fence(&rw, &w1), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_fence(&rw, &r1), 0);
    nm_assert_rc(netmutex_rwlock_tryrdlock(&rw), 0); /* the same hold, the same fence */
    nm_assert_rc(netmutex_rwlock_fence(&rw, &r2), 0);
    g_assert_cmpuint(r1, ==, r2);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    g_assert_cmpuint(r1, >, w1);

    /* Another process writes, then reads. */
    quiesce();
    Proc pr = { .sh = sh, .name = name, .op = 'w', .slot = 0 };
    pid_t pid = nm_fork_run(proc_hold, &pr);
    g_assert_true(wait_ready(sh));
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    nm_child_wait_ok(pid, PROMPT_MS);
    sh->ready = sh->go = 0;
    pr.op = 'r';
    pr.slot = 1;
    pid = nm_fork_run(proc_hold, &pr);
    g_assert_true(wait_ready(sh));
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    nm_child_wait_ok(pid, PROMPT_MS);
    w2 = sh->fences[0];
    g_assert_cmpuint(w2, >, r1);
    g_assert_cmpuint(sh->fences[1], >, w2);

    nm_configure(redis);
    nm_assert_rc(netmutex_rwlock_wrlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_fence(&rw, &w3), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    g_assert_cmpuint(w3, >, sh->fences[1]);

    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    shared_free(sh);
    g_free(name);
}

/* ---- leases ------------------------------------------------------------------ */

/* Holds outlive their leases while their holders live: the background
 * thread renews a share and the write lock (renew.lua), and netmutex_
 * configure refuses to pull the configuration from under them. */
static void test_holds_renewed(void)
{
    netmutex_rwlock_t rw;
    netmutex_config_t cfg = { 0 };
    char *name = rw_init(&rw, "rw", NETMUTEX_RWLOCK_DEFAULT, nm_ms(1200));
    char *s = rw_key(name, ":s"), *k = rw_key(name, "");
    Locker r = { .rw = &rw, .op = 'r' };

    NmCall *c = nm_call_start(locker_run, &r);
    g_assert_true(wait_got(&r));
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0);
    nm_assert_rc(netmutex_configure(&cfg), EBUSY);
    nmt_sleep_ms(nm_ms(3000));
    g_assert_cmpint(zcard(s), ==, 2);
    long long pttl = nm_redis_pttl(redis, s);
    g_assert_cmpint(pttl, >, 0);
    g_assert_cmpint(pttl, <=, nm_ms(1200));
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    g_atomic_int_set(&r.release, 1);
    nm_assert_rc(nm_call_wait(c, PROMPT_MS), 0);
    g_assert_cmpint(zcard(s), ==, 0); /* the set went with its last share */

    nm_assert_rc(netmutex_rwlock_wrlock(&rw), 0);
    nmt_sleep_ms(nm_ms(3000));
    char *token = nm_redis_get(redis, 0, k, strlen(k));
    g_assert_nonnull(token);
    g_assert_true(nm_is_token(token));
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    g_free(token);
    g_free(k);
    g_free(s);
    g_free(name);
}

/* A key of the lock's that is not what the script expects: EPROTO, and
 * nothing written. */
static void test_wrong_type_eproto(void)
{
    netmutex_rwlock_t rw;
    char *name = rw_init(&rw, "rw", NETMUTEX_RWLOCK_DEFAULT, 0);
    char *s = rw_key(name, ":s"), *k = rw_key(name, "");
    nm_redis_ok(redis, "SET %s x", s);
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), EPROTO);
    nm_assert_rc(netmutex_rwlock_trywrlock(&rw), EPROTO);
    g_assert_null(nm_redis_get(redis, 0, k, strlen(k)));
    nm_redis_ok(redis, "DEL %s", s);
    nm_redis_ok(redis, "SET %s not-a-lock", k);
    nm_assert_rc(netmutex_rwlock_tryrdlock(&rw), EPROTO);
    nm_redis_ok(redis, "DEL %s", k);
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    g_free(k);
    g_free(s);
    g_free(name);
}

/* A process that exits while a thread of it waits in the queue takes it
 * out on its way (exit()'s handlers): nothing is left queued when it is
 * gone.  The child is forked before the parent takes the write lock, from
 * a process with no thread of the library's (see quiesce): forked while
 * the holder's lease was renewed, its first thread once hung in ASan's
 * allocator.  go is 1 once the parent holds, 2 when the child may exit. */
static void *proc_wait_thread(void *p)
{
    netmutex_rwlock_rdlock(p);
    return NULL;
}

static void wait_go(const Shared *sh, int phase)
{
    while (__atomic_load_n(&sh->go, __ATOMIC_SEQ_CST) < phase)
        nmt_sleep_ms(1);
}

static int proc_exit_while_queued(void *p)
{
    const Proc *pr = p;
    netmutex_rwlock_t rw;
    pthread_t t;
    proc_configure();
    if (proc_open(pr, &rw))
        return 10;
    wait_go(pr->sh, 1);
    if (pthread_create(&t, NULL, proc_wait_thread, &rw))
        return 11;
    wait_go(pr->sh, 2);
    exit(0);
}

static void test_exit_leaves_queue(void)
{
    netmutex_rwlock_t rw;
    Shared *sh = shared_new();
    char *name = nm_test_name("rw");
    Proc pr = { .sh = sh, .name = name };
    quiesce();
    pid_t pid = nm_fork_run_unchecked(proc_exit_while_queued, &pr);
    nm_configure(redis);
    nm_assert_rc(netmutex_rwlock_init(&rw, name, NULL), 0);
    nm_assert_rc(netmutex_rwlock_wrlock(&rw), 0);
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    g_assert_true(wait_queued(name, 1));
    __atomic_store_n(&sh->go, 2, __ATOMIC_SEQ_CST);
    nm_child_wait_ok(pid, PROMPT_MS);
    g_assert_cmpint(queued_of(name), ==, 0);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), 0);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    g_assert_true(wait_nothing_left());
    shared_free(sh);
    g_free(name);
}

/* ---- quorum mode ---------------------------------------------------------- */

static void test_quorum_enotsup(void)
{
    netmutex_rwlock_t rw;
    const char *sock = nm_redis_socket(redis);
    char *url = g_strdup_printf("unix://%s?db=1,unix://%s?db=2,unix://%s?db=3", sock, sock,
                                sock);
    netmutex_config_t cfg = { .url = url };
    char *name = nm_test_name("rw");
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_rwlock_init(&rw, name, NULL), 0);
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), ENOTSUP);
    nm_assert_rc(netmutex_rwlock_tryrdlock(&rw), ENOTSUP);
    nm_assert_rc(netmutex_rwlock_wrlock(&rw), ENOTSUP);
    nm_assert_rc(netmutex_rwlock_trywrlock(&rw), ENOTSUP);
    nm_assert_rc(netmutex_rwlock_unlock(&rw), EPERM);
    nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
    netmutex_shared_status_t st;
    nm_assert_rc(netmutex_rwlock_status(name, &st), ENOTSUP);
    nm_configure(redis);
    g_free(url);
    g_free(name);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/rwlock/args/bad", test_bad_arguments);
    g_test_add_func("/rwlock/status", test_status);
    g_test_add_func("/rwlock/args/static-initializer", test_static_initializer);
    g_test_add_func("/rwlock/threads/relock", test_relock);
    g_test_add_func("/rwlock/threads/try-busy", test_try_busy);
    g_test_add_data_func("/rwlock/timed/realtime", GINT_TO_POINTER(CLOCK_REALTIME),
                         test_timed_out);
    g_test_add_data_func("/rwlock/timed/monotonic", GINT_TO_POINTER(CLOCK_MONOTONIC),
                         test_timed_out);
    g_test_add_func("/rwlock/threads/readers-together", test_readers_together_threads);
    g_test_add_data_func("/rwlock/prefer/writer", GINT_TO_POINTER(NETMUTEX_RWLOCK_PREFER_WRITER),
                         test_preference);
    g_test_add_data_func("/rwlock/prefer/reader", GINT_TO_POINTER(NETMUTEX_RWLOCK_PREFER_READER),
                         test_preference);
    g_test_add_func("/rwlock/prefer/reader-after-writer", test_reader_preference_after_writer);
    g_test_add_func("/rwlock/prefer/reader-gives-up", test_reader_preference_gives_up);
    g_test_add_func("/rwlock/prefer/reader-behind-long-queue", test_reader_preference_long_queue);
    g_test_add_func("/rwlock/order/writers-fifo", test_writers_fifo);
    g_test_add_func("/rwlock/processes/readers-together", test_readers_together_processes);
    g_test_add_func("/rwlock/processes/exclusion", test_exclusion_processes);
    g_test_add_data_func("/rwlock/processes/killed-reader", GINT_TO_POINTER('r'),
                         test_killed_holder);
    g_test_add_data_func("/rwlock/processes/killed-writer", GINT_TO_POINTER('w'),
                         test_killed_holder);
    g_test_add_func("/rwlock/processes/stopped-reader-lost", test_stopped_reader_lost);
    g_test_add_func("/rwlock/processes/slow-granted-writer", test_slow_granted_writer);
    g_test_add_func("/rwlock/processes/late-refresh", test_late_refresh);
    g_test_add_func("/rwlock/fences", test_fences);
    g_test_add_func("/rwlock/lease/renewed", test_holds_renewed);
    g_test_add_func("/rwlock/args/wrong-type-eproto", test_wrong_type_eproto);
    g_test_add_func("/rwlock/processes/exit-leaves-queue", test_exit_leaves_queue);
    g_test_add_func("/rwlock/quorum/enotsup", test_quorum_enotsup);

    int rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
