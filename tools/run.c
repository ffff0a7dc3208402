/*
 * run.c -- `netmutex NAME COMMAND`: take the lock, run COMMAND as a child
 * while the library's watchdog renews the lease, release it when the child
 * is gone, and exit as the child did.
 *
 * Everything asynchronous -- our signals, the child's exit, the lost-lease
 * callback, which runs on the library's background thread -- only writes
 * one byte to a self-pipe (the byte is the signal number, 0 for a lost
 * lease).  The main thread reads the pipe and does the real work: kill(2),
 * waitpid(2), messages.  So nothing but write(2) runs where only
 * async-signal-safe calls are allowed.
 *
 * SIGINT, SIGTERM and SIGHUP are blocked before the lock is asked for and
 * taken by a thread of ours in sigwaitinfo(2), never by a handler.  What it
 * does with one depends on how far the main thread has got (struct sigs):
 *  - still waiting for the lock: exit(128 + signal).  A real exit(), which
 *    a handler could not call, because the library's atexit handler takes
 *    our entry out of the server's queue, so that a release does not hand
 *    the lock to a process that is gone;
 *  - holding it, the command not started yet: note the signal, and the
 *    main thread releases the lock and exits instead of starting it;
 *  - the command running: wake the main thread, which passes it on.
 * So no such signal can kill us while we hold the lock.
 */
#include "ac_config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <netmutex.h>

#include "cli.h"

extern char **environ;

#define LOST_BYTE 0

static int wake_pipe[2] = { -1, -1 };

/* The signals we pass on to the child. */
static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP };

enum phase { WAITING, HELD, RUNNING };

/* What the signal thread needs to know of the main thread's progress. */
static struct {
    pthread_mutex_t lock;
    enum phase phase;           /* guarded by lock */
    int pending;                /* HELD: the first signal, 0 if none; lock */
    const struct cli_opts *o;
    sigset_t set;               /* forwarded, less what we found ignored */
    sigset_t orig;              /* our signal mask before, for the child */
} sigs = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void wake(unsigned char byte)
{
    int saved = errno;
    /* A full pipe already holds a wake-up, and the main thread drains it. */
    (void)!write(wake_pipe[1], &byte, 1);
    errno = saved;
}

static void on_lost(const char *name, void *arg)
{
    wake(LOST_BYTE);
}

static void on_sigchld(int sig)
{
    wake((unsigned char)sig);
}

static int catch_sigchld(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigchld;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGCHLD, &sa, NULL) != 0 ? errno : 0;
}

/* Gives up the wait (see the top of this file).  Called with sigs.lock
 * held, which it never lets go of: the main thread takes it (end_wait) as
 * soon as the library returns, so it cannot run on into the command, or
 * into an exit of its own, while we exit.  A grant the library has got
 * but not yet returned when the signal comes is lost with us: that lock
 * frees itself when its lease runs out, as if we had been killed. */
static void exit_waiting(int sig)
{
    if (sigs.o->verbose)
        cli_say("%s while waiting for %s: giving up", strsignal(sig), sigs.o->shown_name);
    exit(128 + sig);
}

static void on_forwarded(int sig, const siginfo_t *info)
{
    pthread_mutex_lock(&sigs.lock);
    switch (sigs.phase) {
    case WAITING:
        exit_waiting(sig);
        break;
    case HELD:
        if (sigs.pending == 0)
            sigs.pending = sig;
        break;
    case RUNNING:
        /* A terminal's ^C reaches the whole foreground process group, the
         * child included (si_code SI_KERNEL); passing it on would deliver
         * it twice.  Only what another process sent (si_code <= 0) is for
         * us to forward. */
        if (info->si_code <= 0)
            wake((unsigned char)sig);
        break;
    }
    pthread_mutex_unlock(&sigs.lock);
}

static void *signal_thread(void *arg)
{
    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(&sigs.set, &info);
        if (sig > 0)
            on_forwarded(sig, &info);
    }
    return NULL;
}

/* Blocks the forwarded signals that were not ignored when we started and
 * starts the thread that waits for them.  Those ignored stay ignored, for
 * the command too: a command run under nohup(1) or `&` must keep ignoring
 * what its caller ignored. */
static int take_signals(const struct cli_opts *o)
{
    struct sigaction old;
    pthread_t t;
    int err;

    sigs.o = o;
    sigemptyset(&sigs.set);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) {
        if (sigaction(forwarded[i], NULL, &old) != 0)
            return errno;
        if (old.sa_handler != SIG_IGN)
            sigaddset(&sigs.set, forwarded[i]);
    }
    if ((err = pthread_sigmask(SIG_BLOCK, &sigs.set, &sigs.orig)) != 0)
        return err;
    if ((err = pthread_create(&t, NULL, signal_thread, NULL)) != 0)
        return err;
    pthread_detach(t);
    return 0;
}

