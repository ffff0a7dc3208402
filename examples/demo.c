/*
 * netmutex-demo -- lost updates with and without a netmutex.
 *
 * Several worker processes, each with a few threads, increment one counter
 * kept in a shared file.  Every increment is a deliberately slow
 * read-modify-write: read the counter, sleep a moment, write counter + 1.
 *
 *   1. with netmutex_lock()/netmutex_unlock() around each increment, on one
 *      mutex name shared by every thread of every process: the final count
 *      is exact;
 *   2. with no lock at all: increments overwrite each other and are lost.
 *
 * Redis: if NETMUTEX_URL is set, that server is used (netmutex_configure
 * reads it).  Otherwise the demo starts a private redis-server on a unix
 * socket in a temporary directory and stops it, and removes the directory,
 * when it exits.  The redis-server binary is the one configure found,
 * or $REDIS_SERVER (redis_server.c, beside this file, does that part).
 *
 * Exit status: 0 when the count under the lock is exact, 1 otherwise,
 * 2 for a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <netmutex.h>

#include "redis_server.h" /* the private server, beside this file */

#ifndef REDIS_SERVER_PATH
#define REDIS_SERVER_PATH "redis-server"
#endif

#define LOCK_NAME "netmutex-demo"
#define HOLD_US 1000        /* the "slow" part of each read-modify-write */
#define MAX_PROCS 64
#define MAX_THREADS 64
#define MAX_ITERATIONS 100000
#define READY_TIMEOUT_MS 10000

/* ---- small helpers ---------------------------------------------------- */

static const char *progname = "netmutex-demo";

static void complain(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", progname);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the private redis-server, and cleanup on every way out ----------- */

/* Everything the signal handler may need: written before the handler can
 * run, read only by the process that wrote it (checked with getpid).  The
 * server, its directory and the counter file in it are redis_server.c's to
 * clean up: the server dies with the demo however it ends (PDEATHSIG). */
static pid_t main_pid;
static volatile pid_t worker_pids[MAX_PROCS];
static rs_server_t server;
static char counter_path[320];

static void stop_redis(void)
{
    rs_destroy(&server);
}

/* SIGINT, SIGTERM, SIGHUP: stop the workers and remove the counter file;
 * redis_server.c then stops our server and removes its directory, and the
 * demo dies of the same signal.  Only async-signal-safe calls here. */
static void on_fatal_signal(int sig)
{
    (void)sig;
    if (getpid() == main_pid) {
        for (int i = 0; i < MAX_PROCS; i++)
            if (worker_pids[i] > 0)
                kill(worker_pids[i], SIGTERM);
        if (counter_path[0] != '\0')
            unlink(counter_path);
    }
}

static const int fatal_signals[] = { SIGINT, SIGTERM, SIGHUP };

/* In a worker: the demo's handler is its parent's business. */
static void default_fatal_signals(void)
{
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        signal(fatal_signals[i], SIG_DFL);
}

/* Starts redis-server on a unix socket in a fresh temporary directory and
 * waits (bounded) until it answers.  Returns 0, or -1 after a message. */
static int start_redis(void)
{
    rs_opts_t o = { .ready_ms = READY_TIMEOUT_MS };
    int err = rs_make_dir(&server, "netmutex-demo");

    if (err == ENAMETOOLONG) {
        complain("TMPDIR is too long for a unix socket path: %s", getenv("TMPDIR"));
        return -1;
    }
    if (err == 0)
        err = rs_start(&server, &o);
    if (err == ECHILD) {
        complain("%s exited before it was ready; its log:", server.exe);
        rs_print_log(&server);
    } else if (err == ETIMEDOUT) {
        complain("%s did not answer on %s within %d ms", server.exe, server.sock,
                 READY_TIMEOUT_MS);
    } else if (err) {
        complain("starting redis-server: %s", strerror(err));
    }
    return err ? -1 : 0;
}

/* ---- the counter ------------------------------------------------------- */

/* The counter is a decimal number at the start of a small file. */
static int counter_fd = -1;

/* Sets *value on every path, and returns non-zero exactly when the read
 * failed: a caller that looks at the result alone never reads a value
 * that was not set. */
static int counter_read(int fd, uint64_t *value)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    *value = 0;
    if (n < 0)
        return errno ? errno : EIO;
    buf[n] = '\0';
    *value = strtoull(buf, NULL, 10);
    return 0;
}

