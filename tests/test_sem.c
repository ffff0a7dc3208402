/*
 * test_sem.c -- counting semaphores across threads and processes
 * (netmutex_sem_*), against a private server.
 *
 * Covered: the argument checks (EINVAL, EPERM, EBUSY); trywait's EAGAIN
 * when every permit is held; timedwait's ETIMEDOUT on both clocks;
 * getvalue as the server counts; never more than N holders among several
 * processes, counted in shared memory, and all N used; a holder killed
 * with SIGKILL gives its permit back when its lease runs out; one stopped
 * past its lease is told it lost it (the callback, ENOLCK); waiters
 * served in arrival order; processes that disagree on the permits told
 * EINVAL, a waiter queued under one count never let in under another's;
 * nothing left on the server once the holders and waiters left;
 * netmutex_sem_status and netmutex_list_shared (permits held of N,
 * waiters, nothing written); quorum mode's ENOTSUP.
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

/* ---- helpers ------------------------------------------------------------ */

/* The key <prefix>{s<tag>}NAME SUFFIX of semaphore NAME (lib.lua). */
static char *sem_key(const char *name, const char *suffix)
{
    char tag[NM_TEST_TAG_LEN + 1];
    nm_test_key_tag(name, strlen(name), tag);
    return g_strdup_printf("netmutex:{s%s}%s%s", tag, name, suffix);
}

static long long int_cmd(const char *cmd, const char *key)
{
    redisReply *r = nm_redis_cmd(redis, "%s %s", cmd, key);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

static long long queued_of(const char *name)
{
    char *q = sem_key(name, ":q");
    long long n = int_cmd("LLEN", q);
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

/* Every key of every semaphore gone, within the bound (a queue's keys
 * live their refresh time after the last waiter left). */
static bool wait_nothing_left(void)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (nm_redis_kind_keys(redis, 's') != 0 && nmt_now_ms() < until)
        nmt_sleep_ms(10);
    return nm_redis_kind_keys(redis, 's') == 0;
}

static int value_of(netmutex_sem_t *s)
{
    int v = -1;
    nm_assert_rc(netmutex_sem_getvalue(s, &v), 0);
    return v;
}

/* A thread's wait on a semaphore: it takes a permit, notes its id in
 * ORDER, and gives the permit back when told (or HOLD_MS later). */
typedef struct Taker {
    netmutex_sem_t *s;
    unsigned int hold_ms;
    int id;
    int *order;
    int *norder;
    int got;     /* atomic */
    int release; /* atomic */
} Taker;

static int taker_run(void *p)
{
    Taker *k = p;
    int err = netmutex_sem_wait(k->s);
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
    return netmutex_sem_post(k->s);
}

static bool wait_got(Taker *k)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!g_atomic_int_get(&k->got) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    return g_atomic_int_get(&k->got);
}

/* ---- arguments ---------------------------------------------------------- */

