/*
 * scenarios_delay.c -- the round-trip targets judged on the delayed link
 * ("THE DELAYED LINK" at the top of nm_bench.c): delayed_uncontended and
 * delayed_quorum_uncontended, the figures uncontended, handoff and
 * quorum_uncontended leave for each link, and the "rtt_targets" line that
 * sets the delayed link's beside the loopback's.
 *
 * Why in turns: on a loaded machine the round trip through the proxy
 * moved between 300 us and 1.2 ms within a minute, so a rate measured
 * seconds after its round trip, or a quorum rate seconds after the
 * single-server one, was judged against another machine.  The two
 * scenarios here cut their -d seconds into slices and measure what they
 * are compared with between the slices: PINGs, or the single server.
 */
#include "ac_config.h"

#include <stdio.h>
#include <string.h>

#include "nm_bench.h"

#define TURNS 4                      /* slices per side */
#define TURN_PINGS 500               /* PINGs before each slice, and after */

/* LD on the servers URL for SECONDS, added to *ACQ and *SECS (each slice
 * in fresh workers, which warm up before it as every load does).  0, or
 * -1 with MSG set. */
static int slice(const char *name, const load_t *ld, const char *url, double seconds,
                 uint64_t *acq, double *secs, char *msg, size_t size)
{
    char saved[sizeof nmb_server_url], want[sizeof nmb_server_url];
    double saved_s = nmb_opt.duration_s;
    group_result_t r;
    snprintf(want, sizeof want, "%s", url);      /* URL may be nmb_server_url */
    memcpy(saved, nmb_server_url, sizeof saved);
    memcpy(nmb_server_url, want, sizeof nmb_server_url);
    nmb_opt.duration_s = seconds;
    int rc = nmb_run_load(name, ld, &r);
    nmb_opt.duration_s = saved_s;
    memcpy(nmb_server_url, saved, sizeof saved);
    if (rc != 0) {
        snprintf(msg, size, "%s", r.error);
        return -1;
    }
    *acq += r.total;
    *secs += r.duration_s;
    return 0;
}

/* uncontended, in TURNS slices with TURN_PINGS PINGs before each and after
 * the last: its rtt_us is the median of all of them. */
int nmb_sc_delayed_uncontended(const scenario_t *sc)
{
    static double pings[(TURNS + 1) * TURN_PINGS];
    double lo = 0, hi = 0, secs = 0, sum = 0;
    uint64_t acq = 0;
    char name[128], msg[192];
    nmb_mutex_name(name, sizeof name, sc->name);
    fprintf(stderr, "nm_bench: %s: 1 process x 1 thread, %d slices of %g s, %d PINGs before "
            "each and after the last\n", sc->name, TURNS, nmb_opt.duration_s / TURNS, TURN_PINGS);
    for (int k = 0; k <= TURNS; k++) {
        double *v = pings + k * TURN_PINGS;
        if (nmb_time_pings(v, TURN_PINGS) != 0)
            return nmb_report_error(sc->name, "PINGs through the proxy failed");
        for (int i = 0; i < TURN_PINGS; i++)
            sum += v[i];
        double m = nmb_median(v, TURN_PINGS);
        lo = k == 0 || m < lo ? m : lo;
        hi = m > hi ? m : hi;
        if (k < TURNS && slice(name, &sc->load, nmb_server_url, nmb_opt.duration_s / TURNS, &acq, &secs,
                               msg, sizeof msg) != 0)
            return nmb_report_error(sc->name, msg);
    }
    nmb_rtt_us = nmb_median(pings, (TURNS + 1) * TURN_PINGS);
    double rate = (double)acq / secs, bound = 1e6 / (2.0 * nmb_rtt_us);
    jline_t j;
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "turns", TURNS);
    nmb_j_num(&j, "duration_s", secs);
    nmb_j_int(&j, "acquisitions", (long long)acq);
    nmb_j_num(&j, "rtt_turn_min_us", lo);    /* the medians of the PING batches */
    nmb_j_num(&j, "rtt_turn_max_us", hi);
    nmb_j_figure(&j, "cycles_per_s", rate, 0.9 * bound, AT_LEAST);
    nmb_j_rtt_bound(&j, rate);
    /* A rate is a mean, and a loaded machine's round trips have a long
     * tail that the median leaves out: the same ratio with the PINGs'
     * mean compares like with like (no target). */
    double mean = sum / ((TURNS + 1) * TURN_PINGS);
    nmb_j_num(&j, "rtt_mean_us", mean);
    nmb_j_num(&j, "ratio_to_mean_rtt_bound", rate * 2.0 * mean / 1e6);
    nmb_j_end(&j);
    nmb_link_figures()->cycles_per_s = rate;
    nmb_link_figures()->cycles_rtt_us = nmb_rtt_us;
    return 0;
}

/* quorum_uncontended and uncontended in turns (ABBA ABBA, -d seconds each
 * side): cycle_time_ratio compares the two under the same load. */
