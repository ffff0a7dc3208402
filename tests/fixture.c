/*
 * fixture.c -- see fixture.h.
 *
 * The server is started with fork+exec, not GSubprocess: GLib's child-watch
 * thread would make every test program multi-threaded before its first
 * fork(), which ThreadSanitizer does not support.  The child asks the kernel
 * to kill it when the test program dies (PR_SET_PDEATHSIG), so an aborted
 * test never leaves a redis-server behind.
 */
#include "ac_config.h"

#include "fixture.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

/* A bound for things that are expected to finish promptly (server start,
 * a remote call, a thread told to unlock): generous, never a speed claim. */
#define NM_PROMPT_MS 30000u

/* Modes in which nm_test_init runs this program as a helper process
 * instead of its tests (see run_remote_if_asked). */
#define REMOTE_FLAG "--nm-remote"
#define COUNT_SOCKETS_FLAG "--nm-count-sockets"
#define EXIT_FLAG "--nm-exit"

extern char **environ;

static void init_slowdown(void);
static void run_remote_if_asked(int argc, char **argv);

/* ===================================================================== */
/* program setup                                                          */
/* ===================================================================== */

/* Removes every NETMUTEX_* variable except our own NETMUTEX_TEST_*, so the
 * library only sees the configuration a test gives it. */
static void clear_netmutex_env(void)
{
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);

    for (char **e = environ; *e; e++) {
        if (g_str_has_prefix(*e, "NETMUTEX_") &&
            !g_str_has_prefix(*e, "NETMUTEX_TEST_")) {
            const char *eq = strchr(*e, '=');
            g_ptr_array_add(names, g_strndup(*e, eq ? (gsize)(eq - *e) : strlen(*e)));
        }
    }
    for (guint i = 0; i < names->len; i++)
        g_unsetenv(names->pdata[i]);
    g_ptr_array_free(names, TRUE);
}

void nm_test_init(int *argc, char ***argv)
{
    run_remote_if_asked(*argc, *argv);
    g_test_init(argc, argv, NULL);
    /* One library bug should fail its test, not hide every later test of
     * the program.  Infrastructure failures still use g_error (fatal). */
    g_test_set_nonfatal_assertions();
    clear_netmutex_env();
    init_slowdown();
    /* A server killed under a connection must surface as an errno from the
     * library, not kill the test program: hiredis writes with write(2). */
    signal(SIGPIPE, SIG_IGN);
}

int nm_test_finish(int run_result)
{
    int rc = netmutex_shutdown();

    /* EBUSY here means a test left a mutex held: a failure of its own,
     * reported through the exit status (the TAP driver shows it). */
    if (rc != 0) {
        g_printerr("netmutex_shutdown at exit: %s\n", nm_errname(rc));
        return run_result ? run_result : 1;
    }
    return run_result;
}

char *nm_test_name(const char *suffix)
{
    return g_strdup_printf("%s/%s", g_test_get_path(), suffix);
}

static const struct {
    const char *name;
    int type;
} mutex_types[] = {
    { "normal", NETMUTEX_NORMAL },
    { "errorcheck", NETMUTEX_ERRORCHECK },
    { "recursive", NETMUTEX_RECURSIVE },
    /* DEFAULT is NORMAL today; tested separately so a change shows up. */
    { "default", NETMUTEX_DEFAULT },
};

void nm_test_add_for_types(const char *path, GTestDataFunc fn)
{
    for (gsize i = 0; i < G_N_ELEMENTS(mutex_types); i++) {
        char *p = g_strdup_printf("%s/%s", path, mutex_types[i].name);
        g_test_add_data_func(p, GINT_TO_POINTER(mutex_types[i].type), fn);
        g_free(p);
    }
}

const char *nm_type_name(int type)
{
    for (gsize i = 0; i < G_N_ELEMENTS(mutex_types); i++)
        if (mutex_types[i].type == type)
            return mutex_types[i].name;
    return "(bad type)";
}

