/*
 * test_wake.c -- waiting and waking: waiters sleep until a release (or the
 * holder's lease end) and must never miss one; the Redis queue serves
 * processes in arrival order; a timed-out waiter leaves the queue; a
 * waiter whose blocked connection is killed blocks again; the local queue and
 * cohort hand-off keep mutual exclusion and fence order across processes;
 * with cohort hand-off off every acquisition gets its own fence.
 *
 * Worker processes are forked from a parent that holds nothing and has no
 * library thread (every test ends with netmutex_shutdown, asserting 0);
 * holders that must live in another process are nm_remote (fork + exec).
 */
#include "ac_config.h"

#include "fixture.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static NmRedis *redis;

#define PROMPT_MS nm_ms(30000)

/* ---- helpers ------------------------------------------------------------- */

/* An integer reply of FMT run on a fresh connection (-1 otherwise). */
static long long redis_int(const char *fmt, const char *name)
{
    redisReply *reply = nm_redis_cmd(redis, fmt, name);
    long long n = -1;

    if (reply->type == REDIS_REPLY_INTEGER)
        n = reply->integer;
    freeReplyObject(reply);
    return n;
}

static long long waiting_len(const char *name)
{
    char *key = nm_key_of("netmutex:", name, ":w");
    long long n = redis_int("HLEN %s", key);
    g_free(key);
    return n;
}

static void *shared_alloc(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    g_assert_true(p != MAP_FAILED);
    memset(p, 0, size);
    return p;
}

/* ---- the shared resource of the multi-process tests ------------------------ */

/* What the protected resource remembers, in memory shared by every worker
 * process.  Only the netmutex protects it: a plain read-modify-write that
 * loses updates without the lock. */
typedef struct Resource {
    volatile long long counter;
    volatile uint64_t last_fence;
    volatile int last_pid;
    gint violations;     /* fence went back, or repeated in another process */
    gint failures;       /* a netmutex call failed */
    gint same_fence;     /* acquisitions that shared the previous fence */
    gint switches;       /* acquisitions by another process than the last */
    gint64 max_wait_ms;  /* longest single lock wait (information only) */
} Resource;

typedef struct Workload {
    const char *name;
    Resource *res;
    int threads;
    int iterations;
    unsigned int hold_us;
    bool cohort_off;
    int start_fd;  /* read end: EOF means go */
    int start_out; /* write end: each child closes its copy */
} Workload;

static void note_failure(Resource *res, const char *what, int rc)
{
    g_printerr("pid %d: %s returned %s\n", (int)getpid(), what, nm_errname(rc));
    g_atomic_int_inc(&res->failures);
}

/* The critical section: check the fence against the last one the
 * resource saw, then read, dawdle, write back plus one. */
static void touch(Resource *res, netmutex_t *m, unsigned int hold_us)
{
    uint64_t fence = 0;
    long long counter;
    int rc = netmutex_fence(m, &fence);

    if (rc != 0)
        note_failure(res, "fence", rc);
    if (fence < res->last_fence || (fence == res->last_fence && res->last_pid != getpid())) {
        g_printerr("fence went from %" G_GUINT64_FORMAT " (pid %d) to %" G_GUINT64_FORMAT
                   " (pid %d)\n", res->last_fence, res->last_pid, fence, (int)getpid());
        g_atomic_int_inc(&res->violations);
    }
    if (fence == res->last_fence)
        res->same_fence++;
    if (res->last_pid != getpid())
        res->switches++;
    res->last_fence = fence;
    res->last_pid = getpid();
    counter = res->counter;
    if (hold_us)
        g_usleep(hold_us);
    else
        sched_yield();
    res->counter = counter + 1;
}

static void *worker_thread(void *p)
{
    const Workload *w = p;
    netmutex_t m;
    gint64 max_wait = 0;
    int rc = netmutex_init(&m, w->name, NULL);

    if (rc != 0) {
        note_failure(w->res, "init", rc);
        return NULL;
    }
    for (int i = 0; i < w->iterations; i++) {
        gint64 start = nmt_now_ms();

        rc = netmutex_lock(&m);
        if (rc != 0) {
            note_failure(w->res, "lock", rc);
            break;
        }
        max_wait = MAX(max_wait, nmt_now_ms() - start);
        touch(w->res, &m, w->hold_us);
        if (max_wait > w->res->max_wait_ms)
            w->res->max_wait_ms = max_wait;
        rc = netmutex_unlock(&m);
        if (rc != 0) {
            note_failure(w->res, "unlock", rc);
            break;
        }
    }
    rc = netmutex_destroy(&m);
    if (rc != 0)
        note_failure(w->res, "destroy", rc);
    return NULL;
}