static void test_bad_arguments(void)
{
    netmutex_sem_t s, zero;
    netmutex_semattr_t a, zero_attr;
    struct timespec ts = { 0, 0 }, bad = { 0, 1000000000 };
    int v;
    char *name = nm_test_name("sem");

    memset(&zero, 0, sizeof zero);
    memset(&zero_attr, 0, sizeof zero_attr);
    nm_assert_rc(netmutex_semattr_init(NULL), EINVAL);
    nm_assert_rc(netmutex_semattr_destroy(NULL), EINVAL);
    nm_assert_rc(netmutex_semattr_destroy(&zero_attr), EINVAL);
    nm_assert_rc(netmutex_sem_init(&s, name, 1, &zero_attr), EINVAL);
    nm_assert_rc(netmutex_semattr_init(&a), 0);

    nm_assert_rc(netmutex_sem_init(NULL, name, 1, NULL), EINVAL);
    nm_assert_rc(netmutex_sem_init(&s, NULL, 1, NULL), EINVAL);
    nm_assert_rc(netmutex_sem_init(&s, "", 1, NULL), EINVAL);
    char *long_name = g_strnfill(NETMUTEX_NAME_MAX + 1, 'x');
    nm_assert_rc(netmutex_sem_init(&s, long_name, 1, NULL), EINVAL);
    g_free(long_name);
    nm_assert_rc(netmutex_sem_init(&s, name, 0, NULL), EINVAL);
    nm_assert_rc(netmutex_sem_init(&s, name, NETMUTEX_SEM_PERMITS_MAX + 1, NULL), EINVAL);
    nm_assert_rc(netmutex_sem_init(&s, name, (unsigned int)-1, NULL), EINVAL);
    nm_assert_rc(netmutex_sem_init(&s, name, NETMUTEX_SEM_PERMITS_MAX, &a), 0);
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    nm_assert_rc(netmutex_sem_init(&s, name, 1, &a), 0);
    nm_assert_rc(netmutex_semattr_destroy(&a), 0);
    nm_assert_rc(netmutex_semattr_destroy(&a), EINVAL);
    nm_assert_rc(netmutex_sem_init(&zero, name, 1, &a), EINVAL); /* destroyed attr */

    /* Never initialized (zeroed) or NULL: EINVAL everywhere. */
    nm_assert_rc(netmutex_sem_wait(NULL), EINVAL);
    nm_assert_rc(netmutex_sem_wait(&zero), EINVAL);
    nm_assert_rc(netmutex_sem_trywait(&zero), EINVAL);
    nm_assert_rc(netmutex_sem_timedwait(&zero, &ts), EINVAL);
    nm_assert_rc(netmutex_sem_clockwait(&zero, CLOCK_MONOTONIC, &ts), EINVAL);
    nm_assert_rc(netmutex_sem_post(&zero), EINVAL);
    nm_assert_rc(netmutex_sem_post(NULL), EINVAL);
    nm_assert_rc(netmutex_sem_getvalue(&zero, &v), EINVAL);
    nm_assert_rc(netmutex_sem_getvalue(NULL, &v), EINVAL);
    nm_assert_rc(netmutex_sem_getvalue(&s, NULL), EINVAL);
    nm_assert_rc(netmutex_sem_destroy(&zero), EINVAL);
    nm_assert_rc(netmutex_sem_destroy(NULL), EINVAL);

    /* Bad deadlines and clocks, checked before anything else. */
    nm_assert_rc(netmutex_sem_timedwait(&s, NULL), EINVAL);
    nm_assert_rc(netmutex_sem_timedwait(&s, &bad), EINVAL);
    nm_assert_rc(netmutex_sem_clockwait(&s, CLOCK_MONOTONIC, NULL), EINVAL);
    nm_assert_rc(netmutex_sem_clockwait(&s, CLOCK_PROCESS_CPUTIME_ID, &ts), EINVAL);

    /* No permit: EPERM.  Held: destroy says EBUSY. */
    nm_assert_rc(netmutex_sem_post(&s), EPERM);
    nm_assert_rc(netmutex_sem_wait(&s), 0);
    nm_assert_rc(netmutex_sem_destroy(&s), EBUSY);
    nm_assert_rc(netmutex_sem_post(&s), 0);
    nm_assert_rc(netmutex_sem_post(&s), EPERM);
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    nm_assert_rc(netmutex_sem_destroy(&s), EINVAL);
    nm_assert_rc(netmutex_sem_wait(&s), EINVAL);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* ---- threads ------------------------------------------------------------ */

/* Every permit held: trywait says EAGAIN; getvalue counts what the server
 * holds; a thread may hold several and posts each. */
static void test_try_full(void)
{
    netmutex_sem_t s, other;
    char *name = nm_test_name("sem");
    nm_assert_rc(netmutex_sem_init(&s, name, 3, NULL), 0);
    nm_assert_rc(netmutex_sem_init(&other, name, 3, NULL), 0);
    g_assert_cmpint(value_of(&s), ==, 3);
    g_assert_cmpint(nm_redis_kind_keys(redis, 's'), ==, 0); /* getvalue writes nothing */
    nm_assert_rc(netmutex_sem_trywait(&s), 0);
    g_assert_cmpint(value_of(&s), ==, 2);
    nm_assert_rc(netmutex_sem_wait(&s), 0);
    nm_assert_rc(netmutex_sem_trywait(&other), 0);
    g_assert_cmpint(value_of(&other), ==, 0);
    nm_assert_rc(netmutex_sem_trywait(&s), EAGAIN);
    nm_assert_rc(netmutex_sem_trywait(&other), EAGAIN);
    /* Another thread holds nothing: EPERM, and it cannot get in. */
    Taker t = { .s = &s, .hold_ms = 1 };
    NmCall *c = nm_call_start(taker_run, &t);
    g_assert_true(wait_queued(name, 1));
    nm_assert_rc(netmutex_sem_post(&other), 0); /* any handle of the name */
    nm_assert_rc(nm_call_wait(c, PROMPT_MS), 0);
    g_assert_cmpint(value_of(&s), ==, 1);
    nm_assert_rc(netmutex_sem_post(&s), 0);
    nm_assert_rc(netmutex_sem_post(&s), 0);
    nm_assert_rc(netmutex_sem_post(&s), EPERM);
    g_assert_cmpint(value_of(&s), ==, 3);
    nm_assert_rc(netmutex_sem_destroy(&other), 0);
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* A post by a thread that holds no permit: EPERM, though others do. */
static int post_run(void *p)
{
    return netmutex_sem_post(p);
}

static void test_post_not_held(void)
{
    netmutex_sem_t s;
    char *name = nm_test_name("sem");
    nm_assert_rc(netmutex_sem_init(&s, name, 2, NULL), 0);
    nm_assert_rc(netmutex_sem_wait(&s), 0);
    nm_assert_rc(nm_call_wait(nm_call_start(post_run, &s), PROMPT_MS), EPERM);
    g_assert_cmpint(value_of(&s), ==, 1);
    nm_assert_rc(netmutex_sem_post(&s), 0);
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* timedwait and clockwait: ETIMEDOUT at the deadline while every permit
 * is held; the queue is left. */
static void test_timed_out(gconstpointer data)
{
    clockid_t clock = (clockid_t)GPOINTER_TO_INT(data);
    netmutex_sem_t s;
    struct timespec ts;
    char *name = nm_test_name("sem");
    nm_assert_rc(netmutex_sem_init(&s, name, 1, NULL), 0);
    Taker holder = { .s = &s };
    NmCall *c = nm_call_start(taker_run, &holder);
    g_assert_true(wait_got(&holder));
    nm_deadline(&ts, clock, 200);
    if (clock == CLOCK_REALTIME)
        nm_assert_rc(netmutex_sem_timedwait(&s, &ts), ETIMEDOUT);
    else
        nm_assert_rc(netmutex_sem_clockwait(&s, clock, &ts), ETIMEDOUT);
    nm_assert_rc(netmutex_sem_post(&s), EPERM);
    g_atomic_int_set(&holder.release, 1);
    nm_assert_rc(nm_call_wait(c, PROMPT_MS), 0);
    /* Free now: a timed wait gets in at once. */
    nm_deadline(&ts, clock, 200);
    nm_assert_rc(netmutex_sem_clockwait(&s, clock, &ts), 0);
    nm_assert_rc(netmutex_sem_post(&s), 0);
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* Waiters are served in the order they came, each when a permit comes
 * back. */
static void test_fifo(void)
{
    enum { W = 5 };
    netmutex_sem_t s;
    int order[W + 2] = { 0 }, n = 0;
    char *name = nm_test_name("sem");
    nm_assert_rc(netmutex_sem_init(&s, name, 2, NULL), 0);
    Taker h1 = { .s = &s, .id = 0 }, h2 = { .s = &s, .id = 0 };
    Taker w[W];
    NmCall *calls[W];
    NmCall *c1 = nm_call_start(taker_run, &h1);
    NmCall *c2 = nm_call_start(taker_run, &h2);
    g_assert_true(wait_got(&h1));
    g_assert_true(wait_got(&h2));
    for (int i = 0; i < W; i++) {
        w[i] = (Taker){ .s = &s, .id = i + 1, .order = order, .norder = &n, .hold_ms = 20 };
        calls[i] = nm_call_start(taker_run, &w[i]);
        g_assert_true(wait_queued(name, i + 1));
    }
    /* One permit back: the waiters go one after another, in order. */
    g_atomic_int_set(&h1.release, 1);
    nm_assert_rc(nm_call_wait(c1, PROMPT_MS), 0);
    for (int i = 0; i < W; i++)
        nm_assert_rc(nm_call_wait(calls[i], PROMPT_MS), 0);
    for (int i = 0; i < W; i++)
        g_assert_cmpint(order[i], ==, i + 1);
    g_atomic_int_set(&h2.release, 1);
    nm_assert_rc(nm_call_wait(c2, PROMPT_MS), 0);
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* The server's bound: "=N" scored -1 in the permits' set while a permit is
 * held; a set of the wrong type is EPROTO, and nothing is written. */
static void test_bound_and_wrong_type(void)
{
    netmutex_sem_t s;
    int v;
    char *name = nm_test_name("sem");
    char *set = sem_key(name, ":s");
    nm_assert_rc(netmutex_sem_init(&s, name, 4, NULL), 0);
    nm_assert_rc(netmutex_sem_wait(&s), 0);
    redisReply *r = nm_redis_cmd(redis, "ZSCORE %s =4", set);
    g_assert_cmpint(r->type, ==, REDIS_REPLY_STRING);
    g_assert_cmpstr(r->str, ==, "-1");
    freeReplyObject(r);
    g_assert_cmpint(int_cmd("ZCARD", set), ==, 2);
    nm_assert_rc(netmutex_sem_post(&s), 0);
    g_assert_cmpint(int_cmd("EXISTS", set), ==, 0); /* the bound alone: gone */

    freeReplyObject(nm_redis_cmd(redis, "SET %s x", set));
    nm_assert_rc(netmutex_sem_trywait(&s), EPROTO);
    nm_assert_rc(netmutex_sem_getvalue(&s, &v), EPROTO);
    freeReplyObject(nm_redis_cmd(redis, "DEL %s", set));
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    g_assert_true(wait_nothing_left());
    g_free(set);
    g_free(name);
}

/* Two handles of one name with other permits: the second is refused while
 * a permit is held under the first's number, and nothing is mixed. */
static void test_disagree(void)
{
    netmutex_sem_t two, three;
    struct timespec ts;
    int v;
    char *name = nm_test_name("sem");
    nm_assert_rc(netmutex_sem_init(&two, name, 2, NULL), 0);
    nm_assert_rc(netmutex_sem_init(&three, name, 3, NULL), 0);
    nm_assert_rc(netmutex_sem_wait(&two), 0);
    nm_assert_rc(netmutex_sem_trywait(&three), EINVAL);
    nm_assert_rc(netmutex_sem_wait(&three), EINVAL);
    nm_deadline(&ts, CLOCK_REALTIME, 200);
    nm_assert_rc(netmutex_sem_timedwait(&three, &ts), EINVAL);
    nm_assert_rc(netmutex_sem_getvalue(&three, &v), EINVAL);
    g_assert_cmpint(value_of(&two), ==, 1);
    nm_assert_rc(netmutex_sem_post(&two), 0);
    /* Nothing held: the next to take a permit sets the number. */
    nm_assert_rc(netmutex_sem_wait(&three), 0);
    g_assert_cmpint(value_of(&three), ==, 2);
    nm_assert_rc(netmutex_sem_trywait(&two), EINVAL);
    nm_assert_rc(netmutex_sem_post(&three), 0);
    nm_assert_rc(netmutex_sem_destroy(&two), 0);
    nm_assert_rc(netmutex_sem_destroy(&three), 0);
    g_assert_true(wait_nothing_left());
    g_free(name);
}

/* ---- processes -------------------------------------------------------------- */

typedef struct Shared {
    int inside;     /* holders inside now (atomic) */
    int most;       /* the most seen inside at once */
    int violations; /* more than the permits inside */
    int rounds;     /* rounds done (atomic) */
    int ready;      /* a child holds its permit */
    int go;         /* the child may go on */
    int lost;       /* lost-hold callbacks the child saw */
} Shared;

static Shared *shared_new(void)
{
    Shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    return sh;
}

typedef struct Proc {
    Shared *sh;
    const char *name;
    unsigned int permits;
    unsigned int lease_ms; /* 0: the default */
    int rounds;
} Proc;

static void lost_count(const char *name, void *arg)
{
    (void)name;
    Shared *sh = arg;
    __atomic_add_fetch(&sh->lost, 1, __ATOMIC_SEQ_CST);
}

static void proc_configure(const Proc *pr)
{
    netmutex_config_t cfg = { .lease_ms = pr->lease_ms, .on_lost = lost_count,
                              .on_lost_arg = pr->sh };
    nm_configure_with(redis, cfg);
}

/* Children fork from a process with no thread of the library's. */
static void quiesce(void)
{
    nm_assert_rc(netmutex_shutdown(), 0);
}

/* Rounds of wait, a while inside counted in shared memory, post. */
static int proc_rounds(void *p)
{
    const Proc *pr = p;
    Shared *sh = pr->sh;
    netmutex_sem_t s;
    proc_configure(pr);
    int err = netmutex_sem_init(&s, pr->name, pr->permits, NULL);
    for (int i = 0; !err && i < pr->rounds; i++) {
        err = netmutex_sem_wait(&s);
        if (err)
            break;
        int in = __atomic_add_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST);
        if (in > (int)pr->permits)
            __atomic_add_fetch(&sh->violations, 1, __ATOMIC_SEQ_CST);
        int m = __atomic_load_n(&sh->most, __ATOMIC_SEQ_CST);
        while (in > m && !__atomic_compare_exchange_n(&sh->most, &m, in, 0, __ATOMIC_SEQ_CST,
                                                      __ATOMIC_SEQ_CST))
            ;
        nmt_sleep_ms(5);
        __atomic_sub_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&sh->rounds, 1, __ATOMIC_SEQ_CST);
        err = netmutex_sem_post(&s);
    }
    netmutex_sem_destroy(&s);
    netmutex_shutdown();
    return err ? 20 + err : 0;
}

static void test_cap_processes(void)
{
    enum { PROCS = 6, PERMITS = 3, ROUNDS = 25 };
    pid_t pids[PROCS];
    Shared *sh = shared_new();
    char *name = nm_test_name("sem");
    Proc pr = { .sh = sh, .name = name, .permits = PERMITS, .rounds = ROUNDS };
    quiesce();
    for (int i = 0; i < PROCS; i++)
        pids[i] = nm_fork_run(proc_rounds, &pr);
    for (int i = 0; i < PROCS; i++)
        nm_child_wait_ok(pids[i], nm_ms(120000));
    g_test_message("rounds %d, most inside at once %d", sh->rounds, sh->most);
    g_assert_cmpint(sh->violations, ==, 0);
    g_assert_cmpint(sh->rounds, ==, PROCS * ROUNDS);
    g_assert_cmpint(sh->most, ==, PERMITS);
    nm_configure(redis);
    g_assert_true(wait_nothing_left());
    munmap(sh, sizeof *sh);
    g_free(name);
}

/* A child that takes a permit, says so, and waits to be told to go on
 * (or to be killed or stopped meanwhile); then waits for the lost-hold
 * callback and posts.  Its exit status: 0, or the post's result plus 100
 * (ENOLCK expected when its lease ran out while it was stopped). */
static int proc_hold(void *p)
{
    const Proc *pr = p;
    Shared *sh = pr->sh;
    netmutex_sem_t s;
    proc_configure(pr);
    int err = netmutex_sem_init(&s, pr->name, pr->permits, NULL);
    if (!err)
        err = netmutex_sem_wait(&s);
    if (err)
        return 20 + err;
    __atomic_store_n(&sh->ready, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&sh->go, __ATOMIC_SEQ_CST))
        nmt_sleep_ms(1);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!__atomic_load_n(&sh->lost, __ATOMIC_SEQ_CST) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    err = netmutex_sem_post(&s);
    netmutex_sem_destroy(&s);
    netmutex_shutdown();
    return err ? 100 + err : 0;
}

/* A holder stopped (SIGSTOP) past its lease: its permit comes back to
 * the others, and the holder, resumed, is told it lost it: the lost-hold
 * callback, then ENOLCK from its post. */
static void test_stopped_holder_lost(void)
{
    netmutex_sem_t s;
    Shared *sh = shared_new();
    char *name = nm_test_name("sem");
    Proc pr = { .sh = sh, .name = name, .permits = 1, .lease_ms = nm_ms(400) };
    quiesce();
    pid_t pid = nm_fork_run(proc_hold, &pr);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!__atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    g_assert_true(__atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST));
    g_assert_cmpint(kill(pid, SIGSTOP), ==, 0);
    nm_configure(redis);
    nm_assert_rc(netmutex_sem_init(&s, name, 1, NULL), 0);
    nm_assert_rc(netmutex_sem_wait(&s), 0); /* once the stopped one's ran out */
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    g_assert_cmpint(kill(pid, SIGCONT), ==, 0);
    int status = 0;
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 100 + ENOLCK);
    g_assert_cmpint(__atomic_load_n(&sh->lost, __ATOMIC_SEQ_CST), ==, 1);
    g_assert_cmpint(value_of(&s), ==, 0); /* its post did not free ours */
    nm_assert_rc(netmutex_sem_post(&s), 0);
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    g_assert_true(wait_nothing_left());
    munmap(sh, sizeof *sh);
    g_free(name);
}

