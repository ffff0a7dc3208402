/*
 * test_cond.c -- condition variables across threads and processes
 * (netmutex_cond_*), against a private server.
 *
 * Covered: the argument checks and their errno values (a statically
 * initialized condition's too); signal wakes one waiter and broadcast
 * all, threads and processes; a producer/consumer
 * queue across processes (with lease caching on, the default) that loses
 * no wake-up, checked by a counter at the end; timedwait's ETIMEDOUT at
 * its deadline with the mutex held again; a waiter signalled as its
 * deadline passed returns 0, also when the answer to its leaving is lost
 * (the server applied it); one signalled without the push that wakes it
 * learns it at its next look; a waiter killed with SIGKILL swallows no
 * signal and leaves nothing on the server; a robust mutex's EOWNERDEAD
 * after a wait; a lease cached by the waiting process given back by the
 * wait, taken by another process that signals; quorum mode's ENOTSUP; a
 * thread cancelled while it blocks in a wait runs its clean-up handler
 * with the mutex held, leaves nothing of the condition on the server, and
 * a signal afterwards wakes the next waiter; a signal given while the
 * mutex is held reaches the waiter when its process is killed before it
 * unlocks, and with lease caching on when the signalling thread stays
 * idle after its unlock; a signal from a thread that holds no lock waits
 * for its answer, and one from a thread that holds only a read share,
 * the write lock or a semaphore permit, whose request was cut, is sent
 * again by the unlock or post; a signal from a process whose own lease
 * is much shorter than the waiters', whose chosen waiter is stopped past
 * its lease, goes on to the other waiter; a user whose rule lacks BLPOP
 * wakes at once, and the server's refusal is logged in its words.
 */
#include "ac_config.h"

#include "fixture.h"
#include "proxy.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static NmRedis *redis;

#define PROMPT_MS nm_ms(30000)

/* ---- helpers ------------------------------------------------------------ */

/* The key <prefix>{c<tag>}NAME:SUFFIX of condition NAME: the mutex's key
 * of the same name has the tag {<tag>}. */
static char *cond_key(const char *name, const char *suffix)
{
    char *lock = nm_lock_key(name); /* netmutex:{<tag>}NAME */
    const char *brace = strchr(lock, '{');
    char *key = g_strdup_printf("%.*s{c%s%s", (int)(brace - lock), lock, brace + 1, suffix);
    g_free(lock);
    return key;
}

static long long llen(const char *key)
{
    redisReply *r = nm_redis_cmd(redis, "LLEN %s", key);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

/* Waiter TOKEN marked signalled in CS, the set of signalled waiters, as
 * cond.lua does: scored by when its CH entry ENTRY ("s:<expires>:<lease>")
 * expires. */
static void mark_signalled(const char *cs, const char *token, const char *entry)
{
    long long expires = g_ascii_strtoll(entry + 2, NULL, 10);
    nm_redis_ok(redis, "ZADD %s %lld %s", cs, expires, token);
}

/* How many members the sorted set KEY has (-1: another type). */
static long long zcard(const char *key)
{
    redisReply *r = nm_redis_cmd(redis, "ZCARD %s", key);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

/* Polls until condition NAME has N waiters not signalled yet (CW). */
static bool wait_waiters(const char *name, long long n)
{
    char *cw = cond_key(name, ":cw");
    gint64 until = nmt_now_ms() + PROMPT_MS;
    bool ok;
    while (!(ok = llen(cw) == n) && nmt_now_ms() < until)
        nmt_sleep_ms(2);
    g_free(cw);
    return ok;
}

static bool wait_nothing_left(void)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (nm_redis_kind_keys(redis, 'c') != 0 && nmt_now_ms() < until)
        nmt_sleep_ms(10);
    return nm_redis_kind_keys(redis, 'c') == 0;
}

/* ---- arguments --------------------------------------------------------- */

static void test_bad_arguments(void)
{
    netmutex_cond_t c, zero;
    netmutex_condattr_t a;
    netmutex_t m;
    struct timespec ts = { 0, 0 }, bad = { 0, 1000000000 };
    clockid_t clk;
    char *name = nm_test_name("c");
    char *mname = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    memset(&zero, 0, sizeof zero);
    nm_assert_rc(netmutex_condattr_init(NULL), EINVAL);
    nm_assert_rc(netmutex_condattr_init(&a), 0);
    nm_assert_rc(netmutex_condattr_getclock(&a, &clk), 0);
    g_assert_cmpint(clk, ==, CLOCK_REALTIME);
    nm_assert_rc(netmutex_condattr_setclock(&a, CLOCK_PROCESS_CPUTIME_ID), EINVAL);
    nm_assert_rc(netmutex_condattr_setclock(&a, CLOCK_MONOTONIC), 0);
    nm_assert_rc(netmutex_condattr_getclock(&a, NULL), EINVAL);

    nm_assert_rc(netmutex_cond_init(NULL, name, NULL), EINVAL);
    nm_assert_rc(netmutex_cond_init(&c, NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_cond_init(&c, "", NULL), EINVAL);
    nm_assert_rc(netmutex_cond_init(&c, name, &a), 0);
    nm_assert_rc(netmutex_condattr_destroy(&a), 0);
    nm_assert_rc(netmutex_condattr_destroy(&a), EINVAL);
    nm_assert_rc(netmutex_cond_init(&zero, name, &a), EINVAL); /* destroyed attr */

    nm_assert_rc(netmutex_cond_signal(NULL), EINVAL);
    nm_assert_rc(netmutex_cond_signal(&zero), EINVAL);
    nm_assert_rc(netmutex_cond_broadcast(&zero), EINVAL);
    nm_assert_rc(netmutex_cond_wait(&zero, &m), EINVAL);
    nm_assert_rc(netmutex_cond_wait(&c, NULL), EINVAL);
    /* Not holding the mutex: EPERM, nothing registered. */
    nm_assert_rc(netmutex_cond_wait(&c, &m), EPERM);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_cond_timedwait(&c, &m, NULL), EINVAL);
    nm_assert_rc(netmutex_cond_timedwait(&c, &m, &bad), EINVAL);
    nm_assert_rc(netmutex_cond_clockwait(&c, &m, CLOCK_PROCESS_CPUTIME_ID, &ts), EINVAL);
    /* A deadline passed long ago: ETIMEDOUT at once, still held. */
    nm_assert_rc(netmutex_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
    nm_assert_rc(netmutex_unlock(&m), 0);
    /* A signal with nobody waiting is fine, and not remembered. */
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    nm_assert_rc(netmutex_cond_broadcast(&c), 0);
    g_assert_cmpint(nm_redis_kind_keys(redis, 'c'), ==, 0);

    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_cond_destroy(&c), EINVAL);
    nm_assert_rc(netmutex_cond_signal(&c), EINVAL);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(mname);
    g_free(name);
}

/* The static initializer: the record is made on first use, from a name
 * a mutex could have (an oversized one is EINVAL, as for a mutex). */
static void test_static_initializer(void)
{
    char *name = nm_test_name("c");
    char *mname;
    char big[NETMUTEX_NAME_MAX + 2];
    netmutex_t m;
    struct timespec past = { 0, 0 };
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    netmutex_cond_t c = NETMUTEX_COND_INITIALIZER(name);
    netmutex_cond_t null = NETMUTEX_COND_INITIALIZER(NULL);
    netmutex_cond_t empty = NETMUTEX_COND_INITIALIZER("");
    netmutex_cond_t oversized = NETMUTEX_COND_INITIALIZER(big);
    mname = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    nm_assert_rc(netmutex_cond_signal(&null), EINVAL);
    nm_assert_rc(netmutex_cond_broadcast(&empty), EINVAL);
    nm_assert_rc(netmutex_cond_signal(&oversized), EINVAL);
    nm_assert_rc(netmutex_cond_destroy(&oversized), EINVAL);
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_cond_timedwait(&c, &m, &past), ETIMEDOUT); /* its clock: realtime */
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_cond_destroy(&c), EINVAL);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(mname);
    g_free(name);
}

