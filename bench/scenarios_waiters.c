/*
 * scenarios_waiters.c -- nm_bench's waiters scenario: what waiting costs
 * the server, and whether a long queue slows the hand-off.
 *
 * For each kind of wait -- a mutex, a semaphore of one permit, writers
 * queued behind a read share of a read-write lock, condition waiters --
 * and each N of WAITERS_N, one process holds the name (for a condition it
 * is the signaller, holding nothing) and N waiters wait on it, lease
 * caching off, so that the server sees N waiters.  Up to PROCS_MAX they
 * are N processes of one thread each; above (10,000: as many processes
 * do not fit a test machine's memory) processes of THREADS_PER_PROC
 * threads, on small stacks, where each thread waits at the server itself:
 * a semaphore's and a read-write lock's threads go to the server without
 * waiting locally (sem.c, rwlock.c), and each condition waiter registers
 * with a token of its own (design.md, 9a).  A mutex's threads cannot: the
 * threads of one process queue locally and one of them talks to the
 * server (entry.h), fair mode included, which only turns the cohort
 * hand-off off; that N is reported "skipped" with the reason, not run
 * with fewer waiters at the server than it claims.  A private server's
 * maxclients is raised for the run when N needs more (and set back).
 *
 * Once they have all made their call and the server counts them blocked
 * (or BLOCKED_WAIT_MS passed: a kind whose waiters do not block at the
 * server is reported with the count it had), and SETTLE_MS more, the
 * server's CPU seconds and commands are read over -d seconds.  Then
 * hand-offs with the queue kept full: every waiter takes the name again
 * as soon as it let it go, so N stay queued; a sample is the time from
 * one holder's release call to the next holder's return (a condition:
 * from the signal call to the woken waiter's return), the first
 * HANDOFF_CAP of them.
 *
 * The top of nm_bench.c describes what it reports.
 */
#include "ac_config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <netmutex.h>

#include "nm_bench.h"

#define WAITERS_MAX 10000
#define PROCS_MAX 1000           /* above: processes of many threads */
#define THREADS_PER_PROC 100
#define THREAD_STACK (128 * 1024)
#define HANDOFF_CAP 256          /* hand-off samples kept */
#define CALL_TIMEOUT_S 300       /* every wait is timed: nothing hangs */
#define SIGNAL_WAIT_MS 5000      /* a signal's waiter woke, or we go on */
#define SETTLE_MS 1000
#define START_WAIT_MS 60000      /* the holder holds, the waiters called */
/* Until the server counts them blocked, and until every waiter is gone
 * after the hand-offs (each takes the name once more on its way out):
 * a base, and per waiter. */
#define BLOCKED_WAIT_MS(n) (20000 + 2 * (n))
#define END_WAIT_MS(n) (180000 + 12 * (n))
/* Connections a waiter process has beside its threads' own (the
 * background thread's, subscribers), and the main process's and the
 * holder's: maxclients must leave room for them. */
#define CLIENTS_PER_PROC 4
#define CLIENTS_SPARE 64
/* The engine issue's target, per waiter: 1,000 waiting on one name cost
 * the server at most 3 % of its core, 10,000 at most 30 %.  Judged from
 * 1,000 waiters on. */
#define CPU_PCT_PER_WAITER 0.003
#define CPU_TARGET_FROM 1000
#define HANDOFF_RATIO_TARGET 1.5

enum { W_MUTEX, W_SEM, W_RWLOCK, W_COND, W_KINDS };
static const char *const kind_name[W_KINDS] = { "mutex", "sem", "rwlock_writers", "cond" };
static const long waiters_n[] = { 1, 100, 1000, 10000 };
/* Why a kind's waiters cannot be threads that each wait at the server
 * (NULL: they can). */
static const char *const no_threads_why[W_KINDS] = {
    "a mutex's threads queue in their process, one per process waits at the server "
    "(fair mode too); 10,000 processes do not fit", NULL, NULL, NULL };

typedef struct {
    int kind;
    long n;                  /* waiters */
    char name[192];
    int holding;             /* the holder holds (the signaller is up) */
    int ready;               /* waiters about to make their first call */
    int loop;                /* the hand-offs may start */
    int stop;                /* leave after the current turn */
    int alive;               /* condition waiters (threads) not gone yet */
    int err;                 /* the first failure's errno, and where */
    char what[64];
    unsigned long turns;     /* acquisitions (wake-ups) so far */
    long late_signals;       /* a signal no waiter woke for in time */
    long warnings;           /* the library's warnings, in every process */
    char first_warning[160]; /* the first one's text */
    int64_t rel_ns[HANDOFF_CAP], acq_ns[HANDOFF_CAP];
} wboard_t;

