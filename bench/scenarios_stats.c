/*
 * scenarios_stats.c -- what statistics (netmutex_stats(3)) cost: the same
 * workload with statistics off and on, side by side, taking turns so that
 * both see the same machine load.
 *
 *   stats_cache_uncontended  cache_uncontended's cycle (a cached lease,
 *                      1 process x 1 thread) in STATS_ROUNDS slices per
 *                      side of -d / (2 x STATS_ROUNDS) each, statistics
 *                      switched with netmutex_set_stats between slices in
 *                      the one process: "off_ns_per_cycle",
 *                      "on_ns_per_cycle" (medians), "on_over_off";
 *                      "on_minus_off_ns", target <= 5.
 *   stats_contended_procs  contended_procs (4 processes x 1 thread, hold
 *                      1 ms, think 1 ms, caching off) with statistics off
 *                      and on in turns, STATS_LOAD_ROUNDS runs of -d /
 *                      STATS_LOAD_ROUNDS seconds per side (off, on, off,
 *                      on, ...): "off_acq_per_s", "on_acq_per_s" (medians
 *                      of the runs), "off_wait_p50_ms", "on_wait_p50_ms";
 *                      "on_over_off", target >= 0.98.
 */
#include "ac_config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netmutex.h>

#include "nm_bench.h"

#define STATS_ROUNDS 10
#define STATS_BATCH 1024
#define STATS_LOAD_ROUNDS 4

/* ---- stats_cache_uncontended ------------------------------------------------ */

/* Cycles of M for SECONDS: cycles per second, or -1. */
static double slice(netmutex_t *m, double seconds, int *err)
{
    int64_t t0 = nmb_now_ns(), end = t0 + (int64_t)(seconds * 1e9), t;
    uint64_t n = 0;
    do {
        for (int i = 0; i < STATS_BATCH; i++)
            if ((*err = netmutex_lock(m)) != 0 || (*err = netmutex_unlock(m)) != 0)
                return -1;
        n += STATS_BATCH;
    } while ((t = nmb_now_ns()) < end);
    return (double)n / ((double)(t - t0) / 1e9);
}

static int unc_child(void *arg, int index)
{
    const char *scenario = ((const scenario_t *)arg)->name;
    netmutex_config_t cfg = nmb_bench_config(1);
    double off[STATS_ROUNDS], on[STATS_ROUNDS];
    double len = nmb_opt.duration_s / (2.0 * STATS_ROUNDS);
    netmutex_t m;
    char name[128], msg[96];
    int err = 0;
    (void)index;
    nmb_mutex_name(name, sizeof name, scenario);
    if ((err = netmutex_configure(&cfg)) != 0 || (err = netmutex_init(&m, name, NULL)) != 0) {
        snprintf(msg, sizeof msg, "netmutex_configure/init: %s", nmb_errname(err));
        return nmb_report_error(scenario, msg);
    }
    /* Warm-up: the lease cached, its subscription settled. */
    if (slice(&m, 0.2, &err) < 0)
        goto failed;
    for (int r = 0; r < STATS_ROUNDS; r++) {
        netmutex_set_stats(NETMUTEX_STATS_OFF);
        if ((off[r] = slice(&m, len, &err)) < 0)
            goto failed;
        netmutex_set_stats(NETMUTEX_STATS_ON);
        if ((on[r] = slice(&m, len, &err)) < 0)
            goto failed;
    }
    netmutex_set_stats(NETMUTEX_STATS_OFF);
    double off_ns = 1e9 / nmb_median(off, STATS_ROUNDS), on_ns = 1e9 / nmb_median(on, STATS_ROUNDS);
    jline_t j;
    nmb_j_begin(&j, scenario);
    nmb_j_int(&j, "procs", 1);
    nmb_j_int(&j, "threads", 1);
    nmb_j_num(&j, "duration_s", nmb_opt.duration_s);
    nmb_j_int(&j, "rounds", STATS_ROUNDS);
    nmb_j_num(&j, "off_ns_per_cycle", off_ns);
    nmb_j_num(&j, "on_ns_per_cycle", on_ns);
    nmb_j_num(&j, "on_over_off", on_ns / off_ns);
    nmb_j_figure(&j, "on_minus_off_ns", on_ns - off_ns, 5.0, AT_MOST);
    nmb_j_end(&j);
    netmutex_destroy(&m);
    netmutex_shutdown();
    return 0;
failed:
    snprintf(msg, sizeof msg, "a cycle failed: %s", nmb_errname(err));
    return nmb_report_error(scenario, msg);
}

int nmb_sc_stats_cache_uncontended(const scenario_t *sc)
{
    crew_t crew;
    fprintf(stderr, "nm_bench: %s: 1 process x 1 thread, lease caching on, statistics off/on, %g s\n",
            sc->name, nmb_opt.duration_s);
    if (nmb_crew_spawn(&crew, 1, unc_child, (void *)sc) != 0) {
        nmb_crew_kill(&crew);
        return nmb_report_error(sc->name, "fork failed");
    }
    int64_t limit = nmb_now_ns() + (int64_t)(nmb_opt.duration_s * 1e9) + HANG_GRACE_MS * 1000000LL;
    if (nmb_crew_wait(&crew, limit) != 0)
        return crew.failed ? -1 : nmb_report_error(sc->name, "still running after its time limit: killed");
    return 0;
}

/* ---- stats_contended_procs ------------------------------------------------------ */

int nmb_sc_stats_contended_procs(const scenario_t *sc)
{
    load_t ld = nmb_with_overrides(sc->load);
    double rate[2][STATS_LOAD_ROUNDS], p50[2][STATS_LOAD_ROUNDS];
    double saved = nmb_opt.duration_s;
    char name[128];
    group_result_t r;
    nmb_opt.duration_s = saved / STATS_LOAD_ROUNDS;
    for (int round = 0; round < STATS_LOAD_ROUNDS; round++) {
        for (int side = 0; side < 2; side++) {
            nmb_worker_stats = side;
            nmb_mutex_name(name, sizeof name, sc->name);
            if (nmb_run_load(name, &ld, &r) != 0) {
                nmb_opt.duration_s = saved;
                nmb_worker_stats = 0;
                return nmb_report_error(sc->name, r.error);
            }
            rate[side][round] = nmb_rate(&r);
            p50[side][round] = r.wait_p50_us / 1e3;
        }
    }
    nmb_opt.duration_s = saved;
    nmb_worker_stats = 0;
    double off = nmb_median(rate[0], STATS_LOAD_ROUNDS), on = nmb_median(rate[1], STATS_LOAD_ROUNDS);
    jline_t j;
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "procs", ld.procs);
    nmb_j_int(&j, "threads", ld.threads);
    nmb_j_int(&j, "hold_us", ld.hold_us);
    nmb_j_int(&j, "think_us", ld.think_us);
    nmb_j_num(&j, "duration_s", saved);
    nmb_j_int(&j, "rounds", STATS_LOAD_ROUNDS);
    nmb_j_num(&j, "off_acq_per_s", off);
    nmb_j_num(&j, "on_acq_per_s", on);
    nmb_j_num(&j, "off_wait_p50_ms", nmb_median(p50[0], STATS_LOAD_ROUNDS));
    nmb_j_num(&j, "on_wait_p50_ms", nmb_median(p50[1], STATS_LOAD_ROUNDS));
    nmb_j_figure(&j, "on_over_off", off > 0 ? on / off : 0, 0.98, AT_LEAST);
    nmb_j_end(&j);
    return 0;
}
