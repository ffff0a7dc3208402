/*
 * bench_redis.c -- nm_bench talking to Redis without the library: the
 * admin connection, the round trip, the server's counters, and the private
 * servers (common/redis_server.h) it starts when no URL is given.
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
/* talking to Redis directly: RTT and server counters                     */
/* ===================================================================== */

/* Where an admin connection goes: the first server of a netmutex URL
 * (unix://[[user]:pass@]/path[?db=N] or redis://[[user]:pass@]host[:port][/db]). */
typedef struct {
    char path[256];          /* unix socket; empty for TCP */
    char host[256];
    int port;
    char user[128], pass[256];
    int db;
} endpoint_t;

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Copies S[0..N) to OUT, decoding %XX escapes.  -1 if it does not fit. */
static int pct_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < n && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
            c = (char)(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
            i += 2;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

static int parse_url(const char *url, endpoint_t *ep)
{
    const char *p, *end = url + strcspn(url, ",");
    int is_unix = strncmp(url, "unix://", 7) == 0;

    memset(ep, 0, sizeof *ep);
    ep->port = 6379;
    if (is_unix)
        p = url + 7;
    else if (strncmp(url, "redis://", 8) == 0)
        p = url + 8;
    else
        return -1;

    /* Credentials come before the first '/' in both forms. */
    const char *slash = memchr(p, '/', (size_t)(end - p));
    const char *auth_end = slash ? slash : end, *at = NULL;
    for (const char *q = p; q < auth_end; q++)
        if (*q == '@')
            at = q;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon && pct_decode(p, (size_t)(colon - p), ep->user, sizeof ep->user) != 0)
            return -1;
        const char *pw = colon ? colon + 1 : p;
        if (pct_decode(pw, (size_t)(at - pw), ep->pass, sizeof ep->pass) != 0)
            return -1;
        p = at + 1;
    }

    if (is_unix) {
        const char *q = memchr(p, '?', (size_t)(end - p));
        if (pct_decode(p, (size_t)((q ? q : end) - p), ep->path, sizeof ep->path) != 0)
            return -1;
        if (q && strncmp(q, "?db=", 4) == 0)
            ep->db = atoi(q + 4);
        return ep->path[0] == '/' ? 0 : -1;
    }
    const char *host_end;
    if (*p == '[') {
        host_end = memchr(p, ']', (size_t)(end - p));
        if (!host_end)
            return -1;
        p++;
    } else {
        host_end = p + strcspn(p, ":/,");
    }
    if (pct_decode(p, (size_t)(host_end - p), ep->host, sizeof ep->host) != 0)
        return -1;
    p = host_end + (*host_end == ']');
    if (*p == ':')
        ep->port = atoi(p + 1);
    const char *db = memchr(p, '/', (size_t)(end - p));
    if (db)
        ep->db = atoi(db + 1);
    return ep->host[0] ? 0 : -1;
}