/* A recursive mutex locked twice cannot be waited with. */
static void test_recursive_twice(void)
{
    netmutex_cond_t c;
    netmutex_t m;
    char *name = nm_test_name("c");
    char *mname = nm_mutex_init(&m, "m", NETMUTEX_RECURSIVE, 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_cond_wait(&c, &m), EINVAL);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(mname);
    g_free(name);
}

/* ---- threads -------------------------------------------------------------- */

typedef struct Waiter {
    netmutex_cond_t *c;
    netmutex_t *m;
    unsigned int timeout_ms; /* 0: untimed */
    int woke;                /* atomic: the wait returned */
} Waiter;

/* One wait under the mutex (timed if TIMEOUT_MS); the first error. */
static int waiter_run(void *p)
{
    Waiter *w = p;
    struct timespec ts;
    int err = netmutex_lock(w->m);
    if (err)
        return err;
    if (w->timeout_ms) {
        nm_deadline(&ts, CLOCK_REALTIME, w->timeout_ms);
        err = netmutex_cond_timedwait(w->c, w->m, &ts);
    } else {
        err = netmutex_cond_wait(w->c, w->m);
    }
    g_atomic_int_set(&w->woke, 1);
    int uerr = netmutex_unlock(w->m);
    return err ? err : uerr;
}

static void test_signal_one_broadcast_all_threads(void)
{
    enum { N = 3 };
    netmutex_cond_t c;
    netmutex_t m;
    Waiter w[N];
    NmCall *calls[N];
    char *name = nm_test_name("c");
    char *mname = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);

    for (int i = 0; i < N; i++) {
        w[i] = (Waiter){ .c = &c, .m = &m };
        calls[i] = nm_call_start(waiter_run, &w[i]);
    }
    g_assert_true(wait_waiters(name, N));
    nm_assert_rc(netmutex_cond_destroy(&c), EBUSY);
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    g_assert_true(wait_waiters(name, N - 1));
    /* Exactly one wakes; the others keep waiting. */
    gint64 until = nmt_now_ms() + PROMPT_MS;
    int woke = 0;
    while (woke == 0 && nmt_now_ms() < until) {
        nmt_sleep_ms(2);
        for (int i = 0; i < N; i++)
            woke += g_atomic_int_get(&w[i].woke);
    }
    g_assert_cmpint(woke, ==, 1);
    nmt_sleep_ms(nm_ms(100));
    woke = 0;
    for (int i = 0; i < N; i++)
        woke += g_atomic_int_get(&w[i].woke);
    g_assert_cmpint(woke, ==, 1);

    nm_assert_rc(netmutex_cond_broadcast(&c), 0);
    for (int i = 0; i < N; i++)
        nm_assert_rc(nm_call_wait(calls[i], PROMPT_MS), 0);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(mname);
    g_free(name);
}

/* ---- timeouts ------------------------------------------------------------ */

static void test_timedwait_times_out(gconstpointer data)
{
    clockid_t clock = GPOINTER_TO_INT(data);
    netmutex_cond_t c;
    netmutex_condattr_t a;
    netmutex_t m;
    struct timespec deadline, returned;
    char *name = nm_test_name("c");
    char *mname = nm_mutex_init(&m, "m", NETMUTEX_ERRORCHECK, 0);
    nm_assert_rc(netmutex_condattr_init(&a), 0);
    nm_assert_rc(netmutex_condattr_setclock(&a, clock), 0);
    nm_assert_rc(netmutex_cond_init(&c, name, &a), 0);

    nm_assert_rc(netmutex_lock(&m), 0);
    nm_deadline(&deadline, clock, 200);
    nm_assert_rc(netmutex_cond_timedwait(&c, &m, &deadline), ETIMEDOUT);
    clock_gettime(clock, &returned);
    /* Generous: 72 ms late was seen at a load of 10 on 2 cores. */
    nm_assert_timed_out_at(&returned, &deadline, nm_ms(500));
    /* Held again: an ERRORCHECK relock says so. */
    nm_assert_rc(netmutex_trylock(&m), EBUSY);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_cmpint(nm_redis_kind_keys(redis, 'c'), ==, 0);

    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(mname);
    g_free(name);
}

/* Signalled as it timed out: chosen by a signal whose push it never saw
 * (made by hand here, as the signal script does it), the waiter that
 * times out returns 0, so the signal is not lost. */
static void test_signalled_at_timeout_returns_0(void)
{
    netmutex_cond_t c;
    netmutex_t m;
    char *name = nm_test_name("c");
    char *mname = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *cw = cond_key(name, ":cw"), *cs = cond_key(name, ":cs"), *ch = cond_key(name, ":ch");
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    Waiter w = { .c = &c, .m = &m, .timeout_ms = nm_ms(500) };
    NmCall *call = nm_call_start(waiter_run, &w);
    g_assert_true(wait_waiters(name, 1));

    redisReply *r = nm_redis_cmd(redis, "LPOP %s", cw);
    g_assert_cmpint(r->type, ==, REDIS_REPLY_STRING);
    redisReply *e = nm_redis_cmd(redis, "HGET %s %s", ch, r->str);
    g_assert_cmpint(e->type, ==, REDIS_REPLY_STRING);
    g_assert_cmpint(e->str[0], ==, 'w');
    e->str[0] = 's';
    nm_redis_ok(redis, "HSET %s %s %s", ch, r->str, e->str);
    mark_signalled(cs, r->str, e->str);
    freeReplyObject(e);
    freeReplyObject(r);

    nm_assert_rc(nm_call_wait(call, PROMPT_MS), 0);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(cw);
    g_free(cs);
    g_free(ch);
    g_free(mname);
    g_free(name);
}