/* A holder killed: its permit comes back when its lease runs out, the
 * waiter gets in, and nothing is left on the server. */
static void test_killed_holder(void)
{
    netmutex_sem_t s;
    Shared *sh = shared_new();
    char *name = nm_test_name("sem");
    Proc pr = { .sh = sh, .name = name, .permits = 1, .lease_ms = nm_ms(1000) };
    quiesce();
    pid_t pid = nm_fork_run(proc_hold, &pr);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!__atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    g_assert_true(__atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST));
    nm_configure(redis);
    nm_assert_rc(netmutex_sem_init(&s, name, 1, NULL), 0);
    nm_assert_rc(netmutex_sem_trywait(&s), EAGAIN);
    g_assert_cmpint(value_of(&s), ==, 0);
    Taker w = { .s = &s };
    NmCall *c = nm_call_start(taker_run, &w);
    g_assert_true(wait_queued(name, 1));
    g_assert_cmpint(kill(pid, SIGKILL), ==, 0);
    int status = 0;
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFSIGNALED(status));
    g_assert_true(wait_got(&w));
    g_atomic_int_set(&w.release, 1);
    nm_assert_rc(nm_call_wait(c, PROMPT_MS), 0);
    g_assert_cmpint(value_of(&s), ==, 1);
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    g_assert_true(wait_nothing_left());
    munmap(sh, sizeof *sh);
    g_free(name);
}