/* A command whose reply must not be an error; NULL after a message. */
redisReply *nmb_admin_cmd(redisContext *c, const char *what, int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    if (!r) {
        nmb_complain("%s: %s", what, c->errstr);
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        nmb_complain("%s: %s", what, r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* INFO SECTION's text, as a string reply; NULL after a message. */
redisReply *nmb_info(redisContext *c, const char *section)
{
    redisReply *r = nmb_admin_cmd(c, "INFO", 2, (const char *[]){ "INFO", section });
    if (r && r->type != REDIS_REPLY_STRING) {
        nmb_complain("INFO %s: not a string reply", section);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

double nmb_info_field(const char *info, const char *field)
{
    size_t n = strlen(field);
    for (const char *line = info; line; line = strchr(line, '\n')) {
        line += *line == '\n';
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            return strtod(line + n + 1, NULL);
    }
    return NAN;
}

/* The main thread's CPU time where the server reports it: the I/O and
 * background threads do not run lock commands, and what they do (lazy
 * frees, fsync) is not part of a cycle.  Older servers: the process's. */
double nmb_server_cpu_s(redisContext *c, int *main_thread)
{
    redisReply *r = nmb_info(c, "cpu");
    if (!r)
        return NAN;
    double user = nmb_info_field(r->str, "used_cpu_user_main_thread");
    double sys = nmb_info_field(r->str, "used_cpu_sys_main_thread");
    *main_thread = !isnan(user) && !isnan(sys);
    if (!*main_thread) {
        user = nmb_info_field(r->str, "used_cpu_user");
        sys = nmb_info_field(r->str, "used_cpu_sys");
    }
    freeReplyObject(r);
    if (isnan(user + sys))
        nmb_complain("INFO cpu has no used_cpu_user / used_cpu_sys");
    return user + sys;
}

/* The same for a command whose reply is not needed: 0, or -1. */
int nmb_admin_do(redisContext *c, const char *what, int argc, const char **argv)
{
    redisReply *r = nmb_admin_cmd(c, what, argc, argv);
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

/* A plain hiredis connection to nmb_server_url, authenticated and on the
 * right database; NULL after a message. */
redisContext *nmb_admin_connect(void)
{
    endpoint_t ep;
    struct timeval tv = { 5, 0 };
    if (parse_url(nmb_server_url, &ep) != 0) {
        nmb_complain("cannot parse the URL %s", nmb_server_url);
        return NULL;
    }
    redisContext *c = ep.path[0] ? redisConnectUnixWithTimeout(ep.path, tv)
                                 : redisConnectWithTimeout(ep.host, ep.port, tv);
    if (!c || c->err) {
        nmb_complain("connecting to %s: %s", nmb_server_url, c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    int ok = 1;
    if (ep.pass[0] && ep.user[0])
        ok = nmb_admin_do(c, "AUTH", 3, (const char *[]){ "AUTH", ep.user, ep.pass }) == 0;
    else if (ep.pass[0])
        ok = nmb_admin_do(c, "AUTH", 2, (const char *[]){ "AUTH", ep.pass }) == 0;
    if (ok && ep.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", ep.db);
        ok = nmb_admin_do(c, "SELECT", 2, (const char *[]){ "SELECT", db }) == 0;
    }
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Times N PINGs into V (in us, in order); 0, or -1 after a message. */
int nmb_time_pings(double *v, int n)
{
    redisContext *c = nmb_admin_connect();
    if (!c)
        return -1;
    for (int i = 0; i < n; i++) {
        int64_t t0 = nmb_now_ns();
        redisReply *r = nmb_admin_cmd(c, "PING", 1, (const char *[]){ "PING" });
        v[i] = (double)(nmb_now_ns() - t0) / 1e3;
        if (!r) {
            redisFree(c);
            return -1;
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return 0;
}

/* Median time of RTT_PINGS PINGs, in us; -1 after a message. */
double nmb_measure_rtt(void)
{
    static double v[RTT_PINGS];
    return nmb_time_pings(v, RTT_PINGS) == 0 ? nmb_median(v, RTT_PINGS) : -1;
}

/* The server's command counters, from INFO commandstats. */
int nmb_read_cmdstats(redisContext *c, cmdstats_t *out)
{
    redisReply *r = nmb_admin_cmd(c, "INFO commandstats", 2, (const char *[]){ "INFO", "commandstats" });
    if (!r)
        return -1;
    memset(out, 0, sizeof *out);
    /* Lines look like "cmdstat_evalsha:calls=12,usec=...". */
    for (const char *line = r->str; line; line = strchr(line, '\n')) {
        char cmd[64];
        unsigned long long calls;
        line += *line == '\n';
        if (sscanf(line, "cmdstat_%63[^:]:calls=%llu", cmd, &calls) != 2)
            continue;
        if (strcmp(cmd, "evalsha") == 0)
            out->evalsha = calls;
        else if (strcmp(cmd, "pexpire") == 0)
            out->pexpire = calls;
    }
    freeReplyObject(r);
    return 0;
}

/* ===================================================================== */
/* the private redis-server                                               */
/* ===================================================================== */

/* Server 0 serves every scenario; the quorum scenarios add servers 1 and 2
 * (independent masters) beside it.  Each has its own directory; only the
 * main process cleans them up (redis_server.h), at exit or on a fatal
 * signal, and workers die with us through PR_SET_PDEATHSIG. */
static rs_server_t servers[NSERVERS];

void nmb_stop_redis(void)
{
    for (int i = 0; i < NSERVERS; i++)
        rs_destroy(&servers[i]);
}

/* Starts private server I and writes its URL to URL.  0, or -1 after a
 * message. */
static int start_server(int i, char *url, size_t url_size)
{
    rs_opts_t o = { .port = nmb_opt.tcp ? RS_PICK_PORT : 0, .ready_ms = READY_TIMEOUT_MS };
    rs_server_t *s = &servers[i];
    int err = rs_make_dir(s, "nm_bench");

    if (err) {
        nmb_complain("a directory for redis-server in $TMPDIR: %s", strerror(err));
        return -1;
    }
    err = rs_start(s, &o);
    if (err == ECHILD) {
        nmb_complain("%s exited before it was ready; its log:", s->exe);
        rs_print_log(s);
    } else if (err == ETIMEDOUT) {
        nmb_complain("%s did not answer on %s within %d ms", s->exe, s->sock, READY_TIMEOUT_MS);
    } else if (err) {
        nmb_complain("starting redis-server: %s", strerror(err));
    }
    if (err) {
        nmb_stop_redis();
        return -1;
    }
    if (nmb_opt.tcp)
        snprintf(url, url_size, "redis://127.0.0.1:%d", s->port);
    else
        snprintf(url, url_size, "unix://%s", s->sock);
    return 0;
}

pid_t nmb_private_server_pid(void)
{
    return servers[0].pid;
}

/* Starts the private server and sets nmb_server_url.  0, or -1 after a message. */
int nmb_start_redis(void)
{
    if (start_server(0, nmb_server_url, sizeof nmb_server_url) != 0)
        return -1;
    nmb_server_kind = nmb_opt.tcp ? "private-tcp" : "private-unix";
    return 0;
}

/* The quorum scenarios' URL list: server 0 and two more private servers,
 * started on first use.  NULL (after a message) when they cannot be had. */
static char delayed_list[sizeof nmb_server_url]; /* the proxy's, while delayed */

const char *nmb_quorum_url(void)
{
    static char list[sizeof nmb_server_url + 2 * 200];
    char one[200];
    if (delayed_list[0])
        return delayed_list;
    if (list[0])
        return list;
    if (!servers[0].dir[0]) {
        nmb_complain("quorum scenarios need the private servers (no -u / NETMUTEX_URL)");
        return NULL;
    }
    snprintf(list, sizeof list, "%s", nmb_server_url);
    for (int i = 1; i < NSERVERS; i++) {
        if (start_server(i, one, sizeof one) != 0) {
            list[0] = '\0';
            return NULL;
        }
        strncat(list, ",", sizeof list - strlen(list) - 1);
        strncat(list, one, sizeof list - strlen(list) - 1);
    }
    return list;
}

/* ===================================================================== */
/* the delayed link                                                       */
/* ===================================================================== */

long nmb_link_delay_us;
double nmb_loopback_rtt_us;
static pid_t proxy_pid;
static char loopback_url[sizeof nmb_server_url];

int nmb_delay_begin(long delay_us, int quorum)
{
    proxy_target_t t[NSERVERS];
    int ports[NSERVERS], n = quorum ? NSERVERS : 1;
    size_t len = 0;

    if (!servers[0].dir[0]) {
        nmb_complain("the delayed link needs the private servers (no -u / NETMUTEX_URL)");
        return -1;
    }
    if (quorum && !nmb_quorum_url())  /* starts servers 1 and 2 */
        return -1;
    for (int i = 0; i < n; i++) {
        memset(&t[i], 0, sizeof t[i]);
        snprintf(t[i].path, sizeof t[i].path, "%s", servers[i].sock);
        t[i].port = servers[i].port;
    }
    if ((proxy_pid = nmb_proxy_start(t, n, delay_us, ports)) < 0)
        return -1;
    memcpy(loopback_url, nmb_server_url, sizeof loopback_url);
    snprintf(nmb_server_url, sizeof nmb_server_url, "redis://127.0.0.1:%d", ports[0]);
    for (int i = 0; quorum && i < n; i++)
        len += (size_t)snprintf(delayed_list + len, sizeof delayed_list - len,
                                "%sredis://127.0.0.1:%d", i ? "," : "", ports[i]);
    nmb_loopback_rtt_us = nmb_rtt_us;
    nmb_link_delay_us = delay_us;
    if ((nmb_rtt_us = nmb_measure_rtt()) < 0) {
        nmb_delay_end();
        return -1;
    }
    return 0;
}

void nmb_delay_end(void)
{
    if (!nmb_link_delay_us)
        return;
    nmb_proxy_stop(proxy_pid);
    proxy_pid = 0;
    memcpy(nmb_server_url, loopback_url, sizeof nmb_server_url);
    delayed_list[0] = '\0';
    nmb_rtt_us = nmb_loopback_rtt_us;
    nmb_link_delay_us = 0;
}
