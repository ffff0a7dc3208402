/*
 * chaos_worker.c -- what runs in each chaos worker process.
 *
 * The process configures netmutex (short connect and I/O timeouts, so that
 * faults resolve quickly), makes one mutex with a short lease and a
 * lost-lease callback, and starts its threads.  The mutex is ROBUST, or
 * (cfg->robust false) of the default type with lease caching on, as a
 * ported program gets it: caching is asked for explicitly on the attribute
 * and left at its defaults in the configuration (cache_idle_ms 0: the
 * default), since robust mutexes are never cached.  Each thread loops, until
 * the driver sets log->stop, over one of
 *     netmutex_lock        (half of the rounds: no bound but the run's),
 *     netmutex_timedlock   (three in ten: a random deadline),
 *     netmutex_trylock     (two in ten),
 * and logs the call (chaos_log.h).  A prober (one single-threaded worker)
 * makes only trylock and timedlock calls, 10 to 30 ms apart: in a process
 * of several threads those calls mostly queue behind a local holder, while
 * the prober's always reach the server, faults or not, so that the bounds
 * of these calls are exercised while the server stalls.  When it got the
 * mutex (0 or
 * EOWNERDEAD), in this order:
 *   1. the hold starts at the time read right after the call returned;
 *   2. netmutex_fence;
 *   3. netmutex_validity: the promise ends at the time read just before
 *      that call + ms_left (a later promise replaces it; ENOLCK or 0 ms
 *      left is no promise);
 *   4. after EOWNERDEAD, netmutex_consistent (the "repair");
 *   4b. one hold in long_one_in (the prober's) lasts a good part of a
 *      lease or more here, so that the watchdog has to renew it while
 *      faults strike, and may lose it; validity is asked again after it;
 *   5. the fence is presented to the fenced resource; only if it was
 *      accepted, a read-modify-write of the shared counter with a sleep in
 *      between, and netmutex_validity again right before the write, as the
 *      docs/deployment.md advises before a side effect (no write if it says ENOLCK);
 *   6. a short random time more, then the unlock, whose call time and
 *      result are logged.
 * The lost-lease callback stamps lost_ns on the hold of whichever thread of
 * this process is holding: a process has one lease of the name at a time,
 * shared by its cohort hand-offs.  A callback that comes late for an
 * earlier lease can only stamp a later hold too early, which shortens
 * valid intervals and never invents a violation.
 *
 * Each phase change is published in log->procs for the driver, which picks
 * holders and waiters to stop or kill from there.
 */
#include "ac_config.h"

#include "chaos_worker.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "netmutex.h"

typedef struct Worker {
    const ChaosWorkerCfg *cfg;
    ChaosShared *log;
    ChaosProc *proc;
    int32_t pid;
    netmutex_t m;
} Worker;

typedef struct WThread {
    Worker *w;
    int index;
    uint64_t rng;
    pthread_t tid;
} WThread;

/* ---- small helpers ---------------------------------------------------- */

/* xorshift64*: each thread its own sequence, no locking. */
static uint64_t next_random(WThread *t)
{
    t->rng ^= t->rng >> 12;
    t->rng ^= t->rng << 25;
    t->rng ^= t->rng >> 27;
    return t->rng * 2685821657736338717ull;
}

static unsigned int random_upto(WThread *t, unsigned int n)
{
    return n ? (unsigned int)(next_random(t) % (n + 1u)) : 0;
}