static wboard_t *wb;

typedef struct {
    netmutex_t m;
    netmutex_sem_t s;
    netmutex_rwlock_t rw;
    netmutex_cond_t c;
} wobj_t;

static int wfail(const char *what, int err)
{
    int none = 0;
    if (__atomic_compare_exchange_n(&wb->err, &none, err ? err : EIO, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
        snprintf(wb->what, sizeof wb->what, "%s", what);
    return -1;
}

static int wget(const int *v)
{
    return __atomic_load_n(v, __ATOMIC_SEQ_CST);
}

static void wset(int *v, int x)
{
    __atomic_store_n(v, x, __ATOMIC_SEQ_CST);
}

static struct timespec wdeadline(long s)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += s;
    return t;
}

/* ---- the objects of one process --------------------------------------- */

static int wobj_init(wobj_t *o)
{
    char cname[sizeof wb->name + 8];
    switch (wb->kind) {
    case W_MUTEX:
        return netmutex_init(&o->m, wb->name, NULL);
    case W_SEM:
        return netmutex_sem_init(&o->s, wb->name, 1, NULL);
    case W_RWLOCK:
        return netmutex_rwlock_init(&o->rw, wb->name, NULL);
    default:
        snprintf(cname, sizeof cname, "%s/m", wb->name);
        int err = netmutex_init(&o->m, cname, NULL);
        if (err == 0 && (err = netmutex_cond_init(&o->c, wb->name, NULL)) != 0)
            netmutex_destroy(&o->m);
        return err;
    }
}

static void wobj_destroy(wobj_t *o)
{
    switch (wb->kind) {
    case W_MUTEX:
        netmutex_destroy(&o->m);
        break;
    case W_SEM:
        netmutex_sem_destroy(&o->s);
        break;
    case W_RWLOCK:
        netmutex_rwlock_destroy(&o->rw);
        break;
    default:
        netmutex_cond_destroy(&o->c);
        netmutex_destroy(&o->m);
    }
}

/* Takes the name; the holder of a read-write lock takes a read share. */
static int wacquire(wobj_t *o, int read)
{
    struct timespec dl = wdeadline(CALL_TIMEOUT_S);
    switch (wb->kind) {
    case W_MUTEX:
        return netmutex_timedlock(&o->m, &dl);
    case W_SEM:
        return netmutex_sem_timedwait(&o->s, &dl);
    default:
        return read ? netmutex_rwlock_timedrdlock(&o->rw, &dl)
                    : netmutex_rwlock_timedwrlock(&o->rw, &dl);
    }
}

static int wrelease(wobj_t *o)
{
    switch (wb->kind) {
    case W_MUTEX:
        return netmutex_unlock(&o->m);
    case W_SEM:
        return netmutex_sem_post(&o->s);
    default:
        return netmutex_rwlock_unlock(&o->rw);
    }
}

/* ---- a process's part ----------------------------------------------------- */

/* Turn after turn, from the first acquisition on, until told to stop or
 * the samples are full; every turn is counted, its times kept. */
static int turns(wobj_t *o)
{
    int err;
    for (;;) {
        unsigned long k = __atomic_fetch_add(&wb->turns, 1, __ATOMIC_SEQ_CST);
        int leaving = wget(&wb->stop) || k + 1 >= HANDOFF_CAP;
        if (k < HANDOFF_CAP) {
            wb->acq_ns[k] = nmb_now_ns();
            wb->rel_ns[k] = nmb_now_ns();
        }
        if (leaving)
            wset(&wb->stop, 1);
        if ((err = wrelease(o)) != 0)
            return wfail("release", err);
        if (leaving)
            return 0;
        if ((err = wacquire(o, 0)) != 0)
            return wfail("wait (hand-off)", err);
    }
}

static int holder(wobj_t *o)
{
    int err = wacquire(o, wb->kind == W_RWLOCK);
    if (err != 0)
        return wfail("holder's first take", err);
    wset(&wb->holding, 1);
    while (!wget(&wb->loop) && !wget(&wb->stop))
        nmb_sleep_us(1000);
    return turns(o);
}

static int waiter(wobj_t *o)
{
    __atomic_add_fetch(&wb->ready, 1, __ATOMIC_SEQ_CST);
    int err = wacquire(o, 0);
    return err != 0 ? wfail("wait", err) : turns(o);
}

/* One signal at a time, each once the last one's waiter woke; then
 * broadcasts until every waiter is gone. */
static int signaller(wobj_t *o)
{
    int err;
    wset(&wb->holding, 1);
    while (!wget(&wb->loop) && !wget(&wb->stop))
        nmb_sleep_us(1000);
    for (unsigned long k = 0; k < HANDOFF_CAP && !wget(&wb->stop); k++) {
        int64_t limit = nmb_now_ns() + (int64_t)SIGNAL_WAIT_MS * 1000000;
        wb->rel_ns[k] = nmb_now_ns();
        if ((err = netmutex_cond_signal(&o->c)) != 0)
            return wfail("signal", err);
        while (__atomic_load_n(&wb->turns, __ATOMIC_SEQ_CST) <= k && nmb_now_ns() < limit)
            nmb_sleep_us(50);
        if (__atomic_load_n(&wb->turns, __ATOMIC_SEQ_CST) <= k)
            wb->late_signals++;
    }
    wset(&wb->stop, 1);
    int64_t limit = nmb_now_ns() + (int64_t)END_WAIT_MS(wb->n) * 1000000;
    while (wget(&wb->alive) > 0 && nmb_now_ns() < limit) {
        if ((err = netmutex_cond_broadcast(&o->c)) != 0)
            return wfail("broadcast", err);
        nmb_sleep_us(50000);
    }
    return 0;
}

static int cond_waiter_loop(wobj_t *o)
{
    for (;;) {
        struct timespec dl = wdeadline(CALL_TIMEOUT_S);
        int err = netmutex_cond_timedwait(&o->c, &o->m, &dl);
        if (err != 0)
            return wfail("condition wait", err);
        unsigned long k = __atomic_fetch_add(&wb->turns, 1, __ATOMIC_SEQ_CST);
        if (k < HANDOFF_CAP)
            wb->acq_ns[k] = nmb_now_ns();
        if (wget(&wb->stop))
            return 0;
    }
}

static int cond_waiter(wobj_t *o)
{
    struct timespec dl = wdeadline(CALL_TIMEOUT_S);
    int err = netmutex_timedlock(&o->m, &dl);
    __atomic_add_fetch(&wb->ready, 1, __ATOMIC_SEQ_CST);
    if (err != 0)
        err = wfail("condition's mutex", err);
    else if ((err = cond_waiter_loop(o)) == 0 && (err = netmutex_unlock(&o->m)) != 0)
        err = wfail("condition's mutex unlock", err);
    __atomic_sub_fetch(&wb->alive, 1, __ATOMIC_SEQ_CST);
    return err;
}

/* Counted, not printed: a thousand processes would flood stderr.  The
 * first one's text is kept for the report. */
static void wcount_warning(int level, const char *message, void *arg)
{
    (void)arg;
    if (level <= NETMUTEX_LOG_WARN &&
        __atomic_fetch_add(&wb->warnings, 1, __ATOMIC_SEQ_CST) == 0)
        snprintf(wb->first_warning, sizeof wb->first_warning, "%s", message);
}

static void *wthread(void *arg)
{
    wobj_t *o = arg;
    int err = wb->kind == W_COND ? cond_waiter(o) : waiter(o);
    return err != 0 ? arg : NULL;
}

/* NTHREADS waiters on one set of objects, each a thread on a small stack
 * (10,000 of the default would not fit); a thread not started is counted
 * ready and gone, so that nobody waits for it.  0, or -1. */
static int wthreads(wobj_t *o, int nthreads)
{
    pthread_t tid[THREADS_PER_PROC];
    pthread_attr_t attr;
    int started = 0, err = pthread_attr_init(&attr), rc = 0;
    if (err == 0)
        err = pthread_attr_setstacksize(&attr, THREAD_STACK);
    while (err == 0 && started < nthreads &&
           (err = pthread_create(&tid[started], &attr, wthread, o)) == 0)
        started++;
    if (err != 0) {
        __atomic_add_fetch(&wb->ready, nthreads - started, __ATOMIC_SEQ_CST);
        if (wb->kind == W_COND)
            __atomic_sub_fetch(&wb->alive, nthreads - started, __ATOMIC_SEQ_CST);
        rc = wfail("pthread_create", err);
    }
    pthread_attr_destroy(&attr);
    for (int i = 0; i < started; i++) {
        void *r;
        pthread_join(tid[i], &r);
        if (r)
            rc = -1;
    }
    return rc;
}

/* The holder (NTHREADS 1), or a process of NTHREADS waiters. */
static int wchild(int is_holder, int nthreads)
{
    netmutex_config_t cfg = nmb_bench_config(0);
    wobj_t o;
    int err = netmutex_set_log(NETMUTEX_LOG_WARN, wcount_warning, NULL);
    if (err == 0)
        err = netmutex_configure(&cfg);
    if (err == 0)
        err = wobj_init(&o);
    if (err != 0) {
        if (!is_holder)
            __atomic_add_fetch(&wb->ready, nthreads, __ATOMIC_SEQ_CST);
        if (wb->kind == W_COND && !is_holder)
            __atomic_sub_fetch(&wb->alive, nthreads, __ATOMIC_SEQ_CST);
        return wfail("set-up", err);
    }
    if (is_holder)
        err = wb->kind == W_COND ? signaller(&o) : holder(&o);
    else if (nthreads > 1)
        err = wthreads(&o, nthreads);
    else
        err = wb->kind == W_COND ? cond_waiter(&o) : waiter(&o);
    wobj_destroy(&o);
    netmutex_shutdown();
    return err;
}

/* ---- the parent ------------------------------------------------------------ */

typedef struct {
    pid_t *pid;
    int n;
} wcrew_t;

static int wspawn(wcrew_t *c, int is_holder, int nthreads)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == -1)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        _exit(wchild(is_holder, nthreads) == 0 ? 0 : 1);
    }
    c->pid[c->n++] = pid;
    return 0;
}