char *nm_mutex_init(netmutex_t *m, const char *suffix, int type,
                    unsigned int lease_ms)
{
    char *name = nm_test_name(suffix);
    netmutex_attr_t attr;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_settype(&attr, type), 0);
    nm_assert_rc(netmutex_attr_setlease(&attr, lease_ms), 0);
    nm_assert_rc(netmutex_init(m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    return name;
}

/* ===================================================================== */
/* time                                                                   */
/* ===================================================================== */

/* Which sanitizer this program is built with (configure's --enable-asan
 * and --enable-tsan add the flags to every object, the tests' too). */
#if defined(__SANITIZE_THREAD__)
#define NM_BUILT_WITH_TSAN 1
#elif defined(__SANITIZE_ADDRESS__)
#define NM_BUILT_WITH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NM_BUILT_WITH_TSAN 1
#elif __has_feature(address_sanitizer)
#define NM_BUILT_WITH_ASAN 1
#endif
#endif

bool nm_fork_with_threads_is_safe(void)
{
#ifdef NM_BUILT_WITH_ASAN
    return false;
#else
    return true;
#endif
}

/* NETMUTEX_TEST_SLOWDOWN when set (CI sets it).  Otherwise a default for
 * the variant, so a developer's `make check-valgrind` or TSan build is not
 * flaky either: check-valgrind exports VALGRIND to the tests. */
static double default_slowdown(void)
{
    if (g_getenv("VALGRIND"))
        return 10;
#if defined(NM_BUILT_WITH_TSAN)
    return 5;
#elif defined(NM_BUILT_WITH_ASAN)
    return 2;
#else
    return 1;
#endif
}

/* Set once by nm_test_init, before any thread exists, and only read
 * afterwards (no lazy initialization: threads call nm_ms too). */
static double slowdown_factor = 1.0;

static void init_slowdown(void)
{
    const char *s = g_getenv("NETMUTEX_TEST_SLOWDOWN");
    double f = s ? g_ascii_strtod(s, NULL) : default_slowdown();

    slowdown_factor = f >= 1.0 ? f : 1.0;
}

double nm_slowdown(void)
{
    return slowdown_factor;
}

unsigned int nm_ms(unsigned int ms)
{
    return (unsigned int)(ms * nm_slowdown());
}

gint64 nm_now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

void nm_deadline(struct timespec *ts, clockid_t clock, unsigned int ms)
{
    clock_gettime(clock, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void nm_sleep_ms(unsigned int ms)
{
    g_usleep((gulong)ms * 1000);
}

int nm_timespec_cmp(const struct timespec *a, const struct timespec *b)
{
    if (a->tv_sec != b->tv_sec)
        return a->tv_sec < b->tv_sec ? -1 : 1;
    if (a->tv_nsec != b->tv_nsec)
        return a->tv_nsec < b->tv_nsec ? -1 : 1;
    return 0;
}

static gint64 timespec_diff_us(const struct timespec *a, const struct timespec *b)
{
    return (gint64)(a->tv_sec - b->tv_sec) * 1000000 + (a->tv_nsec - b->tv_nsec) / 1000;
}

void nm_assert_timed_out_at(const struct timespec *returned,
                            const struct timespec *deadline,
                            unsigned int late_ms)
{
    gint64 after_us = timespec_diff_us(returned, deadline);

    if (nm_timespec_cmp(returned, deadline) < 0)
        g_error("ETIMEDOUT %" G_GINT64_FORMAT " us before the deadline", -after_us);
    if (after_us > (gint64)late_ms * 1000)
        g_error("ETIMEDOUT %" G_GINT64_FORMAT " us after the deadline", after_us);
}

/* ===================================================================== */
/* assertions                                                             */
/* ===================================================================== */

const char *nm_errname(int rc)
{
    switch (rc) {
    case 0: return "0";
    case EINVAL: return "EINVAL";
    case EBUSY: return "EBUSY";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EDEADLK: return "EDEADLK";
    case EPERM: return "EPERM";
    case EAGAIN: return "EAGAIN";
    case ENOLCK: return "ENOLCK";
    case EIO: return "EIO";
    case EACCES: return "EACCES";
    case ENOTSUP: return "ENOTSUP";
    case EPROTO: return "EPROTO";
    case ENOMEM: return "ENOMEM";
    case EOWNERDEAD: return "EOWNERDEAD";
    case ENOTRECOVERABLE: return "ENOTRECOVERABLE";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ENOENT: return "ENOENT";
    default: return "(other errno)";
    }
}

void nm_assert_rc_failed(const char *file, int line, const char *func,
                         const char *expr, int got, int want)
{
    char *msg = g_strdup_printf("%s returned %s (%d), expected %s (%d)", expr,
                                nm_errname(got), got, nm_errname(want), want);
    g_assertion_message(G_LOG_DOMAIN, file, line, func, msg);
    g_free(msg);
}

bool nm_is_token(const char *s)
{
    if (s == NULL || strlen(s) < 32)
        return false;
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    /* A lock key's value goes on with two flags and a space (lib.lua). */
    return s[32] == '\0' || (strchr("q-", s[32]) && s[33] && strchr("c-", s[33]) &&
                              s[34] == ' ');
}

/* ===================================================================== */
/* the private redis-server                                               */
/* ===================================================================== */

struct NmRedis {
    char *dir;
    char *sock;
    char *log;
    char *pass;
    char *exe;
    int port; /* 0: unix socket only */
    bool debug; /* started with --enable-debug-command yes */
    pid_t pid; /* 0: not running */
    bool paused;
    int cleanup_slot;
};

/* ---- cleanup when a test program dies ---------------------------------- */

/* g_error and failed fatal checks end the program with SIGTRAP or SIGABRT,
 * a harness timeout or Ctrl-C with SIGTERM or SIGINT, all skipping
 * nm_redis_free.  The server dies with us anyway (PDEATHSIG); this also
 * removes its directory.  Paths are prepared in advance because only
 * async-signal-safe calls are allowed in the handler. */
#define MAX_SERVERS 8
static const char *const dir_files[] = { "redis.sock", "redis.log", "dump.rdb", "counter" };
static char cleanup_paths[MAX_SERVERS][G_N_ELEMENTS(dir_files) + 1][512];
static volatile sig_atomic_t cleanup_pids[MAX_SERVERS];
static const int fatal_signals[] = { SIGABRT, SIGTRAP, SIGTERM, SIGINT, SIGHUP };

static void emergency_cleanup(int sig)
{
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (cleanup_pids[i] > 0)
            kill(cleanup_pids[i], SIGKILL);
        if (cleanup_paths[i][0][0] == '\0')
            continue;
        for (gsize f = 1; f <= G_N_ELEMENTS(dir_files); f++)
            unlink(cleanup_paths[i][f]);
        rmdir(cleanup_paths[i][0]);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static int register_cleanup(const char *dir)
{
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (cleanup_paths[i][0][0] != '\0')
            continue;
        g_snprintf(cleanup_paths[i][0], sizeof cleanup_paths[i][0], "%s", dir);
        for (gsize f = 0; f < G_N_ELEMENTS(dir_files); f++)
            g_snprintf(cleanup_paths[i][f + 1], sizeof cleanup_paths[i][f + 1], "%s/%s",
                       dir, dir_files[f]);
        for (gsize s = 0; s < G_N_ELEMENTS(fatal_signals); s++)
            signal(fatal_signals[s], emergency_cleanup);
        return i;
    }
    return -1;
}

/* In a forked worker: the server and its directory belong to the parent. */
static void disarm_cleanup(void)
{
    for (gsize s = 0; s < G_N_ELEMENTS(fatal_signals); s++)
        signal(fatal_signals[s], SIG_DFL);
    for (int i = 0; i < MAX_SERVERS; i++) {
        cleanup_pids[i] = 0;
        cleanup_paths[i][0][0] = '\0';
    }
}

static void unregister_cleanup(int slot)
{
    if (slot >= 0) {
        cleanup_pids[slot] = 0;
        cleanup_paths[slot][0][0] = '\0';
    }
}

/* A TCP port that was free a moment ago (the kernel's pick for port 0). */
static int free_tcp_port(void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    g_assert_cmpint(fd, >=, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g_assert_cmpint(bind(fd, (struct sockaddr *)&sa, sizeof sa), ==, 0);
    g_assert_cmpint(getsockname(fd, (struct sockaddr *)&sa, &len), ==, 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static char **redis_argv(const NmRedis *r)
{
    GPtrArray *a = g_ptr_array_new();

#define ARG(s) g_ptr_array_add(a, g_strdup(s))
    ARG(r->exe);
    ARG("--port");
    g_ptr_array_add(a, g_strdup_printf("%d", r->port));
    ARG("--bind");
    ARG("127.0.0.1");
    ARG("--unixsocket");
    ARG(r->sock);
    ARG("--unixsocketperm");
    ARG("700");
    /* No persistence: a restart must come back empty. */
    ARG("--save");
    ARG("");
    ARG("--appendonly");
    ARG("no");
    ARG("--dir");
    ARG(r->dir);
    ARG("--daemonize");
    ARG("no");
    ARG("--logfile");
    ARG(r->log);
    ARG("--databases");
    ARG("16");
    if (r->pass) {
        ARG("--requirepass");
        ARG(r->pass);
    }
    /* Redis 7 refuses DEBUG unless told otherwise; older servers do not
     * know the option, so it is only passed when a test asks for it. */
    if (r->debug) {
        ARG("--enable-debug-command");
        ARG("yes");
    }
#undef ARG
    g_ptr_array_add(a, NULL);
    return (char **)g_ptr_array_free(a, FALSE);
}

static void spawn_redis(NmRedis *r)
{
    char **argv = redis_argv(r);
    pid_t parent = getpid();
    pid_t pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        /* Only async-signal-safe calls between fork and exec. */
        int devnull;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    g_strfreev(argv);
    r->pid = pid;
    r->paused = false;
    if (r->cleanup_slot >= 0)
        cleanup_pids[r->cleanup_slot] = pid;
}

static bool redis_reply_is(redisReply *reply, int type, const char *str)
{
    return reply && reply->type == type && (!str || strcmp(reply->str, str) == 0);
}

static struct timeval tv_ms(unsigned int ms)
{
    struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
    return tv;
}

/* One PING over a fresh connection, authenticated when needed. */
static bool redis_answers(const NmRedis *r)
{
    redisContext *c = redisConnectUnixWithTimeout(r->sock, tv_ms(500));
    bool ok = false;

    if (c && !c->err) {
        redisReply *reply = NULL;

        redisSetTimeout(c, tv_ms(nm_ms(2000)));
        if (r->pass) {
            reply = redisCommand(c, "AUTH %s", r->pass);
            ok = redis_reply_is(reply, REDIS_REPLY_STATUS, "OK");
            freeReplyObject(reply);
        } else {
            ok = true;
        }
        if (ok) {
            reply = redisCommand(c, "PING");
            ok = redis_reply_is(reply, REDIS_REPLY_STATUS, "PONG");
            freeReplyObject(reply);
        }
    }
    if (c)
        redisFree(c);
    return ok;
}

static char *redis_log_tail(const NmRedis *r)
{
    char *text = NULL;

    if (!g_file_get_contents(r->log, &text, NULL, NULL))
        return g_strdup("(no log)");
    return text;
}

/* Waits until the server answers PING.  False if it exited first (the
 * caller may retry with another port); fails the test if it neither
 * answers nor exits within the bound. */
static bool wait_until_ready(NmRedis *r)
{
    gint64 deadline = nm_now_ms() + nm_ms(NM_PROMPT_MS);

    for (;;) {
        int status;

        if (waitpid(r->pid, &status, WNOHANG) == r->pid) {
            r->pid = 0;
            return false;
        }
        if (redis_answers(r))
            return true;
        if (nm_now_ms() > deadline) {
            char *log = redis_log_tail(r);
            g_error("redis-server did not answer PING in time; log:\n%s", log);
        }
        nm_sleep_ms(10);
    }
}

/* Starts the server on r->port (or a fresh free port if PICK_PORT). */
static void start_redis(NmRedis *r, bool pick_port)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        if (pick_port)
            r->port = free_tcp_port();
        g_remove(r->log);
        spawn_redis(r);
        if (wait_until_ready(r))
            return;
        /* Another process took the port between our probe and redis'
         * bind; only a freshly picked port can be retried. */
        if (!pick_port)
            break;
    }
    {
        char *log = redis_log_tail(r);
        g_error("redis-server (%s) exited during start-up; log:\n%s", r->exe, log);
    }
}

NmRedis *nm_redis_start(const NmRedisOpts *opts)
{
    NmRedis *r = g_new0(NmRedis, 1);
    const char *exe = g_getenv("REDIS_SERVER");
    GError *error = NULL;

    if (!exe || !*exe)
        exe = "redis-server";
    /* execv needs a path, and resolving it must happen before fork. */
    r->exe = g_find_program_in_path(exe);
    if (!r->exe)
        g_error("redis-server not found (REDIS_SERVER=%s)", exe);
    r->dir = g_dir_make_tmp("netmutex-test-XXXXXX", &error);
    g_assert_no_error(error);
    r->sock = g_build_filename(r->dir, "redis.sock", NULL);
    r->log = g_build_filename(r->dir, "redis.log", NULL);
    r->pass = opts && opts->requirepass ? g_strdup(opts->requirepass) : NULL;
    r->debug = opts && opts->debug_command;
    r->cleanup_slot = register_cleanup(r->dir);
    start_redis(r, opts && opts->tcp);
    return r;
}

void nm_redis_stop(NmRedis *r)
{
    gint64 deadline = nm_now_ms() + nm_ms(NM_PROMPT_MS);
    int status;

    if (r->pid == 0)
        return;
    kill(r->pid, SIGTERM);
    if (r->paused)
        kill(r->pid, SIGCONT); /* a stopped process never handles SIGTERM */
    while (waitpid(r->pid, &status, WNOHANG) == 0) {
        if (nm_now_ms() > deadline) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, &status, 0);
            break;
        }
        nm_sleep_ms(5);
    }
    r->pid = 0;
    r->paused = false;
    if (r->cleanup_slot >= 0)
        cleanup_pids[r->cleanup_slot] = 0;
    /* Redis removes its socket on a clean shutdown; make sure of it, so a
     * stopped server always looks the same to the library. */
    g_remove(r->sock);
}

void nm_redis_restart(NmRedis *r)
{
    g_assert_cmpint(r->pid, ==, 0);
    start_redis(r, false);
}

void nm_redis_pause(NmRedis *r)
{
    g_assert_cmpint(r->pid, >, 0);
    g_assert_cmpint(kill(r->pid, SIGSTOP), ==, 0);
    r->paused = true;
}

void nm_redis_resume(NmRedis *r)
{
    g_assert_cmpint(r->pid, >, 0);
    g_assert_cmpint(kill(r->pid, SIGCONT), ==, 0);
    r->paused = false;
}

/* The directory holds only files we or the server created. */
static void remove_dir(const char *path)
{
    GDir *d = g_dir_open(path, 0, NULL);
    const char *entry;

    if (!d)
        return;
    while ((entry = g_dir_read_name(d)) != NULL) {
        char *p = g_build_filename(path, entry, NULL);
        g_remove(p);
        g_free(p);
    }
    g_dir_close(d);
    g_rmdir(path);
}

void nm_redis_free(NmRedis *r)
{
    if (!r)
        return;
    nm_redis_stop(r);
    unregister_cleanup(r->cleanup_slot);
    remove_dir(r->dir);
    g_free(r->dir);
    g_free(r->sock);
    g_free(r->log);
    g_free(r->pass);
    g_free(r->exe);
    g_free(r);
}

const char *nm_redis_dir(NmRedis *r) { return r->dir; }
const char *nm_redis_socket(NmRedis *r) { return r->sock; }
int nm_redis_port(NmRedis *r) { return r->port; }

char *nm_redis_url(NmRedis *r)
{
    if (r->pass)
        return g_strdup_printf("unix://:%s@%s", r->pass, r->sock);
    return g_strdup_printf("unix://%s", r->sock);
}

char *nm_redis_tcp_url(NmRedis *r, int db)
{
    char *auth = r->pass ? g_strdup_printf(":%s@", r->pass) : g_strdup("");
    char *path = db >= 0 ? g_strdup_printf("/%d", db) : g_strdup("");
    char *url;

    g_assert_cmpint(r->port, >, 0);
    url = g_strdup_printf("redis://%s127.0.0.1:%d%s", auth, r->port, path);
    g_free(auth);
    g_free(path);
    return url;
}

void nm_configure_timeouts(NmRedis *r, unsigned int connect_ms, unsigned int io_ms)
{
    char *url = nm_redis_url(r);
    netmutex_config_t cfg = {
        .url = url,
        .connect_timeout_ms = connect_ms,
        .io_timeout_ms = io_ms,
    };

    nm_assert_rc(netmutex_configure(&cfg), 0);
    g_free(url);
}

void nm_configure(NmRedis *r)
{
    nm_configure_timeouts(r, 0, 0);
}

static void expect_ok_reply(redisContext *c, redisReply *reply, const char *what)
{
    if (!reply)
        g_error("raw %s: no reply (%s)", what, c->errstr);
    if (reply->type == REDIS_REPLY_ERROR)
        g_error("raw %s: %s", what, reply->str);
    freeReplyObject(reply);
}

redisContext *nm_redis_connect(NmRedis *r, int db)
{
    redisContext *c = redisConnectUnixWithTimeout(r->sock, tv_ms(nm_ms(5000)));

    if (!c || c->err)
        g_error("raw connection to %s: %s", r->sock, c ? c->errstr : "out of memory");
    redisSetTimeout(c, tv_ms(nm_ms(10000)));
    if (r->pass)
        expect_ok_reply(c, redisCommand(c, "AUTH %s", r->pass), "AUTH");
    if (db != 0)
        expect_ok_reply(c, redisCommand(c, "SELECT %d", db), "SELECT");
    return c;
}

static redisReply *vcmd(NmRedis *r, const char *fmt, va_list ap)
{
    redisContext *c = nm_redis_connect(r, 0);
    redisReply *reply = redisvCommand(c, fmt, ap);

    if (!reply)
        g_error("raw command '%s': %s", fmt, c->errstr);
    redisFree(c);
    return reply;
}

redisReply *nm_redis_cmd(NmRedis *r, const char *fmt, ...)
{
    va_list ap;
    redisReply *reply;

    va_start(ap, fmt);
    reply = vcmd(r, fmt, ap);
    va_end(ap);
    return reply;
}

void nm_redis_ok(NmRedis *r, const char *fmt, ...)
{
    va_list ap;
    redisReply *reply;

    va_start(ap, fmt);
    reply = vcmd(r, fmt, ap);
    va_end(ap);
    if (reply->type == REDIS_REPLY_ERROR)
        g_error("raw command '%s' failed: %s", fmt, reply->str);
    freeReplyObject(reply);
}

char *nm_redis_get(NmRedis *r, int db, const char *key, size_t keylen)
{
    redisContext *c = nm_redis_connect(r, db);
    const char *argv[] = { "GET", key };
    const size_t lens[] = { 3, keylen };
    redisReply *reply = redisCommandArgv(c, 2, argv, lens);
    char *value = NULL;

    if (!reply)
        g_error("raw GET: %s", c->errstr);
    if (reply->type == REDIS_REPLY_STRING)
        value = g_strndup(reply->str, reply->len);
    else if (reply->type != REDIS_REPLY_NIL)
        g_error("raw GET: unexpected reply type %d", reply->type);
    freeReplyObject(reply);
    redisFree(c);
    return value;
}

static long long int_reply(redisReply *reply, const char *what)
{
    long long v;

    if (reply->type == REDIS_REPLY_INTEGER)
        v = reply->integer;
    else if (reply->type == REDIS_REPLY_STRING)
        v = g_ascii_strtoll(reply->str, NULL, 10);
    else if (reply->type == REDIS_REPLY_NIL)
        v = 0;
    else
        g_error("%s: unexpected reply type %d", what, reply->type);
    freeReplyObject(reply);
    return v;
}

long long nm_redis_pttl(NmRedis *r, const char *key)
{
    return int_reply(nm_redis_cmd(r, "PTTL %s", key), "PTTL");
}

long long nm_redis_fence(NmRedis *r, const char *lock_key)
{
    char *value = nm_redis_get(r, 0, lock_key, strlen(lock_key));
    long long fence = 0;

    /* "<token><q><c> <fence> <holder>" (src/lua/lib.lua) */
    if (value && strlen(value) > 35)
        fence = g_ascii_strtoll(value + 35, NULL, 10);
    g_free(value);
    return fence;
}

char *nm_lock_key(const char *name)
{
    return g_strdup_printf("netmutex:{%s}", name);
}

char *nm_token_of(NmRedis *r, const char *name)
{
    char *key = nm_lock_key(name);
    char *value = nm_redis_get(r, 0, key, strlen(key));
    char *token = value ? g_strndup(value, 32) : NULL;

    g_free(value);
    g_free(key);
    return token;
}

/* ===================================================================== */
/* threads                                                                */
/* ===================================================================== */

struct NmCall {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    int result;
    NmCallFunc fn;
    void *arg;
};

static void cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

static void *call_main(void *p)
{
    NmCall *c = p;
    int result = c->fn(c->arg);

    pthread_mutex_lock(&c->lock);
    c->result = result;
    c->done = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

NmCall *nm_call_start(NmCallFunc fn, void *arg)
{
    NmCall *c = g_new0(NmCall, 1);

    c->fn = fn;
    c->arg = arg;
    pthread_mutex_init(&c->lock, NULL);
    cond_init_monotonic(&c->cond);
    g_assert_cmpint(pthread_create(&c->thread, NULL, call_main, c), ==, 0);
    return c;
}

bool nm_call_done(NmCall *c)
{
    bool done;

    pthread_mutex_lock(&c->lock);
    done = c->done;
    pthread_mutex_unlock(&c->lock);
    return done;
}

int nm_call_wait(NmCall *c, unsigned int timeout_ms)
{
    struct timespec deadline;
    int result;

    nm_deadline(&deadline, CLOCK_MONOTONIC, timeout_ms);
    pthread_mutex_lock(&c->lock);
    while (!c->done) {
        if (pthread_cond_timedwait(&c->cond, &c->lock, &deadline) == ETIMEDOUT)
            break;
    }
    if (!c->done) {
        pthread_mutex_unlock(&c->lock);
        /* The thread still uses C, so C is deliberately not freed. */
        g_error("a call did not return within %u ms", timeout_ms);
    }
    result = c->result;
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    g_free(c);
    return result;
}

int nm_call_run(NmCallFunc fn, void *arg, unsigned int timeout_ms)
{
    return nm_call_wait(nm_call_start(fn, arg), timeout_ms);
}

int nm_call_lock_unlock(void *m)
{
    int rc = netmutex_lock(m);

    return rc ? rc : netmutex_unlock(m);
}

int nm_call_trylock_unlock(void *m)
{
    int rc = netmutex_trylock(m);

    return rc ? rc : netmutex_unlock(m);
}

struct NmHolder {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    netmutex_t *m;
    bool locked;
    int lock_rc;
    bool release;
    unsigned int delay_ms;
    bool finished;
    int unlock_rc;
};

static void *holder_main(void *p)
{
    NmHolder *h = p;
    int rc = netmutex_lock(h->m);
    unsigned int delay;

    pthread_mutex_lock(&h->lock);
    h->lock_rc = rc;
    h->locked = true;
    pthread_cond_broadcast(&h->cond);
    while (!h->release && rc == 0)
        pthread_cond_wait(&h->cond, &h->lock);
    delay = h->delay_ms;
    pthread_mutex_unlock(&h->lock);

    if (rc == 0) {
        nm_sleep_ms(delay);
        rc = netmutex_unlock(h->m);
    }
    pthread_mutex_lock(&h->lock);
    h->unlock_rc = rc;
    h->finished = true;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

NmHolder *nm_holder_start(netmutex_t *m)
{
    NmHolder *h = g_new0(NmHolder, 1);
    struct timespec deadline;

    h->m = m;
    pthread_mutex_init(&h->lock, NULL);
    cond_init_monotonic(&h->cond);
    g_assert_cmpint(pthread_create(&h->thread, NULL, holder_main, h), ==, 0);

    nm_deadline(&deadline, CLOCK_MONOTONIC, nm_ms(NM_PROMPT_MS));
    pthread_mutex_lock(&h->lock);
    while (!h->locked &&
           pthread_cond_timedwait(&h->cond, &h->lock, &deadline) != ETIMEDOUT)
        ;
    if (!h->locked)
        g_error("holder thread did not get the lock in time");
    pthread_mutex_unlock(&h->lock);
    nm_assert_rc(h->lock_rc, 0);
    return h;
}

void nm_holder_release_later(NmHolder *h, unsigned int delay_ms)
{
    pthread_mutex_lock(&h->lock);
    h->release = true;
    h->delay_ms = delay_ms;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
}

int nm_holder_join(NmHolder *h)
{
    struct timespec deadline;
    int rc;

    nm_deadline(&deadline, CLOCK_MONOTONIC, nm_ms(NM_PROMPT_MS) + h->delay_ms);
    pthread_mutex_lock(&h->lock);
    while (!h->finished &&
           pthread_cond_timedwait(&h->cond, &h->lock, &deadline) != ETIMEDOUT)
        ;
    if (!h->finished)
        g_error("holder thread did not unlock in time");
    rc = h->unlock_rc;
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    pthread_cond_destroy(&h->cond);
    pthread_mutex_destroy(&h->lock);
    g_free(h);
    return rc;
}

int nm_holder_release(NmHolder *h)
{
    nm_holder_release_later(h, 0);
    return nm_holder_join(h);
}

struct NmWorker {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    netmutex_t *m;
    char op;     /* pending request, 0 when none */
    bool done;   /* RESULT is the answer to the last request */
    int result;
};

static void *worker_main(void *p)
{
    NmWorker *w = p;

    pthread_mutex_lock(&w->lock);
    for (;;) {
        char op;
        int rc;

        while (w->op == 0)
            pthread_cond_wait(&w->cond, &w->lock);
        op = w->op;
        if (op == 'q')
            break;
        pthread_mutex_unlock(&w->lock);
        rc = op == 'l' ? netmutex_lock(w->m)
           : op == 't' ? netmutex_trylock(w->m)
           : op == 'u' ? netmutex_unlock(w->m) : EINVAL;
        pthread_mutex_lock(&w->lock);
        w->op = 0;
        w->result = rc;
        w->done = true;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

NmWorker *nm_worker_start(netmutex_t *m)
{
    NmWorker *w = g_new0(NmWorker, 1);

    w->m = m;
    pthread_mutex_init(&w->lock, NULL);
    cond_init_monotonic(&w->cond);
    g_assert_cmpint(pthread_create(&w->thread, NULL, worker_main, w), ==, 0);
    return w;
}

int nm_worker(NmWorker *w, char op)
{
    struct timespec deadline;
    int rc;

    nm_deadline(&deadline, CLOCK_MONOTONIC, nm_ms(NM_PROMPT_MS));
    pthread_mutex_lock(&w->lock);
    w->op = op;
    w->done = false;
    pthread_cond_broadcast(&w->cond);
    while (!w->done &&
           pthread_cond_timedwait(&w->cond, &w->lock, &deadline) != ETIMEDOUT)
        ;
    if (!w->done)
        g_error("worker thread did not answer in time");
    rc = w->result;
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void nm_worker_stop(NmWorker *w)
{
    pthread_mutex_lock(&w->lock);
    w->op = 'q';
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    g_free(w);
}

int nm_count_fds(void)
{
    GDir *d = g_dir_open("/proc/self/fd", 0, NULL);
    int n = 0;

    g_assert_nonnull(d);
    while (g_dir_read_name(d))
        n++;
    g_dir_close(d);
    return n;
}

/* ===================================================================== */
/* processes                                                              */
/* ===================================================================== */

pid_t nm_fork(void)
{
    pid_t parent = getpid();
    pid_t pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        disarm_cleanup();
        /* GLib's failed assertions print "Bail out!" on stdout: in a child
         * that must not reach the TAP stream of the parent. */
        dup2(2, 1);
    }
    return pid;
}

/* Assertions are not fatal (see nm_test_init): a child that failed one
 * must still exit non-zero. */
static G_NORETURN void child_exit(int status)
{
    _exit(status == 0 && g_test_failed() ? 99 : status);
}

pid_t nm_fork_run(NmCallFunc fn, void *arg)
{
    pid_t pid = nm_fork();

    if (pid == 0)
        child_exit(fn(arg));
    return pid;
}

/* The exit status travels through an exec of this program, which exits
 * with it at once: leak checkers run at exit, not at exec. */
static G_NORETURN void child_exit_unchecked(int status)
{
    static char self[4096];
    char code[16];
    char *argv[] = { self, (char *)EXIT_FLAG, code, NULL };
    ssize_t n;

    status = status == 0 && g_test_failed() ? 99 : status;
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        g_snprintf(code, sizeof code, "%d", status);
        execv(self, argv);
    }
    _exit(status);
}

pid_t nm_fork_run_unchecked(NmCallFunc fn, void *arg)
{
    pid_t pid = nm_fork();

    if (pid == 0)
        child_exit_unchecked(fn(arg));
    return pid;
}

void nm_child_wait_ok(pid_t pid, unsigned int timeout_ms)
{
    gint64 deadline = nm_now_ms() + timeout_ms;
    int status = 0;
    pid_t got;

    while ((got = waitpid(pid, &status, WNOHANG)) == 0) {
        if (nm_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            g_test_message("child %d did not exit within %u ms", (int)pid, timeout_ms);
            g_test_fail();
            return;
        }
        nm_sleep_ms(5);
    }
    /* A failing child is a failing test, not a broken fixture: report it
     * and let the program go on with its other tests. */
    g_assert_cmpint(got, ==, pid);
    if (WIFSIGNALED(status)) {
        g_test_message("child %d killed by signal %d (%s)", (int)pid,
                       WTERMSIG(status), g_strsignal(WTERMSIG(status)));
        g_test_fail();
    } else if (WEXITSTATUS(status) != 0) {
        g_test_message("child %d exited with status %d", (int)pid, WEXITSTATUS(status));
        g_test_fail();
    }
}

struct NmRemote {
    pid_t pid;
    int to_child;   /* ops */
    int from_child; /* int results */
};

/* Reads exactly LEN bytes from FD within TIMEOUT_MS; false on timeout/EOF. */
static bool read_full(int fd, void *buf, size_t len, unsigned int timeout_ms)
{
    gint64 deadline = nm_now_ms() + timeout_ms;
    size_t got = 0;

    while (got < len) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        gint64 left = deadline - nm_now_ms();
        ssize_t n;

        if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
            return false;
        n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    return true;
}

static void write_full(int fd, const void *buf, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = write(fd, (const char *)buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(3); /* the other side is gone: nothing sensible left */
        done += (size_t)n;
    }
}

/* The remote's op 'w': a thread that waits for the mutex; whatever it
 * gets, the remote is expected to exit (op 'x') or be killed meanwhile. */
static void *remote_background_lock(void *m)
{
    netmutex_lock(m);
    return NULL;
}

/* The remote's main loop: one result per op, until 'q' or EOF ('x' exits
 * at once, through exit(), without a result).  Runs in a freshly exec'd
 * copy of the test program (see nm_test_init). */
static int remote_main(const char *url, const char *name, int type,
                       unsigned int lease_ms, int in, int out)
{
    netmutex_config_t cfg = { .url = url };
    netmutex_attr_t attr;
    netmutex_t m;
    int rc;
    char op;

    rc = netmutex_configure(&cfg);
    netmutex_attr_init(&attr);
    netmutex_attr_settype(&attr, type & ~NM_REMOTE_ROBUST);
    if (type & NM_REMOTE_ROBUST)
        netmutex_attr_setrobust(&attr, NETMUTEX_ROBUST);
    netmutex_attr_setlease(&attr, lease_ms);
    if (rc == 0)
        rc = netmutex_init(&m, name, &attr);
    netmutex_attr_destroy(&attr);
    write_full(out, &rc, sizeof rc);
    if (rc != 0)
        return 2;
    while (read(in, &op, 1) == 1) {
        switch (op) {
        case 'l': rc = netmutex_lock(&m); break;
        case 't': rc = netmutex_trylock(&m); break;
        case 'u': rc = netmutex_unlock(&m); break;
        case 'w': {
            pthread_t t;
            rc = pthread_create(&t, NULL, remote_background_lock, &m);
            break;
        }
        case 'x': exit(0);
        case 'q':
            rc = netmutex_destroy(&m);
            if (rc == 0)
                rc = netmutex_shutdown();
            return rc == 0 ? 0 : 4;
        default: return 5;
        }
        write_full(out, &rc, sizeof rc);
    }
    return 6;
}


/* Exit status: how many sockets this process was started with. */
static int count_sockets(void)
{
    GDir *d = g_dir_open("/proc/self/fd", 0, NULL);
    const char *entry;
    int n = 0;

    while (d && (entry = g_dir_read_name(d)) != NULL) {
        char *path = g_build_filename("/proc/self/fd", entry, NULL);
        char *target = g_file_read_link(path, NULL);

        n += target && g_str_has_prefix(target, "socket:");
        g_free(target);
        g_free(path);
    }
    if (d)
        g_dir_close(d);
    return n;
}

/* argv of a remote: REMOTE_FLAG url name type lease in-fd out-fd. */
static void run_remote_if_asked(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], COUNT_SOCKETS_FLAG) == 0)
        exit(count_sockets());
    if (argc == 3 && strcmp(argv[1], EXIT_FLAG) == 0)
        _exit(atoi(argv[2]));
    if (argc != 8 || strcmp(argv[1], REMOTE_FLAG) != 0)
        return;
    exit(remote_main(argv[2], argv[3], atoi(argv[4]), (unsigned int)atoi(argv[5]),
                     atoi(argv[6]), atoi(argv[7])));
}

/* The remote is this very program, exec'd: a fresh process that shares no
 * library state, connection or thread with its parent, whatever the parent
 * did before (forking a process that uses netmutex is test_fork's subject,
 * and something ThreadSanitizer cannot follow). */
NmRemote *nm_remote_start(NmRedis *r, const char *name, int type,
                          unsigned int lease_ms)
{
    char *url = nm_redis_url(r);
    NmRemote *rem = nm_remote_start_url(url, NULL, name, type, lease_ms);

    g_free(url);
    return rem;
}

NmRemote *nm_remote_start_url(const char *url, const char *const *env,
                              const char *name, int type, unsigned int lease_ms)
{
    NmRemote *rem = g_new0(NmRemote, 1);
    char *self = g_file_read_link("/proc/self/exe", NULL);
    /* Built before fork: between fork and exec only execve runs. */
    char **envp = g_get_environ();
    int down[2], up[2];
    int rc = -1;
    char *argv[9];

    g_assert_nonnull(self);
    g_assert_cmpint(pipe(down), ==, 0);
    g_assert_cmpint(pipe(up), ==, 0);
    argv[0] = self;
    argv[1] = (char *)REMOTE_FLAG;
    argv[2] = (char *)url;
    argv[3] = (char *)name;
    argv[4] = g_strdup_printf("%d", type);
    argv[5] = g_strdup_printf("%u", lease_ms);
    argv[6] = g_strdup_printf("%d", down[0]);
    argv[7] = g_strdup_printf("%d", up[1]);
    argv[8] = NULL;
    for (const char *const *e = env; e && *e; e++) {
        char *eq = strchr(*e, '=');
        char *var = g_strndup(*e, eq ? (gsize)(eq - *e) : strlen(*e));

        g_assert_nonnull(eq);
        envp = g_environ_setenv(envp, var, eq + 1, TRUE);
        g_free(var);
    }
    rem->pid = nm_fork();
    if (rem->pid == 0) {
        close(down[1]);
        close(up[0]);
        execve(self, argv, envp);
        _exit(127);
    }
    for (int i = 4; i < 8; i++)
        g_free(argv[i]);
    g_strfreev(envp);
    g_free(self);
    close(down[0]);
    close(up[1]);
    rem->to_child = down[1];
    rem->from_child = up[0];
    if (!read_full(rem->from_child, &rc, sizeof rc, nm_ms(NM_PROMPT_MS)))
        g_error("remote process did not start");
    nm_assert_rc(rc, 0);
    return rem;
}

void nm_remote_send(NmRemote *rem, char op)
{
    write_full(rem->to_child, &op, 1);
}

bool nm_remote_poll(NmRemote *rem, unsigned int timeout_ms)
{
    struct pollfd pfd = { .fd = rem->from_child, .events = POLLIN };

    return poll(&pfd, 1, (int)timeout_ms) == 1;
}

int nm_remote_result(NmRemote *rem)
{
    int rc = -1;

    if (!read_full(rem->from_child, &rc, sizeof rc, nm_ms(NM_PROMPT_MS)))
        g_error("remote process did not answer in time");
    return rc;
}

int nm_remote(NmRemote *rem, char op)
{
    nm_remote_send(rem, op);
    return nm_remote_result(rem);
}

void nm_remote_stop(NmRemote *rem)
{
    nm_remote_send(rem, 'q');
    close(rem->to_child);
    close(rem->from_child);
    nm_child_wait_ok(rem->pid, nm_ms(NM_PROMPT_MS));
    g_free(rem);
}

pid_t nm_remote_pid(NmRemote *rem)
{
    return rem->pid;
}

void nm_remote_exit(NmRemote *rem)
{
    nm_remote_send(rem, 'x');
    close(rem->to_child);
    close(rem->from_child);
    nm_child_wait_ok(rem->pid, nm_ms(NM_PROMPT_MS));
    g_free(rem);
}

void nm_remote_kill(NmRemote *rem)
{
    int status;

    kill(rem->pid, SIGKILL);
    waitpid(rem->pid, &status, 0);
    close(rem->to_child);
    close(rem->from_child);
    g_free(rem);
}

int nm_exec_count_sockets(void)
{
    char *self = g_file_read_link("/proc/self/exe", NULL);
    char *argv[] = { self, (char *)COUNT_SOCKETS_FLAG, NULL };
    int status = 0;
    pid_t pid;

    g_assert_nonnull(self);
    pid = nm_fork();
    if (pid == 0) {
        execv(self, argv);
        _exit(127);
    }
    g_free(self);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

int nm_probe_trylock(NmRedis *r, const char *name, int type)
{
    NmRemote *rem = nm_remote_start(r, name, type, 0);
    int rc = nm_remote(rem, 't');

    if (rc == 0)
        nm_assert_rc(nm_remote(rem, 'u'), 0);
    nm_remote_stop(rem);
    return rc;
}

long long nm_queue_len(NmRedis *r, const char *name)
{
    redisReply *reply = nm_redis_cmd(r, "LLEN netmutex:{%s}:q", name);
    long long n = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;

    freeReplyObject(reply);
    return n;
}

bool nm_wait_queue_len(NmRedis *r, const char *name, long long n, unsigned int timeout_ms)
{
    gint64 end = nm_now_ms() + timeout_ms;

    while (nm_queue_len(r, name) != n) {
        if (nm_now_ms() > end)
            return false;
        nm_sleep_ms(2);
    }
    return true;
}

int nm_kill_when_queued(void *p)
{
    NmKiller *k = p;
    bool queued = nm_wait_queue_len(k->redis, k->name, 1, nm_ms(10000));

    k->killed_at = nm_now_ms();
    nm_remote_kill(k->victim);
    return queued ? 0 : 1;
}

/* ---- lost-lease callbacks ---------------------------------------------- */

void nm_lost_init(NmLost *l)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
    cond_init_monotonic(&l->cond);
}

void nm_lost_clear(NmLost *l)
{
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->cond);
    g_free(l->name);
}

void nm_lost_record(const char *name, void *arg)
{
    NmLost *l = arg;
    gint64 now = nm_now_ms();

    pthread_mutex_lock(&l->lock);
    if (l->calls++ == 0) {
        l->first_at = now;
        l->name = g_strdup(name);
    }
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

int nm_lost_calls(NmLost *l)
{
    int calls;

    pthread_mutex_lock(&l->lock);
    calls = l->calls;
    pthread_mutex_unlock(&l->lock);
    return calls;
}

/* Waits at most TIMEOUT_MS (not scaled) for a first call; returns the
 * number of calls so far. */
int nm_lost_wait(NmLost *l, unsigned int timeout_ms)
{
    struct timespec end;
    int calls;

    nm_deadline(&end, CLOCK_MONOTONIC, timeout_ms);
    pthread_mutex_lock(&l->lock);
    while (l->calls == 0 && pthread_cond_timedwait(&l->cond, &l->lock, &end) != ETIMEDOUT)
        ;
    calls = l->calls;
    pthread_mutex_unlock(&l->lock);
    return calls;
}
