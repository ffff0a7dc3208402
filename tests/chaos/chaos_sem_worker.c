/*
 * chaos_sem_worker.c -- what runs in each worker process of the semaphore
 * families (/chaos/sem/...).
 *
 * The process configures netmutex as chaos_rw_worker.c does, with the
 * lost-hold callback in the configuration (a semaphore's permits take the
 * process's lease and callback), and makes one netmutex_sem_t of the
 * family's name with cfg->permits permits.  Each thread loops, until the
 * driver sets log->stop, over one round: it takes a permit by
 *     netmutex_sem_wait       (half of the rounds),
 *     netmutex_sem_clockwait  (three in ten: a random deadline,
 *                              CLOCK_REALTIME or, one in two,
 *                              CLOCK_MONOTONIC),
 *     netmutex_sem_trywait    (two in ten),
 * logged as a mutex's lock call is (chaos_log.h, op 'l', 'T', 't') with
 * mode 's'.  The prober (the last slot, one thread) makes only try and
 * timed calls, 10 to 30 ms apart.  With a permit:
 *   1. the hold starts at the time read right after the call returned;
 *   2. one hold in long_one_in (the prober's) lasts a good part of a lease
 *      or more, so that the background thread renews it while faults
 *      strike, and may lose it;
 *   3. a short random time more (up to hold_us), then netmutex_sem_post.
 * A permit has no fence: fence_rc stays 0 and fence 0.  Lost-hold notices
 * are stamped as in the read-write lock families (chaos_wutil.h).
 */
#include "ac_config.h"

#include "chaos_sem_worker.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "netmutex.h"

#include "chaos_wutil.h"

typedef struct SWorker {
    const ChaosWorkerCfg *cfg;
    ChaosShared *log;
    ChaosProc *proc;
    int32_t pid;
    netmutex_sem_t sem;
} SWorker;

typedef struct SThread {
    SWorker *w;
    int index;
    uint64_t rng;
    pthread_t tid;
} SThread;

static unsigned int upto(SThread *t, unsigned int n)
{
    return chaos_rand_upto(&t->rng, n);
}

static void set_phase(SThread *t, int phase)
{
    chaos_store(&t->w->proc->phase[t->index], phase);
}

static void on_lost(const char *name, void *arg)
{
    SWorker *w = arg;

    (void)name;
    chaos_stamp_lost(w->log, w->proc);
}

static void hold(SThread *t, ChaosRec *r)
{
    SWorker *w = t->w;
    const ChaosWorkerCfg *cfg = w->cfg;
    unsigned int n = cfg->long_one_in;

    r->fence_rc = 0;
    if (n && upto(t, n - 1) == 0)
        chaos_sleep_us((cfg->long_min_ms + upto(t, cfg->long_max_ms - cfg->long_min_ms)) *
                       1000u);
    chaos_sleep_us(upto(t, cfg->hold_us));
    set_phase(t, CHAOS_UNLOCKING);
    r->unlock_ns = chaos_now_ns();
    r->unlock_rc = netmutex_sem_post(&w->sem);
    r->unlock_end_ns = chaos_now_ns();
}

static void pick(SThread *t, ChaosRec *r)
{
    unsigned int n = upto(t, 9);
    bool prober = t->w->cfg->prober;

    r->mode = 's';
    r->op = prober ? (n < 5 ? 'T' : 't') : (n < 5 ? 'l' : n < 8 ? 'T' : 't');
}

/* The deadline on CLOCK_MONOTONIC is read first, then the one the library
 * is given: the library's is then never before the logged one. */
static int call_wait(SThread *t, ChaosRec *r)
{
    const ChaosWorkerCfg *cfg = t->w->cfg;
    unsigned int ms = cfg->timed_min_ms + upto(t, cfg->timed_max_ms - cfg->timed_min_ms);
    clockid_t clock = upto(t, 1) ? CLOCK_MONOTONIC : CLOCK_REALTIME;
    netmutex_sem_t *s = &t->w->sem;
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
        rc = netmutex_sem_wait(s);
    else if (r->op == 'T')
        rc = netmutex_sem_clockwait(s, clock, &abs);
    else
        rc = netmutex_sem_trywait(s);
    r->ret_ns = chaos_now_ns();
    r->rc = rc;
    return rc;
}

static bool one_round(SThread *t)
{
    SWorker *w = t->w;
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
    rc = call_wait(t, r);
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
    SThread *t = p;

    while (!chaos_load(&t->w->log->stop) && one_round(t))
        ;
    while (!chaos_load(&t->w->log->stop))
        chaos_sleep_us(10000);
    set_phase(t, CHAOS_EXITED);
    return NULL;
}

static int setup(SWorker *w)
{
    const ChaosWorkerCfg *c = w->cfg;
    netmutex_config_t cfg = {
        .url = c->url,
        .connect_timeout_ms = c->connect_ms,
        .io_timeout_ms = c->io_ms,
        .lease_ms = c->lease_ms,
        .on_lost = on_lost,
        .on_lost_arg = w,
    };
    int rc = netmutex_configure(&cfg);

    return rc ? rc : netmutex_sem_init(&w->sem, c->name, c->permits, NULL);
}

static int run_threads(SWorker *w)
{
    SThread t[CHAOS_MAX_THREADS];
    int n = w->cfg->threads, started = 0;

    for (int i = 0; i < n; i++) {
        t[i] = (SThread){ .w = w, .index = i, .rng = chaos_rand_seed(w->pid, i) };
        if (pthread_create(&t[i].tid, NULL, thread_main, &t[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(t[i].tid, NULL);
    return started == n ? 0 : 1;
}

int chaos_sem_worker_main(void *p)
{
    const ChaosWorkerCfg *cfg = p;
    SWorker w = { .cfg = cfg, .log = cfg->log, .proc = &cfg->log->procs[cfg->proc] };
    int rc;

    w.pid = (int32_t)getpid();
    chaos_store(&w.proc->pid, w.pid);
    if (setup(&w) != 0)
        return 10;
    rc = run_threads(&w) ? 11 : 0;
    if (netmutex_sem_destroy(&w.sem) != 0)
        rc = rc ? rc : 12;
    if (netmutex_shutdown() != 0)
        rc = rc ? rc : 13;
    return rc;
}