/* Reaps what exited; how many still run. */
static int wreap(wcrew_t *c)
{
    int running = 0, status;
    for (int i = 0; i < c->n; i++) {
        if (c->pid[i] == 0)
            continue;
        pid_t r = waitpid(c->pid[i], &status, WNOHANG);
        if (r == c->pid[i]) {
            c->pid[i] = 0;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                wfail(wb->what[0] ? wb->what : "a process died", wb->err ? wb->err : EIO);
        } else {
            running++;
        }
    }
    return running;
}

static void wkill(wcrew_t *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->pid[i] > 0)
            kill(c->pid[i], SIGKILL);
    for (int i = 0; i < c->n; i++)
        if (c->pid[i] > 0)
            waitpid(c->pid[i], NULL, 0);
    c->n = 0;
}

/* Waits until *V reaches WANT (0), a failure or MS (-1). */
static int wawait(wcrew_t *c, const int *v, int want, long ms)
{
    int64_t limit = nmb_now_ns() + (int64_t)ms * 1000000;
    while (wget(v) < want) {
        wreap(c);
        if (wget(&wb->err) || nmb_now_ns() > limit)
            return -1;
        nmb_sleep_us(2000);
    }
    return 0;
}

typedef struct {
    long blocked, clients;
    double cpu_s, commands;
} wsnap_t;