/* ---- programs that disagree, one's waiter queued ------------------------ */

/* A child that waits once (no bound: it is queued until it gets in or is
 * told otherwise) and posts what it got.  Its exit status: the wait's
 * result, or the post's plus 100. */
static int proc_wait_once(void *p)
{
    const Proc *pr = p;
    netmutex_sem_t s;
    proc_configure(pr);
    int err = netmutex_sem_init(&s, pr->name, pr->permits, NULL);
    if (!err)
        err = netmutex_sem_wait(&s);
    if (!err) {
        int posted = netmutex_sem_post(&s);
        err = posted ? 100 + posted : 0;
    }
    netmutex_sem_destroy(&s);
    netmutex_shutdown();
    return err;
}

/* One round of test_disagree_queued; false when the test itself stalled
 * past the waiter's entry (the interleaving was not the one wanted). */
static bool disagree_queued_round(void)
{
    netmutex_sem_t two;
    Shared *sh = shared_new();
    char *name = nm_test_name("sem");
    char *q = sem_key(name, ":q"), *w = sem_key(name, ":w"), *set = sem_key(name, ":s");
    Proc a = { .sh = sh, .name = name, .permits = 1 };
    quiesce();
    pid_t holder = nm_fork_run(proc_hold, &a);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!__atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    g_assert_true(__atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST));
    pid_t waiter = nm_fork_run(proc_wait_once, &a);
    g_assert_true(wait_queued(name, 1));
    g_assert_cmpint(kill(holder, SIGKILL), ==, 0);
    g_assert_cmpint(waitpid(holder, NULL, 0), ==, holder);

    /* A's waiter stopped just after a refresh of its entry, whose
     * count is A's; then A's last permit runs out (the set expires with
     * its last share, shares.lua), and B's trywait is the first request
     * to find the name free, A's waiter queued and live. */
    char *token = nm_redis_string(redis, "LINDEX %s 0", q);
    g_assert_nonnull(token);
    char *was = nm_redis_string(redis, "HGET %s %s", w, token);
    char *entry = nm_redis_wait_refresh(redis, w, token, was, PROMPT_MS);
    g_assert_nonnull(entry);
    g_assert_cmpint(kill(waiter, SIGSTOP), ==, 0);
    nm_redis_ok(redis, "DEL %s", set);
    nm_configure(redis);
    nm_assert_rc(netmutex_sem_init(&two, name, 2, NULL), 0);
    nm_assert_rc(netmutex_sem_trywait(&two), 0);
    long long age = nm_redis_time_ms(redis) - nm_entry_written_ms(entry);
    bool driven = age >= 0 && age < NM_TEST_ENTRY_LIFE_MS;
    if (driven) {
        /* Nothing reserved for A's waiter under B's count: S holds B's
         * permit and its bound alone, and A's waiter left the queue when
         * it reached its head, to be told at its next attempt. */
        g_assert_cmpint(int_cmd("ZCARD", set), ==, 2);
        g_assert_cmpint(queued_of(name), ==, 0);
    } else {
        g_test_message("the test stalled %lld ms: round run again", age);
    }

    /* Resumed, A's waiter is told B's count is not its own, and holds
     * nothing: its give-up confirmed no reservation. */
    g_assert_cmpint(kill(waiter, SIGCONT), ==, 0);
    int status = 0;
    until = nmt_now_ms() + PROMPT_MS;
    pid_t got;
    while ((got = waitpid(waiter, &status, WNOHANG)) == 0 && nmt_now_ms() < until)
        nmt_sleep_ms(5);
    if (got == 0) {
        kill(waiter, SIGKILL);
        waitpid(waiter, &status, 0);
    }
    g_assert_cmpint(got, ==, waiter);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, EINVAL);
    g_assert_cmpint(value_of(&two), ==, 1);
    nm_assert_rc(netmutex_sem_post(&two), 0);
    nm_assert_rc(netmutex_sem_destroy(&two), 0);
    g_assert_true(wait_nothing_left());
    g_free(entry);
    g_free(was);
    g_free(token);
    g_free(set);
    g_free(w);
    g_free(q);
    munmap(sh, sizeof *sh);
    g_free(name);
    return driven;
}