static int counter_write(int fd, uint64_t value)
{
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%020" PRIu64 "\n", value);
    return pwrite(fd, buf, (size_t)len, 0) == len ? 0 : errno ? errno : EIO;
}

/* ---- the workers ------------------------------------------------------- */

struct run {
    int procs, threads, iterations;
    int use_lock;
    const char *url;   /* NULL: NETMUTEX_URL / default */
};

struct worker {
    const struct run *run;
    netmutex_t *mutex; /* NULL: no lock */
    int failed;
};

/* One thread: ITERATIONS slow increments, each one inside the mutex when
 * there is one. */
static void *worker_thread(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < w->run->iterations; i++) {
        int err;
        uint64_t value;

        if (w->mutex != NULL && (err = netmutex_lock(w->mutex)) != 0) {
            complain("netmutex_lock: %s", netmutex_strerror(err));
            w->failed = 1;
            break;
        }

        /* The critical section: read, dawdle, write back + 1. */
        err = counter_read(counter_fd, &value);
        if (err == 0) {
            struct timespec hold = { 0, HOLD_US * 1000L };
            nanosleep(&hold, NULL);
            err = counter_write(counter_fd, value + 1);
        }
        if (err != 0) {
            complain("counter file: %s", strerror(err));
            w->failed = 1;
        }

        if (w->mutex != NULL && (err = netmutex_unlock(w->mutex)) != 0) {
            /* ENOLCK: we held it longer than its lease; EIO: the server
             * could not be told.  Either way we no longer hold it. */
            complain("netmutex_unlock: %s", netmutex_strerror(err));
            w->failed = 1;
        }
        if (w->failed)
            break;
    }
    return NULL;
}

/* The body of one worker process.  Returns its exit status. */
static int worker_process(const struct run *run)
{
    netmutex_t mutex;
    pthread_t tids[MAX_THREADS];
    struct worker w[MAX_THREADS];
    int err, status = 0, started = 0;

    counter_fd = open(counter_path, O_RDWR);
    if (counter_fd == -1) {
        complain("open %s: %s", counter_path, strerror(errno));
        return 1;
    }

    if (run->use_lock) {
        netmutex_config_t cfg;
        memset(&cfg, 0, sizeof cfg); /* 0 / NULL: environment, then defaults */
        cfg.url = run->url;
        if ((err = netmutex_configure(&cfg)) != 0) {
            complain("netmutex_configure: %s", netmutex_strerror(err));
            return 1;
        }
        /* Every thread of every process uses the same name, so they all
         * exclude each other. */
        if ((err = netmutex_init(&mutex, LOCK_NAME, NULL)) != 0) {
            complain("netmutex_init: %s", netmutex_strerror(err));
            return 1;
        }
    }

    for (int t = 0; t < run->threads; t++) {
        w[t].run = run;
        w[t].mutex = run->use_lock ? &mutex : NULL;
        w[t].failed = 0;
        if ((err = pthread_create(&tids[t], NULL, worker_thread, &w[t])) != 0) {
            complain("pthread_create: %s", strerror(err));
            status = 1;
            break;
        }
        started++;
    }
    for (int t = 0; t < started; t++) {
        pthread_join(tids[t], NULL);
        if (w[t].failed)
            status = 1;
    }

    if (run->use_lock) {
        if ((err = netmutex_destroy(&mutex)) != 0) {
            complain("netmutex_destroy: %s", netmutex_strerror(err));
            status = 1;
        }
        netmutex_shutdown();
    }
    close(counter_fd);
    return status;
}

