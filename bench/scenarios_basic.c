/*
 * scenarios_basic.c -- the lock-loop scenarios of nm_bench: uncontended,
 * contended_procs, fair_procs, threads, threads_two_procs, many_locks and
 * the quorum ones (the top of nm_bench.c describes each).
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
/* scenarios                                                              */
/* ===================================================================== */

/* This run's single-server contended figure, for quorum_contended_procs'
 * ratio (0: not measured in this run); the uncontended one is the link's
 * (nmb_link_figures). */
static double single_contended_per_s;

int nmb_sc_uncontended(const scenario_t *sc)
{
    group_result_t r;
    jline_t j;
    if (nmb_measure(sc->name, &sc->load, &r, &j) != 0)   /* never overridden */
        return -1;
    nmb_link_figures()->cycles_per_s = nmb_rate(&r);
    nmb_link_figures()->cycles_rtt_us = nmb_rtt_us;
    double bound = 1e6 / (2.0 * nmb_rtt_us);
    /* Right after, the same cycle with the least a Redis lock can do: what
     * this machine's round trips allow any script-based lock. */
    double ref = nmb_reference_cycles_per_s(sc->name, nmb_opt.duration_s);
    nmb_j_num(&j, "wait_p99_ms", r.wait_p99_us / 1e3);
    if (ref > 0) {
        nmb_j_num(&j, "reference_cycles_per_s", ref);
        nmb_j_num(&j, "reference_ratio_to_rtt_bound", ref / bound);
        nmb_j_num(&j, "ratio_to_reference", nmb_rate(&r) / ref);
    }
    nmb_j_figure(&j, "cycles_per_s", nmb_rate(&r), 0.9 * bound, AT_LEAST);
    nmb_j_rtt_bound(&j, nmb_rate(&r));
    nmb_j_end(&j);
    return 0;
}

/* The same load on a process-shared pthread mutex: what the machine and
 * the hold/think sleeps allow a lock that costs nothing, in this run.
 * -1 after printing SCENARIO's error line. */
static int measure_pthread_ref(const char *scenario, const load_t *ld, group_result_t *ref)
{
    load_t pl = *ld;
    char msg[sizeof ref->error + 32];
    pl.pthread_ref = 1;
    pl.fair = 0;                       /* pthread mutexes have no fair mode */
    fprintf(stderr, "nm_bench: %s: the same load on a process-shared pthread mutex\n", scenario);
    if (nmb_run_load("pthread", &pl, ref) == 0)
        return 0;
    snprintf(msg, sizeof msg, "pthread reference: %s", ref->error);
    return nmb_report_error(scenario, msg);
}

/* contended_procs and fair_procs. */
static int contended(const scenario_t *sc, int fair)
{
    load_t ld = nmb_with_overrides(sc->load);
    group_result_t r, ref;
    jline_t j;
    ld.fair = fair;
    if (nmb_measure(sc->name, &ld, &r, &j) != 0 || measure_pthread_ref(sc->name, &ld, &ref) != 0)
        return -1;
    nmb_j_figure(&j, "wait_p99_ms", r.wait_p99_us / 1e3, 5.0, AT_MOST);
    nmb_j_num(&j, "wait_max_ms", r.wait_max_us / 1e3);
    /* The target is the pthread mutex's rate, measured under the same
     * timer slack and machine load, not the arithmetic ideal. */
    nmb_j_figure(&j, "acq_per_s", nmb_rate(&r), 0.9 * nmb_rate(&ref), AT_LEAST);
    nmb_j_num(&j, "pthread_acq_per_s", nmb_rate(&ref));
    nmb_j_num(&j, "pthread_wait_p50_ms", ref.wait_p50_us / 1e3);
    nmb_j_num(&j, "pthread_wait_p99_ms", ref.wait_p99_us / 1e3);
    nmb_j_num(&j, "pthread_fairness", nmb_min_over_max(ref.per_proc, ld.procs));
    /* The most the parameters allow: the lock busy all the time, or every
     * worker always either holding or thinking.  With no hold time the
     * round trips set the limit. */
    if (ld.hold_us > 0) {
        double workers = (double)ld.procs * ld.threads;
        double ideal = 1e6 / (double)ld.hold_us;
        double demand = workers * 1e6 / (double)(ld.hold_us + ld.think_us);
        nmb_j_num(&j, "ideal_per_s", demand < ideal ? demand : ideal);
    } else {
        nmb_j_rtt_bound(&j, nmb_rate(&r));
    }
    if (ld.procs > 1)
        nmb_j_figure(&j, "fairness", nmb_min_over_max(r.per_proc, ld.procs), 0.8, AT_LEAST);
    nmb_j_end(&j);
    if (!fair && !ld.cache)
        single_contended_per_s = nmb_rate(&r);
    return 0;
}