static int worker_process(void *p)
{
    const Workload *w = p;
    pthread_t t[16];
    char go;

    close(w->start_out);
    if (w->cohort_off) {
        char *url = nm_redis_url(redis);
        netmutex_config_t cfg = { .url = url, .cohort_max = NETMUTEX_COHORT_OFF,
                                  .cache_idle_ms = NETMUTEX_CACHE_OFF };
        int rc = netmutex_configure(&cfg);

        g_free(url);
        if (rc != 0)
            return 13;
    } else {
        nm_configure(redis);
    }
    if (read(w->start_fd, &go, 1) != 0)
        return 10;
    for (int i = 0; i < w->threads; i++)
        if (pthread_create(&t[i], NULL, worker_thread, (void *)w) != 0)
            return 11;
    for (int i = 0; i < w->threads; i++)
        pthread_join(t[i], NULL);
    return netmutex_shutdown() == 0 ? 0 : 12;
}

/* Runs W in PROCS processes started together; waits for all of them. */
static void run_workload(Workload *w, int procs)
{
    pid_t pids[8];
    int start[2];

    g_assert_cmpint(procs, <=, (int)G_N_ELEMENTS(pids));
    g_assert_cmpint(w->threads, <=, 16);
    g_assert_cmpint(pipe(start), ==, 0);
    w->start_fd = start[0];
    w->start_out = start[1];
    for (int i = 0; i < procs; i++)
        pids[i] = nm_fork_run(worker_process, w);
    close(start[0]);
    close(start[1]); /* go */
    for (int i = 0; i < procs; i++)
        nm_child_wait_ok(pids[i], nm_ms(120000));
}

/* ---- no lost wake-up ------------------------------------------------------- */

/* Many short critical sections, 4 processes x 2 threads: a wake-up lost
 * anywhere would strand a waiter (the run would not finish within the
 * bound) and a broken exclusion would lose an update.  Once with cohort
 * hand-off off, so every release goes through Redis and wakes another
 * waiter there, once with the defaults. */
static void stress(bool cohort_off)
{
    char *name = nm_test_name("m");
    Resource *res = shared_alloc(sizeof *res);
    Workload w = { .name = name, .res = res, .threads = 2, .iterations = 200,
                   .cohort_off = cohort_off };
    gint64 start = nmt_now_ms();

    run_workload(&w, 4);
    g_test_message("%lld acquisitions in %" G_GINT64_FORMAT " ms, %d changes of process, "
                   "longest wait %" G_GINT64_FORMAT " ms", res->counter,
                   nmt_now_ms() - start, res->switches, res->max_wait_ms);
    g_assert_cmpint(res->failures, ==, 0);
    g_assert_cmpint(res->violations, ==, 0);
    g_assert_cmpint(res->counter, ==, 4 * 2 * 200);
    if (cohort_off)
        g_assert_cmpint(res->same_fence, ==, 0);
    munmap(res, sizeof *res);
    g_free(name);
}

static void test_stress_no_lost_wakeup(void)
{
    stress(true);
}

static void test_stress_no_lost_wakeup_cohort(void)
{
    stress(false);
}

/* ---- cohort hand-off across processes ----------------------------------------- */

/* 2 processes x 8 threads: the local queue and the cohort hand-off (which
 * passes the lease between threads of one process) keep the exclusion
 * exact, and the fences the resource sees never decrease, and grow
 * whenever the holder's process changes. */