/* Two programs that disagree on the permits, one's waiter queued when the
 * other's request comes: A (1 permit: a holder and a waiter, children)
 * and B (2, this process).  A's holder dies and its permit runs out,
 * taking the set's bound with it; B's trywait, the first request after,
 * serves the queue under B's count.  A's waiter must leave the queue, never
 * granted (it was, and its give-up after EINVAL then confirmed the grant:
 * two holders of a 1-permit program), and is told EINVAL. */
static void test_disagree_queued(void)
{
    enum { ROUNDS = 5 };
    bool driven = false;
    for (int i = 0; i < ROUNDS && !driven && !g_test_failed(); i++)
        driven = disagree_queued_round();
    g_assert_true(driven);
}

/* ---- status ------------------------------------------------------------- */

/* netmutex_list_shared's callback: the semaphore named in ARG found. */
typedef struct Found {
    const char *name;
    int kind;
    netmutex_shared_status_t st;
    int n;
} Found;

static int found_one(const char *name, int kind, const netmutex_shared_status_t *st, void *arg)
{
    Found *f = arg;
    if (strcmp(name, f->name) == 0) {
        f->kind = kind;
        f->st = *st;
        f->n++;
    }
    return 0;
}

/* netmutex_sem_status: permits held out of N, waiters, nothing written;
 * netmutex_list_shared finds the semaphore while a permit is held. */