static void sleep_us(unsigned int us)
{
    struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void set_phase(WThread *t, int phase)
{
    chaos_store(&t->w->proc->phase[t->index], phase);
}

/* ---- the lost-lease callback ------------------------------------------ */

static void on_lost(const char *name, void *arg)
{
    Worker *w = arg;
    int64_t now = chaos_now_ns();

    (void)name;
    __atomic_fetch_add(&w->proc->lost_calls, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < w->proc->nthreads; i++) {
        int phase = chaos_load(&w->proc->phase[i]);
        int32_t rec = chaos_load(&w->proc->rec[i]);

        if ((phase == CHAOS_HOLDING || phase == CHAOS_UNLOCKING) && rec >= 0)
            chaos_set_once(&w->log->recs[rec].lost_ns, now);
    }
}

/* ---- one hold ------------------------------------------------------------ */

/* Asks for a promise; false when there is none.  "0 ms left" is none
 * either: netmutex_validity(3) gives ms_left as how long the hold is still safe, so
 * 0 says "not safe any more", not "ours until now" (the library returns
 * it, for one, when a stopped process wakes up long after its lease ended
 * and the watchdog has not yet declared it lost). */
static bool take_promise(WThread *t, ChaosRec *r)
{
    uint64_t ms_left = 0;
    int64_t before = chaos_now_ns();
    int rc = netmutex_validity(&t->w->m, &ms_left);

    r->validity_rc = rc;
    if (rc != 0 || ms_left == 0)
        return false;
    r->promise_ns = before + (int64_t)ms_left * 1000000;
    return true;
}

static void read_modify_write(WThread *t, ChaosRec *r)
{
    int64_t v;

    r->rmw_read_ns = chaos_now_ns();
    v = chaos_counter_read(t->w->log);
    r->rmw_value = v;
    r->rmw_state = CHAOS_RMW_READ;
    sleep_us(t->w->cfg->rmw_us);
    if (!take_promise(t, r)) {
        r->rmw_state = CHAOS_RMW_SKIPPED;
        return;
    }
    chaos_counter_write(t->w->log, v + 1);
    r->rmw_write_ns = chaos_now_ns();
    r->rmw_state = CHAOS_RMW_WRITTEN;
}

static void release(WThread *t, ChaosRec *r)
{
    int rc;

    set_phase(t, CHAOS_UNLOCKING);
    r->unlock_ns = chaos_now_ns();
    rc = netmutex_unlock(&t->w->m);
    r->unlock_end_ns = chaos_now_ns();
    r->unlock_rc = rc;
}

static void hold(WThread *t, ChaosRec *r)
{
    Worker *w = t->w;

    set_phase(t, CHAOS_HOLDING);
    r->fence_rc = netmutex_fence(&w->m, &r->fence);
    take_promise(t, r);
    if (r->rc == EOWNERDEAD)
        r->consistent_rc = netmutex_consistent(&w->m);
    if (w->cfg->long_one_in && random_upto(t, w->cfg->long_one_in - 1) == 0) {
        unsigned int ms = w->cfg->long_min_ms +
                          random_upto(t, w->cfg->long_max_ms - w->cfg->long_min_ms);
        sleep_us(ms * 1000u);
        take_promise(t, r);
    }
    if (r->fence_rc == 0)
        r->accepted = chaos_resource_present(w->log, r->fence, w->pid);
    if (r->accepted == 1)
        read_modify_write(t, r);
    sleep_us(random_upto(t, w->cfg->hold_us));
    release(t, r);
}

/* ---- one round -------------------------------------------------------------- */

static char pick_op(WThread *t)
{
    unsigned int n = random_upto(t, 9);

    if (t->w->cfg->prober)
        return n < 5 ? 'T' : 't';
    return n < 5 ? 'l' : n < 8 ? 'T' : 't';
}

/* The deadline is read on CLOCK_MONOTONIC first, then CLOCK_REALTIME: the
 * library's (realtime) deadline is then never before the logged one. */
static int call_lock(WThread *t, ChaosRec *r)
{
    const ChaosWorkerCfg *cfg = t->w->cfg;
    unsigned int ms = cfg->timed_min_ms + random_upto(t, cfg->timed_max_ms - cfg->timed_min_ms);
    struct timespec abs;
    int rc;

    r->call_ns = chaos_now_ns();
    clock_gettime(CLOCK_REALTIME, &abs);
    abs.tv_sec += ms / 1000;
    abs.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (abs.tv_nsec >= 1000000000L) {
        abs.tv_sec++;
        abs.tv_nsec -= 1000000000L;
    }
    if (r->op == 'T')
        r->deadline_ns = r->call_ns + (int64_t)ms * 1000000;
    rc = r->op == 'l' ? netmutex_lock(&t->w->m)
       : r->op == 'T' ? netmutex_timedlock(&t->w->m, &abs)
       : netmutex_trylock(&t->w->m);
    r->ret_ns = chaos_now_ns();
    r->rc = rc;
    return rc;
}

/* False when the log is full: no call may be made without a record. */
static bool one_round(WThread *t)
{
    Worker *w = t->w;
    int32_t index;
    ChaosRec *r = chaos_log_add(w->log, w->pid, t->index, &index);
    int rc;

    if (!r)
        return false;
    r->op = pick_op(t);
    chaos_store(&w->proc->rec[t->index], index);
    set_phase(t, CHAOS_LOCKING);
    rc = call_lock(t, r);
    if (rc == 0 || rc == EOWNERDEAD)
        hold(t, r);
    set_phase(t, CHAOS_IDLE);
    /* Busy or unreachable: do not spin (and fill the log) on trylock. */
    if (rc == EBUSY || rc == EAGAIN)
        sleep_us(2000 + random_upto(t, 3000));
    else if (rc != 0 && rc != EOWNERDEAD && rc != ETIMEDOUT)
        sleep_us(5000);
    else
        sleep_us(random_upto(t, 1000));
    sleep_us(random_upto(t, w->cfg->think_us));
    if (w->cfg->prober)
        sleep_us(10000 + random_upto(t, 20000));
    return true;
}

static void *thread_main(void *p)
{
    WThread *t = p;

    while (!chaos_load(&t->w->log->stop) && one_round(t))
        ;
    /* A full log: wait for the end without calling anything. */
    while (!chaos_load(&t->w->log->stop))
        sleep_us(10000);
    set_phase(t, CHAOS_EXITED);
    return NULL;
}

/* ---- the process ------------------------------------------------------------- */

static int setup(Worker *w)
{
    const ChaosWorkerCfg *c = w->cfg;
    netmutex_config_t cfg = {
        .url = c->url,
        .connect_timeout_ms = c->connect_ms,
        .io_timeout_ms = c->io_ms,
        .lease_ms = c->lease_ms,
        .server_timeout_ms = c->server_ms,
    };
    netmutex_attr_t attr;
    int rc = netmutex_configure(&cfg);

    if (rc == 0)
        rc = netmutex_attr_init(&attr);
    if (rc != 0)
        return rc;
    rc = c->robust ? netmutex_attr_setrobust(&attr, NETMUTEX_ROBUST)
                   : netmutex_attr_setcache(&attr, 1);
    if (rc == 0)
        rc = netmutex_attr_setlease(&attr, c->lease_ms);
    if (rc == 0)
        rc = netmutex_attr_setlostfn(&attr, on_lost, w);
    if (rc == 0)
        rc = netmutex_init(&w->m, c->name, &attr);
    netmutex_attr_destroy(&attr);
    return rc;
}

static int run_threads(Worker *w)
{
    WThread t[CHAOS_MAX_THREADS];
    int n = w->cfg->threads, started = 0;

    for (int i = 0; i < n; i++) {
        t[i] = (WThread){ .w = w, .index = i };
        t[i].rng = ((uint64_t)w->pid << 20) ^ (uint64_t)chaos_now_ns() ^ ((uint64_t)i << 8);
        t[i].rng |= 1; /* xorshift must not start at 0 */
        if (pthread_create(&t[i].tid, NULL, thread_main, &t[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(t[i].tid, NULL);
    return started == n ? 0 : 1;
}

int chaos_worker_main(void *p)
{
    const ChaosWorkerCfg *cfg = p;
    Worker w = { .cfg = cfg, .log = cfg->log, .proc = &cfg->log->procs[cfg->proc] };
    int rc;

    w.pid = (int32_t)getpid();
    chaos_store(&w.proc->pid, w.pid);
    if (setup(&w) != 0)
        return 10;
    rc = run_threads(&w) ? 11 : 0;
    if (netmutex_destroy(&w.m) != 0)
        rc = rc ? rc : 12;
    if (netmutex_shutdown() != 0)
        rc = rc ? rc : 13;
    return rc;
}