static void test_cohort_exclusion_and_fences(void)
{
    char *name = nm_test_name("m");
    Resource *res = shared_alloc(sizeof *res);
    Workload w = { .name = name, .res = res, .threads = 8, .iterations = 50, .hold_us = 50 };

    run_workload(&w, 2);
    g_test_message("%d of %lld acquisitions shared the previous fence (cohort hand-offs)",
                   res->same_fence, res->counter);
    g_assert_cmpint(res->failures, ==, 0);
    g_assert_cmpint(res->violations, ==, 0);
    g_assert_cmpint(res->counter, ==, 2 * 8 * 50);
    munmap(res, sizeof *res);
    g_free(name);
}

/* ---- cohort off ---------------------------------------------------------------- */

#define OFF_THREADS 4
#define OFF_ITERATIONS 50

typedef struct OffState {
    netmutex_t *m;
    uint64_t last;        /* guarded by the netmutex */
    int acquisitions;     /* guarded by the netmutex */
    gint bad;
} OffState;

static void *cohort_off_thread(void *p)
{
    OffState *s = p;

    for (int i = 0; i < OFF_ITERATIONS; i++) {
        uint64_t fence = 0;
        int rc = netmutex_lock(s->m);

        if (rc != 0) {
            g_printerr("lock: %s\n", nm_errname(rc));
            g_atomic_int_inc(&s->bad);
            break;
        }
        if (netmutex_fence(s->m, &fence) != 0 || fence <= s->last) {
            g_printerr("fence %" G_GUINT64_FORMAT " after %" G_GUINT64_FORMAT "\n",
                       fence, s->last);
            g_atomic_int_inc(&s->bad);
        }
        s->last = fence;
        s->acquisitions++;
        sched_yield();
        if (netmutex_unlock(s->m) != 0)
            g_atomic_int_inc(&s->bad);
    }
    return NULL;
}

/* cohort_max = NETMUTEX_COHORT_OFF: no hand-off between the 4 threads of
 * this process, so every acquisition has a fence of its own, strictly
 * greater than the one before. */
static void test_cohort_off_own_fences(void)
{
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url, .cohort_max = NETMUTEX_COHORT_OFF,
                              .cache_idle_ms = NETMUTEX_CACHE_OFF };
    char *name;
    netmutex_t m;
    OffState s = { .m = &m };
    pthread_t t[OFF_THREADS];
    uint64_t first = 0;

    nm_assert_rc(netmutex_configure(&cfg), 0);
    name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_fence(&m, &first), 0);
    s.last = first;
    nm_assert_rc(netmutex_unlock(&m), 0);

    for (int i = 0; i < OFF_THREADS; i++)
        g_assert_cmpint(pthread_create(&t[i], NULL, cohort_off_thread, &s), ==, 0);
    for (int i = 0; i < OFF_THREADS; i++)
        pthread_join(t[i], NULL);
    g_assert_cmpint(s.bad, ==, 0);
    g_assert_cmpint(s.acquisitions, ==, OFF_THREADS * OFF_ITERATIONS);
    /* One fence per acquisition: each thread saw every fence strictly
     * greater than the one before (a hand-off would have shared it). */
    g_assert_cmpuint(s.last, >, first);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
    g_free(url);
}

/* ---- a killed holder ----------------------------------------------------------- */

/* A waiter sleeping on a holder that is then killed with SIGKILL wakes
 * when the lease runs out: within the lease plus a (generous) bound. */
static void test_dead_holder_waiter_wakes(void)
{
    unsigned int lease = nm_ms(500);
    char *name = nm_test_name("m");
    netmutex_t m;
    NmKiller k = { .redis = redis, .name = name };
    NmCall *killer;
    gint64 got_at;

    nm_configure(redis);
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    k.victim = nm_remote_start(redis, name, NETMUTEX_NORMAL, lease);
    nm_assert_rc(nm_remote(k.victim, 'l'), 0);
    killer = nm_call_start(nm_kill_when_queued, &k);
    nm_assert_rc(netmutex_lock(&m), 0);
    got_at = nmt_now_ms();
    nm_assert_rc(nm_call_wait(killer, PROMPT_MS), 0);
    g_test_message("woke %" G_GINT64_FORMAT " ms after the kill (lease %u ms)",
                   got_at - k.killed_at, lease);
    g_assert_cmpint(got_at - k.killed_at, <=, lease + nm_ms(5000));
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_cmpint(nm_queue_len(redis, name), ==, 0);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
}

/* ---- timedlock ---------------------------------------------------------------- */

