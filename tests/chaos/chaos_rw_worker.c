/*
 * chaos_rw_worker.c -- what runs in each worker process of the read-write
 * lock families (/chaos/rwlock/...).
 *
 * The process configures netmutex as chaos_worker.c does and makes one
 * netmutex_rwlock_t of the family's name with a short lease and a
 * lost-hold callback; the worker in an odd slot prefers readers
 * (NETMUTEX_RWLOCK_PREFER_READER), the others writers (the default), so
 * that both kinds wait in the one queue.  The workers in the first two
 * slots (one of each kind) cache their read shares
 * (netmutex_rwlockattr_setcache), so that cached shares are joined,
 * revoked by writers, lost and given back under every fault.  Each thread loops, until the
 * driver sets log->stop, over one round: a write lock in three (one in two
 * for the prober) or a read lock, by
 *     the blocking call   (half of the rounds),
 *     the timed call      (three in ten: a random deadline, CLOCK_REALTIME
 *                          or, one in two, CLOCK_MONOTONIC),
 *     the try call        (two in ten),
 * logged as a mutex's lock call is (chaos_log.h, op 'l', 'T', 't'), with
 * its mode ('r' or 'w').  The prober (the last slot, one thread) makes
 * only try and timed calls, 10 to 30 ms apart, so that their bounds are
 * exercised while the server stalls.  When it got the lock:
 *   1. the hold starts at the time read right after the call returned;
 *   2. netmutex_rwlock_fence;
 *   3. one hold in long_one_in (the prober's: a read share or the write
 *      lock) lasts a good part of a lease or more, so that the background
 *      thread renews it while faults strike, and may lose it;
 *   4. a writer presents its fence to the fenced resource and, if it was
 *      accepted, read-modify-writes the shared counter (a sleep between
 *      the read and the write); a reader only waits a little;
 *   5. a short random time more, then the unlock.
 * The lost-hold callback stamps lost_ns on every hold of this process
 * (each thread's hold is a lease of its own, and the callback does not
 * say whose was lost: stamping them all only shortens valid intervals);
 * a thread whose lock call returned while a notice came stamps its new
 * hold at its start, since the notice may have been its own.
 */
#include "ac_config.h"

#include "chaos_rw_worker.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "netmutex.h"

#include "chaos_wutil.h"

typedef struct RWorker {
    const ChaosWorkerCfg *cfg;
    ChaosShared *log;
    ChaosProc *proc;
    int32_t pid;
    netmutex_rwlock_t rw;
} RWorker;

typedef struct RThread {
    RWorker *w;
    int index;
    uint64_t rng;
    pthread_t tid;
} RThread;

static unsigned int random_upto(RThread *t, unsigned int n)
{
    return chaos_rand_upto(&t->rng, n);
}

static void sleep_us(unsigned int us)
{
    chaos_sleep_us(us);
}

static void set_phase(RThread *t, int phase)
{
    chaos_store(&t->w->proc->phase[t->index], phase);
}

static void on_lost(const char *name, void *arg)
{
    RWorker *w = arg;

    (void)name;
    chaos_stamp_lost(w->log, w->proc);
}

/* ---- one hold ------------------------------------------------------------ */

static void read_modify_write(RThread *t, ChaosRec *r)
{
    int64_t v;

    r->rmw_read_ns = chaos_now_ns();
    v = chaos_counter_read(t->w->log);
    r->rmw_value = v;
    r->rmw_state = CHAOS_RMW_READ;
    sleep_us(t->w->cfg->rmw_us);
    chaos_counter_write(t->w->log, v + 1);
    r->rmw_write_ns = chaos_now_ns();
    r->rmw_state = CHAOS_RMW_WRITTEN;
}

static void hold(RThread *t, ChaosRec *r)
{
    RWorker *w = t->w;
    const ChaosWorkerCfg *cfg = w->cfg;
    unsigned int n = cfg->long_one_in;

    r->fence_rc = netmutex_rwlock_fence(&w->rw, &r->fence);
    if (n && random_upto(t, n - 1) == 0)
        sleep_us((cfg->long_min_ms + random_upto(t, cfg->long_max_ms - cfg->long_min_ms)) *
                 1000u);
    if (r->mode == 'w' && r->fence_rc == 0)
        r->accepted = chaos_resource_present(w->log, r->fence, w->pid);
    if (r->accepted == 1)
        read_modify_write(t, r);
    sleep_us(random_upto(t, cfg->hold_us));
    set_phase(t, CHAOS_UNLOCKING);
    r->unlock_ns = chaos_now_ns();
    r->unlock_rc = netmutex_rwlock_unlock(&w->rw);
    r->unlock_end_ns = chaos_now_ns();
}

/* ---- one round -------------------------------------------------------------- */

static void pick(RThread *t, ChaosRec *r)
{
    unsigned int n = random_upto(t, 9);
    bool prober = t->w->cfg->prober;

    r->mode = random_upto(t, prober ? 1 : 2) == 0 ? 'w' : 'r';
    r->op = prober ? (n < 5 ? 'T' : 't') : (n < 5 ? 'l' : n < 8 ? 'T' : 't');
}

/* The deadline on CLOCK_MONOTONIC is read first, then the one the library
 * is given: the library's is then never before the logged one. */
