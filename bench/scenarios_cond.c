/*
 * scenarios_cond.c -- nm_bench's condition-variable scenarios.
 *
 * cond_pingpong: two processes hand a turn to each other through one
 * netmutex_cond_t and the netmutex guarding the turn, and count the
 * wake-ups that found the turn not theirs (spurious: the API allows them,
 * but they must be rare).  A third process runs the uncached uncontended
 * lock+unlock loop in slices that take turns with the ping-pong's, so the
 * ratio of the two rates is taken under the same machine load.
 *
 * cond_broadcast16: 16 waiters (8 processes of 2 threads) wait on one
 * condition; a ninth process broadcasts, and a sample is the time from
 * the broadcast's call to the moment the last of the 16 holds the mutex.
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

#include <netmutex.h>

#include "nm_bench.h"

/* How long past the end a wait may last before it counts as hung. */
#define PP_WAIT_GRACE_S 30
/* Slices of each side of cond_pingpong, taking turns: the ping-pong's and
 * the uncontended loop's (-d seconds each in all). */
#define PP_ROUNDS 4
/* The ping-pong's target: exchanges per second against the uncontended
 * cycles per second of the same run. */
#define PP_RATIO_TARGET 0.5
/* How often a side that does not run looks whether it may: seldom, so as
 * not to take the CPU from the side that runs. */
#define PP_IDLE_US 1000

/* Which side runs (the main process says): none yet, the uncontended
 * loop, the ping-pong, or none any more. */
enum { PHASE_WARM, PHASE_UNC, PHASE_PP, PHASE_STOP };

typedef struct {
    int ready;
    int phase;                /* the main process's: which side runs */
    int turn;                 /* whose turn: under the netmutex */
    int stop;                 /* under the netmutex */
    uint64_t exchanges[2];    /* turns handed over by each, in PP slices */
    uint64_t spurious[2];     /* wake-ups that found the turn not theirs */
    uint64_t cycles;          /* the uncontended loop's, in UNC slices */
    int err[3];
    char what[3][48];
} ppboard_t;

static int pp_phase(ppboard_t *b)
{
    return __atomic_load_n(&b->phase, __ATOMIC_ACQUIRE);
}

static int pp_fail(ppboard_t *b, int me, const char *what, int err)
{
    b->err[me] = err ? err : EIO;
    snprintf(b->what[me], sizeof b->what[me], "%s", what);
    return -1;
}

/* Waits for the turn under M: 0, or the wait's error. */
static int pp_wait_turn(ppboard_t *b, int me, netmutex_cond_t *c, netmutex_t *m)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += (time_t)(2 * nmb_opt.duration_s + PP_WAIT_GRACE_S);
    while (b->turn != me && !b->stop) {
        int err = netmutex_cond_clockwait(c, m, CLOCK_MONOTONIC, &deadline);
        if (err)
            return err;
        if (b->turn != me && !b->stop)
            b->spurious[me]++;
    }
    return 0;
}

/* Between the ping-pong's slices the holder of the turn keeps it, without
 * the mutex (the other waits on), until the ping-pong goes on or is over. */
static void pp_paused(ppboard_t *b)
{
    int phase;
    while ((phase = pp_phase(b)) != PHASE_PP && phase != PHASE_STOP)
        nmb_sleep_us(PP_IDLE_US);
}

/* One turn: wait for it, hand it over, signal -- or, once it is all over,
 * tell the other and stop (*DONE). */
static int pp_turn(ppboard_t *b, int me, netmutex_cond_t *c, netmutex_t *m, int *done)
{
    int err = netmutex_lock(m);
    if (err)
        return pp_fail(b, me, "netmutex_lock", err);
    if ((err = pp_wait_turn(b, me, c, m)) != 0) {
        netmutex_unlock(m);
        return pp_fail(b, me, "netmutex_cond_clockwait", err);
    }
    int phase = pp_phase(b);
    *done = b->stop;
    if (!*done && phase == PHASE_PP) {
        b->turn = 1 - me;
        b->exchanges[me]++;
        err = netmutex_cond_signal(c);
    } else if (!*done && phase == PHASE_STOP) {
        b->stop = *done = 1;
        err = netmutex_cond_broadcast(c);
    }
    int uerr = netmutex_unlock(m);
    if (err || uerr)
        return pp_fail(b, me, err ? "netmutex_cond_signal" : "netmutex_unlock", err ? err : uerr);
    if (!*done && phase != PHASE_PP)
        pp_paused(b);
    return 0;
}

