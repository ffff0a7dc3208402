/*
 * scenarios_rwlock.c -- nm_bench's read-write lock scenarios.
 *
 * rwlock_read_mostly: processes x threads (4 x 2 by default) each do
 * operations back to back, 95 % of them reads, every one holding the lock
 * for --hold-us (2 ms by default).  The same load runs on one netmutex_t
 * (every operation exclusive) in slices that take turns with the rwlock's,
 * so the ratio of the two rates is taken under the same machine load.
 * Both sides count who is inside, so an overlap the lock should have
 * prevented (a writer with anyone else) is seen.
 *
 * rwlock_cached_read: one thread rdlocks and unlocks a lock whose read
 * shares are cached, no writer anywhere.  rwlock_revoke: a writer of
 * another process takes the lock from a reader process's cached idle
 * share, in turns.
 *
 * The top of nm_bench.c describes what they report.
 */
#include "ac_config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include <netmutex.h>

#include "keytag.h"
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

/* ===================================================================== */
/* rwlock_cached_read and rwlock_revoke: lease caching of read shares     */
/* ===================================================================== */

#define RC_ROUNDS 5                  /* slices of -d / RC_ROUNDS; the median */
#define RC_BATCH 1024                /* cycles between two looks at the clock */
#define RC_WARMUP_MS 5000            /* until the share stays cached */
#define RV_MIN_SAMPLES 200
#define RV_CAP (1u << 16)
#define RV_WAIT_S 10                 /* the writer's deadline: a hang, not a sample */
#define RV_WARMUP_TURNS 5

