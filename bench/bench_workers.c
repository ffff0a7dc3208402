/*
 * bench_workers.c -- nm_bench's worker processes and the lock loop most
 * scenarios are made of ("HOW IT RUNS" at the top of nm_bench.c).
 */
#include "ac_config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <hiredis/hiredis.h>

#include <netmutex.h>

#include "nm_bench.h"
#include "redis_server.h"

/* ===================================================================== */
/* worker processes                                                       */
/* ===================================================================== */

/* Starts N processes running FN(ARG, i) and exiting 0 if it returns 0. */
int nmb_crew_spawn(crew_t *c, int n, crew_fn fn, void *arg)
{
    pid_t parent = getpid();
    memset(c, 0, sizeof *c);
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == -1) {
            nmb_complain("fork: %s", strerror(errno));
            return -1;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            /* _exit, not exit: the parent's atexit cleanup is not ours. */
            _exit(fn(arg, i) == 0 ? 0 : 1);
        }
        c->pid[c->n++] = pid;
    }
    return 0;
}

int nmb_crew_ready(crew_t *c, int *ready, int n)
{
    int64_t deadline = nmb_now_ns() + (int64_t)READY_TIMEOUT_MS * 1000000;
    while (__atomic_load_n(ready, __ATOMIC_SEQ_CST) < n) {
        nmb_crew_reap(c);
        if (c->failed || nmb_now_ns() > deadline)
            return -1;
        nmb_sleep_us(1000);
    }
    return 0;
}

/* Reaps the processes that have exited; returns how many still run. */
int nmb_crew_reap(crew_t *c)
{
    int running = 0;
    for (int i = 0; i < c->n; i++) {
        int status;
        if (c->pid[i] == 0)
            continue;
        pid_t r = waitpid(c->pid[i], &status, WNOHANG);
        if (r == c->pid[i] || (r == -1 && errno == ECHILD)) {
            if (r == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                c->failed = 1;
                if (r != -1 && WIFSIGNALED(status))
                    nmb_complain("worker %ld died of signal %d", (long)c->pid[i], WTERMSIG(status));
            }
            c->pid[i] = 0;
        } else {
            running++;
        }
    }
    return running;
}

void nmb_crew_kill(crew_t *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->pid[i] > 0)
            kill(c->pid[i], SIGKILL);
    while (nmb_crew_reap(c) > 0)
        nmb_sleep_us(1000);
}

/* Waits until all have exited; kills them at DEADLINE_NS.  0 if all
 * exited in time and cleanly. */
int nmb_crew_wait(crew_t *c, int64_t deadline_ns)
{
    while (nmb_crew_reap(c) > 0) {
        if (nmb_now_ns() > deadline_ns) {
            nmb_crew_kill(c);
            return -1;
        }
        nmb_sleep_us(2000);
    }
    return c->failed ? -1 : 0;
}

/* ===================================================================== */
/* the lock loop: most scenarios are this with other knobs                */
/* ===================================================================== */

/* One worker thread's results. */
typedef struct {
    uint64_t acquisitions;   /* locks that returned within the period */
    uint64_t hold_ns;        /* time from lock's return to unlock's call */
    uint64_t unlock_ns;      /* time spent in netmutex_unlock, summed */
    uint32_t nsamples;       /* wait_us[0..nsamples) */
    float max_wait_us;
    int err;                 /* first unexpected netmutex error */
    char what[32];           /* the call that returned it */
    float wait_us[SAMPLE_CAP];
} slot_t;

/* Shared between the main process and the workers. */
typedef struct {
    int ready;               /* threads warmed up (atomic) */
    int go;                  /* set once end_ns is (atomic) */
    int64_t end_ns;
    pthread_mutex_t pmutex;  /* the reference runs' process-shared mutex */
    slot_t slots[];          /* procs x threads, process by process */
} board_t;

typedef struct {
    board_t *board;
    const load_t *load;
    const char *name;
} crew_job_t;

typedef struct {
    board_t *board;
    slot_t *slot;
    netmutex_t *m;           /* NULL in the pthread reference runs */
    const load_t *load;
    uint64_t rng;
} worker_t;

/* The lock under test: the netmutex, or in the reference runs the
 * process-shared pthread mutex on the board, taken the same way. */
static int w_lock(worker_t *w)
{
    return w->m ? netmutex_lock(w->m) : pthread_mutex_lock(&w->board->pmutex);
}

static int w_unlock(worker_t *w)
{
    return w->m ? netmutex_unlock(w->m) : pthread_mutex_unlock(&w->board->pmutex);
}

