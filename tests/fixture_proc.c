/*
 * fixture_proc.c -- see fixture.h: forked workers that die with the test,
 * waited for with a bound; a netmutex driven in another process (a
 * "remote": this same program re-executed with REMOTE_FLAG) over pipes.
 */
#include "ac_config.h"

#include "fixture.h"
#include "fixture_int.h"
#include "keytag.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

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

void nm_print_stacks(pid_t pid, const char *who)
{
    char *gdb = g_find_program_in_path("gdb"), *pid_s = g_strdup_printf("%d", (int)pid);
    char *out = NULL;
    char *argv[] = { gdb, "-p", pid_s, "-batch", "-ex", "thread apply all bt", NULL };

    if (gdb && g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out,
                            NULL, NULL, NULL))
        g_printerr("fixture: the threads of %s %d:\n%s", who, (int)pid, out);
    g_free(out);
    g_free(pid_s);
    g_free(gdb);
}

void nm_child_wait_ok(pid_t pid, unsigned int timeout_ms)
{
    gint64 deadline = nmt_now_ms() + timeout_ms;
    int status = 0;
    pid_t got;

    while ((got = waitpid(pid, &status, WNOHANG)) == 0) {
        if (nmt_now_ms() > deadline) {
            nm_print_stacks(pid, "child");
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            g_test_message("child %d did not exit within %u ms", (int)pid, timeout_ms);
            g_test_fail();
            return;
        }
        nmt_sleep_ms(5);
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
    gint64 deadline = nmt_now_ms() + timeout_ms;
    size_t got = 0;

    while (got < len) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        gint64 left = deadline - nmt_now_ms();
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
        if (n <= 0) {
            /* The other side is gone: nothing sensible left, but say so
             * (a test process that ends here ends with no other word). */
            fprintf(stderr, "fixture: pid %ld: the other side of a remote's pipe is gone: %s\n",
                    (long)getpid(), n < 0 ? strerror(errno) : "wrote nothing");
            _exit(3);
        }
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

/* The remote's ops 'd' and 'g': a waiter thread that dials first (a
 * trylock), then waits for 'g' before it locks, so a test can hold its
 * first queueing request up (pause the server) on a connection that is
 * already open. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int dialed, go, rc;
} staged = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };

static void *remote_staged_lock(void *m)
{
    int rc = netmutex_trylock(m);
    pthread_mutex_lock(&staged.lock);
    staged.rc = rc;
    staged.dialed = 1;
    pthread_cond_broadcast(&staged.cv);
    while (!staged.go)
        pthread_cond_wait(&staged.cv, &staged.lock);
    pthread_mutex_unlock(&staged.lock);
    if (rc == 0)
        netmutex_unlock(m);
    netmutex_lock(m);
    return NULL;
}

/* 'd': the trylock's result. */
static int remote_stage(netmutex_t *m)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, remote_staged_lock, m);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&staged.lock);
    while (!staged.dialed)
        pthread_cond_wait(&staged.cv, &staged.lock);
    rc = staged.rc;
    pthread_mutex_unlock(&staged.lock);
    return rc;
}

static int remote_go(void)
{
    pthread_mutex_lock(&staged.lock);
    staged.go = 1;
    pthread_cond_broadcast(&staged.cv);
    pthread_mutex_unlock(&staged.lock);
    return 0;
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
    uint64_t fence;
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
        case 'b': rc = netmutex_break(name); break;
        case 'f':
            /* A fence is a 64-bit value: it follows the result. */
            fence = 0;
            rc = netmutex_fence(&m, &fence);
            write_full(out, &rc, sizeof rc);
            write_full(out, &fence, sizeof fence);
            continue;
        case 'w': {
            pthread_t t;
            rc = pthread_create(&t, NULL, remote_background_lock, &m);
            break;
        }
        case 'd': rc = remote_stage(&m); break;
        case 'g': rc = remote_go(); break;
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
void nm_fixture_remote_mode(int argc, char **argv)
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

int nm_remote_fence(NmRemote *rem, uint64_t *fence)
{
    int rc;

    nm_remote_send(rem, 'f');
    rc = nm_remote_result(rem);
    if (!read_full(rem->from_child, fence, sizeof *fence, nm_ms(NM_PROMPT_MS)))
        g_error("remote process did not send its fence in time");
    return rc;
}

/* Sends the child its last command (CMD: it leaves its loop), and reaps it. */
static void remote_finish(NmRemote *rem, char cmd)
{
    nm_remote_send(rem, cmd);
    close(rem->to_child);
    close(rem->from_child);
    nm_child_wait_ok(rem->pid, nm_ms(NM_PROMPT_MS));
    g_free(rem);
}

void nm_remote_stop(NmRemote *rem)
{
    remote_finish(rem, 'q');
}

pid_t nm_remote_pid(NmRemote *rem)
{
    return rem->pid;
}

void nm_remote_exit(NmRemote *rem)
{
    remote_finish(rem, 'x');
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

int nm_kill_when_queued(void *p)
{
    NmKiller *k = p;
    bool queued = nm_wait_queue_len(k->redis, k->name, 1, nm_ms(10000));

    k->killed_at = nmt_now_ms();
    nm_remote_kill(k->victim);
    return queued ? 0 : 1;
}