static int wsnap(redisContext *c, wsnap_t *s)
{
    int main_thread;
    redisReply *r = nmb_info(c, "clients");
    if (!r)
        return -1;
    s->blocked = (long)nmb_info_field(r->str, "blocked_clients");
    s->clients = (long)nmb_info_field(r->str, "connected_clients");
    freeReplyObject(r);
    if (!(r = nmb_info(c, "stats")))
        return -1;
    s->commands = nmb_info_field(r->str, "total_commands_processed");
    freeReplyObject(r);
    s->cpu_s = nmb_server_cpu_s(c, &main_thread);
    return isnan(s->cpu_s) || isnan(s->commands) ? -1 : 0;
}

/* Until the server counts N blocked, or BLOCKED_WAIT_MS; then SETTLE_MS. */
static long wsettle(redisContext *c, wcrew_t *crew, long n)
{
    wsnap_t s = { 0 };
    int64_t limit = nmb_now_ns() + (int64_t)BLOCKED_WAIT_MS(n) * 1000000;
    while (wsnap(c, &s) == 0 && s.blocked < n && nmb_now_ns() < limit && !wget(&wb->err)) {
        wreap(crew);
        nmb_sleep_us(100000);
    }
    nmb_sleep_us(SETTLE_MS * 1000);
    return s.blocked;
}