/* Watches NAME's queue while the main thread waits: true once our waiter
 * is visibly queued (in the list and in the waiter hash). */
typedef struct Watcher {
    const char *name;
    unsigned int timeout_ms;
} Watcher;

static int watch_queued(void *p)
{
    Watcher *w = p;
    gint64 end = nmt_now_ms() + w->timeout_ms;

    while (nmt_now_ms() < end) {
        if (nm_queue_len(redis, w->name) == 1 && waiting_len(w->name) == 1)
            return 1;
        nmt_sleep_ms(5);
    }
    return 0;
}

/* One timed wait on CLOCK that must time out at its deadline while a
 * remote process holds NAME. */
static void timed_wait_times_out(netmutex_t *m, const char *name, clockid_t clock)
{
    unsigned int wait_ms = nm_ms(1000);
    Watcher w = { .name = name, .timeout_ms = wait_ms };
    struct timespec deadline, returned;
    NmCall *watcher;

    nm_deadline(&deadline, clock, wait_ms);
    watcher = nm_call_start(watch_queued, &w);
    if (clock == CLOCK_REALTIME)
        nm_assert_rc(netmutex_timedlock(m, &deadline), ETIMEDOUT);
    else
        nm_assert_rc(netmutex_clocklock(m, clock, &deadline), ETIMEDOUT);
    clock_gettime(clock, &returned);
    /* It was really waiting in the queue... */
    g_assert_cmpint(nm_call_wait(watcher, PROMPT_MS), ==, 1);
    /* ...not returned before the deadline, nor much after it... */
    nm_assert_timed_out_at(&returned, &deadline, nm_ms(2000));
    /* ...and left no entry behind (the cancel path). */
    g_assert_cmpint(nm_queue_len(redis, name), ==, 0);
    g_assert_cmpint(waiting_len(name), ==, 0);
}

/* NAME's queue, its tokens in order, as one string (LRANGE). */
static char *queue_of(const char *name)
{
    char *key = nm_key_of("netmutex:", name, ":q");
    redisReply *r = nm_redis_cmd(redis, "LRANGE %s 0 -1", key);
    GString *out = g_string_new("");
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
        g_string_append_printf(out, "%s%s", i ? " " : "", r->element[i]->str);
    freeReplyObject(r);
    g_free(key);
    return g_string_free(out, FALSE);
}

/* Times a lock of the mutex out after its ms (a thread of its own). */
typedef struct Timed {
    netmutex_t *m;
    unsigned int ms;
} Timed;

static int timed_lock(void *p)
{
    Timed *t = p;
    struct timespec deadline;
    nm_deadline(&deadline, CLOCK_MONOTONIC, t->ms);
    int rc = netmutex_clocklock(t->m, CLOCK_MONOTONIC, &deadline);
    if (rc == 0)
        netmutex_unlock(t->m);
    return rc;
}

/* Polls until NAME's queue holds N tokens; returns them (LRANGE). */
static char *queue_when(const char *name, long long n)
{
    g_assert_true(nm_wait_queue_len(redis, name, n, nm_ms(10000)));
    return queue_of(name);
}

/* A waiter queued between two others gives up (its deadline): it alone
 * leaves the queue, the others keep their order, and it is never
 * granted; the release serves the first, the first's the last. */
