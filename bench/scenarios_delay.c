/*
 * scenarios_delay.c -- the round-trip targets judged on the delayed link
 * ("THE DELAYED LINK" at the top of nm_bench.c): the figures uncontended,
 * handoff and quorum_uncontended leave for each link, and the
 * "rtt_targets" line that sets the delayed link's beside the loopback's.
 */
#include "ac_config.h"

#include <stdio.h>

#include "nm_bench.h"

static link_figures_t loopback, delayed;

link_figures_t *link_figures(void)
{
    return link_delay_us ? &delayed : &loopback;
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

void rtt_targets_report(void)
{
    const link_figures_t *d = &delayed, *l = &loopback;
    double bound = 1e6 / (2.0 * d->cycles_rtt_us);
    jline_t j;

    j_begin(&j, "rtt_targets");
    fprintf(stderr,
            "nm_bench: round-trip targets through the proxy (%ld us each way; the PING round\n"
            "nm_bench: trip through it right before each scenario; loopback %.1f us):\n"
            "  %-36s %13s %13s %-7s %-10s %s\n",
            link_delay_us, loopback_rtt_us, "target", "measured", "target", "verdict",
            "RTT", "loopback");
    if (d->cycles_per_s > 0) {
        j_num(&j, "cycles_rtt_us", d->cycles_rtt_us);
        j_figure(&j, "cycles_per_s", d->cycles_per_s, 0.9 * bound, AT_LEAST);
        j_num(&j, "ratio_to_rtt_bound", d->cycles_per_s / bound);
        row("uncontended cycles/s >= 0.9/(2 RTT)", "/s", d->cycles_per_s, 0.9 * bound, AT_LEAST,
            d->cycles_rtt_us, l->cycles_per_s);
        if (l->cycles_per_s > 0) {
            j_num(&j, "loopback_cycles_per_s", l->cycles_per_s);
            j_num(&j, "loopback_ratio_to_rtt_bound", l->cycles_per_s * 2.0 * l->cycles_rtt_us / 1e6);
        }
    }
    if (d->handoff_p50_us > 0) {
        double target = 2.0 * d->handoff_rtt_us + HANDOFF_SLACK_US;
        j_num(&j, "handoff_rtt_us", d->handoff_rtt_us);
        j_figure(&j, "handoff_p50_us", d->handoff_p50_us, target, AT_MOST);
        j_num(&j, "handoff_p50_rtt", d->handoff_p50_us / d->handoff_rtt_us);
        row("hand-off p50 <= 2 RTT + 100 us", "us", d->handoff_p50_us, target, AT_MOST,
            d->handoff_rtt_us, l->handoff_p50_us);
        if (l->handoff_p50_us > 0) {
            j_num(&j, "loopback_handoff_p50_us", l->handoff_p50_us);
            j_num(&j, "loopback_handoff_p50_rtt", l->handoff_p50_us / l->handoff_rtt_us);
        }
    }
    if (d->quorum_ratio > 0) {
        j_figure(&j, "quorum_cycle_time_ratio", d->quorum_ratio, 1.3, AT_MOST);
        row("quorum cycle <= 1.3 x single-server", "", d->quorum_ratio, 1.3, AT_MOST, 0,
            l->quorum_ratio);
        if (l->quorum_ratio > 0)
            j_num(&j, "loopback_quorum_cycle_time_ratio", l->quorum_ratio);
    }
    j_end(&j);
}