/* The read shares of rwlock NAME on the server (its S: lib.lua), or -1. */
static long long rc_shares(redisContext *c, const char *name)
{
    char key[192], tag[NM_TEST_TAG_LEN + 1];
    nm_test_key_tag(name, strlen(name), tag);
    snprintf(key, sizeof key, "netmutex:{r%s}%s:s", tag, name);
    redisReply *r = nmb_admin_cmd(c, "ZCARD", 2, (const char *[]){ "ZCARD", key });
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* Scripts the server ran so far (INFO commandstats' eval* lines), or -1. */
static long long rc_script_calls(redisContext *c)
{
    redisReply *r = nmb_admin_cmd(c, "INFO commandstats", 2,
                                  (const char *[]){ "INFO", "commandstats" });
    long long total = 0;
    if (!r)
        return -1;
    for (const char *line = r->type == REDIS_REPLY_STRING ? r->str : NULL; line;
         line = strchr(line, '\n')) {
        char cmd[64];
        long long calls;
        line += *line == '\n';
        if (sscanf(line, "cmdstat_%63[^:]:calls=%lld", cmd, &calls) == 2 &&
            strncmp(cmd, "eval", 4) == 0)
            total += calls;
    }
    freeReplyObject(r);
    return total;
}

/* A rwlock NAME whose read shares are cached. */
static int rc_open(netmutex_rwlock_t *rw, const char *name)
{
    netmutex_rwlockattr_t a;
    int err = netmutex_rwlockattr_init(&a);
    if (!err)
        err = netmutex_rwlockattr_setcache(&a, 1);
    if (!err)
        err = netmutex_rwlock_init(rw, name, &a);
    netmutex_rwlockattr_destroy(&a);
    return err;
}

/* rdlock+unlock until the share stays cached after the unlock (the
 * process listens for writers a moment after its first read): 0, or -1. */
static int rc_take_cached(netmutex_rwlock_t *rw, const char *name, redisContext *c)
{
    int64_t end = nmb_now_ns() + (int64_t)RC_WARMUP_MS * 1000000;
    do {
        if (netmutex_rwlock_rdlock(rw) != 0 || netmutex_rwlock_unlock(rw) != 0)
            return -1;
        if (rc_shares(c, name) == 1)
            return 0;
        nmb_sleep_us(1000);
    } while (nmb_now_ns() < end);
    return -1;
}

/* rdlock+unlock cycles for SECONDS: cycles per second, or -1. */
static double rc_slice(netmutex_rwlock_t *rw, double seconds, int *err)
{
    int64_t t0 = nmb_now_ns(), end = t0 + (int64_t)(seconds * 1e9), t;
    uint64_t n = 0;
    do {
        for (int i = 0; i < RC_BATCH; i++)
            if ((*err = netmutex_rwlock_rdlock(rw)) != 0 ||
                (*err = netmutex_rwlock_unlock(rw)) != 0)
                return -1;
        n += RC_BATCH;
    } while ((t = nmb_now_ns()) < end);
    return (double)n / ((double)(t - t0) / 1e9);
}

static int rc_measure(const char *scenario, netmutex_rwlock_t *rw, const char *name,
                      redisContext *admin)
{
    double v[RC_ROUNDS];
    int err = 0;
    if (rc_take_cached(rw, name, admin) != 0)
        return nmb_report_error(scenario, "warm-up failed: the share did not stay cached");
    long long c0 = rc_script_calls(admin);
    for (int r = 0; r < RC_ROUNDS; r++)
        if ((v[r] = rc_slice(rw, nmb_opt.duration_s / RC_ROUNDS, &err)) < 0) {
            char msg[96];
            snprintf(msg, sizeof msg, "netmutex_rwlock_rdlock/unlock: %s", nmb_errname(err));
            return nmb_report_error(scenario, msg);
        }
    long long c1 = rc_script_calls(admin);
    qsort(v, RC_ROUNDS, sizeof *v, nmb_cmp_double);
    double per_s = nmb_percentile(v, RC_ROUNDS, 0.5);
    jline_t j;
    nmb_j_begin(&j, scenario);
    nmb_j_int(&j, "procs", 1);
    nmb_j_int(&j, "threads", 1);
    nmb_j_num(&j, "duration_s", nmb_opt.duration_s);
    nmb_j_int(&j, "rounds", RC_ROUNDS);
    nmb_j_num(&j, "ns_per_cycle", 1e9 / per_s);
    nmb_j_int(&j, "script_calls", c0 < 0 || c1 < 0 ? -1 : c1 - c0);
    nmb_j_figure(&j, "cycles_per_s", per_s, 1e6, AT_LEAST);
    nmb_j_end(&j);
    return 0;
}

static int rc_child(void *arg, int index)
{
    const char *scenario = ((const scenario_t *)arg)->name;
    netmutex_config_t cfg = nmb_bench_config(1);
    netmutex_rwlock_t rw;
    char name[128];
    int err, rc;
    (void)index;
    redisContext *admin = nmb_admin_connect();
    if (!admin)
        return nmb_report_error(scenario, "cannot connect to the server for INFO");
    nmb_mutex_name(name, sizeof name, scenario);
    if ((err = netmutex_configure(&cfg)) != 0 || (err = rc_open(&rw, name)) != 0) {
        redisFree(admin);
        return nmb_report_error(scenario, nmb_errname(err));
    }
    rc = rc_measure(scenario, &rw, name, admin);
    redisFree(admin);
    if (((err = netmutex_rwlock_destroy(&rw)) != 0 || (err = netmutex_shutdown()) != 0) && !rc)
        rc = nmb_report_error(scenario, nmb_errname(err));
    return rc;
}

int nmb_sc_rwlock_cached_read(const scenario_t *sc)
{
    crew_t crew;
    fprintf(stderr, "nm_bench: %s: 1 process x 1 thread, read shares cached, no writer, %g s\n",
            sc->name, nmb_opt.duration_s);
    if (nmb_crew_spawn(&crew, 1, rc_child, (void *)sc) != 0) {
        nmb_crew_kill(&crew);
        return nmb_report_error(sc->name, "fork failed");
    }
    int64_t limit = nmb_now_ns() + (int64_t)(nmb_opt.duration_s * 1e9) +
                    (int64_t)(HANG_GRACE_MS + RC_WARMUP_MS) * 1000000;
    if (nmb_crew_wait(&crew, limit) != 0)
        return crew.failed ? -1 : nmb_report_error(sc->name, "still running after its time limit: killed");
    return 0;
}

/* rwlock_revoke: the reader (process 0) reads, and keeps its share cached
 * and idle; the writer (process 1) then takes the write lock, timed from
 * its call to its return, and gives it back; and so on in turns. */
typedef struct {
    int ready, go, stop;             /* atomic */
    int turn;                        /* atomic: 0 the reader's, 1 the writer's */
    int64_t end_ns, limit_ns;
    int err;
    char what[48];
    uint32_t n;
    float us[RV_CAP];
} rvboard_t;

static int rv_fail(rvboard_t *b, const char *what, int err)
{
    if (__atomic_exchange_n(&b->err, err ? err : EIO, __ATOMIC_SEQ_CST) == 0)
        snprintf(b->what, sizeof b->what, "%s", what);
    __atomic_store_n(&b->stop, 1, __ATOMIC_SEQ_CST);
    return -1;
}

static int rv_done(rvboard_t *b)
{
    int64_t t = nmb_now_ns();
    return __atomic_load_n(&b->stop, __ATOMIC_SEQ_CST) || t >= b->limit_ns ||
           (t >= b->end_ns && b->n >= RV_MIN_SAMPLES);
}

/* Waits for ME's turn: 0, or -1 once the run is over. */
static int rv_my_turn(rvboard_t *b, int me)
{
    while (__atomic_load_n(&b->turn, __ATOMIC_SEQ_CST) != me)
        if (rv_done(b))
            return -1;
        else
            nmb_sleep_us(50);
    return 0;
}

static int rv_reader_turn(rvboard_t *b, netmutex_rwlock_t *rw, const char *name,
                          redisContext *admin)
{
    if (rc_take_cached(rw, name, admin) != 0)
        return rv_fail(b, "the share did not stay cached", EIO);
    return 0;
}

static int rv_writer_turn(rvboard_t *b, netmutex_rwlock_t *rw, int sample)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += RV_WAIT_S;
    int64_t t0 = nmb_now_ns();
    int err = netmutex_rwlock_timedwrlock(rw, &deadline);
    int64_t t1 = nmb_now_ns();
    if (err)
        return rv_fail(b, "netmutex_rwlock_timedwrlock", err);
    if ((err = netmutex_rwlock_unlock(rw)) != 0)
        return rv_fail(b, "netmutex_rwlock_unlock", err);
    if (sample && b->n < RV_CAP)
        b->us[b->n++] = (float)(t1 - t0) / 1e3f;
    return 0;
}

static int rv_loop(rvboard_t *b, int me, netmutex_rwlock_t *rw, const char *name,
                   redisContext *admin)
{
    for (int turn = 0; rv_my_turn(b, me) == 0; turn++) {
        int err = me == 0 ? rv_reader_turn(b, rw, name, admin)
                          : rv_writer_turn(b, rw, turn >= RV_WARMUP_TURNS);
        if (err)
            return -1;
        __atomic_store_n(&b->turn, 1 - me, __ATOMIC_SEQ_CST);
    }
    __atomic_store_n(&b->stop, 1, __ATOMIC_SEQ_CST);
    return 0;
}

static int rv_child(void *arg, int me)
{
    rvboard_t *b = arg;
    netmutex_config_t cfg = nmb_bench_config(1);
    netmutex_rwlock_t rw;
    char name[128];
    int err, rc;
    redisContext *admin = nmb_admin_connect();
    nmb_mutex_name(name, sizeof name, "rwlock_revoke");
    if (!admin || (err = netmutex_configure(&cfg)) != 0 ||
        (err = me == 0 ? rc_open(&rw, name) : netmutex_rwlock_init(&rw, name, NULL)) != 0) {
        rv_fail(b, admin ? "netmutex_configure/rwlock_init" : "admin connection",
                admin ? err : EIO);
        __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
        if (admin)
            redisFree(admin);
        return -1;
    }
    __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&b->go, __ATOMIC_ACQUIRE))
        nmb_sleep_us(100);
    rc = rv_loop(b, me, &rw, name, admin);
    redisFree(admin);
    if (((err = netmutex_rwlock_destroy(&rw)) != 0 || (err = netmutex_shutdown()) != 0) &&
        rc == 0)
        rc = rv_fail(b, "netmutex_rwlock_destroy/shutdown", err);
    return rc;
}

