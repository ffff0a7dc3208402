/*
 * scenarios_rwlock.c -- nm_bench's read-write lock scenario.
 *
 * rwlock_read_mostly: processes x threads (4 x 2 by default) each do
 * operations back to back, 95 % of them reads, every one holding the lock
 * for --hold-us (2 ms by default).  The same load runs on one netmutex_t
 * (every operation exclusive) in slices that take turns with the rwlock's,
 * so the ratio of the two rates is taken under the same machine load.
 * Both sides count who is inside, so an overlap the lock should have
 * prevented (a writer with anyone else) is seen.
 *
 * The top of nm_bench.c describes what it reports.
 */
#include "ac_config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <netmutex.h>

#include "nm_bench.h"

/* Reads out of 1000 operations. */
#define RW_READS_PER_1000 950
/* Slices of each side, taking turns (-d seconds each in all). */
#define RW_ROUNDS 4
#define RW_SAMPLES 65536
/* Targets: readers inside at once, the rate against the mutex's, and how
 * long a writer waits. */
#define RW_READERS_TARGET 4
#define RW_RATIO_TARGET 2.5
#define RW_WRITER_P99_TARGET_MS 50.0
/* A side that does not run looks this often whether it may. */
#define RW_IDLE_US 1000
#define RW_GRACE_S 30

enum { RW_WARM, RW_RW, RW_MX, RW_STOP };

typedef struct {
    int ready, phase;
    int threads;                   /* per process */
    long hold_us;
    /* Inside now, per side ([0] the rwlock, [1] the mutex): a slice
     * starts while the last one's operations end, on the other lock. */
    int readers[2], writers[2];
    int max_readers;
    uint64_t overlaps;             /* a writer inside with anyone else */
    uint64_t ops[2];               /* per side: [0] rwlock, [1] mutex */
    uint64_t writes;               /* the rwlock side's */
    uint32_t nwait;                /* writer waits recorded (rwlock side) */
    float wait_ms[RW_SAMPLES];
    int err;
    char what[64];
} rwboard_t;

typedef struct {
    rwboard_t *b;
    netmutex_rwlock_t *rw;
    netmutex_t *m;
    long hold_us;
    unsigned int seed;
} rwworker_t;

static void rw_fail(rwboard_t *b, const char *what, int err)
{
    if (__atomic_exchange_n(&b->err, err ? err : EIO, __ATOMIC_SEQ_CST) == 0)
        snprintf(b->what, sizeof b->what, "%s", what);
}

static int rw_phase(rwboard_t *b)
{
    return __atomic_load_n(&b->phase, __ATOMIC_ACQUIRE);
}

/* Who is inside: a reader counts itself among the readers, a writer among
 * the writers; either sees an overlap the lock should have prevented. */