int nmb_sc_delayed_quorum(const scenario_t *sc)
{
    const char *list = nmb_quorum_url();
    uint64_t acq[2] = { 0, 0 };
    double secs[2] = { 0, 0 };
    char name[2][128], msg[192], what[96];
    if (!list)
        return nmb_report_error(sc->name, "the quorum servers could not be started");
    for (int q = 0; q < 2; q++) {
        snprintf(what, sizeof what, "%s/%d", sc->name, q ? NSERVERS : 1);
        nmb_mutex_name(name[q], sizeof name[q], what);
    }
    fprintf(stderr, "nm_bench: %s: 1 process x 1 thread, %d slices of %g s each on 3 servers "
            "and on 1, in turns\n", sc->name, TURNS, nmb_opt.duration_s / TURNS);
    for (int k = 0; k < 2 * TURNS; k++) {
        int q = k % 4 == 1 || k % 4 == 2;
        if (slice(name[q], &sc->load, q ? list : nmb_server_url, nmb_opt.duration_s / TURNS, &acq[q],
                  &secs[q], msg, sizeof msg) != 0)
            return nmb_report_error(sc->name, msg);
    }
    double single = (double)acq[0] / secs[0], quorum = (double)acq[1] / secs[1];
    jline_t j;
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "servers", NSERVERS);
    nmb_j_int(&j, "turns", TURNS);
    nmb_j_num(&j, "duration_s", secs[1]);
    nmb_j_num(&j, "cycles_per_s", quorum);
    nmb_j_num(&j, "single_server_per_s", single);
    nmb_j_figure(&j, "cycle_time_ratio", single / quorum, 1.3, AT_MOST);
    nmb_j_end(&j);
    nmb_link_figures()->quorum_ratio = single / quorum;
    return 0;
}

static link_figures_t loopback, delayed;

link_figures_t *nmb_link_figures(void)
{
    return nmb_link_delay_us ? &delayed : &loopback;
}

/* One row of the table on stderr. */
static void row(const char *what, const char *unit, double value, double target, int sense,
                double rtt, double loop)
{
    int met = sense == AT_LEAST ? value >= target : value <= target;
    char beside[32] = "-";
    if (loop > 0)
        snprintf(beside, sizeof beside, "%.*f%s", unit[0] ? 0 : 2, loop, unit);
    char at[16] = "-";
    if (rtt > 0)
        snprintf(at, sizeof at, "%.0fus", rtt);
    fprintf(stderr, "  %-36s %10.*f%-3s %10.*f%-3s %-7s %-10s %s\n", what, unit[0] ? 0 : 2,
            value, unit, unit[0] ? 0 : 2, target, unit, met ? "met" : "MISSED", at, beside);
}

void nmb_rtt_targets_report(void)
{
    const link_figures_t *d = &delayed, *l = &loopback;
    double bound = 1e6 / (2.0 * d->cycles_rtt_us);
    jline_t j;

    nmb_j_begin(&j, "rtt_targets");
    fprintf(stderr,
            "nm_bench: round-trip targets through the proxy (%ld us each way; RTT: the PING\n"
            "nm_bench: round trip through it in the same scenario; loopback %.1f us):\n"
            "  %-36s %13s %13s %-7s %-10s %s\n",
            nmb_link_delay_us, nmb_loopback_rtt_us, "target", "measured", "target", "verdict",
            "RTT", "loopback");
    if (d->cycles_per_s > 0) {
        nmb_j_num(&j, "cycles_rtt_us", d->cycles_rtt_us);
        nmb_j_figure(&j, "cycles_per_s", d->cycles_per_s, 0.9 * bound, AT_LEAST);
        nmb_j_num(&j, "ratio_to_rtt_bound", d->cycles_per_s / bound);
        row("uncontended cycles/s >= 0.9/(2 RTT)", "/s", d->cycles_per_s, 0.9 * bound, AT_LEAST,
            d->cycles_rtt_us, l->cycles_per_s);
        if (l->cycles_per_s > 0) {
            nmb_j_num(&j, "loopback_cycles_per_s", l->cycles_per_s);
            nmb_j_num(&j, "loopback_ratio_to_rtt_bound", l->cycles_per_s * 2.0 * l->cycles_rtt_us / 1e6);
        }
    }
    if (d->handoff_p50_us > 0) {
        double target = 2.0 * d->handoff_rtt_us + HANDOFF_SLACK_US;
        nmb_j_num(&j, "handoff_rtt_us", d->handoff_rtt_us);
        nmb_j_figure(&j, "handoff_p50_us", d->handoff_p50_us, target, AT_MOST);
        nmb_j_num(&j, "handoff_p50_rtt", d->handoff_p50_us / d->handoff_rtt_us);
        row("hand-off p50 <= 2 RTT + 100 us", "us", d->handoff_p50_us, target, AT_MOST,
            d->handoff_rtt_us, l->handoff_p50_us);
        if (l->handoff_p50_us > 0) {
            nmb_j_num(&j, "loopback_handoff_p50_us", l->handoff_p50_us);
            nmb_j_num(&j, "loopback_handoff_p50_rtt", l->handoff_p50_us / l->handoff_rtt_us);
        }
    }
    if (d->quorum_ratio > 0) {
        nmb_j_figure(&j, "quorum_cycle_time_ratio", d->quorum_ratio, 1.3, AT_MOST);
        row("quorum cycle <= 1.3 x single-server", "", d->quorum_ratio, 1.3, AT_MOST, 0,
            l->quorum_ratio);
        if (l->quorum_ratio > 0)
            nmb_j_num(&j, "loopback_quorum_cycle_time_ratio", l->quorum_ratio);
    }
    nmb_j_end(&j);
}
