/*
 * scenarios_deadlock.c -- nm_bench's deadlock_cycle scenario: how soon a
 * cycle of waits across two processes ends with EDEADLK.  What it reports
 * is described at the top of nm_bench.c; the helpers it shares with the
 * other scenarios are declared in nm_bench.h.
 *
 * Each round, two processes each lock an ERRORCHECK mutex of their own
 * (fresh names every round), meet, and lock the other's: an AB/BA cycle.
 * The cycle closes when the second of them starts to wait; a sample is the
 * time from then to the return of the EDEADLK (CLOCK_MONOTONIC, shared by
 * the two processes of one host).
 */
#include "ac_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <netmutex.h>

#include "nm_bench.h"

#define ROUNDS_MAX 256
#define ROUNDS_MIN 10
#define CYCLE_TARGET_MS 1000   /* p99, the bound */

typedef struct {
    int rounds;
    int locked[ROUNDS_MAX], done[ROUNDS_MAX];  /* atomic, per round */
    int64_t start_ns[ROUNDS_MAX][2], end_ns[ROUNDS_MAX][2];
    int rc[ROUNDS_MAX][2];
    int failed;
    char what[128];
} cycle_t;

static cycle_t *shared;

/* Waits until *COUNTER reaches 2: 0, or -1 after 60 s. */
static int meet(int *counter)
{
    int64_t bound = nmb_now_ns() + 60 * 1000000000LL;
    while (__atomic_load_n(counter, __ATOMIC_SEQ_CST) < 2)
        if (nmb_now_ns() > bound)
            return -1;
        else
            nmb_sleep_us(200);
    return 0;
}

static int cycle_child(void *arg, int index)
{
    const char *scenario = ((const scenario_t *)arg)->name;
    netmutex_config_t cfg = nmb_bench_config(0);
    netmutex_attr_t a;
    cycle_t *c = shared;
    if (netmutex_configure(&cfg) != 0)
        return nmb_report_error(scenario, "netmutex_configure failed");
    netmutex_attr_init(&a);
    netmutex_attr_settype(&a, NETMUTEX_ERRORCHECK);
    for (int r = 0; r < c->rounds; r++) {
        char own_name[128], next_name[128], what[64];
        netmutex_t own, next;
        snprintf(what, sizeof what, "deadlock_cycle/%d/%d", r, index);
        nmb_mutex_name(own_name, sizeof own_name, what);
        snprintf(what, sizeof what, "deadlock_cycle/%d/%d", r, 1 - index);
        nmb_mutex_name(next_name, sizeof next_name, what);
        if (netmutex_init(&own, own_name, &a) != 0 || netmutex_init(&next, next_name, &a) != 0 ||
            netmutex_lock(&own) != 0) {
            c->failed = 1;
            return nmb_report_error(scenario, "cannot lock its own name");
        }
        __atomic_add_fetch(&c->locked[r], 1, __ATOMIC_SEQ_CST);
        if (meet(&c->locked[r]) != 0)
            return nmb_report_error(scenario, "the other process never came");
        c->start_ns[r][index] = nmb_now_ns();
        int rc = netmutex_lock(&next);
        c->end_ns[r][index] = nmb_now_ns();
        c->rc[r][index] = rc;
        if (rc == 0)
            netmutex_unlock(&next);
        netmutex_unlock(&own);
        netmutex_destroy(&next);
        netmutex_destroy(&own);
        __atomic_add_fetch(&c->done[r], 1, __ATOMIC_SEQ_CST);
        if (meet(&c->done[r]) != 0)
            return nmb_report_error(scenario, "the other process never finished");
    }
    netmutex_attr_destroy(&a);
    netmutex_shutdown();
    return 0;
}

int nmb_sc_deadlock_cycle(const scenario_t *sc)
{
    crew_t crew;
    int rounds = (int)(nmb_opt.duration_s * 2);
    rounds = rounds < ROUNDS_MIN ? ROUNDS_MIN : rounds > ROUNDS_MAX ? ROUNDS_MAX : rounds;
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    memset(shared, 0, sizeof *shared);
    shared->rounds = rounds;
    fprintf(stderr, "nm_bench: %s: %d AB/BA cycles of 2 processes\n", sc->name, rounds);
    if (nmb_crew_spawn(&crew, 2, cycle_child, (void *)sc) != 0) {
        nmb_crew_kill(&crew);
        return nmb_report_error(sc->name, "fork failed");
    }
    int64_t limit = nmb_now_ns() + ((int64_t)rounds * 10000 + HANG_GRACE_MS) * 1000000;
    if (nmb_crew_wait(&crew, limit) != 0)
        return crew.failed ? -1 : nmb_report_error(sc->name, "still running after its time limit: killed");

    double ms[ROUNDS_MAX];
    int n = 0, edeadlk = 0, other = 0;
    for (int r = 0; r < rounds; r++) {
        int64_t closed = shared->start_ns[r][0] > shared->start_ns[r][1] ? shared->start_ns[r][0]
                                                                         : shared->start_ns[r][1];
        for (int i = 0; i < 2; i++) {
            if (shared->rc[r][i] == EDEADLK) {
                edeadlk++;
                ms[n++] = (double)(shared->end_ns[r][i] - closed) / 1e6;
            } else if (shared->rc[r][i] != 0) {
                other++;
            }
        }
    }
    if (n == 0)
        return nmb_report_error(sc->name, "no EDEADLK");
    qsort(ms, (size_t)n, sizeof ms[0], nmb_cmp_double);
    jline_t j;
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "cycles", rounds);
    nmb_j_num(&j, "edeadlk_p50_ms", nmb_percentile(ms, (size_t)n, 0.5));
    nmb_j_figure(&j, "edeadlk_p99_ms", nmb_percentile(ms, (size_t)n, 0.99), CYCLE_TARGET_MS,
                 AT_MOST);
    nmb_j_num(&j, "edeadlk_max_ms", ms[n - 1]);
    nmb_j_figure(&j, "edeadlk_per_cycle", (double)edeadlk / rounds, 1, AT_MOST);
    nmb_j_figure(&j, "other_errors", (double)other, 0, AT_MOST);
    nmb_j_end(&j);
    munmap(shared, sizeof *shared);
    return 0;
}