static void rw_enter(rwboard_t *b, int mx, int write)
{
    int r, w;
    if (write) {
        w = __atomic_add_fetch(&b->writers[mx], 1, __ATOMIC_SEQ_CST);
        r = __atomic_load_n(&b->readers[mx], __ATOMIC_SEQ_CST);
    } else {
        r = __atomic_add_fetch(&b->readers[mx], 1, __ATOMIC_SEQ_CST);
        w = __atomic_load_n(&b->writers[mx], __ATOMIC_SEQ_CST);
        int max = __atomic_load_n(&b->max_readers, __ATOMIC_RELAXED);
        while (r > max && !__atomic_compare_exchange_n(&b->max_readers, &max, r, 1,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
    }
    if (w > 1 || (w == 1 && r > 0))
        __atomic_add_fetch(&b->overlaps, 1, __ATOMIC_RELAXED);
}

static void rw_leave(rwboard_t *b, int mx, int write)
{
    __atomic_sub_fetch(write ? &b->writers[mx] : &b->readers[mx], 1, __ATOMIC_SEQ_CST);
}

static int rw_lock(rwworker_t *w, int side, int write)
{
    if (side == RW_MX)
        return netmutex_lock(w->m);
    return write ? netmutex_rwlock_wrlock(w->rw) : netmutex_rwlock_rdlock(w->rw);
}

/* One operation on SIDE's lock.  0 or -1. */
static int rw_op(rwworker_t *w, int side)
{
    rwboard_t *b = w->b;
    int write = side == RW_MX || rand_r(&w->seed) % 1000 >= RW_READS_PER_1000;
    int64_t t0 = nmb_now_ns();
    int err = rw_lock(w, side, write);
    if (err) {
        rw_fail(b, side == RW_MX ? "netmutex_lock" : "netmutex_rwlock_*lock", err);
        return -1;
    }
    int64_t t1 = nmb_now_ns();
    rw_enter(b, side == RW_MX, write);
    nmb_sleep_us(w->hold_us);
    rw_leave(b, side == RW_MX, write);
    err = side == RW_MX ? netmutex_unlock(w->m) : netmutex_rwlock_unlock(w->rw);
    if (err) {
        rw_fail(b, "unlock", err);
        return -1;
    }
    __atomic_add_fetch(&b->ops[side == RW_MX], 1, __ATOMIC_RELAXED);
    if (side == RW_RW && write) {
        __atomic_add_fetch(&b->writes, 1, __ATOMIC_RELAXED);
        uint32_t i = __atomic_fetch_add(&b->nwait, 1, __ATOMIC_RELAXED);
        if (i < RW_SAMPLES)
            b->wait_ms[i] = (float)((double)(t1 - t0) / 1e6);
    }
    return 0;
}

static void *rw_thread(void *arg)
{
    rwworker_t *w = arg;
    int phase;
    while ((phase = rw_phase(w->b)) != RW_STOP) {
        if (phase == RW_WARM) {
            nmb_sleep_us(RW_IDLE_US);
            continue;
        }
        if (rw_op(w, phase) != 0)
            break;
    }
    return NULL;
}

static int rw_setup(rwboard_t *b, netmutex_rwlock_t *rw, netmutex_t *m)
{
    netmutex_config_t cfg = nmb_bench_config(0);
    char rname[128], mname[128];
    int err;
    nmb_mutex_name(rname, sizeof rname, "rwlock_read_mostly/rw");
    nmb_mutex_name(mname, sizeof mname, "rwlock_read_mostly/m");
    if ((err = netmutex_configure(&cfg)) != 0 || (err = netmutex_init(m, mname, NULL)) != 0 ||
        (err = netmutex_rwlock_init(rw, rname, NULL)) != 0 ||
        (err = netmutex_rwlock_rdlock(rw)) != 0 || (err = netmutex_rwlock_unlock(rw)) != 0 ||
        (err = netmutex_lock(m)) != 0 || (err = netmutex_unlock(m)) != 0)
        rw_fail(b, "netmutex_configure/init/lock", err);
    __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
    return err;
}

static int rw_child(void *arg, int index)
{
    rwboard_t *b = arg;
    netmutex_rwlock_t rw;
    netmutex_t m;
    pthread_t tid[MAX_THREADS];
    rwworker_t w[MAX_THREADS];
    int started = 0;
    if (rw_setup(b, &rw, &m) != 0)
        return -1;
    for (int i = 0; i < b->threads; i++) {
        w[i] = (rwworker_t){ b, &rw, &m, b->hold_us, (unsigned int)(index * 7919 + i + 1) };
        if (pthread_create(&tid[i], NULL, rw_thread, &w[i]) != 0) {
            rw_fail(b, "pthread_create", EAGAIN);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    netmutex_rwlock_destroy(&rw);
    netmutex_destroy(&m);
    netmutex_shutdown();
    return started == b->threads && !b->err ? 0 : -1;
}

/* The slices, ABBA: each side -d seconds in RW_ROUNDS turns; SECS[0] and
 * SECS[1] get the time the rwlock and the mutex really had. */
static int rw_slices(rwboard_t *b, crew_t *crew, double secs[2])
{
    static const int order[4] = { RW_RW, RW_MX, RW_MX, RW_RW };
    int64_t slice = (int64_t)(nmb_opt.duration_s * 1e9 / RW_ROUNDS);
    secs[0] = secs[1] = 0;
    for (int r = 0; r < 2 * RW_ROUNDS; r++) {
        int phase = order[r % 4];
        int64_t start = nmb_now_ns();
        __atomic_store_n(&b->phase, phase, __ATOMIC_RELEASE);
        while (nmb_now_ns() - start < slice) {
            nmb_sleep_us(2000);
            nmb_crew_reap(crew);
            if (crew->failed || __atomic_load_n(&b->err, __ATOMIC_SEQ_CST))
                return -1;
        }
        secs[phase == RW_MX] += (double)(nmb_now_ns() - start) / 1e9;
    }
    return 0;
}

static int rw_report(const scenario_t *sc, rwboard_t *b, const load_t *ld, const double secs[2])
{
    jline_t j;
    size_t n = b->nwait < RW_SAMPLES ? b->nwait : RW_SAMPLES;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v || b->ops[0] == 0 || b->ops[1] == 0) {
        free(v);
        return nmb_report_error(sc->name, "no operation completed");
    }
    for (size_t i = 0; i < n; i++)
        v[i] = b->wait_ms[i];
    qsort(v, n, sizeof *v, nmb_cmp_double);
    double rate = (double)b->ops[0] / secs[0], mx = (double)b->ops[1] / secs[1];
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "procs", ld->procs);
    nmb_j_int(&j, "threads", ld->threads);
    nmb_j_int(&j, "hold_us", ld->hold_us);
    nmb_j_num(&j, "read_share", RW_READS_PER_1000 / 1000.0);
    nmb_j_int(&j, "rounds", RW_ROUNDS);
    nmb_j_num(&j, "duration_s", secs[0]);
    nmb_j_int(&j, "ops", (long long)b->ops[0]);
    nmb_j_int(&j, "writes", (long long)b->writes);
    nmb_j_num(&j, "ops_per_s", rate);
    nmb_j_num(&j, "mutex_ops_per_s", mx);
    nmb_j_figure(&j, "ratio_to_mutex", rate / mx, RW_RATIO_TARGET, AT_LEAST);
    nmb_j_figure(&j, "max_readers_inside", b->max_readers, RW_READERS_TARGET, AT_LEAST);
    nmb_j_num(&j, "writer_wait_p50_ms", n ? nmb_percentile(v, n, 0.50) : 0);
    nmb_j_figure(&j, "writer_wait_p99_ms", n ? nmb_percentile(v, n, 0.99) : 0,
                 RW_WRITER_P99_TARGET_MS, AT_MOST);
    nmb_j_num(&j, "writer_wait_max_ms", n ? v[n - 1] : 0);
    nmb_j_figure(&j, "overlaps", (double)b->overlaps, 0, AT_MOST);
    nmb_j_end(&j);
    free(v);
    return 0;
}

int nmb_sc_rwlock_read_mostly(const scenario_t *sc)
{
    load_t ld = nmb_with_overrides(sc->load);
    crew_t crew;
    double secs[2];
    int rc;
    rwboard_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    if (b == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    memset(b, 0, sizeof *b);
    b->threads = ld.threads < MAX_THREADS ? ld.threads : MAX_THREADS;
    b->hold_us = ld.hold_us;
    fprintf(stderr,
            "nm_bench: %s: %d processes x %d threads, %d %% reads holding %ld us, %g s, "
            "taking turns with the same load on one mutex, %g s (caching off)\n",
            sc->name, ld.procs, ld.threads, RW_READS_PER_1000 / 10, ld.hold_us,
            nmb_opt.duration_s, nmb_opt.duration_s);
    if (nmb_crew_spawn(&crew, ld.procs, rw_child, b) != 0 ||
        nmb_crew_ready(&crew, &b->ready, ld.procs) != 0) {
        nmb_crew_kill(&crew);
        rc = nmb_report_error(sc->name, "the workers did not start");
        goto out;
    }
    int sliced = rw_slices(b, &crew, secs);
    __atomic_store_n(&b->phase, RW_STOP, __ATOMIC_RELEASE);
    if (nmb_crew_wait(&crew, nmb_now_ns() + (int64_t)RW_GRACE_S * 1000000000) != 0 ||
        sliced != 0 || b->err) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s: %s", b->err ? b->what : "a worker failed or hung",
                 b->err ? nmb_errname(b->err) : "no answer");
        rc = nmb_report_error(sc->name, msg);
    } else {
        rc = rw_report(sc, b, &ld, secs);
    }
out:
    munmap(b, sizeof *b);
    return rc;
}
