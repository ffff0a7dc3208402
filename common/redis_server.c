/*
 * redis_server.c -- see redis_server.h.
 *
 * fork+exec, not posix_spawn: the child must set PR_SET_PDEATHSIG before
 * exec.  Between fork and exec, and in the cleanup paths a signal handler
 * runs, only async-signal-safe calls are made; that is why the binary's
 * path is resolved and the argument vector built before fork, and why the
 * directory is emptied with getdents64 rather than opendir.
 */
#define _GNU_SOURCE
#include "redis_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <arpa/inet.h>
#include <hiredis/hiredis.h>

#ifndef REDIS_SERVER_PATH
#define REDIS_SERVER_PATH "redis-server"
#endif

/* A command line's words, the terminating NULL included: room for a
 * fixture's users (an ACL rule is a word per command) over TLS. */
#define MAX_ARGS 256
#define DEFAULT_READY_MS 30000u
#define PORT_ATTEMPTS 5

static rs_server_t *volatile registry[RS_MAX_SERVERS];
static int caught[16];
static volatile size_t ncaught;
static void (*volatile before_hook)(int);

static void sleep_ms(unsigned int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the directory ----------------------------------------------------- */

/* Empties and removes DIR.  Async-signal-safe on Linux. */
static void remove_dir(const char *dir)
{
#if defined(__linux__) && defined(SYS_getdents64)
    /* The kernel's record; glibc before 2.30 does not declare it. */
    struct rec {
        unsigned long long ino;
        long long off;
        unsigned short reclen;
        unsigned char type;
        char name[];
    };
    char buf[4096] __attribute__((aligned(8)));
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    long n;

    if (fd < 0)
        return;
    /* Unlinking while reading may skip entries: read again until a pass
     * removes nothing. */
    for (int pass = 0; pass < 8; pass++) {
        int removed = 0;
        lseek(fd, 0, SEEK_SET);
        while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
            for (long off = 0; off < n;) {
                struct rec *r = (struct rec *)(buf + off);
                if (strcmp(r->name, ".") != 0 && strcmp(r->name, "..") != 0)
                    removed += unlinkat(fd, r->name, 0) == 0;
                off += r->reclen;
            }
        if (!removed)
            break;
    }
    close(fd);
#else
    /* Elsewhere: the files this helper and the server create. */
    static const char *const names[] = { "redis.sock", "redis.log", "dump.rdb" };
    char path[RS_PATH_MAX];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
#endif
    rmdir(dir);
}

int rs_make_dir(rs_server_t *s, const char *stem)
{
    const char *tmp = getenv("TMPDIR");
    int slot = -1;

    memset(s, 0, sizeof *s);
    if (!tmp || !*tmp)
        tmp = "/tmp";
    if ((size_t)snprintf(s->dir, sizeof s->dir, "%s/%s.XXXXXX", tmp, stem) >= sizeof s->dir) {
        s->dir[0] = '\0';
        return ENAMETOOLONG;
    }
    for (int i = 0; i < RS_MAX_SERVERS && slot < 0; i++)
        if (!registry[i])
            slot = i;
    if (slot < 0) {
        s->dir[0] = '\0';
        return ENOSPC;
    }
    if (!mkdtemp(s->dir)) {
        int err = errno;
        s->dir[0] = '\0';
        return err;
    }
    snprintf(s->sock, sizeof s->sock, "%s/redis.sock", s->dir);
    snprintf(s->log, sizeof s->log, "%s/redis.log", s->dir);
    s->owner = getpid();
    registry[slot] = s;
    return 0;
}

/* ---- starting ---------------------------------------------------------- */

/* NAME, or the first executable NAME in $PATH, into OUT. */
static int find_exe(const char *name, char *out, size_t size)
{
    const char *path = getenv("PATH");

    if (strchr(name, '/'))
        return (size_t)snprintf(out, size, "%s", name) < size && access(out, X_OK) == 0
                   ? 0 : ENOENT;
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t len = strcspn(p, ":");
        if ((size_t)snprintf(out, size, "%.*s/%s", (int)len, len ? p : ".", name) < size &&
            access(out, X_OK) == 0)
            return 0;
        p += len + (p[len] == ':');
    }
    return ENOENT;
}

static const char *default_exe(void)
{
    const char *env = getenv("REDIS_SERVER");
    return env && *env ? env : REDIS_SERVER_PATH;
}