static const char *w_call(const worker_t *w, int unlock)
{
    if (w->m)
        return unlock ? "netmutex_unlock" : "netmutex_lock";
    return unlock ? "pthread_mutex_unlock" : "pthread_mutex_lock";
}

static void slot_fail(slot_t *s, const char *what, int err)
{
    s->err = err;
    snprintf(s->what, sizeof s->what, "%s", what);
}

/* Keeps every wait up to SAMPLE_CAP per thread, then a uniform sample of
 * them (reservoir sampling), so long runs do not favour their start. */
static void record_wait(worker_t *w, float us)
{
    slot_t *s = w->slot;
    uint64_t seen = s->acquisitions;   /* already counts this one */
    if (us > s->max_wait_us)
        s->max_wait_us = us;
    if (s->nsamples < SAMPLE_CAP) {
        s->wait_us[s->nsamples++] = us;
        return;
    }
    w->rng ^= w->rng << 13;            /* xorshift64 */
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    uint64_t k = w->rng % seen;
    if (k < SAMPLE_CAP)
        s->wait_us[k] = us;
}

static void *worker_thread(void *arg)
{
    worker_t *w = arg;
    int err;

    /* Warm-up: the thread's first lock dials Redis and loads the scripts. */
    if ((err = w_lock(w)) != 0)
        slot_fail(w->slot, w_call(w, 0), err);
    else if ((err = w_unlock(w)) != 0)
        slot_fail(w->slot, w_call(w, 1), err);
    __atomic_add_fetch(&w->board->ready, 1, __ATOMIC_SEQ_CST);
    if (err)
        return NULL;
    while (!__atomic_load_n(&w->board->go, __ATOMIC_ACQUIRE))
        nmb_sleep_us(100);

    int64_t end = w->board->end_ns;
    for (;;) {
        int64_t t0 = nmb_now_ns();
        if (t0 >= end)
            break;
        if ((err = w_lock(w)) != 0) {
            slot_fail(w->slot, w_call(w, 0), err);
            break;
        }
        int64_t t1 = nmb_now_ns();
        nmb_sleep_us(w->load->hold_us);
        int64_t t2 = nmb_now_ns();
        if ((err = w_unlock(w)) != 0) {
            slot_fail(w->slot, w_call(w, 1), err);
            break;
        }
        /* A lock that returned after the end is not part of the period. */
        if (t1 < end) {
            w->slot->acquisitions++;
            w->slot->hold_ns += (uint64_t)(t2 - t1);
            w->slot->unlock_ns += (uint64_t)(nmb_now_ns() - t2);
            record_wait(w, (float)(t1 - t0) / 1e3f);
        }
        nmb_sleep_us(w->load->think_us);
    }
    return NULL;
}

static int set_fair_mode(netmutex_attr_t *attr)
{
    return netmutex_attr_setfair(attr, 1);
}

/* Runs the process's threads on M (NULL: the board's pthread mutex) until
 * they are done.  Threads that never ran still count as ready, so the
 * main process sees the failure now instead of at its timeout. */
static int run_threads(crew_job_t *job, slot_t *slots, netmutex_t *m)
{
    const load_t *ld = job->load;
    pthread_t tid[MAX_THREADS];
    worker_t w[MAX_THREADS];
    int err = 0, started = 0;

    for (; started < ld->threads; started++) {
        w[started] = (worker_t){ job->board, &slots[started], m, ld,
                                 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 16 | (uint64_t)started) };
        if ((err = pthread_create(&tid[started], NULL, worker_thread, &w[started])) != 0) {
            slot_fail(&slots[started], "pthread_create", err);
            break;
        }
    }
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    __atomic_add_fetch(&job->board->ready, ld->threads - started, __ATOMIC_SEQ_CST);
    return err;
}

/* Worker process PROC: its own configuration, one netmutex_t shared by
 * its threads, as a program would have.  In the pthread reference runs,
 * only the threads. */
int nmb_worker_stats;