/* measure() with the library pointed at three independent servers. */
static int measure_quorum(const scenario_t *sc, const load_t *ld, group_result_t *r, jline_t *j)
{
    char single[sizeof nmb_server_url];
    const char *list = nmb_quorum_url();
    if (!list)
        return nmb_report_error(sc->name, "the quorum servers could not be started");
    memcpy(single, nmb_server_url, sizeof single);
    snprintf(nmb_server_url, sizeof nmb_server_url, "%s", list);
    int rc = nmb_measure(sc->name, ld, r, j);
    memcpy(nmb_server_url, single, sizeof single);
    if (rc == 0)
        nmb_j_int(j, "servers", NSERVERS);
    return rc;
}

/* How many times longer a quorum cycle takes than a single-server one,
 * from two rates measured in this run (left out when the single-server
 * scenario did not run). */
static void j_vs_single(jline_t *j, double single_per_s, double quorum_per_s, double target)
{
    if (single_per_s <= 0 || quorum_per_s <= 0)
        return;
    nmb_j_num(j, "single_server_per_s", single_per_s);
    if (target > 0)
        nmb_j_figure(j, "cycle_time_ratio", single_per_s / quorum_per_s, target, AT_MOST);
    else
        nmb_j_num(j, "cycle_time_ratio", single_per_s / quorum_per_s);
}

int nmb_sc_quorum_uncontended(const scenario_t *sc)
{
    group_result_t r;
    jline_t j;
    if (measure_quorum(sc, &sc->load, &r, &j) != 0)
        return -1;
    nmb_j_num(&j, "cycles_per_s", nmb_rate(&r));
    nmb_j_num(&j, "wait_p99_ms", r.wait_p99_us / 1e3);
    double single = nmb_link_figures()->cycles_per_s;
    j_vs_single(&j, single, nmb_rate(&r), 1.3);
    if (single > 0)
        nmb_link_figures()->quorum_ratio = single / nmb_rate(&r);
    nmb_j_end(&j);
    return 0;
}

int nmb_sc_quorum_contended_procs(const scenario_t *sc)
{
    load_t ld = nmb_with_overrides(sc->load);
    group_result_t r;
    jline_t j;
    if (measure_quorum(sc, &ld, &r, &j) != 0)
        return -1;
    nmb_j_num(&j, "acq_per_s", nmb_rate(&r));
    nmb_j_num(&j, "wait_p50_ms", r.wait_p50_us / 1e3);
    nmb_j_num(&j, "wait_p99_ms", r.wait_p99_us / 1e3);
    nmb_j_num(&j, "fairness", nmb_min_over_max(r.per_proc, ld.procs));
    j_vs_single(&j, single_contended_per_s, nmb_rate(&r), 0);
    nmb_j_end(&j);
    return 0;
}

int nmb_sc_contended_procs(const scenario_t *sc)
{
    return contended(sc, 0);
}

int nmb_sc_fair_procs(const scenario_t *sc)
{
    if (!HAVE_FAIR_MODE) {
        jline_t j;
        nmb_j_begin(&j, sc->name);
        nmb_j_str(&j, "skipped", "no fair mode in this build");
        nmb_j_end(&j);
        return 0;
    }
    return contended(sc, 1);
}

int nmb_sc_threads(const scenario_t *sc)
{
    load_t ld = nmb_with_overrides(sc->load);
    group_result_t r;
    jline_t j;
    if (nmb_measure(sc->name, &ld, &r, &j) != 0)
        return -1;
    nmb_j_num(&j, "wait_p99_ms", r.wait_p99_us / 1e3);
    nmb_j_num(&j, "wait_max_ms", r.wait_max_us / 1e3);
    nmb_j_figure(&j, "acq_per_s", nmb_rate(&r), 100000.0, AT_LEAST);
    nmb_j_rtt_bound(&j, nmb_rate(&r));
    nmb_j_num(&j, "thread_fairness", r.thread_max ? (double)r.thread_min / (double)r.thread_max : 0.0);
    nmb_j_end(&j);
    return 0;
}