/* The TLS arguments (o->tls_dir's files into FILES, 3 paths of
 * RS_PATH_MAX) after N of ARGV: the new N. */
static size_t tls_argv(const rs_opts_t *o, const char **argv, size_t n, const char *port_arg,
                       char files[3][RS_PATH_MAX])
{
    static const char *const names[3] = { "server.crt", "server.key", "ca.crt" };
    static const char *const opts[3] = { "--tls-cert-file", "--tls-key-file",
                                         "--tls-ca-cert-file" };
    if (!o->tls_dir)
        return n;
    argv[n++] = "--port", argv[n++] = "0", argv[n++] = "--tls-port", argv[n++] = port_arg;
    for (int i = 0; i < 3; i++) {
        snprintf(files[i], RS_PATH_MAX, "%s/%s", o->tls_dir, names[i]);
        argv[n++] = opts[i], argv[n++] = files[i];
    }
    argv[n++] = "--tls-auth-clients", argv[n++] = "yes";
    argv[n++] = "--tls-replication", argv[n++] = "yes";
    argv[n++] = "--tls-cluster", argv[n++] = "yes";
    return n;
}

/* The whole command line into ARGV (PORT_ARG and FILES are its storage):
 * 0, or E2BIG when it does not fit (never a server started with words
 * left out: a user's rule cut short once refused commands silently). */
static int build_argv(const rs_server_t *s, const rs_opts_t *o, const char **argv,
                      char *port_arg, size_t port_size, char files[3][RS_PATH_MAX])
{
    size_t n = 0, dropped = 0;

    snprintf(port_arg, port_size, "%d", s->port);
#define ARG(x) (n < MAX_ARGS - 17 ? (void)(argv[n++] = (x)) : (void)dropped++)
    ARG(s->exe);
    for (const char *const *a = o->first; a && *a; a++)
        ARG(*a);
    ARG("--port"), ARG(port_arg), ARG("--bind"), ARG("127.0.0.1");
    ARG("--unixsocket"), ARG(s->sock), ARG("--unixsocketperm"), ARG("700");
    /* No persistence: a restart must come back empty. */
    ARG("--save"), ARG(""), ARG("--appendonly"), ARG("no");
    ARG("--dir"), ARG(s->dir), ARG("--daemonize"), ARG("no");
    ARG("--logfile"), ARG(s->log);
    if (o->pass)
        ARG("--requirepass"), ARG(o->pass);
    n = tls_argv(o, argv, n, port_arg, files);
    for (const char *const *a = o->extra; a && *a; a++)
        ARG(*a);
#undef ARG
    argv[n] = NULL;
    return dropped ? E2BIG : 0;
}

/* In the child: nothing but async-signal-safe calls until exec. */
static void exec_child(const char *const *argv, pid_t parent)
{
    int devnull;

    for (size_t i = 0; i < ncaught; i++)
        signal(caught[i], SIG_DFL);
#ifdef __linux__
    /* Should the program die in any way, the server goes too (SIGKILL: a
     * stopped server would sit on SIGTERM). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent)
        _exit(127);
    devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
    }
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

/* Waits until the server answers, exits or overruns BOUND_MS. */
static int wait_ready(rs_server_t *s, const char *pass, unsigned int bound_ms)
{
    long long deadline = now_ms() + bound_ms;

    for (;;) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return ECHILD;
        }
        if (rs_answers(s->sock, pass, 2000))
            return 0;
        if (now_ms() > deadline)
            return ETIMEDOUT;
        sleep_ms(10);
    }
}

static int start_once(rs_server_t *s, const rs_opts_t *o)
{
    const char *argv[MAX_ARGS];
    char port_arg[16], files[3][RS_PATH_MAX];
    pid_t parent = getpid(), pid;

    int err = build_argv(s, o, argv, port_arg, sizeof port_arg, files);
    if (err)
        return err;
    unlink(s->log);
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0)
        exec_child(argv, parent);
    s->pid = pid;
    return wait_ready(s, o->pass, o->ready_ms ? o->ready_ms : DEFAULT_READY_MS);
}