static int pp_player(ppboard_t *b, int me)
{
    netmutex_config_t cfg = nmb_bench_config(1);
    netmutex_t m;
    netmutex_cond_t c;
    char mname[128], cname[128];
    int err, done = 0, rc = 0;
    nmb_mutex_name(mname, sizeof mname, "cond_pingpong/m");
    nmb_mutex_name(cname, sizeof cname, "cond_pingpong/c");
    if ((err = netmutex_configure(&cfg)) != 0 || (err = netmutex_init(&m, mname, NULL)) != 0 ||
        (err = netmutex_cond_init(&c, cname, NULL)) != 0) {
        __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
        return pp_fail(b, me, "netmutex_configure/init", err);
    }
    __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
    while (pp_phase(b) == PHASE_WARM)
        nmb_sleep_us(100);
    while (!done && rc == 0)
        rc = pp_turn(b, me, &c, &m, &done);
    netmutex_cond_destroy(&c);
    netmutex_destroy(&m);
    netmutex_shutdown();
    return rc;
}

/* The reference: lock+unlock of a name of its own, caching off, in the
 * UNC slices. */
static int pp_uncontended(ppboard_t *b)
{
    netmutex_config_t cfg = nmb_bench_config(0);
    netmutex_t m;
    char mname[128];
    int err, phase;
    nmb_mutex_name(mname, sizeof mname, "cond_pingpong/uncontended");
    if ((err = netmutex_configure(&cfg)) != 0 || (err = netmutex_init(&m, mname, NULL)) != 0 ||
        (err = netmutex_lock(&m)) != 0 || (err = netmutex_unlock(&m)) != 0) {
        __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
        return pp_fail(b, 2, "uncontended: configure/init/lock", err);
    }
    __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
    while ((phase = pp_phase(b)) != PHASE_STOP) {
        if (phase != PHASE_UNC) {
            nmb_sleep_us(PP_IDLE_US);
            continue;
        }
        if ((err = netmutex_lock(&m)) != 0 || (err = netmutex_unlock(&m)) != 0)
            return pp_fail(b, 2, "uncontended: lock/unlock", err);
        __atomic_add_fetch(&b->cycles, 1, __ATOMIC_RELAXED);
    }
    netmutex_destroy(&m);
    netmutex_shutdown();
    return 0;
}

static int pp_child(void *arg, int i)
{
    return i < 2 ? pp_player(arg, i) : pp_uncontended(arg);
}

static int pp_report(const scenario_t *sc, const ppboard_t *b, double pp_s, double unc_s)
{
    jline_t j;
    uint64_t n = b->exchanges[0] + b->exchanges[1];
    uint64_t spurious = b->spurious[0] + b->spurious[1];
    if (n == 0 || b->cycles == 0)
        return nmb_report_error(sc->name, n ? "no uncontended cycle" : "no turn was handed over");
    double rate = (double)n / pp_s, unc = (double)b->cycles / unc_s;
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "procs", 2);
    nmb_j_int(&j, "rounds", PP_ROUNDS);
    nmb_j_num(&j, "duration_s", pp_s);
    nmb_j_int(&j, "exchanges", (long long)n);
    nmb_j_num(&j, "exchanges_per_s", rate);
    nmb_j_num(&j, "exchange_us", 1e6 / rate);
    nmb_j_num(&j, "exchange_rtt", 1e6 / rate / nmb_rtt_us);
    nmb_j_num(&j, "uncontended_duration_s", unc_s);
    nmb_j_num(&j, "uncontended_cycles_per_s", unc);
    nmb_j_num(&j, "uncontended_cycle_us", 1e6 / unc);
    nmb_j_figure(&j, "ratio_to_uncontended", rate / unc, PP_RATIO_TARGET, AT_LEAST);
    nmb_j_int(&j, "spurious", (long long)spurious);
    nmb_j_figure(&j, "spurious_per_1000", 1000.0 * (double)spurious / (double)n, 1, AT_MOST);
    nmb_j_end(&j);
    return 0;
}

/* Runs the slices: each side -d seconds in PP_ROUNDS turns.  *PP_S and
 * *UNC_S get the time each side really had.  0, or -1 when a worker failed
 * or the ping-pong stalled. */