static void test_status(void)
{
    netmutex_sem_t s;
    netmutex_shared_status_t st;
    Found f = { 0 };
    char *name = nm_test_name("sem");
    f.name = name;
    nm_assert_rc(netmutex_sem_status(NULL, &st), EINVAL);
    nm_assert_rc(netmutex_sem_status(name, NULL), EINVAL);
    nm_assert_rc(netmutex_list_shared(NULL, NULL, NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_sem_status(name, &st), 0);
    g_assert_cmpuint(st.shares, ==, 0);
    g_assert_cmpuint(st.permits, ==, 0);
    g_assert_cmpint(st.writer, ==, 0);
    g_assert_cmpint(st.ttl_ms, ==, -1);
    g_assert_cmpuint(st.waiters, ==, 0);
    g_assert_cmpint(nm_redis_kind_keys(redis, 's'), ==, 0); /* status writes nothing */

    nm_assert_rc(netmutex_sem_init(&s, name, 2, NULL), 0);
    nm_assert_rc(netmutex_sem_wait(&s), 0);
    nm_assert_rc(netmutex_sem_wait(&s), 0);
    Taker t = { .s = &s, .hold_ms = 1 };
    NmCall *c = nm_call_start(taker_run, &t);
    g_assert_true(wait_queued(name, 1));
    long long keys = nm_redis_kind_keys(redis, 's');
    nm_assert_rc(netmutex_sem_status(name, &st), 0);
    g_assert_cmpuint(st.shares, ==, 2);
    g_assert_cmpuint(st.permits, ==, 2);
    g_assert_cmpuint(st.waiters, ==, 1);
    g_assert_cmpuint(st.writers_waiting, ==, 0);
    g_assert_cmpint(st.writer, ==, 0);
    g_assert_cmpstr(st.holder, ==, "");
    nm_assert_rc(netmutex_list_shared(NULL, found_one, &f, NULL), 0);
    g_assert_cmpint(f.n, ==, 1);
    g_assert_cmpint(f.kind, ==, NETMUTEX_KIND_SEM);
    g_assert_cmpuint(f.st.shares, ==, 2);
    g_assert_cmpint(nm_redis_kind_keys(redis, 's'), ==, keys);
    nm_assert_rc(netmutex_status(name, &(netmutex_status_t){ 0 }), 0);

    nm_assert_rc(netmutex_sem_post(&s), 0);
    nm_assert_rc(nm_call_wait(c, PROMPT_MS), 0);
    nm_assert_rc(netmutex_sem_post(&s), 0);
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    g_assert_true(wait_nothing_left());
    nm_assert_rc(netmutex_sem_status(name, &st), 0);
    g_assert_cmpuint(st.shares, ==, 0);
    f.n = 0;
    nm_assert_rc(netmutex_list_shared(NULL, found_one, &f, NULL), 0);
    g_assert_cmpint(f.n, ==, 0);
    g_free(name);
}

/* ---- quorum mode ---------------------------------------------------------- */

static void test_quorum_enotsup(void)
{
    netmutex_sem_t s;
    int v;
    const char *sock = nm_redis_socket(redis);
    char *url = g_strdup_printf("unix://%s?db=1,unix://%s?db=2,unix://%s?db=3", sock, sock,
                                sock);
    netmutex_config_t cfg = { .url = url };
    char *name = nm_test_name("sem");
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_sem_init(&s, name, 2, NULL), 0);
    nm_assert_rc(netmutex_sem_wait(&s), ENOTSUP);
    nm_assert_rc(netmutex_sem_trywait(&s), ENOTSUP);
    nm_assert_rc(netmutex_sem_getvalue(&s, &v), ENOTSUP);
    nm_assert_rc(netmutex_sem_post(&s), EPERM);
    nm_assert_rc(netmutex_sem_destroy(&s), 0);
    netmutex_shared_status_t st;
    nm_assert_rc(netmutex_sem_status(name, &st), ENOTSUP);
    nm_assert_rc(netmutex_list_shared(NULL, found_one, NULL, NULL), ENOTSUP);
    nm_configure(redis);
    g_free(url);
    g_free(name);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/sem/args/bad", test_bad_arguments);
    g_test_add_func("/sem/threads/try-full", test_try_full);
    g_test_add_func("/sem/threads/post-not-held", test_post_not_held);
    g_test_add_data_func("/sem/timed/realtime", GINT_TO_POINTER(CLOCK_REALTIME),
                         test_timed_out);
    g_test_add_data_func("/sem/timed/monotonic", GINT_TO_POINTER(CLOCK_MONOTONIC),
                         test_timed_out);
    g_test_add_func("/sem/order/fifo", test_fifo);
    g_test_add_func("/sem/args/disagree", test_disagree);
    g_test_add_func("/sem/args/bound-and-wrong-type", test_bound_and_wrong_type);
    g_test_add_func("/sem/processes/disagree-queued", test_disagree_queued);
    g_test_add_func("/sem/processes/cap", test_cap_processes);
    g_test_add_func("/sem/processes/killed-holder", test_killed_holder);
    g_test_add_func("/sem/processes/stopped-holder-lost", test_stopped_holder_lost);
    g_test_add_func("/sem/status", test_status);
    g_test_add_func("/sem/quorum/enotsup", test_quorum_enotsup);

    int rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