/* The main thread is done waiting: from now on a signal no longer ends the
 * process. */
static void end_wait(void)
{
    pthread_mutex_lock(&sigs.lock);
    sigs.phase = HELD;
    pthread_mutex_unlock(&sigs.lock);
}

/* The signal that came since end_wait, or 0; one that comes later waits
 * for start_forwarding. */
static int pending_signal(void)
{
    pthread_mutex_lock(&sigs.lock);
    int sig = sigs.pending;
    sigs.pending = 0;
    pthread_mutex_unlock(&sigs.lock);
    return sig;
}

/* The child exists: signals are passed on from now, and one that came
 * while it was being started too, however it came. */
static void start_forwarding(void)
{
    pthread_mutex_lock(&sigs.lock);
    sigs.phase = RUNNING;
    if (sigs.pending != 0)
        wake((unsigned char)sigs.pending);
    pthread_mutex_unlock(&sigs.lock);
}

static int make_pipe(void)
{
    if (pipe(wake_pipe) != 0)
        return errno;
    for (int i = 0; i < 2; i++) {
        /* CLOEXEC: the child must not hold our end; NONBLOCK: a writer in a
         * signal handler must never block. */
        if (fcntl(wake_pipe[i], F_SETFD, FD_CLOEXEC) != 0 ||
            fcntl(wake_pipe[i], F_SETFL, O_NONBLOCK) != 0)
            return errno;
    }
    return 0;
}

/* environ with NETMUTEX_FENCE=TOKEN in place of any inherited one, so the
 * command can hand the token to the resource it protects. */
static char **child_environ(uint64_t fence, char *var, size_t len)
{
    static const char key[] = "NETMUTEX_FENCE=";
    size_t n = 0, j = 0;

    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (env == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], key, sizeof key - 1) != 0)
            env[j++] = environ[i];
    }
    snprintf(var, len, "%s%" PRIu64, key, fence);
    env[j] = var;
    return env;
}

/* The child gets the signal mask we started with and SIGCHLD at its
 * default, not what we changed for ourselves. */
static int spawn(const struct cli_opts *o, char **env, pid_t *pid)
{
    char *sh_argv[] = { "sh", "-c", (char *)o->shell_cmd, NULL };
    posix_spawnattr_t sa;
    sigset_t dfl;
    int err;

    if ((err = posix_spawnattr_init(&sa)) != 0)
        return err;
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGCHLD);
    err = posix_spawnattr_setsigdefault(&sa, &dfl);
    if (err == 0)
        err = posix_spawnattr_setsigmask(&sa, &sigs.orig);
    if (err == 0)
        err = posix_spawnattr_setflags(&sa, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    if (err == 0 && o->shell_cmd != NULL)
        err = posix_spawn(pid, "/bin/sh", NULL, &sa, sh_argv, env);
    else if (err == 0)
        err = posix_spawnp(pid, o->argv[0], NULL, &sa, o->argv, env);
    posix_spawnattr_destroy(&sa);
    return err;
}

/* Starts the command; 0 or the exit code a shell would give. */
static int start_child(const struct cli_opts *o, uint64_t fence, pid_t *pid)
{
    char var[48];
    char **env = child_environ(fence, var, sizeof var);
    int err = env != NULL ? spawn(o, env, pid) : ENOMEM;

    free(env);
    if (err == 0)
        return 0;
    cli_say("cannot run %s: %s", o->shell_cmd ? "/bin/sh" : o->argv[0], strerror(err));
    if (err == ENOMEM)
        return CLI_EX_OSERR;
    return err == ENOENT ? CLI_EX_NOTFOUND : CLI_EX_NOEXEC;
}

/* What a shell would say of a child that ended with STATUS. */
static int shell_status(int status)
{
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* One byte from the self-pipe. */
static void handle_wake(unsigned char byte, const struct cli_opts *o, pid_t pid, int *lost)
{
    if (byte == SIGCHLD)
        return;
    if (byte != LOST_BYTE) {
        kill(pid, byte);
        return;
    }
    if (*lost)
        return;
    *lost = 1;
    cli_say("lease of %s lost while the command ran%s", o->shown_name,
            o->lost_sig ? ": signalling it" : "");
    if (o->lost_sig)
        kill(pid, o->lost_sig);
}

/* Waits for the child, acting on every wake-up meanwhile, and gives its
 * wait status.  Should poll(2) ever fail, a plain wait still reaps it, so
 * the lock is never released before the command is over. */
static int supervise(const struct cli_opts *o, pid_t pid, int *lost)
{
    int status = 0;

    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return status;
        struct pollfd p = { .fd = wake_pipe[0], .events = POLLIN };
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            break;
        unsigned char buf[64];
        ssize_t n = read(wake_pipe[0], buf, sizeof buf);
        for (ssize_t i = 0; i < n; i++)
            handle_wake(buf[i], o, pid, lost);
    }
    cli_say("poll: %s", strerror(errno));
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        continue;
    return status;
}