typedef struct {
    long n, blocked, blocked_after, clients, samples, late, warnings;
    double cpu_pct, commands_per_s, p50_us;
    double handoff_cpu_us, handoff_commands; /* the server's, per hand-off */
} wresult_t;

/* The server's CPU and commands per hand-off, from A (taken AT ns, as the
 * hand-offs started, after T0 turns) to now, less what the waiting alone
 * costs (RES's rates, measured before) over that time: the server's side
 * of a hand-off, which does not move with the machine's load as its
 * latency does.  NAN when nothing was handed off or the server did not
 * answer. */
static void whandoff_cost(redisContext *c, const wsnap_t *a, int64_t at, unsigned long t0,
                          wresult_t *res)
{
    wsnap_t b;
    unsigned long t1 = __atomic_load_n(&wb->turns, __ATOMIC_SEQ_CST);
    double dt = (double)(nmb_now_ns() - at) / 1e9;
    res->handoff_cpu_us = res->handoff_commands = NAN;
    if (t1 <= t0 || wsnap(c, &b) != 0)
        return;
    double cpu_s = b.cpu_s - a->cpu_s - res->cpu_pct / 100 * dt;
    double commands = b.commands - a->commands - 1 - res->commands_per_s * dt;
    res->handoff_cpu_us = cpu_s * 1e6 / (double)(t1 - t0);
    res->handoff_commands = commands / (double)(t1 - t0);
}

/* The hand-off samples, sorted into V; how many. */
static long wsamples(double *v)
{
    unsigned long turns = __atomic_load_n(&wb->turns, __ATOMIC_SEQ_CST);
    long n = 0;
    if (turns > HANDOFF_CAP)
        turns = HANDOFF_CAP;
    for (unsigned long k = 1; k < turns; k++) {
        int64_t from = wb->kind == W_COND ? wb->rel_ns[k] : wb->rel_ns[k - 1];
        if (wb->acq_ns[k] > 0 && from > 0 && wb->acq_ns[k] >= from)
            v[n++] = (double)(wb->acq_ns[k] - from) / 1e3;
    }
    qsort(v, (size_t)n, sizeof v[0], nmb_cmp_double);
    return n;
}

/* The measured part, with the crew up: cost, then hand-offs. */
static int wmeasure(redisContext *c, wcrew_t *crew, wresult_t *res)
{
    wsnap_t a, b;
    res->blocked = wsettle(c, crew, res->n);
    if (wget(&wb->err) || wsnap(c, &a) != 0)
        return -1;
    nmb_sleep_us((long)(nmb_opt.duration_s * 1e6));
    if (wsnap(c, &b) != 0)
        return -1;
    res->clients = b.clients;
    res->blocked_after = b.blocked;
    res->cpu_pct = (b.cpu_s - a.cpu_s) / nmb_opt.duration_s * 100;
    res->commands_per_s = (b.commands - a.commands - 3) / nmb_opt.duration_s;
    wsnap_t h;
    int costed = wsnap(c, &h) != 0;
    int64_t h_at = nmb_now_ns();
    unsigned long t0 = __atomic_load_n(&wb->turns, __ATOMIC_SEQ_CST);
    res->handoff_cpu_us = res->handoff_commands = NAN;
    wset(&wb->loop, 1);
    int64_t stop_at = nmb_now_ns() + (int64_t)(nmb_opt.duration_s * 1e9);
    int64_t limit = nmb_now_ns() + (int64_t)END_WAIT_MS(res->n) * 1000000;
    while (wreap(crew) > 0) {
        if (!costed && wget(&wb->stop)) {
            whandoff_cost(c, &h, h_at, t0, res);
            costed = 1;
        }
        if (nmb_now_ns() > stop_at)
            wset(&wb->stop, 1);
        if (nmb_now_ns() > limit)
            return wfail("still running after the hand-offs: killed", ETIMEDOUT);
        nmb_sleep_us(2000);
    }
    if (wget(&wb->err))
        return -1;
    double v[HANDOFF_CAP];
    res->samples = wsamples(v);
    res->p50_us = res->samples ? nmb_percentile(v, (size_t)res->samples, 0.5) : NAN;
    res->late = wb->late_signals;
    res->warnings = wb->warnings;
    return 0;
}

