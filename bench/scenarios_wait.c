/*
 * scenarios_wait.c -- nm_bench's timedlock_late scenario: how late a timed
 * wait on a held name returns after its deadline.  What it reports is
 * described at the top of nm_bench.c; the helpers it shares with the other
 * scenarios are declared in nm_bench.h.
 *
 * The holder is the lock key written by hand with a token of nobody's, so
 * nothing but the waiter talks to the server: the figure is the waiter's
 * own lateness (its clock, leaving the queue), not a holder's.
 */
#include "ac_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include <netmutex.h>

#include "keytag.h"
#include "nm_bench.h"

#define LATE_CAP 4096                /* samples kept */
#define LATE_MIN_MS 20               /* deadlines 20 to 69 ms from the call, */
#define LATE_SPREAD_MS 50            /* so they fall anywhere in a server tick */
#define LATE_TARGET_MS 10            /* p99, docs/design.md */
#define FOREIGN_VALUE "0123456789abcdef0123456789abcdef-- 1 nm_bench:1:1"

typedef struct {
    double late_ms[LATE_CAP];
    size_t n;
    long early, warnings;
    const char *what;
    int err;
} late_t;

static void count_warning(int level, const char *message, void *arg)
{
    (void)message;
    if (level <= NETMUTEX_LOG_WARN)
        __atomic_add_fetch(&((late_t *)arg)->warnings, 1, __ATOMIC_RELAXED);
}

static double ts_diff_ms(const struct timespec *a, const struct timespec *b)
{
    return (double)(a->tv_sec - b->tv_sec) * 1e3 + (double)(a->tv_nsec - b->tv_nsec) / 1e6;
}

/* Timed waits on the held M until the measured period is over. */
static int late_measure(netmutex_t *m, late_t *t)
{
    int64_t end = nmb_now_ns() + (int64_t)(nmb_opt.duration_s * 1e9);
    for (unsigned i = 0; t->n < LATE_CAP && nmb_now_ns() < end; i++) {
        struct timespec deadline, returned;
        long ms = LATE_MIN_MS + (long)(i * 7) % LATE_SPREAD_MS;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += ms / 1000;
        deadline.tv_nsec += (ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
        int err = netmutex_timedlock(m, &deadline);
        clock_gettime(CLOCK_REALTIME, &returned);
        if (err != ETIMEDOUT) {
            if (err == 0)
                netmutex_unlock(m);
            t->what = "netmutex_timedlock";
            return t->err = err ? err : EINVAL;
        }
        double late = ts_diff_ms(&returned, &deadline);
        t->early += late < 0;
        t->late_ms[t->n++] = late;
    }
    return 0;
}

/* The server's hz, from INFO server, or -1. */
static long server_hz(redisContext *c)
{
    redisReply *r = nmb_admin_cmd(c, "INFO server", 2, (const char *[]){ "INFO", "server" });
    const char *at = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "\nhz:") : NULL;
    long hz = at ? atol(at + 4) : -1;
    if (r)
        freeReplyObject(r);
    return hz;
}

static int late_report(const char *scenario, late_t *t, long hz)
{
    jline_t j;
    qsort(t->late_ms, t->n, sizeof t->late_ms[0], nmb_cmp_double);
    nmb_j_begin(&j, scenario);
    nmb_j_int(&j, "server_hz", hz);
    nmb_j_int(&j, "samples", (long long)t->n);
    nmb_j_int(&j, "deadline_min_ms", LATE_MIN_MS);
    nmb_j_int(&j, "deadline_max_ms", LATE_MIN_MS + LATE_SPREAD_MS - 1);
    nmb_j_num(&j, "late_p50_ms", nmb_percentile(t->late_ms, t->n, 0.5));
    nmb_j_figure(&j, "late_p99_ms", nmb_percentile(t->late_ms, t->n, 0.99), LATE_TARGET_MS, AT_MOST);
    nmb_j_num(&j, "late_max_ms", t->late_ms[t->n - 1]);
    nmb_j_figure(&j, "early", (double)t->early, 0, AT_MOST);
    nmb_j_figure(&j, "warnings", (double)t->warnings, 0, AT_MOST);
    nmb_j_end(&j);
    return 0;
}

static int late_fail(const char *scenario, const late_t *t)
{
    char msg[128];
    snprintf(msg, sizeof msg, "%s: %s", t->what, nmb_errname(t->err));
    return nmb_report_error(scenario, msg);
}

/* Its own process: holds the name by hand, then waits on it. */
static int late_child(void *arg, int index)
{
    const char *scenario = ((const scenario_t *)arg)->name;
    netmutex_config_t cfg = nmb_bench_config(0);
    static late_t t;
    char name[128], key[192], tag[NM_TEST_TAG_LEN + 1], px[32];
    netmutex_t m;
    int rc = 0;
    (void)index;
    redisContext *admin = nmb_admin_connect();
    if (!admin)
        return nmb_report_error(scenario, "cannot connect to the server");
    nmb_mutex_name(name, sizeof name, scenario);
    nm_test_key_tag(name, strlen(name), tag);
    snprintf(key, sizeof key, "netmutex:{%s}%s", tag, name);
    snprintf(px, sizeof px, "%ld", (long)(nmb_opt.duration_s * 1000) + HANG_GRACE_MS);
    if (nmb_admin_do(admin, "SET", 5, (const char *[]){ "SET", key, FOREIGN_VALUE, "PX", px }) != 0 ||
        netmutex_configure(&cfg) != 0 || netmutex_init(&m, name, NULL) != 0) {
        redisFree(admin);
        return nmb_report_error(scenario, "cannot set up the held name");
    }
    netmutex_set_log(NETMUTEX_LOG_WARN, count_warning, &t);
    /* The connection, dialed before anything is measured. */
    if ((t.err = netmutex_trylock(&m)) != EBUSY) {
        if (t.err == 0)
            netmutex_unlock(&m);
        t.what = "netmutex_trylock";
        t.err = t.err ? t.err : EINVAL;
        rc = -1;
    }
    if (rc == 0 && late_measure(&m, &t) != 0)
        rc = -1;
    netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL);
    nmb_admin_do(admin, "DEL", 2, (const char *[]){ "DEL", key });
    if (rc == 0 && t.n == 0) {
        t.what = "no sample";
        t.err = EINVAL;
        rc = -1;
    }
    rc = rc ? late_fail(scenario, &t) : late_report(scenario, &t, server_hz(admin));
    redisFree(admin);
    netmutex_destroy(&m);
    netmutex_shutdown();
    return rc;
}

int nmb_sc_timedlock_late(const scenario_t *sc)
{
    crew_t crew;
    fprintf(stderr, "nm_bench: %s: timed waits of %d-%d ms on a held name, %g s\n", sc->name,
            LATE_MIN_MS, LATE_MIN_MS + LATE_SPREAD_MS - 1, nmb_opt.duration_s);
    if (nmb_crew_spawn(&crew, 1, late_child, (void *)sc) != 0) {
        nmb_crew_kill(&crew);
        return nmb_report_error(sc->name, "fork failed");
    }
    int64_t limit = nmb_now_ns() + ((int64_t)(nmb_opt.duration_s * 1000) + HANG_GRACE_MS) * 1000000;
    if (nmb_crew_wait(&crew, limit) != 0)
        return crew.failed ? -1 : nmb_report_error(sc->name, "still running after its time limit: killed");
    return 0;
}
