/*
 * conf_harness.c -- see conf_harness.h.  Plain C and hiredis, no GLib and
 * no netmutex API: the programs it serves must stay ordinary pthread code.
 */
#define _GNU_SOURCE
#include "ac_config.h"

#include "conf_harness.h"
#include "keytag.h"
#include "redis_server.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis.h>

static rs_server_t server;
static int ntests, nfailed;

int conf_networked(void)
{
    return dlsym(RTLD_DEFAULT, "netmutex_configure") != NULL;
}

static double slowdown(void)
{
    const char *s = getenv("NETMUTEX_TEST_SLOWDOWN");
    double f = s ? atof(s) : getenv("VALGRIND") ? 10.0 : 1.0;
    return f >= 1.0 ? f : 1.0;
}

unsigned int conf_ms(unsigned int ms)
{
    return (unsigned int)(ms * slowdown());
}

void conf_deadline(struct timespec *ts, clockid_t clock, unsigned int ms)
{
    clock_gettime(clock, ts);
    long long ns = ts->tv_nsec + ms * 1000000LL;
    ts->tv_sec += (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
}

long conf_diff_ms(const struct timespec *a, const struct timespec *b)
{
    return (long)(a->tv_sec - b->tv_sec) * 1000 + (a->tv_nsec - b->tv_nsec) / 1000000L;
}

/* ---- clean-up: at exit and on fatal signals (redis_server.h) ---------- */

static void on_fatal(int sig)
{
    static const char msg[] = "Bail out! fatal signal or time limit\n";
    (void)sig;
    if (write(STDOUT_FILENO, msg, sizeof msg - 1) < 0) {
        /* nothing left to tell anyone */
    }
}

static void bail(const char *why)
{
    printf("Bail out! %s\n", why);
    exit(99);
}

/* ---- the private server ----------------------------------------------- */

static void spawn_server(void)
{
    rs_opts_t o = { .ready_ms = conf_ms(10000) };
    int err = rs_make_dir(&server, "nmconf");
    if (err)
        bail(strerror(err));
    err = rs_start(&server, &o);
    if (err) {
        rs_print_log(&server);
        bail("redis-server did not start");
    }
}

static void set_env(const char *selected)
{
    char url[160], lease[32];
    snprintf(url, sizeof url, "unix://%s", server.sock);
    /* A short lease, so a process that dies holding a mutex frees it soon;
     * scaled, so a slowed-down holder still renews in time. */
    snprintf(lease, sizeof lease, "%u", conf_ms(2000));
    setenv("NETMUTEX_URL", url, 1);
    setenv("NETMUTEX_LEASE_MS", lease, 1);
    setenv("NETMUTEX_MUTEXES", selected, 0);
}

void conf_setup(const char *selected, unsigned int limit_s)
{
    static const int sigs[] = { SIGALRM, SIGINT, SIGTERM, SIGABRT, SIGSEGV };
    setvbuf(stdout, NULL, _IOLBF, 0);
    rs_catch_fatal(sigs, sizeof sigs / sizeof sigs[0], on_fatal);
    alarm(conf_ms(limit_s * 1000) / 1000);
    int plain = strstr(program_invocation_short_name, "_plain") != NULL;
    if (plain == conf_networked())
        bail(plain ? "a plain build has netmutex inside" : "netmutex is not inside");
    if (plain)
        return;
    atexit(rs_cleanup_all);
    spawn_server();
    set_env(selected);
}

/* ---- TAP ------------------------------------------------------------- */

void conf_ok(int cond, const char *fmt, ...)
{
    va_list ap;
    printf("%sok %d - ", cond ? "" : "not ", ++ntests);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    nfailed += !cond;
}

/* The C library's name of E: the harness cannot ask netmutex_errname, since
 * the plain build must not link netmutex (conf_networked looks for it). */
static const char *errname(int e)
{
    if (e == 0)
        return "0";
#ifdef HAVE_STRERRORNAME_NP
    const char *name = strerrorname_np(e);
    if (name != NULL)
        return name;
#endif
    return strerror(e);
}

void conf_eq(int got, int want, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    conf_ok(got == want, "%s: %s (want %s)", what, errname(got), errname(want));
}

int conf_done(void)
{
    printf("1..%d\n", ntests);
    return nfailed ? 1 : 0;
}

/* ---- looking at the server ------------------------------------------- */

/* A connection to the harness's server, NULL if there is none; *PREFIX
 * the key prefix in use. */
static redisContext *server_connect(const char **prefix)
{
    struct timeval tv = { 5, 0 };
    const char *p = getenv("NETMUTEX_PREFIX");
    *prefix = p ? p : "netmutex:";
    if (!server.dir[0])
        return NULL;
    redisContext *c = redisConnectUnixWithTimeout(server.sock, tv);
    if (c && c->err) {
        redisFree(c);
        c = NULL;
    }
    return c;
}

int conf_key_exists(const char *name)
{
    const char *prefix;
    redisContext *c = server_connect(&prefix);
    if (!c)
        return -1;
    char tag[NM_TEST_TAG_LEN + 1];
    nm_test_key_tag(name, strlen(name), tag);
    redisReply *r = redisCommand(c, "GET %s{%s}%s", prefix, tag, name);
    /* A lease kept cached by its process says so in its value (lib.lua). */
    int n = !r ? -1 : r->type == REDIS_REPLY_NIL ? 0
          : r->type != REDIS_REPLY_STRING ? -1 : r->len > 33 && r->str[33] == 'k' ? 2 : 1;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

int conf_count_keys(const char *pattern)
{
    const char *prefix;
    redisContext *c = server_connect(&prefix);
    if (!c)
        return -1;
    redisReply *r = redisCommand(c, "KEYS %s%s", prefix, pattern);
    int n = r && r->type == REDIS_REPLY_ARRAY ? (int)r->elements : -1;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

void conf_check_backing(const char *name, int held)
{
    int state = conf_key_exists(name);
    if (conf_networked() && held)
        conf_ok(state >= 1, "%s is held in redis", name);
    else if (conf_networked())
        conf_ok(state == 0 || state == 2, "%s is not held in redis (or only cached)", name);
    else
        conf_ok(state == -1, "%s: plain build, no server", name);
}

/* ThreadSanitizer's start-up hook: the checks misuse mutexes on purpose
 * (unlock by a non-owner, destroy while locked) to see pthread's error
 * codes, which TSan would otherwise report as bugs of the program. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
    return "report_mutex_bugs=0 report_destroy_locked=0";
}
