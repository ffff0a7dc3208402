/*
 * scenarios_cond.c -- nm_bench's condition-variable scenario, cond_pingpong:
 * two processes hand a turn to each other through one netmutex_cond_t and
 * the netmutex guarding the turn, and count the wake-ups that found the
 * turn not theirs (spurious: the API allows them, but they must be rare).
 * The top of nm_bench.c describes what it reports.
 */
#include "ac_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <netmutex.h>

#include "nm_bench.h"

/* How long past the end a wait may last before it counts as hung. */
#define PP_WAIT_GRACE_S 30

typedef struct {
    int ready, go;
    int turn;                 /* whose turn: under the netmutex */
    int stop;                 /* under the netmutex */
    int64_t end_ns;
    uint64_t exchanges[2];    /* turns handed over by each process */
    uint64_t spurious[2];     /* wake-ups that found the turn not theirs */
    int err[2];
    char what[2][48];
} ppboard_t;

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
    deadline.tv_sec += (time_t)(nmb_opt.duration_s + PP_WAIT_GRACE_S);
    while (b->turn != me && !b->stop) {
        int err = netmutex_cond_clockwait(c, m, CLOCK_MONOTONIC, &deadline);
        if (err)
            return err;
        if (b->turn != me && !b->stop)
            b->spurious[me]++;
    }
    return 0;
}

/* One turn: wait for it, hand it over, signal. */
static int pp_turn(ppboard_t *b, int me, netmutex_cond_t *c, netmutex_t *m, int *done)
{
    int err = netmutex_lock(m);
    if (err)
        return pp_fail(b, me, "netmutex_lock", err);
    if ((err = pp_wait_turn(b, me, c, m)) != 0) {
        netmutex_unlock(m);
        return pp_fail(b, me, "netmutex_cond_clockwait", err);
    }
    *done = b->stop;
    if (!*done) {
        b->turn = 1 - me;
        b->exchanges[me]++;
        b->stop = nmb_now_ns() >= b->end_ns;
        err = b->stop ? netmutex_cond_broadcast(c) : netmutex_cond_signal(c);
    }
    int uerr = netmutex_unlock(m);
    if (err || uerr)
        return pp_fail(b, me, err ? "netmutex_cond_signal" : "netmutex_unlock", err ? err : uerr);
    return 0;
}

static int pp_child(void *arg, int me)
{
    ppboard_t *b = arg;
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
    while (!__atomic_load_n(&b->go, __ATOMIC_ACQUIRE))
        nmb_sleep_us(100);
    while (!done && rc == 0)
        rc = pp_turn(b, me, &c, &m, &done);
    netmutex_cond_destroy(&c);
    netmutex_destroy(&m);
    netmutex_shutdown();
    return rc;
}

static int pp_report(const scenario_t *sc, const ppboard_t *b, double duration_s)
{
    jline_t j;
    uint64_t n = b->exchanges[0] + b->exchanges[1];
    uint64_t spurious = b->spurious[0] + b->spurious[1];
    if (n == 0)
        return nmb_report_error(sc->name, "no turn was handed over");
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "procs", 2);
    nmb_j_num(&j, "duration_s", duration_s);
    nmb_j_int(&j, "exchanges", (long long)n);
    nmb_j_num(&j, "exchanges_per_s", (double)n / duration_s);
    nmb_j_num(&j, "exchange_us", duration_s * 1e6 / (double)n);
    nmb_j_num(&j, "exchange_rtt", duration_s * 1e6 / (double)n / nmb_rtt_us);
    nmb_j_int(&j, "spurious", (long long)spurious);
    nmb_j_figure(&j, "spurious_per_1000", 1000.0 * (double)spurious / (double)n, 1, AT_MOST);
    nmb_j_end(&j);
    return 0;
}

int nmb_sc_cond_pingpong(const scenario_t *sc)
{
    crew_t crew;
    int rc;
    ppboard_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    if (b == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    memset(b, 0, sizeof *b);
    fprintf(stderr, "nm_bench: %s: 2 processes hand a turn over through a condition, %g s\n",
            sc->name, nmb_opt.duration_s);
    if (nmb_crew_spawn(&crew, 2, pp_child, b) != 0 || nmb_crew_ready(&crew, &b->ready, 2) != 0) {
        nmb_crew_kill(&crew);
        rc = nmb_report_error(sc->name, "the workers did not start");
        goto out;
    }
    int64_t start = nmb_now_ns();
    b->end_ns = start + (int64_t)(nmb_opt.duration_s * 1e9);
    __atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
    int64_t limit = b->end_ns + (int64_t)(PP_WAIT_GRACE_S + 5) * 1000000000;
    if (nmb_crew_wait(&crew, limit) != 0) {
        char msg[160];
        int who = b->err[1] ? 1 : 0;
        snprintf(msg, sizeof msg, "%s: %s", b->err[who] ? b->what[who] : "a wait hung",
                 b->err[who] ? nmb_errname(b->err[who]) : "no answer");
        rc = nmb_report_error(sc->name, msg);
    } else {
        rc = pp_report(sc, b, (double)(nmb_now_ns() - start) / 1e9);
    }
out:
    munmap(b, sizeof *b);
    return rc;
}