static int pp_slices(ppboard_t *b, crew_t *crew, double *pp_s, double *unc_s)
{
    int64_t slice = (int64_t)(nmb_opt.duration_s * 1e9 / PP_ROUNDS);
    *pp_s = *unc_s = 0;
    for (int r = 0; r < 2 * PP_ROUNDS; r++) {
        int phase = r % 2 == 0 ? PHASE_UNC : PHASE_PP;
        int64_t start = nmb_now_ns();
        __atomic_store_n(&b->phase, phase, __ATOMIC_RELEASE);
        while (nmb_now_ns() - start < slice) {
            nmb_sleep_us(2000);
            nmb_crew_reap(crew);
            if (crew->failed)
                return -1;
        }
        /* The slice ends as the next one starts (or the caller stops). */
        double took = (double)(nmb_now_ns() - start) / 1e9;
        if (phase == PHASE_PP)
            *pp_s += took;
        else
            *unc_s += took;
    }
    return 0;
}

int nmb_sc_cond_pingpong(const scenario_t *sc)
{
    crew_t crew;
    int rc;
    double pp_s, unc_s;
    ppboard_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    if (b == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    memset(b, 0, sizeof *b);
    fprintf(stderr,
            "nm_bench: %s: 2 processes hand a turn over through a condition, %g s, taking turns "
            "with an uncontended loop (caching off), %g s\n",
            sc->name, nmb_opt.duration_s, nmb_opt.duration_s);
    if (nmb_crew_spawn(&crew, 3, pp_child, b) != 0 || nmb_crew_ready(&crew, &b->ready, 3) != 0) {
        nmb_crew_kill(&crew);
        rc = nmb_report_error(sc->name, "the workers did not start");
        goto out;
    }
    int sliced = pp_slices(b, &crew, &pp_s, &unc_s);
    __atomic_store_n(&b->phase, PHASE_STOP, __ATOMIC_RELEASE);
    int64_t limit = nmb_now_ns() + (int64_t)(PP_WAIT_GRACE_S + 5) * 1000000000;
    if (nmb_crew_wait(&crew, limit) != 0 || sliced != 0) {
        char msg[160];
        int who = b->err[0] ? 0 : b->err[1] ? 1 : 2;
        snprintf(msg, sizeof msg, "%s: %s", b->err[who] ? b->what[who] : "a wait hung",
                 b->err[who] ? nmb_errname(b->err[who]) : "no answer");
        rc = nmb_report_error(sc->name, msg);
    } else {
        rc = pp_report(sc, b, pp_s, unc_s);
    }
out:
    munmap(b, sizeof *b);
    return rc;
}

/* ===================================================================== */
/* cond_broadcast16                                                       */
/* ===================================================================== */

#define BC_PROCS 8
#define BC_THREADS 2
#define BC_WAITERS (BC_PROCS * BC_THREADS)
#define BC_ROUNDS_MAX 4096
#define BC_ROUNDS_MIN 20
/* All 16 awake and holding the mutex in turn within this, p99. */
#define BC_TARGET_MS 50.0
/* A round that takes longer has hung. */
#define BC_ROUND_LIMIT_S 30

typedef struct {
    int ready, go, stop;
    int gen;                          /* the round: under the netmutex */
    int waiting;                      /* waiters in their wait: under it */
    int rounds;                       /* done */
    int64_t t0[BC_ROUNDS_MAX];        /* the broadcast's call */
    int64_t last[BC_ROUNDS_MAX];      /* the latest waiter to hold it */
    int held[BC_ROUNDS_MAX];          /* waiters that held it */
    uint64_t spurious;                /* under the netmutex */
    int err;
    char what[64];
} bcboard_t;

typedef struct {
    bcboard_t *b;
    netmutex_t *m;
    netmutex_cond_t *c;
    int err;
} bcwaiter_t;

static void bc_fail(bcboard_t *b, const char *what, int err)
{
    if (__atomic_exchange_n(&b->err, err ? err : EIO, __ATOMIC_SEQ_CST) == 0)
        snprintf(b->what, sizeof b->what, "%s", what);
}

/* One waiter: waits for each round under the mutex, notes when it holds
 * it, and waits again. */
static void *bc_waiter(void *arg)
{
    bcwaiter_t *w = arg;
    bcboard_t *b = w->b;
    struct timespec deadline;
    int err = netmutex_lock(w->m), seen = 0;
    if (err) {
        bc_fail(b, "netmutex_lock", err);
        w->err = err;
        return NULL;
    }
    while (!err) {
        b->waiting++;
        while (b->gen == seen && !b->stop && !err) {
            clock_gettime(CLOCK_MONOTONIC, &deadline);
            deadline.tv_sec += BC_ROUND_LIMIT_S + (time_t)nmb_opt.duration_s;
            err = netmutex_cond_clockwait(w->c, w->m, CLOCK_MONOTONIC, &deadline);
            if (!err && b->gen == seen && !b->stop)
                b->spurious++;
        }
        b->waiting--;
        if (err || b->stop)
            break;
        seen = b->gen;
        int64_t now = nmb_now_ns();
        if (now > b->last[seen])
            b->last[seen] = now;
        b->held[seen]++;
    }
    if (err)
        bc_fail(b, "netmutex_cond_clockwait", err);
    netmutex_unlock(w->m); /* held again, whatever the wait said */
    w->err = err;
    return NULL;
}

static int bc_setup(bcboard_t *b, netmutex_t *m, netmutex_cond_t *c)
{
    netmutex_config_t cfg = nmb_bench_config(1);
    char mname[128], cname[128];
    int err;
    nmb_mutex_name(mname, sizeof mname, "cond_broadcast16/m");
    nmb_mutex_name(cname, sizeof cname, "cond_broadcast16/c");
    if ((err = netmutex_configure(&cfg)) != 0 || (err = netmutex_init(m, mname, NULL)) != 0 ||
        (err = netmutex_cond_init(c, cname, NULL)) != 0 || (err = netmutex_lock(m)) != 0 ||
        (err = netmutex_unlock(m)) != 0)
        bc_fail(b, "netmutex_configure/init/lock", err);
    __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
    return err;
}

static int bc_waiters(bcboard_t *b)
{
    netmutex_t m;
    netmutex_cond_t c;
    pthread_t tid[BC_THREADS];
    bcwaiter_t w[BC_THREADS];
    int started = 0, rc = 0;
    if (bc_setup(b, &m, &c) != 0)
        return -1;
    while (!__atomic_load_n(&b->go, __ATOMIC_ACQUIRE))
        nmb_sleep_us(100);
    for (int i = 0; i < BC_THREADS; i++) {
        w[i] = (bcwaiter_t){ b, &m, &c, 0 };
        if (pthread_create(&tid[i], NULL, bc_waiter, &w[i]) != 0) {
            bc_fail(b, "pthread_create", EAGAIN);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(tid[i], NULL);
        rc |= w[i].err != 0;
    }
    netmutex_cond_destroy(&c);
    netmutex_destroy(&m);
    netmutex_shutdown();
    return rc || started < BC_THREADS ? -1 : 0;
}

/* Waits until F(B, ARG) holds, polling, by DEADLINE: 0, or -1. */
static int bc_until(bcboard_t *b, int (*f)(bcboard_t *, int), int arg, int64_t deadline)
{
    while (!f(b, arg)) {
        if (nmb_now_ns() > deadline || __atomic_load_n(&b->err, __ATOMIC_SEQ_CST))
            return -1;
        nmb_sleep_us(100);
    }
    return 0;
}

static int bc_all_held(bcboard_t *b, int round)
{
    return __atomic_load_n(&b->held[round], __ATOMIC_SEQ_CST) == BC_WAITERS;
}

/* One round: once all 16 wait (checked under the mutex: each counted
 * itself under it and registers before it lets the mutex go), broadcast
 * under the mutex, then wait for the 16 to have held it.  0 or -1. */
static int bc_round(bcboard_t *b, netmutex_t *m, netmutex_cond_t *c, int round)
{
    int64_t deadline = nmb_now_ns() + (int64_t)BC_ROUND_LIMIT_S * 1000000000;
    int err;
    for (;;) {
        if ((err = netmutex_lock(m)) != 0) {
            bc_fail(b, "netmutex_lock", err);
            return -1;
        }
        if (b->waiting == BC_WAITERS)
            break;
        netmutex_unlock(m);
        if (nmb_now_ns() > deadline || __atomic_load_n(&b->err, __ATOMIC_SEQ_CST)) {
            bc_fail(b, "the waiters did not all wait", ETIMEDOUT);
            return -1;
        }
        nmb_sleep_us(200);
    }
    b->gen = round;
    b->t0[round] = nmb_now_ns();
    err = netmutex_cond_broadcast(c);
    int uerr = netmutex_unlock(m);
    if (err || uerr) {
        bc_fail(b, err ? "netmutex_cond_broadcast" : "netmutex_unlock", err ? err : uerr);
        return -1;
    }
    if (bc_until(b, bc_all_held, round, deadline) != 0) {
        bc_fail(b, "the waiters did not all wake", ETIMEDOUT);
        return -1;
    }
    return 0;
}

static int bc_broadcaster(bcboard_t *b)
{
    netmutex_t m;
    netmutex_cond_t c;
    int rc = 0;
    if (bc_setup(b, &m, &c) != 0)
        return -1;
    while (!__atomic_load_n(&b->go, __ATOMIC_ACQUIRE))
        nmb_sleep_us(100);
    int64_t end = nmb_now_ns() + (int64_t)(nmb_opt.duration_s * 1e9);
    int round = 1;
    for (; round < BC_ROUNDS_MAX && (round <= BC_ROUNDS_MIN || nmb_now_ns() < end); round++)
        if ((rc = bc_round(b, &m, &c, round)) != 0)
            break;
    b->rounds = round - 1;
    if ((netmutex_lock(&m)) == 0) {
        b->stop = 1;
        netmutex_cond_broadcast(&c);
        netmutex_unlock(&m);
    }
    netmutex_cond_destroy(&c);
    netmutex_destroy(&m);
    netmutex_shutdown();
    return rc;
}

static int bc_child(void *arg, int i)
{
    return i < BC_PROCS ? bc_waiters(arg) : bc_broadcaster(arg);
}

static int bc_report(const scenario_t *sc, bcboard_t *b)
{
    jline_t j;
    int n = b->rounds;
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v || n <= 0) {
        free(v);
        return nmb_report_error(sc->name, "no round");
    }
    for (int i = 0; i < n; i++)
        v[i] = (double)(b->last[i + 1] - b->t0[i + 1]) / 1e6;
    qsort(v, (size_t)n, sizeof *v, nmb_cmp_double);
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "procs", BC_PROCS);
    nmb_j_int(&j, "threads", BC_THREADS);
    nmb_j_int(&j, "waiters", BC_WAITERS);
    nmb_j_int(&j, "rounds", n);
    nmb_j_num(&j, "all_held_p50_ms", nmb_percentile(v, (size_t)n, 0.50));
    nmb_j_figure(&j, "all_held_p99_ms", nmb_percentile(v, (size_t)n, 0.99), BC_TARGET_MS,
                 AT_MOST);
    nmb_j_num(&j, "all_held_max_ms", v[n - 1]);
    nmb_j_int(&j, "spurious", (long long)b->spurious);
    nmb_j_end(&j);
    free(v);
    return 0;
}