static void test_middle_waiter_gives_up(void)
{
    char *name = nm_test_name("m");
    netmutex_t m;
    NmRemote *holder = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);
    NmRemote *first = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);
    NmRemote *last = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);

    nm_configure(redis);
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    nm_assert_rc(nm_remote(holder, 'l'), 0);
    nm_remote_send(first, 'l');
    char *q1 = queue_when(name, 1);
    Timed t = { .m = &m, .ms = nm_ms(2000) };
    NmCall *us = nm_call_start(timed_lock, &t);
    char *q2 = queue_when(name, 2);
    nm_remote_send(last, 'l');
    char *q3 = queue_when(name, 3);
    g_assert_true(g_str_has_prefix(q3, q2) && g_str_has_prefix(q2, q1));
    nm_assert_rc(nm_call_wait(us, PROMPT_MS), ETIMEDOUT);
    char *mine = g_strndup(q2 + strlen(q1), strlen(q2) - strlen(q1)); /* " <ours>" */
    char *want = g_strconcat(q1, q3 + strlen(q2), NULL);
    char *after = queue_of(name);
    g_assert_cmpstr(after, ==, want);
    nm_assert_rc(nm_remote(holder, 'u'), 0);
    nm_assert_rc(nm_remote_result(first), 0);
    char *rest = queue_of(name);
    g_assert_cmpstr(rest, ==, q3 + strlen(q2) + 1);
    g_assert_null(strstr(rest, mine + 1));
    nm_assert_rc(nm_remote(first, 'u'), 0);
    nm_assert_rc(nm_remote_result(last), 0);
    nm_assert_rc(nm_remote(last, 'u'), 0);
    g_assert_cmpint(nm_queue_len(redis, name), ==, 0);
    nm_remote_stop(last);
    nm_remote_stop(first);
    nm_remote_stop(holder);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(rest);
    g_free(after);
    g_free(want);
    g_free(mine);
    g_free(q3);
    g_free(q2);
    g_free(q1);
    g_free(name);
}

/* timedlock and clocklock with no release: ETIMEDOUT by the deadline, and
 * afterwards nothing of the waiter is left in the Redis queue -- so the
 * holder's release frees the lock instead of granting it to the waiter
 * that left. */
static void test_timedlock_leaves_queue(void)
{
    char *name = nm_test_name("m");
    netmutex_t m;
    NmRemote *holder;
    char *token, *after;

    nm_configure(redis);
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    holder = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);
    nm_assert_rc(nm_remote(holder, 'l'), 0);
    token = nm_token_of(redis, name);

    timed_wait_times_out(&m, name, CLOCK_REALTIME);
    timed_wait_times_out(&m, name, CLOCK_MONOTONIC);

    after = nm_token_of(redis, name);
    g_assert_cmpstr(after, ==, token);
    g_free(after);
    nm_assert_rc(nm_remote(holder, 'u'), 0);
    after = nm_token_of(redis, name);
    g_assert_null(after); /* released, not granted to a waiter that left */
    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_remote_stop(holder);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(token);
    g_free(name);
}

/* ---- FIFO ------------------------------------------------------------------------ */

#define FIFO_WAITERS 3

typedef struct FifoBoard {
    gint next;                  /* index of the next slot */
    int order[FIFO_WAITERS];    /* waiter ids in the order they got the lock */
} FifoBoard;

typedef struct FifoWaiter {
    const char *name;
    FifoBoard *board;
    int id;
} FifoWaiter;

static int fifo_waiter(void *p)
{
    const FifoWaiter *w = p;
    netmutex_t m;
    int rc;

    nm_configure(redis);
    if ((rc = netmutex_init(&m, w->name, NULL)) != 0 || (rc = netmutex_lock(&m)) != 0) {
        g_printerr("waiter %d: %s\n", w->id, nm_errname(rc));
        return 1;
    }
    w->board->order[g_atomic_int_add(&w->board->next, 1) % FIFO_WAITERS] = w->id;
    nmt_sleep_ms(20); /* hold briefly: the next in line really waits */
    if ((rc = netmutex_unlock(&m)) != 0 || (rc = netmutex_destroy(&m)) != 0 ||
        (rc = netmutex_shutdown()) != 0) {
        g_printerr("waiter %d: %s\n", w->id, nm_errname(rc));
        return 2;
    }
    return 0;
}

/* A holds; B, C and D (three processes) start waiting one after another,
 * each once the previous one is visibly queued in Redis; when A unlocks
 * they get the lock in arrival order: B, C, D. */
/* Static: the forked waiters inherit it, and memcheck must see it as
 * reachable in them. */
static NmRemote *volatile fifo_holder;