int nmb_sc_threads_two_procs(const scenario_t *sc)
{
    load_t ld = nmb_with_overrides(sc->load);
    group_result_t r;
    jline_t j;
    if (nmb_measure(sc->name, &ld, &r, &j) != 0)
        return -1;
    nmb_j_num(&j, "wait_p99_ms", r.wait_p99_us / 1e3);
    nmb_j_num(&j, "wait_max_ms", r.wait_max_us / 1e3);
    nmb_j_num(&j, "acq_per_s", nmb_rate(&r));
    nmb_j_rtt_bound(&j, nmb_rate(&r));
    uint64_t least = r.per_proc[0];
    for (int p = 1; p < ld.procs; p++)
        least = r.per_proc[p] < least ? r.per_proc[p] : least;
    double share = r.total ? (double)least / (double)r.total : 0.0;
    /* 2/3 of an even share: 1/3 each for two processes (docs/design.md). */
    nmb_j_figure(&j, "min_proc_share", share, 2.0 / (3.0 * ld.procs), AT_LEAST);
    nmb_j_end(&j);
    return 0;
}

/* ---- many_locks -------------------------------------------------------- */

#define MANY_LOCKS_N 100000          /* -n */
#define MANY_LOCKS_LEASE_MS 3000     /* --lease-ms */

static int lost_callbacks;   /* atomic */