int nmb_sc_cond_broadcast16(const scenario_t *sc)
{
    crew_t crew;
    int rc;
    bcboard_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    if (b == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    memset(b, 0, sizeof *b);
    fprintf(stderr,
            "nm_bench: %s: %d waiters in %d processes, a broadcast and all of them holding the "
            "mutex in turn, %g s (at least %d rounds)\n",
            sc->name, BC_WAITERS, BC_PROCS, nmb_opt.duration_s, BC_ROUNDS_MIN);
    if (nmb_crew_spawn(&crew, BC_PROCS + 1, bc_child, b) != 0 ||
        nmb_crew_ready(&crew, &b->ready, BC_PROCS + 1) != 0) {
        nmb_crew_kill(&crew);
        rc = nmb_report_error(sc->name, "the workers did not start");
        goto out;
    }
    __atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
    int64_t limit = nmb_now_ns() +
                    (int64_t)((nmb_opt.duration_s + 2 * BC_ROUND_LIMIT_S + 5) * 1e9);
    if (nmb_crew_wait(&crew, limit) != 0 || b->err) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s: %s", b->err ? b->what : "a worker failed or hung",
                 b->err ? nmb_errname(b->err) : "no answer");
        rc = nmb_report_error(sc->name, msg);
    } else {
        rc = bc_report(sc, b);
    }
out:
    munmap(b, sizeof *b);
    return rc;
}