/* Resets the counter, runs PROCS worker processes and waits for them.
 * Returns 0 when every worker succeeded; *count and *secs get the result. */
static int run_phase(const struct run *run, uint64_t *count, double *secs)
{
    int failed = 0, fd;

    fd = open(counter_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd == -1 || counter_write(fd, 0) != 0) {
        complain("%s: %s", counter_path, strerror(errno));
        if (fd != -1)
            close(fd);
        return -1;
    }

    fflush(NULL); /* nothing buffered may be written twice by the children */
    double start = now_s();
    for (int p = 0; p < run->procs; p++) {
        pid_t pid = fork();
        if (pid == -1) {
            complain("fork: %s", strerror(errno));
            failed = 1;
            break;
        }
        if (pid == 0) {
            default_fatal_signals();
#ifdef __linux__
            /* Killed outright, the demo takes its workers along: they would
             * otherwise wait forever for the server it stopped. */
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != main_pid)
                _exit(1);
#endif
            _exit(worker_process(run));
        }
        worker_pids[p] = pid;
    }
    for (int p = 0; p < run->procs; p++) {
        int status;
        pid_t pid = worker_pids[p];
        if (pid <= 0)
            continue;
        while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
            ;
        worker_pids[p] = 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        if (WIFSIGNALED(status))
            complain("worker %ld died of signal %d", (long)pid, WTERMSIG(status));
        failed = 1;
    }
    *secs = now_s() - start;

    int err = counter_read(fd, count);
    close(fd);
    unlink(counter_path);
    if (err != 0) {
        complain("%s: %s", counter_path, strerror(err));
        return -1;
    }
    return failed ? -1 : 0;
}

/* Prints URL with any password replaced by "***". */
static void print_url(const char *url)
{
    const char *scheme_end = strstr(url, "://");
    const char *at = strchr(url, '@');
    if (scheme_end != NULL && at != NULL && at > scheme_end) {
        const char *userinfo = scheme_end + 3;
        const char *colon = memchr(userinfo, ':', (size_t)(at - userinfo));
        if (colon != NULL) {
            printf("%.*s:***%s", (int)(colon - url), url, at);
            return;
        }
    }
    fputs(url, stdout);
}

/* Makes sure the configured server can be reached before any worker starts:
 * netmutex_lock would otherwise wait for it forever.  Leaves this process
 * with no connection open, so the workers inherit none. */
static int check_server(const char *url)
{
    netmutex_config_t cfg;
    netmutex_t probe;
    int err;

    memset(&cfg, 0, sizeof cfg);
    cfg.url = url;
    if ((err = netmutex_configure(&cfg)) != 0) {
        complain("netmutex_configure: %s (check NETMUTEX_URL and the other "
              "NETMUTEX_* variables)", netmutex_strerror(err));
        return -1;
    }
    if ((err = netmutex_init(&probe, LOCK_NAME, NULL)) != 0) {
        complain("netmutex_init: %s", netmutex_strerror(err));
        netmutex_shutdown();
        return -1;
    }
    err = netmutex_trylock(&probe);
    if (err == 0)
        netmutex_unlock(&probe);
    netmutex_destroy(&probe);
    netmutex_shutdown();
    if (err != 0 && err != EBUSY) { /* EBUSY: reachable, someone holds it */
        complain("cannot use the Redis server (netmutex_trylock: %s)",
                 netmutex_strerror(err));
        return -1;
    }
    return 0;
}

