/*
 * conf_harness.c -- see conf_harness.h.  Plain C and hiredis, no GLib and
 * no netmutex API: the programs it serves must stay ordinary pthread code.
 */
#define _GNU_SOURCE
#include "conf_harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis.h>

static char dir[64];
static char sock[128];
static pid_t server_pid, owner_pid;
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

/* ---- clean-up: at exit and on fatal signals, by the process that set up */

static void remove_server(void)
{
    static const char *const files[] = { "redis.sock", "redis.log", "dump.rdb" };
    char path[192];
    if (getpid() != owner_pid || !dir[0])
        return;
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
    }
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    dir[0] = '\0';
}

static void on_fatal(int sig)
{
    static const char msg[] = "Bail out! fatal signal or time limit\n";
    if (write(STDOUT_FILENO, msg, sizeof msg - 1) < 0) {
        /* nothing left to tell anyone */
    }
    remove_server();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void bail(const char *why)
{
    printf("Bail out! %s\n", why);
    exit(99);
}

/* ---- the private server ----------------------------------------------- */

static int server_answers(void)
{
    struct timeval tv = { 0, 500000 };
    redisContext *c = redisConnectUnixWithTimeout(sock, tv);
    int ok = 0;
    if (c && !c->err) {
        redisReply *r = redisCommand(c, "PING");
        ok = r && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
    }
    if (c)
        redisFree(c);
    return ok;
}

static void spawn_server(void)
{
    const char *exe = getenv("REDIS_SERVER");
    char log[128];
    snprintf(log, sizeof log, "%s/redis.log", dir);
    char *argv[] = { (char *)(exe && *exe ? exe : "redis-server"),
                     "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly",
                     "no", "--dir", dir, "--logfile", log, "--daemonize", "no", NULL };
    fflush(stdout);
    server_pid = fork();
    if (server_pid < 0)
        bail("fork");
    if (server_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execvp(argv[0], argv);
        _exit(127);
    }
    for (unsigned int waited = 0; !server_answers(); waited += 10) {
        if (waited > conf_ms(10000) || waitpid(server_pid, NULL, WNOHANG) == server_pid)
            bail("redis-server did not start");
        usleep(10000);
    }
}

static void set_env(const char *selected)
{
    char url[160], lease[32];
    snprintf(url, sizeof url, "unix://%s", sock);
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
    owner_pid = getpid();
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], on_fatal);
    alarm(conf_ms(limit_s * 1000) / 1000);
    int plain = strstr(program_invocation_short_name, "_plain") != NULL;
    if (plain == conf_networked())
        bail(plain ? "a plain build has netmutex inside" : "netmutex is not inside");
    if (plain)
        return;
    snprintf(dir, sizeof dir, "/tmp/nmconf.XXXXXX");
    if (!mkdtemp(dir))
        bail("mkdtemp");
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    atexit(remove_server);
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

static const char *errname(int e)
{
    switch (e) {
    case 0: return "0";
    case EBUSY: return "EBUSY";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EINVAL: return "EINVAL";
    case EPERM: return "EPERM";
    case EDEADLK: return "EDEADLK";
    case EAGAIN: return "EAGAIN";
    case EOWNERDEAD: return "EOWNERDEAD";
    case ENOTRECOVERABLE: return "ENOTRECOVERABLE";
    case ENOLCK: return "ENOLCK";
    default: return strerror(e);
    }
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

int conf_key_exists(const char *name)
{
    struct timeval tv = { 5, 0 };
    const char *prefix = getenv("NETMUTEX_PREFIX");
    if (!dir[0])
        return -1;
    redisContext *c = redisConnectUnixWithTimeout(sock, tv);
    if (!c || c->err) {
        if (c)
            redisFree(c);
        return -1;
    }
    redisReply *r = redisCommand(c, "EXISTS %s{%s}", prefix ? prefix : "netmutex:", name);
    int n = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

void conf_check_backing(const char *name, int held)
{
    if (conf_networked())
        conf_ok(conf_key_exists(name) == held, "%s is %sheld in redis", name, held ? "" : "not ");
    else
        conf_ok(conf_key_exists(name) == -1, "%s: plain build, no server", name);
}

/* ThreadSanitizer's start-up hook: the checks misuse mutexes on purpose
 * (unlock by a non-owner, destroy while locked) to see pthread's error
 * codes, which TSan would otherwise report as bugs of the program. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
    return "report_mutex_bugs=0 report_destroy_locked=0";
}