int rs_start(rs_server_t *s, const rs_opts_t *opts)
{
    static const rs_opts_t none = { 0 };
    const rs_opts_t *o = opts ? opts : &none;
    int err;

    if (s->pid > 0)
        return EBUSY;
    if (find_exe(o->exe ? o->exe : default_exe(), s->exe, sizeof s->exe) != 0)
        return ENOENT;
    for (int attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
        if (o->port == RS_PICK_PORT && (s->port = rs_free_port()) < 0)
            return errno;
        if (o->port != RS_PICK_PORT)
            s->port = o->port;
        err = start_once(s, o);
        /* Only a freshly picked port can have been taken and be retried. */
        if (err != ECHILD || o->port != RS_PICK_PORT)
            break;
    }
    if (err == ETIMEDOUT)
        rs_stop(s, 0);
    return err;
}

/* ---- stopping ------------------------------------------------------------ */

void rs_stop(rs_server_t *s, unsigned int bound_ms)
{
    long long deadline = now_ms() + bound_ms;
    pid_t pid = s->pid;

    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    kill(pid, SIGCONT); /* a stopped process never handles SIGTERM */
    while (waitpid(pid, NULL, WNOHANG) == 0) {
        if (now_ms() > deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            break;
        }
        sleep_ms(5);
    }
    s->pid = 0;
    /* Redis removes its socket on a clean shutdown; make sure of it. */
    unlink(s->sock);
}

static void unregister(const rs_server_t *s)
{
    for (int i = 0; i < RS_MAX_SERVERS; i++)
        if (registry[i] == s)
            registry[i] = NULL;
}

void rs_destroy(rs_server_t *s)
{
    if (s->owner != getpid())
        return;
    rs_stop(s, DEFAULT_READY_MS);
    unregister(s);
    if (s->dir[0])
        remove_dir(s->dir);
    s->dir[0] = '\0';
}

void rs_cleanup_all(void)
{
    pid_t self = getpid();

    for (int i = 0; i < RS_MAX_SERVERS; i++) {
        rs_server_t *s = registry[i];
        if (!s || s->owner != self)
            continue;
        if (s->pid > 0) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            s->pid = 0;
        }
        if (s->dir[0])
            remove_dir(s->dir);
        s->dir[0] = '\0';
        registry[i] = NULL;
    }
}

static void on_fatal(int sig)
{
    void (*before)(int) = before_hook;

    if (before)
        before(sig);
    rs_cleanup_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

void rs_catch_fatal(const int *sigs, size_t n, void (*before)(int sig))
{
    static const int usual[] = { SIGABRT, SIGTRAP, SIGTERM, SIGINT, SIGHUP };
    struct sigaction sa;

    if (!sigs) {
        sigs = usual;
        n = sizeof usual / sizeof usual[0];
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sigemptyset(&sa.sa_mask);
    before_hook = before;
    for (size_t i = 0; i < n && ncaught < sizeof caught / sizeof caught[0]; i++) {
        caught[ncaught++] = sigs[i];
        sigaction(sigs[i], &sa, NULL);
    }
}

/* ---- looking at it -------------------------------------------------------- */

static int reply_is(redisReply *r, int type, const char *str)
{
    return r && r->type == type && strcmp(r->str, str) == 0;
}

int rs_answers(const char *sock, const char *pass, unsigned int timeout_ms)
{
    struct timeval tv = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000 };
    struct timeval connect_tv = { 0, 500000 };
    redisContext *c = redisConnectUnixWithTimeout(sock, connect_tv);
    int ok = 0;

    if (c && !c->err) {
        redisReply *r = NULL;
        redisSetTimeout(c, tv);
        if (pass) {
            r = redisCommand(c, "AUTH %s", pass);
            ok = reply_is(r, REDIS_REPLY_STATUS, "OK");
            freeReplyObject(r);
        } else {
            ok = 1;
        }
        if (ok) {
            r = redisCommand(c, "PING");
            ok = reply_is(r, REDIS_REPLY_STATUS, "PONG");
            freeReplyObject(r);
        }
    }
    if (c)
        redisFree(c);
    return ok;
}

int rs_free_port(void)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        struct sockaddr_in sa = { .sin_family = AF_INET };
        socklen_t len = sizeof sa;
        int port = -1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
            return -1;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
            getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
            port = ntohs(sa.sin_port);
        close(fd);
        if (port < 0)
            return -1;
        if (port < 65536 - 10000)
            return port;
    }
    errno = EADDRNOTAVAIL;
    return -1;
}

void rs_print_log(const rs_server_t *s)
{
    FILE *f = fopen(s->log, "r");
    char line[512];

    if (!f)
        return;
    while (fgets(line, sizeof line, f))
        fprintf(stderr, "  %s", line);
    fclose(f);
}