static void count_lost(const char *name, void *arg)
{
    (void)name;
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

/* Runs in a process of its own (see nmb_sc_many_locks) and prints the line. */
static int many_locks_child(void *arg, int index)
{
    const char *scenario = ((const scenario_t *)arg)->name;
    size_t n = (size_t)nmb_opt_or(nmb_opt.n_locks, MANY_LOCKS_N), locked = 0, lost = 0, other = 0;
    long lease_ms = nmb_opt_or(nmb_opt.lease_ms, MANY_LOCKS_LEASE_MS);
    netmutex_config_t cfg = nmb_bench_config(0);
    netmutex_attr_t attr;
    netmutex_t warm;
    char name[128], msg[192];
    int err, first_other = 0;
    (void)index;

    redisContext *admin = nmb_admin_connect();
    if (!admin)
        return nmb_report_error(scenario, "cannot connect to the server for INFO");
    /* The caller's own netmutex_t array is made resident before the
     * baseline: only the library's memory per lock should count. */
    netmutex_t *ms = malloc(n * sizeof *ms);
    if (!ms)
        return nmb_report_error(scenario, "out of memory");
    memset(ms, 0xa5, n * sizeof *ms);

    if ((err = netmutex_configure(&cfg)) != 0 || (err = netmutex_attr_init(&attr)) != 0 ||
        (err = netmutex_attr_setlease(&attr, (unsigned int)lease_ms)) != 0 ||
        (err = netmutex_attr_setlostfn(&attr, count_lost, &lost_callbacks)) != 0) {
        snprintf(msg, sizeof msg, "setup: %s", nmb_errname(err));
        return nmb_report_error(scenario, msg);
    }
    /* Warm-up: connection, scripts and the watchdog thread exist before
     * the baseline, so they are not charged to the locks. */
    nmb_mutex_name(name, sizeof name, "many/warm-up");
    if ((err = netmutex_init(&warm, name, &attr)) != 0 || (err = netmutex_lock(&warm)) != 0 ||
        (err = netmutex_unlock(&warm)) != 0 || (err = netmutex_destroy(&warm)) != 0) {
        snprintf(msg, sizeof msg, "warm-up: %s", nmb_errname(err));
        return nmb_report_error(scenario, msg);
    }

    long rss_before = nmb_vmrss_kb();
    int64_t t0 = nmb_now_ns();
    for (; locked < n; locked++) {
        char what[48];
        snprintf(what, sizeof what, "many/%zu", locked);
        nmb_mutex_name(name, sizeof name, what);
        if ((err = netmutex_init(&ms[locked], name, &attr)) != 0)
            break;
        if ((err = netmutex_lock(&ms[locked])) != 0) {
            netmutex_destroy(&ms[locked]);
            break;
        }
    }
    int64_t t1 = nmb_now_ns();
    if (err)
        snprintf(msg, sizeof msg, "lock %zu of %zu: %s", locked + 1, n, nmb_errname(err));

    /* The hold: only the watchdog talks to the server now, so the counters'
     * difference is its renewal traffic. */
    cmdstats_t s0 = { 0, 0 }, s1 = { 0, 0 };
    int stats_ok = 0;
    int64_t hold_ms = 3 * lease_ms;
    if (!err) {
        fprintf(stderr, "nm_bench: many_locks: holding %zu locks for %lld ms\n", n, (long long)hold_ms);
        stats_ok = nmb_read_cmdstats(admin, &s0) == 0;
        nmb_sleep_us((long)hold_ms * 1000);
        stats_ok = stats_ok && nmb_read_cmdstats(admin, &s1) == 0;
    }
    long rss_held = nmb_vmrss_kb();

    int64_t t2 = nmb_now_ns();
    for (size_t i = 0; i < locked; i++) {
        int e = netmutex_unlock(&ms[i]);
        if (e == ENOLCK) {
            lost++;
        } else if (e != 0) {
            other++;
            first_other = first_other ? first_other : e;
        }
        netmutex_destroy(&ms[i]);
    }
    int64_t t3 = nmb_now_ns();
    free(ms);
    redisFree(admin);
    if (err)
        return nmb_report_error(scenario, msg);

    jline_t j;
    nmb_j_begin(&j, scenario);
    nmb_j_int(&j, "locks", (long long)n);
    nmb_j_int(&j, "lease_ms", lease_ms);
    nmb_j_int(&j, "hold_ms", hold_ms);
    /* An acquisition alone needs one round trip: 1/rtt per second. */
    double acquire_rate = (double)n / ((double)(t1 - t0) / 1e9);
    nmb_j_num(&j, "acquire_s", (double)(t1 - t0) / 1e9);
    nmb_j_num(&j, "acquire_per_s", acquire_rate);
    nmb_j_num(&j, "acquire_ratio_to_rtt_bound", acquire_rate / (1e6 / nmb_rtt_us));
    nmb_j_num(&j, "release_s", (double)(t3 - t2) / 1e9);
    nmb_j_figure(&j, "lost", (double)lost, 0.0, AT_MOST);
    nmb_j_int(&j, "lost_callbacks", __atomic_load_n(&lost_callbacks, __ATOMIC_SEQ_CST));
    nmb_j_int(&j, "unlock_errors", (long long)other);
    nmb_j_int(&j, "rss_kb_before", rss_before);
    nmb_j_int(&j, "rss_kb_held", rss_held);
    nmb_j_figure(&j, "rss_bytes_per_lock", (double)(rss_held - rss_before) * 1024.0 / (double)n,
             1024.0, AT_MOST);
    if (stats_ok) {
        const char *env = getenv("NETMUTEX_RENEW_PERCENT");
        int pct = env && atoi(env) > 0 ? atoi(env) : DEFAULT_RENEW_PERCENT;
        double rounds = (double)hold_ms / ((double)lease_ms * pct / 100.0);
        unsigned long long calls = s1.evalsha - s0.evalsha;
        unsigned long long keys = s1.pexpire - s0.pexpire;
        nmb_j_int(&j, "renew_evalsha_calls", (long long)calls);
        nmb_j_int(&j, "renew_pexpire_calls", (long long)keys);
        nmb_j_num(&j, "renew_rounds_expected", rounds);
        nmb_j_num(&j, "key_renewals_expected", rounds * (double)n);
        nmb_j_num(&j, "keys_per_renew_call", calls ? (double)keys / (double)calls : NAN);
    }
    if (other) {
        snprintf(msg, sizeof msg, "%zu unlocks failed, first with %s", other, nmb_errname(first_other));
        nmb_j_str(&j, "error", msg);
    }
    nmb_j_end(&j);
    return other ? -1 : 0;
}

/* Its own process, so that VmRSS is the library's and nothing else's. */
int nmb_sc_many_locks(const scenario_t *sc)
{
    crew_t crew;
    int64_t limit_ms = 3 * nmb_opt_or(nmb_opt.lease_ms, MANY_LOCKS_LEASE_MS) + 600000;   /* a hang, not a slow run */
    if (nmb_crew_spawn(&crew, 1, many_locks_child, (void *)sc) != 0) {
        nmb_crew_kill(&crew);
        return nmb_report_error(sc->name, "fork failed");
    }
    if (nmb_crew_wait(&crew, nmb_now_ns() + limit_ms * 1000000) != 0) {
        /* The child prints its own error line, unless it died or hung. */
        if (crew.failed)
            return -1;
        return nmb_report_error(sc->name, "still running after its time limit: killed");
    }
    return 0;
}