/* What the signalling thread holds in the case below, and nothing else:
 * the condition's mutex ('m'), a read share ('r'), the write lock ('w')
 * of a read-write lock, or a permit ('p') of a semaphore. */
typedef struct OnlyHold {
    char kind;
    netmutex_t *m;
    netmutex_rwlock_t rw;
    netmutex_sem_t s;
} OnlyHold;

static void only_hold_init(OnlyHold *h, const char *name)
{
    if (h->kind == 'm')
        return;
    char *own = g_strconcat(name, h->kind == 'p' ? "/s" : "/rw", NULL);
    if (h->kind == 'p')
        nm_assert_rc(netmutex_sem_init(&h->s, own, 1, NULL), 0);
    else
        nm_assert_rc(netmutex_rwlock_init(&h->rw, own, NULL), 0);
    g_free(own);
}

static int only_hold_take(OnlyHold *h)
{
    return h->kind == 'm'   ? netmutex_lock(h->m)
           : h->kind == 'p' ? netmutex_sem_wait(&h->s)
           : h->kind == 'r' ? netmutex_rwlock_rdlock(&h->rw)
                            : netmutex_rwlock_wrlock(&h->rw);
}

static int only_hold_give_back(OnlyHold *h)
{
    return h->kind == 'm'   ? netmutex_unlock(h->m)
           : h->kind == 'p' ? netmutex_sem_post(&h->s)
                            : netmutex_rwlock_unlock(&h->rw);
}

static void only_hold_destroy(OnlyHold *h)
{
    if (h->kind == 'm')
        return;
    if (h->kind == 'p')
        nm_assert_rc(netmutex_sem_destroy(&h->s), 0);
    else
        nm_assert_rc(netmutex_rwlock_destroy(&h->rw), 0);
}

/* The signal's request never reaches the server: its connection breaks
 * after the request was written and before the server read it (a CLIENT
 * KILL, a dropped link).  A signal from a thread that holds anything --
 * the condition's mutex, a read share, the write lock or a semaphore
 * permit -- goes without waiting for its answer, so the call that gives
 * that hold back settles it: it reads the broken connection and sends
 * the signal again on a new one, and the waiter wakes long before its
 * deadline.  (A signal that returned once written lost it silently; read-
 * write lock and semaphore calls that never settled one left it unsent:
 * the wait timed out.) */
static void test_signal_cut_holding_only(gconstpointer data)
{
    NmProxy *px = nm_proxy_start(redis);
    char *url = nm_redis_proxy_url(redis, nm_proxy_port(px));
    netmutex_config_t cfg = { .url = url };
    netmutex_cond_t c;
    netmutex_t m;
    OnlyHold h = { .kind = *(const char *)data, .m = &m };
    char *name = nm_test_name("c");
    nm_assert_rc(netmutex_configure(&cfg), 0);
    char *mname = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    only_hold_init(&h, name);
    /* The signalling thread's connection has run the condition's script. */
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    Waiter w = { .c = &c, .m = &m, .timeout_ms = nm_ms(8000) };
    NmCall *call = nm_call_start(waiter_run, &w);
    g_assert_true(wait_waiters(name, 1));

    nm_assert_rc(only_hold_take(&h), 0);
    /* A signal: the keys CW, CS, CH, then the operation 's'. */
    nm_proxy_cut_request(px, ":ch\r\n$1\r\ns\r\n");
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    nm_assert_rc(only_hold_give_back(&h), 0);
    g_assert_cmpuint(nm_proxy_cuts(px), ==, 1);
    nm_assert_rc(nm_call_wait(call, PROMPT_MS), 0);

    g_assert_true(wait_nothing_left());
    only_hold_destroy(&h);
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_configure(redis);
    nm_proxy_free(px);
    g_free(url);
    g_free(mname);
    g_free(name);
}

/* For the case below: a first wait, short, so that the thread's
 * connection has run the condition's script (a registration rides with
 * the release only there); then the mutex again and, once told, the wait
 * of the case. */
typedef struct Warmed {
    Waiter w;
    int locked, go; /* atomic */
} Warmed;

static int warmed_run(void *p)
{
    Warmed *x = p;
    struct timespec ts;
    int err = netmutex_lock(x->w.m);
    if (err)
        return err;
    nm_deadline(&ts, CLOCK_REALTIME, 20);
    err = netmutex_cond_timedwait(x->w.c, x->w.m, &ts);
    if (err != ETIMEDOUT && err != 0)
        return err;
    g_atomic_int_set(&x->locked, 1);
    while (!g_atomic_int_get(&x->go))
        nmt_sleep_ms(1);
    nm_deadline(&ts, CLOCK_REALTIME, x->w.timeout_ms);
    err = netmutex_cond_timedwait(x->w.c, x->w.m, &ts);
    int uerr = netmutex_unlock(x->w.m);
    return err ? err : uerr;
}

/* The write that registers the waiter and releases the mutex never
 * reaches the server: its connection breaks.  The release goes again
 * alone, so the waiter is not registered while the mutex is free, and
 * a broadcast given then, before the deadline, reaches nobody: the wait
 * must end in a wake-up (0), never ETIMEDOUT, even if the deadline passed
 * before it could lock the mutex again (it pauses first).  The deadline
 * is short and not scaled: the old code's pause ran past it. */