/* 0 or an errno: EBUSY and ETIMEDOUT are the conflicts.  A trylock comes
 * first so an unreachable server is reported (EAGAIN) instead of waited
 * for, which is what netmutex_lock would do. */
static int acquire(const struct cli_opts *o, netmutex_t *m, const struct timespec *deadline)
{
    int err = netmutex_trylock(m);

    if (err != EBUSY || o->nonblock || (o->has_timeout && o->timeout_s <= 0))
        return err;
    if (o->verbose)
        cli_say("waiting for %s", o->shown_name);
    if (o->has_timeout)
        return netmutex_clocklock(m, CLOCK_MONOTONIC, deadline);
    return netmutex_lock(m);
}

static void release(const struct cli_opts *o, netmutex_t *m, int *lost)
{
    int err = netmutex_unlock(m);

    if (err == ENOLCK && !*lost)
        cli_say("lease of %s was lost while the command ran", o->shown_name);
    if (err == ENOLCK)
        *lost = 1;
    else if (err == EIO)
        cli_say("could not tell %s that %s is free; it frees itself "
                "when its lease runs out", o->shown_url, o->shown_name);
    else if (err != 0)
        cli_say("unlock %s at %s: %s", o->shown_name, o->shown_url, netmutex_strerror(err));
    else if (o->verbose)
        cli_say("released %s", o->shown_name);
}

static int init_mutex(const struct cli_opts *o, netmutex_t *m)
{
    netmutex_attr_t a;
    int err = netmutex_attr_init(&a);

    if (err == 0)
        err = netmutex_attr_setlease(&a, o->lease_ms);
    if (err == 0)
        err = netmutex_attr_setlostfn(&a, on_lost, NULL);
    if (err == 0)
        err = netmutex_init(m, o->name, &a);
    netmutex_attr_destroy(&a);
    return err;
}

/* Runs the command while M is held; the exit code before the release.
 * A signal that came once the lock was ours, before the command started,
 * means the command is not wanted any more: it is not started, and we exit
 * as if the signal had found us still waiting. */
static int run_locked(const struct cli_opts *o, netmutex_t *m, int *lost)
{
    uint64_t fence = 0;
    pid_t pid;
    int err, rc, sig;

    netmutex_fence(m, &fence);
    if (o->verbose)
        cli_say("acquired %s (fence %" PRIu64 ")", o->shown_name, fence);
    if ((err = catch_sigchld()) != 0) {
        cli_say("sigaction: %s", strerror(err));
        return CLI_EX_OSERR;
    }
    if ((sig = pending_signal()) != 0) {
        if (o->verbose)
            cli_say("%s before the command started: not running it", strsignal(sig));
        return 128 + sig;
    }
    if ((rc = start_child(o, fence, &pid)) != 0)
        return rc;
    start_forwarding();
    return shell_status(supervise(o, pid, lost));
}

static void deadline_after(double secs, struct timespec *ts)
{
    double whole = (double)(time_t)secs;

    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)whole;
    ts->tv_nsec += (long)((secs - whole) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

int cli_run(const struct cli_opts *o)
{
    struct timespec deadline;
    netmutex_t m;
    int err, rc, lost = 0;

    deadline_after(o->has_timeout ? o->timeout_s : 0, &deadline);
    if ((err = make_pipe()) != 0) {
        cli_say("pipe: %s", strerror(err));
        return CLI_EX_OSERR;
    }
    if ((err = init_mutex(o, &m)) != 0) {
        cli_say("%s: %s", o->shown_name, netmutex_strerror(err));
        return cli_exit_code(err);
    }
    if ((err = take_signals(o)) != 0) {
        cli_say("cannot set up signal handling: %s", strerror(err));
        netmutex_destroy(&m);
        return CLI_EX_OSERR;
    }
    err = acquire(o, &m, &deadline);
    end_wait();
    if (err == EBUSY || err == ETIMEDOUT) {
        if (o->verbose)
            cli_say("%s is held elsewhere: giving up", o->shown_name);
        rc = o->conflict_code;
    } else if (err != 0) {
        cli_say("cannot lock %s at %s: %s", o->shown_name, o->shown_url,
                netmutex_strerror(err));
        rc = cli_exit_code(err);
    } else {
        rc = run_locked(o, &m, &lost);
        release(o, &m, &lost);
    }
    netmutex_destroy(&m);
    return lost ? CLI_EX_LOST : rc;
}