/* N waiters: N processes up to PROCS_MAX, else processes of
 * THREADS_PER_PROC threads (the last one the rest). */
static long wprocs(long n)
{
    return n <= PROCS_MAX ? n : (n + THREADS_PER_PROC - 1) / THREADS_PER_PROC;
}

static int wthreads_of(long n, long proc)
{
    long left = n - proc * THREADS_PER_PROC;
    return n <= PROCS_MAX ? 1 : (int)(left < THREADS_PER_PROC ? left : THREADS_PER_PROC);
}

static int wrun(redisContext *c, int kind, long n, wresult_t *res)
{
    char what[64];
    long procs = wprocs(n);
    wcrew_t crew = { calloc((size_t)procs + 1, sizeof(pid_t)), 0 };
    int rc = -1;
    if (!crew.pid)
        return wfail("out of memory", ENOMEM);
    memset(wb, 0, sizeof *wb);
    wb->kind = kind;
    wb->n = n;
    wb->alive = kind == W_COND ? (int)n : 0;
    snprintf(what, sizeof what, "waiters/%s/%ld", kind_name[kind], n);
    nmb_mutex_name(wb->name, sizeof wb->name, what);
    memset(res, 0, sizeof *res);
    res->n = n;
    if (wspawn(&crew, 1, 1) != 0 || wawait(&crew, &wb->holding, 1, START_WAIT_MS) != 0)
        goto out;
    for (long i = 0; i < procs; i++)
        if (wspawn(&crew, 0, wthreads_of(n, i)) != 0) {
            wfail("fork", errno);
            goto out;
        }
    if (wawait(&crew, &wb->ready, (int)n, START_WAIT_MS) != 0)
        goto out;
    rc = wmeasure(c, &crew, res);
out:
    if (rc != 0 && !wget(&wb->err))
        wfail("the processes did not start in time", ETIMEDOUT);
    wkill(&crew);
    free(crew.pid);
    return rc;
}

/* The server's maxclients, or -1 after a message. */
static long wmaxclients_get(redisContext *c)
{
    const char *argv[] = { "CONFIG", "GET", "maxclients" };
    redisReply *r = nmb_admin_cmd(c, "CONFIG GET maxclients", 3, argv);
    long v = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING)
        v = atol(r->element[1]->str);
    else if (r)
        nmb_complain("CONFIG GET maxclients: an unexpected reply");
    freeReplyObject(r);
    return v;
}

static int wmaxclients_set(redisContext *c, long v)
{
    char num[24];
    snprintf(num, sizeof num, "%ld", v);
    const char *argv[] = { "CONFIG", "SET", "maxclients", num };
    return nmb_admin_do(c, "CONFIG SET maxclients", 4, argv);
}

/* Room at the server for N waiters' connections: a private server's
 * maxclients is raised if need be (*WAS keeps the value it had first, to
 * be set back; 0 while untouched), another server's only checked.  0, or
 * -1 with the reason in WHY. */
static int wroom(redisContext *c, long n, long *was, char *why, size_t len)
{
    long need = n + CLIENTS_PER_PROC * wprocs(n) + CLIENTS_SPARE;
    long have = wmaxclients_get(c);
    if (have < 0) {
        snprintf(why, len, "CONFIG GET maxclients failed");
        return -1;
    }
    if (have >= need)
        return 0;
    if (nmb_private_server_pid() == 0) {
        snprintf(why, len, "the server's maxclients is %ld, %ld waiters need %ld", have, n, need);
        return -1;
    }
    if (wmaxclients_set(c, need) != 0) {
        snprintf(why, len, "CONFIG SET maxclients %ld failed", need);
        return -1;
    }
    if (*was == 0)
        *was = have;
    return 0;
}

static void wreport_head(jline_t *j, const scenario_t *sc, int kind, long n)
{
    long procs = wprocs(n);
    nmb_j_begin(j, sc->name);
    nmb_j_str(j, "kind", kind_name[kind]);
    nmb_j_int(j, "waiters", n);
    nmb_j_int(j, "processes", procs);
    nmb_j_int(j, "threads_per_process", (n + procs - 1) / procs);
}

/* N no set-up of this kind can have waiting at the server. */
static void wreport_skipped(const scenario_t *sc, int kind, long n)
{
    jline_t j;
    wreport_head(&j, sc, kind, n);
    nmb_j_str(&j, "skipped", no_threads_why[kind]);
    nmb_j_end(&j);
    fprintf(stderr, "nm_bench: %s: %-14s %5ld waiting: skipped: %s\n", sc->name,
            kind_name[kind], n, no_threads_why[kind]);
}