static void test_register_cut(void)
{
    NmProxy *px = nm_proxy_start(redis);
    char *url = nm_redis_proxy_url(redis, nm_proxy_port(px));
    netmutex_config_t cfg = { .url = url };
    netmutex_cond_t c;
    netmutex_t m;
    char *name = nm_test_name("c");
    nm_assert_rc(netmutex_configure(&cfg), 0);
    char *mname = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    Warmed x = { .w = { .c = &c, .m = &m, .timeout_ms = 60 } };
    NmCall *call = nm_call_start(warmed_run, &x);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!g_atomic_int_get(&x.locked) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    g_assert_true(g_atomic_int_get(&x.locked));
    /* A registration: ... its CG (a token), then the operation 'w'. */
    nm_proxy_cut_request(px, "\r\n$1\r\nw\r\n");
    g_atomic_int_set(&x.go, 1);

    /* Once the waiter gave it back.  Tried, not waited for: a thread of
     * the process waiting for it would have it handed over locally, and
     * the registration would not ride with a release. */
    int rc;
    until = nmt_now_ms() + PROMPT_MS;
    while ((rc = netmutex_trylock(&m)) == EBUSY && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    nm_assert_rc(rc, 0);
    nm_assert_rc(netmutex_cond_broadcast(&c), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(nm_call_wait(call, PROMPT_MS), 0);
    g_assert_cmpuint(nm_proxy_cuts(px), ==, 1);

    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_configure(redis);
    nm_proxy_free(px);
    g_free(url);
    g_free(mname);
    g_free(name);
}

/* Signalled as it timed out, and the answer to its leaving lost after the
 * server applied it (which consumed the signal): the request is sent
 * again on a new connection, which finds the signal gone.  The waiter must
 * not return ETIMEDOUT then: the signal would vanish.  It may return 0, a
 * wake-up that may be spurious. */
static void test_leave_answer_lost(void)
{
    NmProxy *px = nm_proxy_start(redis);
    char *url = nm_redis_proxy_url(redis, nm_proxy_port(px)); /* the ACL user's too */
    netmutex_config_t cfg = { .url = url, .io_timeout_ms = nm_ms(500) };
    netmutex_cond_t c;
    netmutex_t m;
    char *name = nm_test_name("c");
    char *cw = cond_key(name, ":cw"), *cs = cond_key(name, ":cs"), *ch = cond_key(name, ":ch");
    nm_assert_rc(netmutex_configure(&cfg), 0);
    char *mname = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    Waiter w = { .c = &c, .m = &m, .timeout_ms = nm_ms(1000) };
    NmCall *call = nm_call_start(waiter_run, &w);
    g_assert_true(wait_waiters(name, 1));

    /* Signalled by hand, as the signal script does, without the push: the
     * waiter sleeps on until its deadline, then leaves. */
    redisReply *r = nm_redis_cmd(redis, "LPOP %s", cw);
    g_assert_cmpint(r->type, ==, REDIS_REPLY_STRING);
    char *token = g_strdup(r->str);
    freeReplyObject(r);
    redisReply *e = nm_redis_cmd(redis, "HGET %s %s", ch, token);
    g_assert_cmpint(e->type, ==, REDIS_REPLY_STRING);
    e->str[0] = 's';
    nm_redis_ok(redis, "HSET %s %s %s", ch, token, e->str);
    mark_signalled(cs, token, e->str);
    freeReplyObject(e);
    /* Its leaving: ... <CG key, which ends in the token> 'l' ... */
    char *leave = g_strdup_printf("%s\r\n$1\r\nl\r\n", token);
    nm_proxy_mute_reply_to(px, leave);

    nm_assert_rc(nm_call_wait(call, PROMPT_MS), 0);
    g_assert_cmpuint(nm_proxy_muted(px), ==, 1);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_configure(redis);
    nm_proxy_free(px);
    g_free(leave);
    g_free(token);
    g_free(ch);
    g_free(cs);
    g_free(cw);
    g_free(mname);
    g_free(name);
    g_free(url);
}

/* Signalled without a push (a signaller that died between choosing the
 * waiter and waking it, in a cluster): the waiter's look tells it, within
 * a third of its lease. */
static void test_signalled_without_push_wakes(void)
{
    netmutex_cond_t c;
    netmutex_t m;
    netmutex_attr_t a;
    char *name = nm_test_name("c");
    char *mname = nm_test_name("m");
    char *cw = cond_key(name, ":cw"), *cs = cond_key(name, ":cs"), *ch = cond_key(name, ":ch");
    nm_assert_rc(netmutex_attr_init(&a), 0);
    nm_assert_rc(netmutex_attr_setlease(&a, nm_ms(600)), 0);
    nm_assert_rc(netmutex_init(&m, mname, &a), 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    Waiter w = { .c = &c, .m = &m };
    NmCall *call = nm_call_start(waiter_run, &w);
    g_assert_true(wait_waiters(name, 1));

    redisReply *r = nm_redis_cmd(redis, "LPOP %s", cw);
    g_assert_cmpint(r->type, ==, REDIS_REPLY_STRING);
    redisReply *e = nm_redis_cmd(redis, "HGET %s %s", ch, r->str);
    g_assert_cmpint(e->type, ==, REDIS_REPLY_STRING);
    e->str[0] = 's';
    nm_redis_ok(redis, "HSET %s %s %s", ch, r->str, e->str);
    mark_signalled(cs, r->str, e->str);
    freeReplyObject(e);
    freeReplyObject(r);

    nm_assert_rc(nm_call_wait(call, PROMPT_MS), 0);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_attr_destroy(&a), 0);
    g_free(cw);
    g_free(cs);
    g_free(ch);
    g_free(mname);
    g_free(name);
}

/* ---- processes ------------------------------------------------------------ */

typedef struct Proc {
    const char *name;   /* the condition's; the mutex is NAME + "/m" */
    unsigned int lease_ms;
    unsigned int timeout_ms; /* a waiter's: 0 untimed */
    int go;             /* a pipe's read end: the child goes on once it
                           reads a byte there (a waiter's: 0, at once) */
    int items;          /* producer: how many */
} Proc;

static void proc_configure(unsigned int lease_ms)
{
    netmutex_config_t cfg = { 0 };
    cfg.lease_ms = lease_ms;
    nm_configure_with(redis, cfg);
}

/* A child that waits once on the condition, until PR->timeout_ms passed
 * if set (any wake-up counts; ETIMEDOUT fails). */
static int proc_wait_once(void *p)
{
    const Proc *pr = p;
    netmutex_cond_t c;
    netmutex_t m;
    struct timespec ts;
    char *mname = g_strconcat(pr->name, "/m", NULL);
    proc_configure(pr->lease_ms);
    char byte;
    if (netmutex_cond_init(&c, pr->name, NULL) || netmutex_init(&m, mname, NULL))
        return 10;
    if (pr->go && read(pr->go, &byte, 1) != 1)
        return 11;
    int err = netmutex_lock(&m);
    if (!err && pr->timeout_ms) {
        nm_deadline(&ts, CLOCK_REALTIME, pr->timeout_ms);
        err = netmutex_cond_timedwait(&c, &m, &ts);
    } else if (!err) {
        err = netmutex_cond_wait(&c, &m);
    }
    int uerr = netmutex_unlock(&m);
    netmutex_cond_destroy(&c);
    netmutex_destroy(&m);
    g_free(mname);
    netmutex_shutdown();
    return err ? 20 + err : uerr ? 40 : 0;
}

static void test_broadcast_processes(void)
{
    enum { N = 3 };
    netmutex_cond_t c;
    pid_t pids[N];
    char *name = nm_test_name("c");
    Proc pr = { .name = name };
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    for (int i = 0; i < N; i++)
        pids[i] = nm_fork_run(proc_wait_once, &pr);
    g_assert_true(wait_waiters(name, N));
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    g_assert_true(wait_waiters(name, N - 1));
    nm_assert_rc(netmutex_cond_broadcast(&c), 0);
    for (int i = 0; i < N; i++)
        nm_child_wait_ok(pids[i], PROMPT_MS);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    g_free(name);
}

/* The queue: a counter in Redis guarded by the mutex, "items" waiting,
 * "consumed" taken, "done" once the producer stopped. */
static long long get_ll(redisContext *rc, const char *key)
{
    redisReply *r = redisCommand(rc, "GET %s", key);
    long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    if (r)
        freeReplyObject(r);
    return v;
}

static void incr(redisContext *rc, const char *key, int by)
{
    redisReply *r = redisCommand(rc, "INCRBY %s %d", key, by);
    if (r)
        freeReplyObject(r);
}

static int proc_consumer(void *p)
{
    const Proc *pr = p;
    netmutex_cond_t c;
    netmutex_t m;
    char *mname = g_strconcat(pr->name, "/m", NULL);
    char *items = g_strconcat(pr->name, "/items", NULL);
    char *consumed = g_strconcat(pr->name, "/consumed", NULL);
    char *done = g_strconcat(pr->name, "/done", NULL);
    proc_configure(0);
    redisContext *rc = nm_redis_connect(redis, 0);
    if (netmutex_cond_init(&c, pr->name, NULL) || netmutex_init(&m, mname, NULL))
        return 10;
    int err = 0;
    for (;;) {
        if ((err = netmutex_lock(&m)) != 0)
            break;
        while (!err && get_ll(rc, items) == 0 && !get_ll(rc, done))
            err = netmutex_cond_wait(&c, &m);
        long long n = get_ll(rc, items);
        if (!err && n > 0) {
            incr(rc, items, -1);
            incr(rc, consumed, 1);
        }
        int stop = err || (n == 0 && get_ll(rc, done));
        int uerr = netmutex_unlock(&m);
        err = err ? err : uerr;
        if (stop || err)
            break;
    }
    redisFree(rc);
    netmutex_cond_destroy(&c);
    netmutex_destroy(&m);
    netmutex_shutdown();
    g_free(mname);
    g_free(items);
    g_free(consumed);
    g_free(done);
    return err ? 20 + err : 0;
}

static int proc_producer(void *p)
{
    const Proc *pr = p;
    netmutex_cond_t c;
    netmutex_t m;
    char *mname = g_strconcat(pr->name, "/m", NULL);
    char *items = g_strconcat(pr->name, "/items", NULL);
    char *done = g_strconcat(pr->name, "/done", NULL);
    proc_configure(0);
    redisContext *rc = nm_redis_connect(redis, 0);
    if (netmutex_cond_init(&c, pr->name, NULL) || netmutex_init(&m, mname, NULL))
        return 10;
    int err = 0;
    for (int i = 0; i < pr->items && !err; i++) {
        err = netmutex_lock(&m);
        if (err)
            break;
        incr(rc, items, 1);
        err = netmutex_cond_signal(&c);
        int uerr = netmutex_unlock(&m);
        err = err ? err : uerr;
    }
    if (!err && (err = netmutex_lock(&m)) == 0) {
        incr(rc, done, 1);
        err = netmutex_cond_broadcast(&c);
        int uerr = netmutex_unlock(&m);
        err = err ? err : uerr;
    }
    redisFree(rc);
    netmutex_cond_destroy(&c);
    netmutex_destroy(&m);
    netmutex_shutdown();
    g_free(mname);
    g_free(items);
    g_free(done);
    return err ? 20 + err : 0;
}

static void test_producer_consumer_no_lost_wakeup(void)
{
    enum { CONSUMERS = 3, PRODUCERS = 2, ITEMS = 100 };
    pid_t pids[CONSUMERS + PRODUCERS];
    char *name = nm_test_name("q");
    char *consumed = g_strconcat(name, "/consumed", NULL);
    char *items = g_strconcat(name, "/items", NULL);
    Proc pr = { .name = name, .items = ITEMS };
    for (int i = 0; i < CONSUMERS; i++)
        pids[i] = nm_fork_run(proc_consumer, &pr);
    for (int i = 0; i < PRODUCERS; i++)
        pids[CONSUMERS + i] = nm_fork_run(proc_producer, &pr);
    for (int i = 0; i < CONSUMERS + PRODUCERS; i++)
        nm_child_wait_ok(pids[i], nm_ms(120000));
    /* Consumers stop at the first "done" with the queue empty: what the
     * second producer added after that is still queued. */
    redisReply *r = nm_redis_cmd(redis, "MGET %s %s", consumed, items);
    long long got = r->element[0]->str ? atoll(r->element[0]->str) : 0;
    long long left = r->element[1]->str ? atoll(r->element[1]->str) : 0;
    freeReplyObject(r);
    g_test_message("consumed %lld, left %lld", got, left);
    g_assert_cmpint(got + left, ==, PRODUCERS * ITEMS);
    g_assert_cmpint(got, >, 0);
    g_assert_true(wait_nothing_left());
    g_free(consumed);
    g_free(items);
    g_free(name);
}

/* A waiter killed after a signal chose it: the signal goes on to the next
 * live waiter, and nothing is left once it left and the dead one's lease
 * ran out. */
static void test_killed_waiter_swallows_nothing(void)
{
    netmutex_cond_t c;
    char *name = nm_test_name("c");
    Proc doomed = { .name = name, .lease_ms = 300 }, live = { .name = name, .lease_ms = 300 };
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    pid_t a = nm_fork_run(proc_wait_once, &doomed);
    g_assert_true(wait_waiters(name, 1));
    pid_t b = nm_fork_run(proc_wait_once, &live);
    g_assert_true(wait_waiters(name, 2));
    g_assert_cmpint(kill(a, SIGKILL), ==, 0);
    g_assert_cmpint(waitpid(a, NULL, 0), ==, a);
    /* FIFO: the signal chooses the dead waiter, whose key still lives. */
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    nm_child_wait_ok(b, PROMPT_MS);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    g_free(name);
}

/* A condition's script run once on the calling thread's connection, on a
 * condition of its own (no waiter there): the next signal may then go
 * without waiting for its answer. */
static int warm_connection(const char *name)
{
    netmutex_cond_t w;
    char *warm = g_strconcat(name, "/warm", NULL);
    int err = netmutex_cond_init(&w, warm, NULL);
    if (!err)
        err = netmutex_cond_signal(&w);
    netmutex_cond_destroy(&w);
    g_free(warm);
    return err;
}

/* A child that signals once, holding nothing, with PR->lease_ms the
 * lease of its configuration, as soon as it reads a byte on PR->go: it
 * is ready (configured, its connection has run the script) before. */
static int proc_signal_on_go(void *p)
{
    const Proc *pr = p;
    netmutex_cond_t c;
    char byte;
    proc_configure(pr->lease_ms);
    if (netmutex_cond_init(&c, pr->name, NULL) || warm_connection(pr->name) != 0)
        return 10;
    if (read(pr->go, &byte, 1) != 1)
        return 11;
    int err = netmutex_cond_signal(&c);
    netmutex_cond_destroy(&c);
    netmutex_shutdown();
    return err ? 20 + err : 0;
}

/* Waiter I's token (in arrival order) of condition NAME, none signalled. */
static char *waiter_token(const char *name, int i)
{
    char *cw = cond_key(name, ":cw");
    redisReply *r = nm_redis_cmd(redis, "LINDEX %s %d", cw, i);
    char *token = r->type == REDIS_REPLY_STRING ? g_strdup(r->str) : NULL;
    freeReplyObject(r);
    g_free(cw);
    return token;
}

/* Waiter TOKEN's entry in condition NAME's CH ("" when it has none). */
static char *waiter_entry(const char *name, const char *token)
{
    char *ch = cond_key(name, ":ch");
    redisReply *r = nm_redis_cmd(redis, "HGET %s %s", ch, token);
    char *entry = g_strdup(r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    g_free(ch);
    return entry;
}

/* Polls until waiter TOKEN of NAME looks (its entry's expiry moves on). */
static bool wait_look(const char *name, const char *token)
{
    char *was = waiter_entry(name, token), *now = NULL;
    gint64 until = nmt_now_ms() + PROMPT_MS;
    bool looked = false;
    while (!looked && nmt_now_ms() < until) {
        nmt_sleep_ms(2);
        g_free(now);
        now = waiter_entry(name, token);
        looked = *now && strcmp(now, was) != 0;
    }
    g_free(was);
    g_free(now);
    return looked;
}

/* The signaller's own lease is short (DATA ms: 50, 10), the waiters'
 * 1500 ms (scaled): the signal it gave lives as long as the waiters it
 * may be passed to need.  It chooses waiter A, stopped (SIGSTOP) past its
 * lease; B, waiting until 8 s (scaled), must get it at its first look
 * after A's entry expired.  B is stopped too, from just after one of its
 * looks until more than three of the signaller's leases passed, so that
 * none of its looks falls within them; each is stopped just after a look,
 * so that its entry outlives the steps before its lease runs out.  (A
 * list of the signalled that lived three of the signaller's leases was
 * gone by B's next look: nobody passed the signal on, and B timed out.) */
static void test_short_lease_signaller(gconstpointer data)
{
    unsigned int short_ms = GPOINTER_TO_UINT(data);
    int go[2];
    char *name = nm_test_name("c");
    char *cs = cond_key(name, ":cs");
    g_assert_cmpint(pipe(go), ==, 0);
    /* Scaled: a slow machine's late look must not make a waiter dead. */
    Proc a = { .name = name, .lease_ms = nm_ms(1500) };
    Proc b = { .name = name, .lease_ms = nm_ms(1500), .timeout_ms = nm_ms(8000) };
    Proc s = { .name = name, .lease_ms = short_ms, .go = go[0] };
    pid_t ps = nm_fork_run(proc_signal_on_go, &s);
    pid_t pa = nm_fork_run(proc_wait_once, &a);
    g_assert_true(wait_waiters(name, 1));
    pid_t pb = nm_fork_run(proc_wait_once, &b);
    g_assert_true(wait_waiters(name, 2));
    char *ta = waiter_token(name, 0), *tb = waiter_token(name, 1);
    g_assert_nonnull(ta);
    g_assert_nonnull(tb);
    g_assert_true(wait_look(name, ta));
    g_assert_cmpint(kill(pa, SIGSTOP), ==, 0);
    g_assert_true(wait_look(name, tb));
    g_assert_cmpint(kill(pb, SIGSTOP), ==, 0);

    g_assert_cmpint(write(go[1], "g", 1), ==, 1);
    nm_child_wait_ok(ps, PROMPT_MS);
    /* It chose A, the first to wait: B is the one left waiting. */
    g_assert_true(wait_waiters(name, 1));
    char *left = waiter_token(name, 0);
    g_assert_cmpstr(left, ==, tb);
    /* Not scaled: the server's clock, which the load does not slow. */
    nmt_sleep_ms(3 * short_ms + 100);
    g_assert_cmpint(zcard(cs), ==, 1);
    g_assert_cmpint(kill(pb, SIGCONT), ==, 0);
    nm_child_wait_ok(pb, PROMPT_MS);

    /* A wakes at its next look: passed over, its entry gone. */
    g_assert_cmpint(kill(pa, SIGCONT), ==, 0);
    nm_child_wait_ok(pa, PROMPT_MS);
    g_assert_true(wait_nothing_left());
    close(go[0]);
    close(go[1]);
    g_free(left);
    g_free(ta);
    g_free(tb);
    g_free(cs);
    g_free(name);
}

/* Forks a child of FN(ARG) from this process once no thread of the
 * library runs here (netmutex_shutdown), then configures this process
 * again: neither sanitizer's allocator survives a fork made while another
 * thread allocates (nm_fork_with_threads_is_safe): a child of
 * test_rwlock's forked so once hung in ASan's allocator.  The child waits
 * for a byte on its Proc's go before it does what the case is about. */
static pid_t fork_before_threads(NmCallFunc fn, void *arg)
{
    nm_assert_rc(netmutex_shutdown(), 0);
    pid_t pid = nm_fork_run_unchecked(fn, arg);
    nm_configure(redis);
    return pid;
}

/* A child that signals while it holds the mutex, then dies before it
 * unlocks (SIGKILL: nothing of its own runs any more). */
static int proc_signal_then_die(void *p)
{
    const Proc *pr = p;
    netmutex_cond_t c;
    netmutex_t m;
    char *mname = g_strconcat(pr->name, "/m", NULL);
    proc_configure(pr->lease_ms);
    char byte;
    if (netmutex_cond_init(&c, pr->name, NULL) || netmutex_init(&m, mname, NULL) ||
        warm_connection(pr->name) != 0)
        return 10;
    if (read(pr->go, &byte, 1) != 1)
        return 11;
    if (netmutex_lock(&m) != 0)
        return 12;
    if (netmutex_cond_signal(&c) != 0)
        return 20;
    kill(getpid(), SIGKILL);
    return 30;
}

/* The signal was given when netmutex_cond_signal returned, even if its
 * process dies right after, holding the mutex: the waiter wakes, and
 * returns 0 once the dead holder's lease ran out, long before its
 * deadline.  (A signal held back until the next unlock, or for a moment,
 * dies with the process: the wait ends in ETIMEDOUT.) */
static void test_signal_then_killed(void)
{
    netmutex_cond_t c;
    netmutex_t m;
    int status, go[2];
    char *name = nm_test_name("c");
    char *mname = g_strconcat(name, "/m", NULL);
    g_assert_cmpint(pipe(go), ==, 0);
    Proc pr = { .name = name, .lease_ms = 300, .go = go[0] };
    pid_t pid = fork_before_threads(proc_signal_then_die, &pr);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    nm_assert_rc(netmutex_init(&m, mname, NULL), 0);
    Waiter w = { .c = &c, .m = &m, .timeout_ms = nm_ms(15000) };
    NmCall *call = nm_call_start(waiter_run, &w);
    g_assert_true(wait_waiters(name, 1));
    g_assert_cmpint(write(go[1], "g", 1), ==, 1);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    nm_assert_rc(nm_call_wait(call, PROMPT_MS), 0);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    close(go[0]);
    close(go[1]);
    g_free(mname);
    g_free(name);
}

/* A signal given while the mutex is held, with lease caching on (the
 * default, an unlock that may send nothing), and the signalling thread
 * idle after its unlock: the waiter in another process wakes all the
 * same.  (A signal waiting to ride with the next release of a lease never
 * goes when the unlock keeps it cached.) */
static void test_signal_then_cached_unlock(void)
{
    netmutex_cond_t c;
    netmutex_t m;
    int go[2];
    char *name = nm_test_name("c");
    char *mname = g_strconcat(name, "/m", NULL);
    g_assert_cmpint(pipe(go), ==, 0);
    Proc pr = { .name = name, .go = go[0] };
    pid_t pid = fork_before_threads(proc_wait_once, &pr);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    nm_assert_rc(netmutex_init(&m, mname, NULL), 0);
    nm_assert_rc(warm_connection(name), 0);
    /* The lease cached here first, before the waiter locks. */
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_cmpint(write(go[1], "g", 1), ==, 1);
    g_assert_true(wait_waiters(name, 1));
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_child_wait_ok(pid, PROMPT_MS);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    close(go[0]);
    close(go[1]);
    g_free(mname);
    g_free(name);
}

/* A signal from a thread that holds no lock of the library waits for its
 * answer: that thread may never call the library again, so nothing later
 * would send the signal again if its connection broke before the server
 * read it.  The server is paused for PAUSE ms (CLIENT PAUSE), so the
 * answer cannot come before; the call must not return sooner.  (A signal
 * that returns once written comes back at once.) */
#define PAUSE_MS 400
static void test_signal_unheld_waits_answer(void)
{
    netmutex_cond_t c;
    char *name = nm_test_name("c");
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    nm_assert_rc(warm_connection(name), 0);
    nm_redis_ok(redis, "CLIENT PAUSE %d ALL", PAUSE_MS);
    int64_t start = nmt_now_ms();
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    int64_t took = nmt_now_ms() - start;
    g_assert_cmpint(took, >=, PAUSE_MS - 50);
    nm_assert_rc(netmutex_cond_broadcast(&c), 0);
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    g_free(name);
}

/* ---- robust ----------------------------------------------------------- */

typedef struct RobustWait {
    netmutex_cond_t *c;
    netmutex_t *m;
} RobustWait;

static int robust_waiter(void *p)
{
    RobustWait *rw = p;
    int err = netmutex_lock(rw->m);
    if (err)
        return 100 + err;
    err = netmutex_cond_wait(rw->c, rw->m);
    if (err == EOWNERDEAD)
        netmutex_consistent(rw->m);
    int uerr = netmutex_unlock(rw->m);
    return uerr ? 200 + uerr : err;
}

static void test_robust_eownerdead_after_wait(void)
{
    netmutex_cond_t c;
    netmutex_t m;
    netmutex_attr_t a;
    char *name = nm_test_name("c");
    char *mname = nm_test_name("m");
    nm_assert_rc(netmutex_attr_init(&a), 0);
    nm_assert_rc(netmutex_attr_setrobust(&a, NETMUTEX_ROBUST), 0);
    nm_assert_rc(netmutex_attr_setlease(&a, nm_ms(500)), 0);
    nm_assert_rc(netmutex_init(&m, mname, &a), 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    RobustWait rw = { &c, &m };
    NmCall *call = nm_call_start(robust_waiter, &rw);
    g_assert_true(wait_waiters(name, 1));
    /* Another process takes the mutex and dies holding it. */
    NmRemote *rem = nm_remote_start(redis, mname, NETMUTEX_NORMAL | NM_REMOTE_ROBUST, nm_ms(500));
    nm_assert_rc(nm_remote(rem, 'l'), 0);
    nm_remote_kill(rem);
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    nm_assert_rc(nm_call_wait(call, PROMPT_MS), EOWNERDEAD);
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(mname);
    g_free(name);
}

/* ---- lease caching ---------------------------------------------------------- */

/* The process caches the mutex's lease (a first cycle); its wait gives it
 * back rather than keep it cached, so another process locks it without
 * asking; the condition is signalled, and the waiter takes the mutex back
 * from that process, which cached it in turn. */
static void test_cached_lease_and_waiter(void)
{
    netmutex_cond_t c;
    netmutex_t m;
    netmutex_status_t st;
    char *name = nm_test_name("c");
    char *mname = nm_test_name("m");
    nm_assert_rc(netmutex_init(&m, mname, NULL), 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    Waiter w = { .c = &c, .m = &m };
    /* A first cycle: the lease is kept cached here. */
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    do {
        nm_assert_rc(netmutex_status(mname, &st), 0);
        if (!st.cached) { /* not listening yet: kept again next time */
            nm_assert_rc(netmutex_lock(&m), 0);
            nm_assert_rc(netmutex_unlock(&m), 0);
        }
    } while (!st.cached && nmt_now_ms() < until && (nmt_sleep_ms(5), 1));
    g_assert_cmpint(st.cached, ==, 1);
    NmCall *call = nm_call_start(waiter_run, &w);
    g_assert_true(wait_waiters(name, 1));
    /* Given back by the wait (once registered, it unlocks). */
    until = nmt_now_ms() + PROMPT_MS;
    do {
        nm_assert_rc(netmutex_status(mname, &st), 0);
    } while (st.held && nmt_now_ms() < until && (nmt_sleep_ms(5), 1));
    g_assert_cmpint(st.held, ==, 0);

    NmRemote *rem = nm_remote_start(redis, mname, NETMUTEX_NORMAL, 0);
    nm_assert_rc(nm_remote(rem, 'l'), 0);
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    nmt_sleep_ms(nm_ms(50));
    g_assert_false(g_atomic_int_get(&w.woke)); /* the remote holds the mutex */
    nm_assert_rc(nm_remote(rem, 'u'), 0);
    nm_assert_rc(nm_call_wait(call, PROMPT_MS), 0);
    nm_remote_stop(rem);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(mname);
    g_free(name);
}

/* ---- quorum mode ---------------------------------------------------------- */

/* The private server's URL (with its credentials: an ACL user's too)
 * for database DB. */
static char *url_db(int db)
{
    char *url = nm_redis_url(redis);
    char *with = g_strdup_printf("%s%s%d", url, g_str_has_prefix(url, "unix://") ? "?db=" : "/",
                                 db);
    g_free(url);
    return with;
}

static void test_quorum_enotsup(void)
{
    netmutex_cond_t c;
    netmutex_t m;
    char *u1 = url_db(1), *u2 = url_db(2), *u3 = url_db(3);
    char *url = g_strdup_printf("%s,%s,%s", u1, u2, u3);
    netmutex_config_t cfg = { .url = url };
    char *name = nm_test_name("c");
    char *mname = nm_test_name("m");
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_init(&m, mname, NULL), 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_cond_wait(&c, &m), ENOTSUP);
    nm_assert_rc(netmutex_unlock(&m), 0); /* still held */
    nm_assert_rc(netmutex_cond_signal(&c), ENOTSUP);
    nm_assert_rc(netmutex_cond_broadcast(&c), ENOTSUP);
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_configure(redis);
    g_free(url);
    g_free(u1);
    g_free(u2);
    g_free(u3);
    g_free(mname);
    g_free(name);
}

/* ---- cancellation ---------------------------------------------------------- */

static void test_cancel_while_blocked(void)
{
    if (!nm_cancel_in_poll_is_checkable()) {
        g_test_skip("the sanitizers lose track of a thread cancelled in poll(2)");
        return;
    }
    netmutex_cond_t c;
    netmutex_t m;
    NmCondVictim v;
    char *name = nm_test_name("c");
    char *mname = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    nm_cond_victim_start(&v, &c, &m);
    g_assert_true(wait_waiters(name, 1));
    /* Cancelled where it blocks, not at a signal: nothing signals. */
    nm_cond_victim_cancel(&v, PROMPT_MS);
    g_assert_cmpint(v.rc, ==, -1);
    nm_assert_rc(v.unlocked, 0); /* the handler held the mutex */
    g_assert_true(wait_nothing_left());
    /* No waiter of this process is left: destroy does not say EBUSY. */
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);

    /* The next waiter gets the next signal. */
    Waiter w = { .c = &c, .m = &m };
    NmCall *call = nm_call_start(waiter_run, &w);
    g_assert_true(wait_waiters(name, 1));
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    nm_assert_rc(nm_call_wait(call, PROMPT_MS), 0);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(mname);
    g_free(name);
}

/* ---- a refused BLPOP ----------------------------------------------------- */

/* A user whose rule lacks BLPOP: the waiter's block is refused, which
 * wakes it (a spurious wake-up, the mutex held again, well before its
 * deadline), and the server's words -- NOPERM, the command -- are logged,
 * as a lock's refusals are. */
static void test_acl_without_blpop(void)
{
    char *plain = nm_redis_url(redis), *url = nm_url_as_user(plain, "noblpop", "pw");
    netmutex_config_t cfg = { .url = url };
    netmutex_cond_t c;
    netmutex_t m;
    struct timespec ts;
    char *name = nm_test_name("c");

    nm_redis_add_user(redis, "noblpop", "pw", "-blpop");
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_log_capture_start(NETMUTEX_LOG_WARN);
    char *mname = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    nm_assert_rc(netmutex_cond_init(&c, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    gint64 start = nmt_now_ms();
    nm_deadline(&ts, CLOCK_REALTIME, nm_ms(20000));
    nm_assert_rc(netmutex_cond_timedwait(&c, &m, &ts), 0);
    g_assert_cmpint(nmt_now_ms() - start, <, nm_ms(10000));
    nm_assert_rc(netmutex_unlock(&m), 0); /* held again */
    g_assert_true(nm_log_captured("NOPERM"));
    g_assert_true(nm_log_captured("blpop"));
    nm_log_capture_stop();
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_configure(redis);
    nm_redis_ok(redis, "ACL DELUSER noblpop");
    g_free(mname);
    g_free(name);
    g_free(url);
    g_free(plain);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/cond/args/bad", test_bad_arguments);
    g_test_add_func("/cond/args/static-initializer", test_static_initializer);
    g_test_add_func("/cond/args/recursive-twice", test_recursive_twice);
    g_test_add_func("/cond/threads/signal-one-broadcast-all",
                    test_signal_one_broadcast_all_threads);
    g_test_add_data_func("/cond/timedwait/realtime", GINT_TO_POINTER(CLOCK_REALTIME),
                         test_timedwait_times_out);
    g_test_add_data_func("/cond/timedwait/monotonic", GINT_TO_POINTER(CLOCK_MONOTONIC),
                         test_timedwait_times_out);
    g_test_add_func("/cond/timedwait/signalled-at-timeout-returns-0",
                    test_signalled_at_timeout_returns_0);
    g_test_add_func("/cond/timedwait/leave-answer-lost", test_leave_answer_lost);
    g_test_add_data_func("/cond/signal/request-cut", "m", test_signal_cut_holding_only);
    g_test_add_data_func("/cond/signal/cut-holding/read", "r",
                         test_signal_cut_holding_only);
    g_test_add_data_func("/cond/signal/cut-holding/write", "w",
                         test_signal_cut_holding_only);
    g_test_add_data_func("/cond/signal/cut-holding/permit", "p",
                         test_signal_cut_holding_only);
    g_test_add_func("/cond/timedwait/register-cut", test_register_cut);
    g_test_add_func("/cond/look/signalled-without-push-wakes", test_signalled_without_push_wakes);
    g_test_add_func("/cond/processes/broadcast", test_broadcast_processes);
    g_test_add_func("/cond/processes/producer-consumer", test_producer_consumer_no_lost_wakeup);
    g_test_add_func("/cond/processes/killed-waiter", test_killed_waiter_swallows_nothing);
    g_test_add_data_func("/cond/processes/short-lease-signaller/50", GUINT_TO_POINTER(50),
                         test_short_lease_signaller);
    g_test_add_data_func("/cond/processes/short-lease-signaller/10", GUINT_TO_POINTER(10),
                         test_short_lease_signaller);
    g_test_add_func("/cond/processes/signal-then-killed", test_signal_then_killed);
    g_test_add_func("/cond/processes/signal-then-cached-unlock", test_signal_then_cached_unlock);
    g_test_add_func("/cond/signal/unheld-waits-answer", test_signal_unheld_waits_answer);
    g_test_add_func("/cond/robust/eownerdead-after-wait", test_robust_eownerdead_after_wait);
    g_test_add_func("/cond/cache/cached-lease-and-waiter", test_cached_lease_and_waiter);
    g_test_add_func("/cond/quorum/enotsup", test_quorum_enotsup);
    g_test_add_func("/cond/cancel/while-blocked", test_cancel_while_blocked);
    g_test_add_func("/cond/acl/without-blpop", test_acl_without_blpop);

    int rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