static void print_result(const char *label, uint64_t count, uint64_t expected,
                         const char *verdict, double secs)
{
    printf("%-38s %8" PRIu64 " of %-8" PRIu64 " %-20s %7.2f s\n",
           label, count, expected, verdict, secs);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: %s [-p procs] [-t threads] [-n iterations] [-h]\n"
            "\n"
            "Forks PROCS worker processes (default 4) of THREADS threads each\n"
            "(default 3); every thread increments a counter in a shared file\n"
            "ITERATIONS times (default 25) with a slow read-sleep-write, first\n"
            "under netmutex_lock(\"%s\"), then without any lock.\n"
            "\n"
            "Redis: $NETMUTEX_URL if set (see README.md), otherwise a private\n"
            "redis-server on a unix socket ($REDIS_SERVER, default %s).\n"
            "Exit status 0 when the count under the lock is exact.\n",
            progname, LOCK_NAME, REDIS_SERVER_PATH);
}

static int parse_count(const char *s, int max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    struct run run = { 4, 3, 25, 1, NULL };
    int opt, rc = 1;

    while ((opt = getopt(argc, argv, "p:t:n:h")) != -1) {
        switch (opt) {
        case 'p':
            if (parse_count(optarg, MAX_PROCS, &run.procs) != 0) {
                complain("-p wants 1..%d", MAX_PROCS);
                return 2;
            }
            break;
        case 't':
            if (parse_count(optarg, MAX_THREADS, &run.threads) != 0) {
                complain("-t wants 1..%d", MAX_THREADS);
                return 2;
            }
            break;
        case 'n':
            if (parse_count(optarg, MAX_ITERATIONS, &run.iterations) != 0) {
                complain("-n wants 1..%d", MAX_ITERATIONS);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }

    main_pid = getpid();
    rs_catch_fatal(fatal_signals, sizeof fatal_signals / sizeof fatal_signals[0],
                   on_fatal_signal);

    uint64_t expected = (uint64_t)run.procs * run.threads * run.iterations;
    printf("netmutex demo: %d processes x %d threads x %d increments = %" PRIu64
           " expected\n", run.procs, run.threads, run.iterations, expected);

    /* Where Redis is. */
    char url[400];
    const char *env_url = getenv("NETMUTEX_URL");
    if (env_url != NULL && *env_url != '\0') {
        printf("redis: ");
        print_url(env_url);
        printf(" (from NETMUTEX_URL)\n");
    } else {
        if (start_redis() != 0)
            goto out;
        snprintf(url, sizeof url, "unix://%s", server.sock);
        run.url = url;
        printf("redis: private redis-server on %s\n", url);
    }
    if (check_server(run.url) != 0)
        goto out;

    /* The counter file lives beside the socket, or in TMPDIR when the
     * server is someone else's. */
    if (server.dir[0] != '\0') {
        snprintf(counter_path, sizeof counter_path, "%s/counter", server.dir);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(counter_path, sizeof counter_path, "%s/netmutex-demo-counter.%ld",
                 tmp != NULL && *tmp != '\0' ? tmp : "/tmp", (long)getpid());
    }

    uint64_t locked = 0, unlocked = 0;
    double locked_s = 0, unlocked_s = 0;

    run.use_lock = 1;
    if (run_phase(&run, &locked, &locked_s) != 0) {
        complain("a worker failed in the locked run");
        goto out;
    }
    print_result("with netmutex_lock(\"" LOCK_NAME "\")", locked, expected,
                 locked == expected ? "exact" : "WRONG: updates lost!", locked_s);

    run.use_lock = 0;
    if (run_phase(&run, &unlocked, &unlocked_s) != 0) {
        complain("a worker failed in the unlocked run");
        goto out;
    }
    char lost[64];
    if (unlocked < expected)
        snprintf(lost, sizeof lost, "%" PRIu64 " updates lost", expected - unlocked);
    else
        snprintf(lost, sizeof lost, "none lost this time");
    print_result("without any lock", unlocked, expected, lost, unlocked_s);

    rc = locked == expected ? 0 : 1;

out:
    fflush(stdout);
    stop_redis();
    return rc;
}