static int call_lock(RThread *t, ChaosRec *r)
{
    const ChaosWorkerCfg *cfg = t->w->cfg;
    unsigned int ms = cfg->timed_min_ms + random_upto(t, cfg->timed_max_ms - cfg->timed_min_ms);
    clockid_t clock = random_upto(t, 1) ? CLOCK_MONOTONIC : CLOCK_REALTIME;
    netmutex_rwlock_t *rw = &t->w->rw;
    bool w = r->mode == 'w';
    struct timespec abs;
    int rc;

    r->call_ns = chaos_now_ns();
    clock_gettime(clock, &abs);
    abs.tv_sec += ms / 1000;
    abs.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (abs.tv_nsec >= 1000000000L) {
        abs.tv_sec++;
        abs.tv_nsec -= 1000000000L;
    }
    if (r->op == 'T')
        r->deadline_ns = r->call_ns + (int64_t)ms * 1000000;
    if (r->op == 'l')
        rc = w ? netmutex_rwlock_wrlock(rw) : netmutex_rwlock_rdlock(rw);
    else if (r->op == 'T')
        rc = w ? netmutex_rwlock_clockwrlock(rw, clock, &abs)
               : netmutex_rwlock_clockrdlock(rw, clock, &abs);
    else
        rc = w ? netmutex_rwlock_trywrlock(rw) : netmutex_rwlock_tryrdlock(rw);
    r->ret_ns = chaos_now_ns();
    r->rc = rc;
    return rc;
}

static bool one_round(RThread *t)
{
    RWorker *w = t->w;
    int32_t index, lost;
    ChaosRec *r = chaos_log_add(w->log, w->pid, t->index, &index);
    int rc;

    if (!r)
        return false;
    pick(t, r);
    r->accepted = -1;
    chaos_store(&w->proc->rec[t->index], index);
    set_phase(t, CHAOS_LOCKING);
    lost = __atomic_load_n(&w->proc->lost_calls, __ATOMIC_SEQ_CST);
    rc = call_lock(t, r);
    if (rc == 0) {
        set_phase(t, CHAOS_HOLDING);
        if (__atomic_load_n(&w->proc->lost_calls, __ATOMIC_SEQ_CST) != lost)
            chaos_set_once(&r->lost_ns, r->ret_ns);
        hold(t, r);
    }
    set_phase(t, CHAOS_IDLE);
    chaos_pause_after(&t->rng, rc, w->cfg);
    return true;
}

static void *thread_main(void *p)
{
    RThread *t = p;

    while (!chaos_load(&t->w->log->stop) && one_round(t))
        ;
    while (!chaos_load(&t->w->log->stop))
        sleep_us(10000);
    set_phase(t, CHAOS_EXITED);
    return NULL;
}

/* ---- the process ------------------------------------------------------------- */

static int setup(RWorker *w)
{
    const ChaosWorkerCfg *c = w->cfg;
    netmutex_config_t cfg = {
        .url = c->url,
        .connect_timeout_ms = c->connect_ms,
        .io_timeout_ms = c->io_ms,
        .lease_ms = c->lease_ms,
    };
    netmutex_rwlockattr_t attr;
    int rc = netmutex_configure(&cfg);

    if (rc == 0)
        rc = netmutex_rwlockattr_init(&attr);
    if (rc != 0)
        return rc;
    rc = netmutex_rwlockattr_setkind(&attr, c->slot % 2 ? NETMUTEX_RWLOCK_PREFER_READER
                                                        : NETMUTEX_RWLOCK_PREFER_WRITER);
    if (rc == 0)
        rc = netmutex_rwlockattr_setlease(&attr, c->lease_ms);
    if (rc == 0)
        rc = netmutex_rwlockattr_setcache(&attr, !c->prober && c->slot < 2);
    if (rc == 0)
        rc = netmutex_rwlockattr_setlostfn(&attr, on_lost, w);
    if (rc == 0)
        rc = netmutex_rwlock_init(&w->rw, c->name, &attr);
    netmutex_rwlockattr_destroy(&attr);
    return rc;
}

static int run_threads(RWorker *w)
{
    RThread t[CHAOS_MAX_THREADS];
    int n = w->cfg->threads, started = 0;

    for (int i = 0; i < n; i++) {
        t[i] = (RThread){ .w = w, .index = i };
        t[i].rng = chaos_rand_seed(w->pid, i);
        if (pthread_create(&t[i].tid, NULL, thread_main, &t[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(t[i].tid, NULL);
    return started == n ? 0 : 1;
}

int chaos_rw_worker_main(void *p)
{
    const ChaosWorkerCfg *cfg = p;
    RWorker w = { .cfg = cfg, .log = cfg->log, .proc = &cfg->log->procs[cfg->proc] };
    int rc;

    w.pid = (int32_t)getpid();
    chaos_store(&w.proc->pid, w.pid);
    if (setup(&w) != 0)
        return 10;
    rc = run_threads(&w) ? 11 : 0;
    if (netmutex_rwlock_destroy(&w.rw) != 0)
        rc = rc ? rc : 12;
    if (netmutex_shutdown() != 0)
        rc = rc ? rc : 13;
    return rc;
}