static void test_fifo_order(void)
{
    char *name = nm_test_name("m");
    FifoBoard *board = shared_alloc(sizeof *board);
    FifoWaiter waiters[FIFO_WAITERS];
    pid_t pids[FIFO_WAITERS];
    NmRemote *a = fifo_holder = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);

    nm_assert_rc(nm_remote(a, 'l'), 0);
    for (int i = 0; i < FIFO_WAITERS; i++) {
        waiters[i] = (FifoWaiter){ .name = name, .board = board, .id = 'B' + i };
        pids[i] = nm_fork_run(fifo_waiter, &waiters[i]);
        g_assert_true(nm_wait_queue_len(redis, name, i + 1, nm_ms(10000)));
    }
    g_assert_cmpint(g_atomic_int_get(&board->next), ==, 0);
    nm_assert_rc(nm_remote(a, 'u'), 0);
    for (int i = 0; i < FIFO_WAITERS; i++)
        nm_child_wait_ok(pids[i], PROMPT_MS);
    nm_remote_stop(a);
    fifo_holder = NULL;

    g_assert_cmpint(board->next, ==, FIFO_WAITERS);
    g_test_message("order: %c %c %c", board->order[0], board->order[1], board->order[2]);
    for (int i = 0; i < FIFO_WAITERS; i++)
        g_assert_cmpint(board->order[i], ==, 'B' + i);
    g_assert_cmpint(nm_queue_len(redis, name), ==, 0);
    munmap(board, sizeof *board);
    g_free(name);
}

/* ---- the waiter's blocked connection ------------------------------------------------- */

/* The id of the one client blocked in BLPOP (a queued waiter waiting for
 * its grant), or -1 if there is none. */
static long long blocked_waiter(void)
{
    redisReply *reply = nm_redis_cmd(redis, "CLIENT LIST TYPE normal");
    gchar **lines = g_strsplit(reply->type == REDIS_REPLY_STRING ? reply->str : "", "\n", -1);
    long long id = -1;

    for (gchar **l = lines; *l; l++)
        if (strstr(*l, " cmd=blpop ") && g_str_has_prefix(*l, "id="))
            id = g_ascii_strtoll(*l + 3, NULL, 10);
    g_strfreev(lines);
    freeReplyObject(reply);
    return id;
}

/* Waits (bounded) for a client blocked in BLPOP other than NOT: its id. */
static long long wait_blocked_waiter(long long not)
{
    gint64 end = nmt_now_ms() + nm_ms(10000);
    long long id;
    while (((id = blocked_waiter()) < 0 || id == not) && nmt_now_ms() < end)
        nmt_sleep_ms(5);
    return id;
}

/* The connection a queued waiter blocks on for its grant is killed (CLIENT
 * KILL): the waiter dials again, stays queued, blocks again, and gets the
 * lock once the holder unlocks. */
static void test_blocked_waiter_killed(void)
{
    char *name = nm_test_name("m");
    netmutex_t m;
    NmRemote *holder;
    NmCall *waiter;
    long long id, again;
    gint64 released_at;

    nm_configure(redis);
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    holder = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);
    nm_assert_rc(nm_remote(holder, 'l'), 0);
    waiter = nm_call_start(nm_call_lock_unlock, &m);
    g_assert_true(nm_wait_queue_len(redis, name, 1, nm_ms(10000)));
    id = wait_blocked_waiter(-1);
    g_assert_cmpint(id, >=, 0);
    nm_redis_ok(redis, "CLIENT KILL ID %lld", id);
    again = wait_blocked_waiter(id);
    g_assert_cmpint(again, >=, 0);
    g_assert_cmpint(again, !=, id);
    g_assert_false(nm_call_done(waiter));
    g_assert_true(nm_wait_queue_len(redis, name, 1, nm_ms(10000)));
    released_at = nmt_now_ms();
    nm_assert_rc(nm_remote(holder, 'u'), 0);
    nm_assert_rc(nm_call_wait(waiter, nm_ms(5000)), 0);
    g_test_message("waiter done %" G_GINT64_FORMAT " ms after the release",
                   nmt_now_ms() - released_at);
    nm_remote_stop(holder);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
}

/* ---- lease caching and the queue ------------------------------------------ */

/* Locks M (a lease handed over from the queue), unlocks, and trylocks at
 * once: the result of the trylock. */
static int lock_unlock_trylock(void *m)
{
    int err = netmutex_lock(m);
    if (err)
        return 1000 + err;
    err = netmutex_unlock(m);
    if (err)
        return 2000 + err;
    err = netmutex_trylock(m);
    if (err == 0)
        netmutex_unlock(m);
    return err;
}

