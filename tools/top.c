/*
 * top.c -- `netmutex top`: the names every process publishes statistics
 * for (NETMUTEX_STATS=publish; netmutex_stats_cluster(3)), merged across
 * processes and hosts, sorted by total wait, refreshed every interval.
 * In a terminal each refresh redraws the screen; piped, each is a block
 * of its own (or, with --json, one JSON array per line), so scripts and
 * tests read it as they read `list`.
 */
#include "ac_config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <netmutex.h>

#include "cli.h"

struct row {
    char *name;
    netmutex_stats_t st;
};

struct rows {
    struct row *v;
    size_t n, cap;
    unsigned int limit; /* 0: every name */
};

static int keep(const char *name, const netmutex_stats_t *st, void *arg)
{
    struct rows *rs = arg;
    if (rs->limit && rs->n == rs->limit)
        return 0; /* sorted by total wait: the rest are smaller */
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 32;
        struct row *v = realloc(rs->v, cap * sizeof *v);
        if (!v)
            return 1;
        rs->v = v;
        rs->cap = cap;
    }
    if (!(rs->v[rs->n].name = strdup(name)))
        return 1;
    rs->v[rs->n++].st = *st;
    return 0;
}

static void rows_clear(struct rows *rs)
{
    for (size_t i = 0; i < rs->n; i++)
        free(rs->v[i].name);
    rs->n = 0;
}

static const char *kind_name(int kind)
{
    switch (kind) {
    case NETMUTEX_KIND_MUTEX: return "mutex";
    case NETMUTEX_KIND_RWLOCK: return "rwlock";
    case NETMUTEX_KIND_SEM: return "sem";
    case NETMUTEX_KIND_COND: return "cond";
    default: return "?";
    }
}

/* NS as a short duration: "0", "850ns", "12.3us", "4.56ms", "1.20s". */
static const char *span(uint64_t ns, char *buf, size_t size)
{
    if (ns == 0)
        snprintf(buf, size, "0");
    else if (ns < 1000)
        snprintf(buf, size, "%" PRIu64 "ns", ns);
    else if (ns < 1000000)
        snprintf(buf, size, "%.1fus", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, size, "%.2fms", (double)ns / 1e6);
    else
        snprintf(buf, size, "%.2fs", (double)ns / 1e9);
    return buf;
}

static void print_table(const struct rows *rs, const netmutex_list_info_t *info)
{
    char now[64], name[CLI_TEXT_MAX], a[16], b[16], c[16], d[16], e[16], f[16];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    cli_format_time((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, now, sizeof now);
    printf("netmutex top  %s  %u of %u server(s)  %zu name(s), by total wait\n", now,
           info->answered, info->servers, rs->n);
    printf("%-24s %-6s %5s %9s %9s %9s %9s %9s %9s %9s %9s %5s\n", "NAME", "KIND", "PROCS",
           "ACQUIRED", "CONTENDED", "WAIT", "WAIT p50", "WAIT p99", "WAIT max", "HOLD p50",
           "HOLD p99", "LOST");
    for (size_t i = 0; i < rs->n; i++) {
        const netmutex_stats_t *s = &rs->v[i].st;
        printf("%-24s %-6s %5u %9" PRIu64 " %9" PRIu64 " %9s %9s %9s %9s %9s %9s %5" PRIu64 "\n",
               cli_text(rs->v[i].name, name, sizeof name), kind_name(s->kind), s->processes,
               s->acquisitions, s->contended, span(s->wait.total_ns, a, sizeof a),
               span(s->wait.p50_ns, b, sizeof b), span(s->wait.p99_ns, c, sizeof c),
               span(s->wait.max_ns, d, sizeof d), span(s->hold.p50_ns, e, sizeof e),
               span(s->hold.p99_ns, f, sizeof f), s->lost);
    }
}

static void put_timing(const char *key, const netmutex_timing_t *t)
{
    printf(",\"%s\":{\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"p50_ns\":%" PRIu64
           ",\"p99_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 "}",
           key, t->count, t->total_ns, t->p50_ns, t->p99_ns, t->max_ns);
}

static void print_json(const struct rows *rs)
{
    putchar('[');
    for (size_t i = 0; i < rs->n; i++) {
        const netmutex_stats_t *s = &rs->v[i].st;
        printf("%s{\"name\":", i ? "," : "");
        cli_put_json(stdout, rs->v[i].name);
        printf(",\"kind\":\"%s\",\"processes\":%u,\"acquisitions\":%" PRIu64
               ",\"contended\":%" PRIu64 ",\"handoffs\":%" PRIu64 ",\"renewals\":%" PRIu64
               ",\"lost\":%" PRIu64 ",\"revocations\":%" PRIu64 ",\"reconnects\":%" PRIu64
               ",\"deadlocks\":%" PRIu64 ",\"timeouts\":%" PRIu64,
               kind_name(s->kind), s->processes, s->acquisitions, s->contended, s->handoffs,
               s->renewals, s->lost, s->revocations, s->reconnects, s->deadlocks, s->timeouts);
        put_timing("wait", &s->wait);
        put_timing("hold", &s->hold);
        putchar('}');
    }
    puts("]");
}

/* One refresh: 0, or an exit code. */
static int refresh(const struct cli_opts *o, struct rows *rs, int screen)
{
    netmutex_list_info_t info;
    rows_clear(rs);
    int err = netmutex_stats_cluster(o->pattern, keep, rs, &info);
    if (err == ECANCELED)
        err = ENOMEM;
    if (err) {
        cli_say("cannot read the published statistics at %s: %s", o->shown_url,
                netmutex_strerror(err));
        return cli_exit_code(err);
    }
    if (o->json) {
        print_json(rs);
    } else {
        if (screen)
            fputs("\033[H\033[2J", stdout);
        print_table(rs, &info);
        if (!screen)
            putchar('\n');
    }
    return fflush(stdout) == 0 ? 0 : CLI_EX_OSERR;
}

/* 0 once the refreshes asked for were printed (--once, --iterations), or
 * never (until interrupted); an error's exit code. */
int cli_top(const struct cli_opts *o)
{
    struct rows rs = { NULL, 0, 0, o->top_limit };
    int screen = !o->json && isatty(STDOUT_FILENO);
    int rc = 0;
    for (unsigned long i = 0; rc == 0 && (o->top_iterations == 0 || i < o->top_iterations);
         i++) {
        if (i > 0) {
            struct timespec d = { (time_t)(o->top_interval_ms / 1000),
                                  (long)(o->top_interval_ms % 1000) * 1000000L };
            while (nanosleep(&d, &d) != 0 && errno == EINTR)
                ;
        }
        rc = refresh(o, &rs, screen);
    }
    rows_clear(&rs);
    free(rs.v);
    return rc;
}
