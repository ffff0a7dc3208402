/*
 * bench_json.c -- nm_bench's JSON lines ("OUTPUT" at the top of
 * nm_bench.c says what they hold).
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
/* JSON lines                                                             */
/* ===================================================================== */

void nmb_j_raw(jline_t *j, const char *fmt, ...)
{
    va_list ap;
    if (j->len >= sizeof j->buf)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(j->buf + j->len, sizeof j->buf - j->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        j->len = j->len + (size_t)n < sizeof j->buf ? j->len + (size_t)n : sizeof j->buf;
}

/* Keys are literals of this file: they need no escaping. */
void nmb_j_key(jline_t *j, const char *key)
{
    nmb_j_raw(j, "%s\"%s\":", j->len > 1 ? "," : "", key);
}

void nmb_j_str(jline_t *j, const char *key, const char *s)
{
    nmb_j_key(j, key);
    nmb_j_raw(j, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            nmb_j_raw(j, "\\%c", c);
        else if (c < 0x20)
            nmb_j_raw(j, "\\u%04x", c);
        else
            nmb_j_raw(j, "%c", c);
    }
    nmb_j_raw(j, "\"");
}

void nmb_j_int(jline_t *j, const char *key, long long v)
{
    nmb_j_key(j, key);
    nmb_j_raw(j, "%lld", v);
}

/* JSON has no NaN or infinity: they become null. */
void nmb_j_num(jline_t *j, const char *key, double v)
{
    nmb_j_key(j, key);
    if (isfinite(v))
        nmb_j_raw(j, "%.6g", v);
    else
        nmb_j_raw(j, "null");
}

void nmb_j_bool(jline_t *j, const char *key, int v)
{
    nmb_j_key(j, key);
    nmb_j_raw(j, v ? "true" : "false");
}

void nmb_j_int_array(jline_t *j, const char *key, const uint64_t *v, size_t n)
{
    nmb_j_key(j, key);
    nmb_j_raw(j, "[");
    for (size_t i = 0; i < n; i++)
        nmb_j_raw(j, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
    nmb_j_raw(j, "]");
}

/* A figure with its target: see "OUTPUT" at the top. */
void nmb_j_figure(jline_t *j, const char *name, double value, double target, int sense)
{
    char key[96];
    int meets = sense == AT_LEAST ? value >= target : value <= target;
    nmb_j_num(j, name, value);
    snprintf(key, sizeof key, "%s_target", name);
    nmb_j_num(j, key, target);
    if (target != 0) {
        snprintf(key, sizeof key, "%s_vs_target", name);
        nmb_j_num(j, key, value / target);
    }
    snprintf(key, sizeof key, "%s_meets_target", name);
    nmb_j_bool(j, key, meets);
    j->targets++;
    j->met += meets;
}

/* Every line starts alike, so lines from different runs can be compared. */
void nmb_j_begin(jline_t *j, const char *scenario)
{
    j->len = 0;
    j->targets = j->met = 0;
    nmb_j_raw(j, "{");
    nmb_j_str(j, "scenario", scenario);
    nmb_j_str(j, "server", nmb_server_kind);
    nmb_j_num(j, "rtt_us", nmb_rtt_us);
    /* On the delayed link nmb_rtt_us is the proxy's round trip. */
    if (nmb_link_delay_us) {
        nmb_j_int(j, "delay_us", nmb_link_delay_us);
        nmb_j_num(j, "loopback_rtt_us", nmb_loopback_rtt_us);
        nmb_j_bool(j, "proxy_realtime", nmb_proxy_realtime);
    }
}

void nmb_j_end(jline_t *j)
{
    if (j->targets)
        nmb_j_bool(j, "meets_all_targets", j->met == j->targets);
    nmb_j_raw(j, "}");
    fwrite(j->buf, 1, j->len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* The line of a scenario that could not be measured.  Returns -1. */
int nmb_report_error(const char *scenario, const char *msg)
{
    jline_t j;
    nmb_j_begin(&j, scenario);
    nmb_j_str(&j, "error", msg);
    nmb_j_end(&j);
    return -1;
}

/* The same for a two-process scenario: the first process's error, else
 * the second's (as "<call>: <errno name> (process N)"), else FALLBACK. */
int nmb_report_pair_error(const char *scenario, const int err[2], const char *const what[2],
                      const char *fallback)
{
    char msg[96];
    for (int p = 0; p < 2; p++)
        if (err[p]) {
            snprintf(msg, sizeof msg, "%s: %s (process %d)", what[p], nmb_errname(err[p]), p);
            return nmb_report_error(scenario, msg);
        }
    return nmb_report_error(scenario, fallback);
}