static int worker_process(void *arg, int proc)
{
    crew_job_t *job = arg;
    const load_t *ld = job->load;
    slot_t *slots = job->board->slots + (size_t)proc * (size_t)ld->threads;
    netmutex_config_t cfg = nmb_bench_config(ld->cache);
    netmutex_attr_t attr;
    netmutex_t m;
    int err;

    if (ld->pthread_ref)
        return run_threads(job, slots, NULL);
    if ((err = netmutex_configure(&cfg)) != 0 ||
        (nmb_worker_stats && (err = netmutex_set_stats(NETMUTEX_STATS_ON)) != 0)) {
        slot_fail(&slots[0], "netmutex_configure", err);
    } else if ((err = netmutex_attr_init(&attr)) != 0 ||
               (ld->fair && (err = set_fair_mode(&attr)) != 0)) {
        slot_fail(&slots[0], "netmutex_attr", err);
    } else if ((err = netmutex_init(&m, job->name, &attr)) != 0) {
        slot_fail(&slots[0], "netmutex_init", err);
    } else {
        netmutex_attr_destroy(&attr);
        if ((err = run_threads(job, slots, &m)) != 0)
            return err;
        if ((err = netmutex_destroy(&m)) != 0)
            slot_fail(&slots[0], "netmutex_destroy", err);
        else if ((err = netmutex_shutdown()) != 0)
            slot_fail(&slots[0], "netmutex_shutdown", err);
        return err;
    }
    /* Setup failed: no thread runs. */
    __atomic_add_fetch(&job->board->ready, ld->threads, __ATOMIC_SEQ_CST);
    return err;
}

/* What the board says, once the workers are gone. */
static int collect(const board_t *b, const load_t *ld, group_result_t *res)
{
    size_t nslots = (size_t)ld->procs * (size_t)ld->threads, n = 0;
    for (size_t i = 0; i < nslots; i++) {
        const slot_t *s = &b->slots[i];
        if (s->err) {
            snprintf(res->error, sizeof res->error, "%s: %s (process %zu, thread %zu)",
                     s->what, nmb_errname(s->err), i / (size_t)ld->threads, i % (size_t)ld->threads);
            return -1;
        }
        res->total += s->acquisitions;
        res->hold_mean_us += (double)s->hold_ns / 1e3;
        res->unlock_mean_us += (double)s->unlock_ns / 1e3;
        res->per_proc[i / (size_t)ld->threads] += s->acquisitions;
        if (i == 0 || s->acquisitions < res->thread_min)
            res->thread_min = s->acquisitions;
        if (s->acquisitions > res->thread_max)
            res->thread_max = s->acquisitions;
        if (s->max_wait_us > res->wait_max_us)
            res->wait_max_us = s->max_wait_us;
        n += s->nsamples;
    }
    res->hold_mean_us /= res->total ? (double)res->total : 1.0;
    res->unlock_mean_us /= res->total ? (double)res->total : 1.0;
    double *all = malloc((n ? n : 1) * sizeof *all);
    if (!all) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return -1;
    }
    n = 0;
    for (size_t i = 0; i < nslots; i++)
        for (uint32_t k = 0; k < b->slots[i].nsamples; k++)
            all[n++] = b->slots[i].wait_us[k];
    qsort(all, n, sizeof *all, nmb_cmp_double);
    res->nsamples = n;
    res->wait_p50_us = nmb_percentile(all, n, 0.50);
    res->wait_p99_us = nmb_percentile(all, n, 0.99);
    free(all);
    return 0;
}

/* The reference runs' mutex, in the shared mapping where every worker
 * process sees it.  0, or an errno value. */
static int init_shared_mutex(pthread_mutex_t *pm)
{
    pthread_mutexattr_t a;
    int err = pthread_mutexattr_init(&a);
    if (err)
        return err;
    err = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (!err)
        err = pthread_mutex_init(pm, &a);
    pthread_mutexattr_destroy(&a);
    return err;
}

/* Runs LD on the mutex NAME (or LD->pthread_ref's pthread mutex) for
 * nmb_opt.duration_s and fills RES.  -1 with RES->error set when anything
 * failed. */