static int rv_report(const scenario_t *sc, const rvboard_t *b, double duration_s)
{
    size_t n = b->n;
    double *v = malloc((n ? n : 1) * sizeof *v);
    jline_t j;
    if (!v)
        return nmb_report_error(sc->name, "out of memory");
    if (n == 0) {
        free(v);
        return nmb_report_error(sc->name, "no revocation measured");
    }
    for (size_t i = 0; i < n; i++)
        v[i] = b->us[i];
    qsort(v, n, sizeof *v, nmb_cmp_double);
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "procs", 2);
    nmb_j_num(&j, "duration_s", duration_s);
    nmb_j_int(&j, "samples", (long long)n);
    nmb_j_num(&j, "revoke_p50_us", nmb_percentile(v, n, 0.50));
    nmb_j_num(&j, "revoke_p90_us", nmb_percentile(v, n, 0.90));
    nmb_j_num(&j, "revoke_max_us", v[n - 1]);
    nmb_j_figure(&j, "revoke_p99_ms", nmb_percentile(v, n, 0.99) / 1e3, 2.0, AT_MOST);
    nmb_j_end(&j);
    free(v);
    return 0;
}

int nmb_sc_rwlock_revoke(const scenario_t *sc)
{
    crew_t crew;
    int rc;
    rvboard_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    fprintf(stderr, "nm_bench: %s: a writer takes the lock from a reader process's cached idle "
                    "share, %g s\n", sc->name, nmb_opt.duration_s);
    if (nmb_crew_spawn(&crew, 2, rv_child, b) != 0 || nmb_crew_ready(&crew, &b->ready, 2) != 0) {
        nmb_crew_kill(&crew);
        rc = nmb_report_error(sc->name, "the workers did not start");
        goto out;
    }
    int64_t start = nmb_now_ns();
    b->end_ns = start + (int64_t)(nmb_opt.duration_s * 1e9);
    b->limit_ns = b->end_ns + (int64_t)HANG_GRACE_MS * 1000000;
    __atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
    if (nmb_crew_wait(&crew, b->limit_ns + (int64_t)RV_WAIT_S * 1000000000) != 0 || b->err) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s: %s", b->err ? b->what : "a worker failed or hung",
                 b->err ? nmb_errname(b->err) : "no answer");
        rc = nmb_report_error(sc->name, msg);
    } else {
        rc = rv_report(sc, b, (double)(nmb_now_ns() - start) / 1e9);
    }
out:
    munmap(b, sizeof *b);
    return rc;
}