/* A lease handed to us from the Redis queue with another process queued
 * behind us must go back at our unlock: that process asked the holder
 * before us, not us, so no message will come.  Kept cached, our trylock
 * right after the unlock would take it from the cache (0) while the other
 * process waits; given back, the lock is reserved for that process and
 * our trylock gets EBUSY. */
static void test_handed_over_lease_not_cached(void)
{
    char *name = nm_test_name("m");
    netmutex_t m;
    NmRemote *holder, *behind;
    NmCall *us;

    nm_configure(redis);
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    holder = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);
    behind = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);
    nm_assert_rc(nm_remote(holder, 'l'), 0);
    us = nm_call_start(lock_unlock_trylock, &m);
    g_assert_true(nm_wait_queue_len(redis, name, 1, nm_ms(10000)));
    nm_remote_send(behind, 'l');
    g_assert_true(nm_wait_queue_len(redis, name, 2, nm_ms(10000)));
    nm_assert_rc(nm_remote(holder, 'u'), 0);
    nm_assert_rc(nm_call_wait(us, nm_ms(10000)), EBUSY);
    nm_assert_rc(nm_remote_result(behind), 0);
    nm_assert_rc(nm_remote(behind, 'u'), 0);
    nm_remote_stop(behind);
    nm_remote_stop(holder);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
}

/* Polls NAME's status until its idle flag is WANT (bounded). */
static bool wait_idle_flag(const char *name, int want)
{
    netmutex_status_t st = { 0 };
    for (gint64 end = nmt_now_ms() + nm_ms(5000); nmt_now_ms() < end; nmt_sleep_ms(10)) {
        nm_assert_rc(netmutex_status(name, &st), 0);
        if (st.held && st.cached && st.idle == want)
            return true;
    }
    return false;
}

/* A cached lease nobody uses shows as idle after a moment, and as held
 * again soon after a thread takes it from the cache. */
static void test_cached_status_idle_then_held(void)
{
    char *name = nm_test_name("m");
    netmutex_config_t cfg = { .cache_idle_ms = 60000 };
    char *url = nm_redis_url(redis);
    netmutex_t m;

    cfg.url = url;
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    /* Until the subscription is confirmed an unlock gives the lease back. */
    for (gint64 end = nmt_now_ms() + nm_ms(5000); nmt_now_ms() < end; nmt_sleep_ms(10)) {
        netmutex_status_t st;
        nm_assert_rc(netmutex_lock(&m), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
        nm_assert_rc(netmutex_status(name, &st), 0);
        if (st.held)
            break;
    }
    g_assert_true(wait_idle_flag(name, 1));
    nm_assert_rc(netmutex_lock(&m), 0);
    g_assert_true(wait_idle_flag(name, 0));
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_true(wait_idle_flag(name, 1));
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(url);
    g_free(name);
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);

    g_test_add_func("/wake/stress/no-lost-wakeup-4-procs-2-threads-exact-counter",
                    test_stress_no_lost_wakeup);
    g_test_add_func("/wake/stress/no-lost-wakeup-4-procs-2-threads-cohort-exact-counter",
                    test_stress_no_lost_wakeup_cohort);
    g_test_add_func("/wake/dead-holder/waiter-wakes-within-lease", test_dead_holder_waiter_wakes);
    g_test_add_func("/wake/timedlock/etimedout-at-deadline-leaves-queue",
                    test_timedlock_leaves_queue);
    g_test_add_func("/wake/cohort/exclusion-and-fences-2-procs-8-threads",
                    test_cohort_exclusion_and_fences);
    g_test_add_func("/wake/fifo/processes-served-in-arrival-order", test_fifo_order);
    g_test_add_func("/wake/blocked/client-kill-waiter-blocks-again-and-wakes",
                    test_blocked_waiter_killed);
    g_test_add_func("/wake/cohort-off/every-acquisition-own-fence", test_cohort_off_own_fences);
    g_test_add_func("/wake/give-up/middle-waiter-leaves-alone", test_middle_waiter_gives_up);
    g_test_add_func("/wake/cache/handed-over-with-waiters-behind-given-back",
                    test_handed_over_lease_not_cached);
    g_test_add_func("/wake/cache/status-idle-then-held", test_cached_status_idle_then_held);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