int nmb_run_load(const char *name, const load_t *ld, group_result_t *res)
{
    size_t nslots = (size_t)ld->procs * (size_t)ld->threads;
    size_t size = sizeof(board_t) + nslots * sizeof(slot_t);
    crew_t crew;
    int rc = -1;

    memset(res, 0, sizeof *res);
    /* Only the pages the workers write get memory. */
    board_t *b = mmap(NULL, size, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b == MAP_FAILED) {
        snprintf(res->error, sizeof res->error, "mmap: %s", strerror(errno));
        return -1;
    }
    int err = ld->pthread_ref ? init_shared_mutex(&b->pmutex) : 0;
    if (err) {
        snprintf(res->error, sizeof res->error, "pthread_mutex_init: %s", strerror(err));
        munmap(b, size);
        return -1;
    }
    crew_job_t job = { b, ld, name };
    if (nmb_crew_spawn(&crew, ld->procs, worker_process, &job) != 0) {
        nmb_crew_kill(&crew);
        snprintf(res->error, sizeof res->error, "fork failed");
        goto out;
    }

    if (nmb_crew_ready(&crew, &b->ready, (int)nslots) != 0) {
        nmb_crew_kill(&crew);
        if (collect(b, ld, res) == 0)
            snprintf(res->error, sizeof res->error,
                     crew.failed ? "a worker died during warm-up"
                                 : "workers not ready after %d ms", READY_TIMEOUT_MS);
        goto out;
    }

    int64_t start = nmb_now_ns();
    b->end_ns = start + (int64_t)(nmb_opt.duration_s * 1e9);
    __atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
    if (nmb_crew_wait(&crew, b->end_ns + (int64_t)HANG_GRACE_MS * 1000000) != 0) {
        if (collect(b, ld, res) == 0)
            snprintf(res->error, sizeof res->error,
                     crew.failed ? "a worker failed"
                                 : "workers still running %d ms after the end: a lock call hung",
                     HANG_GRACE_MS);
        goto out;
    }
    res->duration_s = (double)(b->end_ns - start) / 1e9;
    rc = collect(b, ld, res);
out:
    if (ld->pthread_ref)
        pthread_mutex_destroy(&b->pmutex);
    munmap(b, size);
    return rc;
}

/* Opt's -p, -t, --hold-us, --think-us over a scenario's defaults. */
load_t nmb_with_overrides(load_t ld)
{
    if (nmb_opt.procs > 0)
        ld.procs = (int)nmb_opt.procs;
    if (nmb_opt.threads > 0)
        ld.threads = (int)nmb_opt.threads;
    if (nmb_opt.hold_us >= 0)
        ld.hold_us = nmb_opt.hold_us;
    if (nmb_opt.think_us >= 0)
        ld.think_us = nmb_opt.think_us;
    return ld;
}

void nmb_mutex_name(char *buf, size_t len, const char *what)
{
    snprintf(buf, len, "%s/%s", nmb_name_prefix, what);
}

/* Runs LD for SCENARIO and starts its JSON line with the parameters and
 * what every load scenario reports.  -1 after printing the error line. */
int nmb_measure(const char *scenario, const load_t *ld, group_result_t *res, jline_t *j)
{
    char name[128];
    nmb_mutex_name(name, sizeof name, scenario);
    fprintf(stderr, "nm_bench: %s: %d process(es) x %d thread(s), hold %ld us, think %ld us, %g s\n",
            scenario, ld->procs, ld->threads, ld->hold_us, ld->think_us, nmb_opt.duration_s);
    if (nmb_run_load(name, ld, res) != 0)
        return nmb_report_error(scenario, res->error);

    nmb_j_begin(j, scenario);
    nmb_j_int(j, "procs", ld->procs);
    nmb_j_int(j, "threads", ld->threads);
    nmb_j_int(j, "hold_us", ld->hold_us);
    nmb_j_int(j, "think_us", ld->think_us);
    nmb_j_num(j, "duration_s", res->duration_s);
    nmb_j_int(j, "acquisitions", (long long)res->total);
    nmb_j_int_array(j, "per_proc", res->per_proc, (size_t)ld->procs);
    nmb_j_int(j, "thread_min", (long long)res->thread_min);
    nmb_j_int(j, "thread_max", (long long)res->thread_max);
    nmb_j_int(j, "wait_samples", (long long)res->nsamples);
    nmb_j_num(j, "wait_p50_ms", res->wait_p50_us / 1e3);
    /* The hold really slept (a sleep overshoots, on a busy host by a lot),
     * and the time unlock took: both eat into the lock's throughput. */
    nmb_j_num(j, "hold_mean_ms", res->hold_mean_us / 1e3);
    nmb_j_num(j, "unlock_mean_ms", res->unlock_mean_us / 1e3);
    return 0;
}

double nmb_rate(const group_result_t *r)
{
    return (double)r->total / r->duration_s;
}

/* The RTT bound of a rate: one lock+unlock needs two round trips. */
void nmb_j_rtt_bound(jline_t *j, double per_s)
{
    double bound = 1e6 / (2.0 * nmb_rtt_us);
    nmb_j_num(j, "rtt_bound_per_s", bound);
    nmb_j_num(j, "ratio_to_rtt_bound", per_s / bound);
}

double nmb_min_over_max(const uint64_t *v, int n)
{
    uint64_t lo = v[0], hi = v[0];
    for (int i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    return hi ? (double)lo / (double)hi : 0.0;
}