static void wreport(const scenario_t *sc, int kind, const wresult_t *r, double p50_one)
{
    jline_t j;
    wreport_head(&j, sc, kind, r->n);
    nmb_j_int(&j, "server_blocked", r->blocked);
    nmb_j_int(&j, "server_blocked_after", r->blocked_after);
    nmb_j_int(&j, "server_clients", r->clients);
    nmb_j_num(&j, "measured_s", nmb_opt.duration_s);
    if (r->n >= CPU_TARGET_FROM)
        nmb_j_figure(&j, "server_cpu_pct", r->cpu_pct, CPU_PCT_PER_WAITER * (double)r->n,
                     AT_MOST);
    else
        nmb_j_num(&j, "server_cpu_pct", r->cpu_pct);
    nmb_j_num(&j, "commands_per_s", r->commands_per_s);
    nmb_j_int(&j, "warnings", r->warnings);
    if (r->warnings > 0)
        nmb_j_str(&j, "first_warning", wb->first_warning);
    nmb_j_int(&j, "handoff_samples", r->samples);
    nmb_j_num(&j, "handoff_p50_us", r->p50_us);
    if (!isnan(r->handoff_cpu_us)) {
        nmb_j_num(&j, "handoff_server_cpu_us", r->handoff_cpu_us);
        nmb_j_num(&j, "handoff_server_commands", r->handoff_commands);
    }
    if (kind == W_COND)
        nmb_j_int(&j, "late_signals", r->late);
    if (r->n > 1 && p50_one > 0)
        nmb_j_figure(&j, "handoff_ratio_to_one", r->p50_us / p50_one, HANDOFF_RATIO_TARGET,
                     AT_MOST);
    nmb_j_end(&j);
    fprintf(stderr, "nm_bench: %s: %-14s %5ld waiting (%ld blocked): server %.2f %% CPU, "
            "%.0f commands/s; hand-off p50 %.0f us\n", sc->name, kind_name[kind], r->n,
            r->blocked, r->cpu_pct, r->commands_per_s, r->p50_us);
}

/* One kind at every N; a failure stops the kind (its waiters overloading
 * the server, say), not the scenario.  0, or -1 after the error line. */
static int wkind(const scenario_t *sc, redisContext *c, int kind, long only, long *was)
{
    double p50_one = 0;
    for (size_t i = 0; i < sizeof waiters_n / sizeof waiters_n[0]; i++) {
        long n = only ? only : waiters_n[i];
        char msg[200];
        wresult_t r;
        if (n > PROCS_MAX && no_threads_why[kind]) {
            wreport_skipped(sc, kind, n);
        } else if (wroom(c, n, was, msg, sizeof msg) != 0) {
            return nmb_report_error(sc->name, msg);
        } else if (wrun(c, kind, n, &r) != 0) {
            snprintf(msg, sizeof msg, "%s, %ld waiters: %s: %s (%ld warnings)", kind_name[kind],
                     n, wb->what, nmb_errname(wb->err), wb->warnings);
            return nmb_report_error(sc->name, msg);
        } else {
            if (n == 1)
                p50_one = r.p50_us;
            wreport(sc, kind, &r, p50_one);
        }
        if (only)
            break;
    }
    return 0;
}

int nmb_sc_waiters(const scenario_t *sc)
{
    long only = nmb_opt.waiters > 0 ? nmb_opt.waiters : nmb_opt.procs > 0 ? nmb_opt.procs : 0;
    long was = 0;
    redisContext *c;
    int rc = 0;
    if (only > WAITERS_MAX)
        return nmb_report_error(sc->name, "at most 10000 waiters (--waiters)");
    wb = mmap(NULL, sizeof *wb, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (wb == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    if (!(c = nmb_admin_connect())) {
        munmap(wb, sizeof *wb);
        return nmb_report_error(sc->name, "no admin connection");
    }
    for (int kind = 0; kind < W_KINDS; kind++)
        if (wkind(sc, c, kind, only, &was) != 0)
            rc = -1;
    if (was > 0)
        wmaxclients_set(c, was);
    redisFree(c);
    munmap(wb, sizeof *wb);
    return rc;
}
