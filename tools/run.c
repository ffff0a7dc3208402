/*
 * run.c -- `netmutex NAME COMMAND`: take the lock, run COMMAND as a child
 * while the library's watchdog renews the lease, release it when the child
 * is gone, and exit as the child did.
 *
 * The child is forked first, before the library is even configured, and
 * waits on a pipe: `netmutex status` names the holder by the command's pid
 * (netmutex_config_t.holder), so that pid must exist before the lock is
 * asked for.  Once the lock is ours the child is sent the fence and execs
 * the command; if the lock is not taken, the pipe is closed and the child
 * exits without running anything.  Forking before the library starts a
 * thread or opens a socket also means the child inherits neither, and that
 * it starts with our signal mask and dispositions untouched.
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
 *
 * What is held (struct lock): with -s, a read share of the read-write lock
 * NAME, which any number of `netmutex -s NAME` hold at once; otherwise the
 * mutex NAME, as always, and then the write lock of the read-write lock
 * NAME, which waits for the readers and keeps new ones out.  So an
 * exclusive run excludes every other run of NAME, shared or not, as
 * flock(1)'s -x and -s on one file do, and still excludes programs that
 * lock the mutex NAME through the library.  Quorum mode has no read-write
 * locks: -s fails there (ENOTSUP), and an exclusive run holds the mutex
 * alone, since no reader can exist to keep out.
 *
 * With -F (nofork.c) all of this runs in a keeper process, and the
 * command's process is the one that started the keeper, not our child
 * (struct cli_command's in_place): it is told the fence, or the exit code
 * to leave with when the command is not to run, and it execs the command
 * itself; we watch it end through its pidfd instead of waitpid(2).
 */
#include "ac_config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <netmutex.h>

#include "cli.h"

#define LOST_BYTE 0

/* What the command runs under: the mutex NAME (exclusive), the
 * read-write lock NAME (has_rw: its write lock if exclusive, a read share
 * if shared), or with --permits a permit of the semaphore NAME. */
struct lock {
    netmutex_t m;
    netmutex_rwlock_t rw;
    netmutex_sem_t s;      /* --permits: a permit of NAME's semaphore alone */
    int has_m, has_rw, has_s;
};

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
    int tell;                   /* -F: the pipe to the command's process */
} sigs = { .lock = PTHREAD_MUTEX_INITIALIZER, .tell = -1 };

static void wake(unsigned char byte)
{
    int saved = errno;
    /* A full pipe already holds a wake-up, and the main thread drains it. */
    (void)!write(wake_pipe[1], &byte, 1);
    errno = saved;
}

void cli_run_on_lost(const char *name, void *arg)
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
    if (sigs.tell >= 0) {
        /* -F: the command's process exits as we would have. */
        struct cli_go go = { .rc = 128 + sig };
        (void)!write(sigs.tell, &go, sizeof go);
    }
    exit(128 + sig);
}

/* -F: the command's process ended before the command started (nofork.c's
 * watcher saw it).  Still waiting, we leave the queue and exit as a signal
 * would make us; later, the main thread finds it out itself. */
void cli_run_command_gone(void)
{
    pthread_mutex_lock(&sigs.lock);
    if (sigs.phase == WAITING) {
        if (sigs.o->verbose)
            cli_say("the command's process ended while waiting for %s: giving up",
                    sigs.o->shown_name);
        exit(CLI_EX_OSERR);
    }
    pthread_mutex_unlock(&sigs.lock);
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
    if ((err = pthread_sigmask(SIG_BLOCK, &sigs.set, NULL)) != 0)
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

/* ---- the command's process ------------------------------------------- */

/* Exactly LEN bytes from FD; -1 if it closes first. */
int cli_read_full(int fd, void *buf, size_t len)
{
    size_t n = 0;

    while (n < len) {
        ssize_t r = read(fd, (char *)buf + n, len - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        n += (size_t)r;
    }
    return 0;
}

/* Becomes the command, with NETMUTEX_FENCE in its environment (replacing
 * any inherited one) to hand to the resource it protects. */
void cli_exec_command(const struct cli_opts *o, uint64_t fence)
{
    char value[32];

    snprintf(value, sizeof value, "%" PRIu64, fence);
    if (setenv("NETMUTEX_FENCE", value, 1) != 0) {
        cli_say("cannot set NETMUTEX_FENCE: %s", strerror(errno));
        _exit(CLI_EX_OSERR);
    }
    if (o->shell_cmd != NULL)
        execl("/bin/sh", "sh", "-c", o->shell_cmd, (char *)NULL);
    else
        execvp(o->argv[0], o->argv);
    int err = errno;
    cli_say("cannot run %s: %s", o->shell_cmd != NULL ? "/bin/sh" : o->argv[0], strerror(err));
    _exit(err == ENOENT ? CLI_EX_NOTFOUND : CLI_EX_NOEXEC);
}

/* The child: the go-ahead arriving means the lock is ours, and the child
 * becomes the command.  The pipe closing first means it is not to run;
 * nobody reads the exit status then. */
static void __attribute__((noreturn)) command_main(const struct cli_opts *o, int go)
{
    struct cli_go msg;

    if (cli_read_full(go, &msg, sizeof msg) != 0 || msg.rc != 0)
        _exit(0);
    cli_exec_command(o, msg.fence);
}

/* Forks the command's process, which waits for command_start.  The pipe is
 * CLOEXEC: the command itself never sees it. */
static int command_fork(const struct cli_opts *o, struct cli_command *c)
{
    int fds[2];

    c->pidfd = -1;
    c->in_place = 0;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        cli_say("pipe: %s", strerror(errno));
        return CLI_EX_OSERR;
    }
    fflush(NULL);               /* nothing buffered may be written twice */
    c->pid = fork();
    if (c->pid == 0) {
        close(fds[1]);
        command_main(o, fds[0]);
    }
    close(fds[0]);
    c->go = fds[1];
    if (c->pid > 0)
        return 0;
    cli_say("fork: %s", strerror(errno));
    close(c->go);
    return CLI_EX_OSERR;
}

/* Lets the command run; 0, or an errno if its process did not get the
 * fence (EPIPE: it had died). */
static int command_start(struct cli_command *c, uint64_t fence)
{
    struct cli_go msg = { .fence = fence, .rc = 0 };
    ssize_t n = write(c->go, &msg, sizeof msg);
    int err = n == (ssize_t)sizeof msg ? 0 : n < 0 ? errno : EIO;

    close(c->go);
    c->go = -1;
    return err;
}

/* The command is not to run, or did not get to: its process exits as its
 * pipe closes, and is reaped; with -F (not our child) it exits with RC. */
static void command_dismiss(struct cli_command *c, int rc)
{
    if (c->go >= 0 && c->in_place) {
        struct cli_go msg = { .rc = rc };
        (void)!write(c->go, &msg, sizeof msg);
    }
    if (c->go >= 0) {
        close(c->go);
        c->go = -1;
    }
    if (c->in_place)
        return;
    while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
        continue;
}

/* ---- running it ----------------------------------------------------------- */

/* What a shell would say of a child that ended with STATUS. */
static int shell_status(int status)
{
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* One byte from the self-pipe. */
static void handle_wake(unsigned char byte, const struct cli_opts *o,
                        const struct cli_command *c, int *lost)
{
    if (byte == SIGCHLD)
        return;
    if (byte != LOST_BYTE) {
        cli_command_signal(c, byte);
        return;
    }
    if (*lost)
        return;
    *lost = 1;
    cli_say("lease of %s lost while the command ran%s", o->shown_name,
            o->lost_sig ? ": signalling it" : "");
    if (o->lost_sig)
        cli_command_signal(c, o->lost_sig);
}

/* -F: waits for the command's process to end (it is not our child: its
 * pidfd, or a look every 100 ms without one), acting on every wake-up
 * meanwhile.  Its exit status is its parent's to read, not ours: 0. */
static int supervise_in_place(const struct cli_opts *o, const struct cli_command *c, int *lost)
{
    while (!cli_command_gone(c)) {
        struct pollfd p[2] = { { .fd = wake_pipe[0], .events = POLLIN },
                               { .fd = c->pidfd, .events = POLLIN } };
        if (poll(p, c->pidfd >= 0 ? 2 : 1, c->pidfd >= 0 ? -1 : 100) < 0 && errno != EINTR) {
            cli_say("poll: %s", strerror(errno));
            poll(NULL, 0, 100);
            continue;
        }
        unsigned char buf[64];
        ssize_t n = read(wake_pipe[0], buf, sizeof buf);
        for (ssize_t i = 0; i < n; i++)
            handle_wake(buf[i], o, c, lost);
    }
    return 0;
}

/* Waits for the child, acting on every wake-up meanwhile, and gives its
 * wait status.  Should poll(2) ever fail, a plain wait still reaps it, so
 * the lock is never released before the command is over. */
static int supervise(const struct cli_opts *o, const struct cli_command *c, int *lost)
{
    int status = 0;
    pid_t pid = c->pid;

    if (c->in_place)
        return supervise_in_place(o, c, lost);
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
            handle_wake(buf[i], o, c, lost);
    }
    cli_say("poll: %s", strerror(errno));
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        continue;
    return status;
}

/* The lock of one side of RW, as acquire() wants it. */
static int rw_take(const struct cli_opts *o, netmutex_rwlock_t *rw, int tries,
                   const struct timespec *deadline)
{
    if (tries)
        return o->shared ? netmutex_rwlock_tryrdlock(rw) : netmutex_rwlock_trywrlock(rw);
    if (o->has_timeout)
        return o->shared ? netmutex_rwlock_clockrdlock(rw, CLOCK_MONOTONIC, deadline)
                         : netmutex_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, deadline);
    return o->shared ? netmutex_rwlock_rdlock(rw) : netmutex_rwlock_wrlock(rw);
}

static int give_up(const struct cli_opts *o)
{
    return o->nonblock || (o->has_timeout && o->timeout_s <= 0);
}

/* A permit of the semaphore: 0, EBUSY (every permit held), or an error.
 * Its trywait says EAGAIN both when every permit is held and when the
 * server is unreachable: asking for the free permits tells which. */
static int sem_take(const struct cli_opts *o, netmutex_sem_t *s, int tries,
                    const struct timespec *deadline)
{
    int value;

    if (!tries)
        return o->has_timeout ? netmutex_sem_clockwait(s, CLOCK_MONOTONIC, deadline)
                              : netmutex_sem_wait(s);
    int err = netmutex_sem_trywait(s);
    if (err == EAGAIN && netmutex_sem_getvalue(s, &value) != EAGAIN)
        err = EBUSY;
    return err;
}

/* With --permits: a permit, waited for unless told not to. */
static int acquire_sem(const struct cli_opts *o, struct lock *l, const struct timespec *deadline)
{
    int err = sem_take(o, &l->s, 1, deadline);

    if (err == EBUSY && !give_up(o)) {
        if (o->verbose)
            cli_say("waiting for %s", o->shown_name);
        err = sem_take(o, &l->s, 0, deadline);
    }
    return err;
}

/* The read-write lock's side: 0 or an errno.  An exclusive run in quorum
 * mode (ENOTSUP) goes without it: no reader can hold it there. */
static int acquire_rw(const struct cli_opts *o, struct lock *l, const struct timespec *deadline)
{
    int err = rw_take(o, &l->rw, 1, deadline);

    if (err == EBUSY && !give_up(o)) {
        if (o->verbose)
            cli_say("waiting for %s%s", o->shown_name, o->shared ? " (shared)" : "");
        err = rw_take(o, &l->rw, 0, deadline);
    }
    if (err == ENOTSUP && !o->shared) {
        netmutex_rwlock_destroy(&l->rw);
        l->has_rw = 0;
        return 0;
    }
    return err;
}

/* 0 or an errno: EBUSY and ETIMEDOUT are the conflicts.  A trylock comes
 * first so an unreachable server is reported (EAGAIN) instead of waited
 * for, which is what netmutex_lock would do.  Exclusive: the mutex, then
 * the read-write lock's write side (the mutex goes back if that fails). */
static int acquire(const struct cli_opts *o, struct lock *l, const struct timespec *deadline)
{
    int err = 0;

    if (l->has_s)
        return acquire_sem(o, l, deadline);
    if (l->has_m) {
        err = netmutex_trylock(&l->m);
        if (err == EBUSY && !give_up(o)) {
            if (o->verbose)
                cli_say("waiting for %s", o->shown_name);
            err = o->has_timeout ? netmutex_clocklock(&l->m, CLOCK_MONOTONIC, deadline)
                                 : netmutex_lock(&l->m);
        }
    }
    if (err == 0 && l->has_rw && (err = acquire_rw(o, l, deadline)) != 0 && l->has_m)
        netmutex_unlock(&l->m);
    return err;
}

/* One unlock's error, said once; ENOLCK marks the run's lease lost.
 * Returns ERR. */
static int unlocked(const struct cli_opts *o, int err, int *lost)
{
    if (err == ENOLCK && !*lost)
        cli_say("lease of %s was lost while the command ran", o->shown_name);
    if (err == ENOLCK)
        *lost = 1;
    else if (err == EIO)
        cli_say("could not tell %s that %s is free; it frees itself "
                "when its lease runs out", o->shown_url, o->shown_name);
    else if (err != 0)
        cli_say("unlock %s at %s: %s", o->shown_name, o->shown_url, netmutex_strerror(err));
    return err;
}

static void release(const struct cli_opts *o, struct lock *l, int *lost)
{
    int err = 0;

    if (l->has_s)
        err |= unlocked(o, netmutex_sem_post(&l->s), lost);
    if (l->has_rw)
        err |= unlocked(o, netmutex_rwlock_unlock(&l->rw), lost);
    if (l->has_m)
        err |= unlocked(o, netmutex_unlock(&l->m), lost);
    if (err == 0 && o->verbose)
        cli_say("released %s", o->shown_name);
}

static int init_mutex(const struct cli_opts *o, netmutex_t *m)
{
    netmutex_attr_t a;
    int err = netmutex_attr_init(&a);

    if (err == 0)
        err = netmutex_attr_setlease(&a, o->lease_ms);
    if (err == 0)
        err = netmutex_attr_setlostfn(&a, cli_run_on_lost, NULL);
    if (err == 0)
        err = netmutex_init(m, o->name, &a);
    netmutex_attr_destroy(&a);
    return err;
}

static int init_rwlock(const struct cli_opts *o, netmutex_rwlock_t *rw)
{
    netmutex_rwlockattr_t a;
    int err = netmutex_rwlockattr_init(&a);

    if (err == 0)
        err = netmutex_rwlockattr_setlease(&a, o->lease_ms);
    if (err == 0)
        err = netmutex_rwlockattr_setlostfn(&a, cli_run_on_lost, NULL);
    if (err == 0)
        err = netmutex_rwlock_init(rw, o->name, &a);
    netmutex_rwlockattr_destroy(&a);
    return err;
}

static int init_lock(const struct cli_opts *o, struct lock *l)
{
    int err = 0;

    memset(l, 0, sizeof *l);
    if (o->permits) {
        if ((err = netmutex_sem_init(&l->s, o->name, o->permits, NULL)) == 0)
            l->has_s = 1;
        return err;
    }
    if (!o->shared && (err = init_mutex(o, &l->m)) == 0)
        l->has_m = 1;
    if (err == 0 && (err = init_rwlock(o, &l->rw)) == 0)
        l->has_rw = 1;
    if (err != 0 && l->has_m)
        netmutex_destroy(&l->m);
    return err;
}

static void destroy_lock(struct lock *l)
{
    if (l->has_s)
        netmutex_sem_destroy(&l->s);
    if (l->has_m)
        netmutex_destroy(&l->m);
    if (l->has_rw)
        netmutex_rwlock_destroy(&l->rw);
}

/* Runs the command while L is held; the exit code before the release.
 * A signal that came once the lock was ours, before the command started,
 * means the command is not wanted any more: it is not started, and we exit
 * as if the signal had found us still waiting. */
static int run_locked(const struct cli_opts *o, struct lock *l, struct cli_command *c, int *lost)
{
    uint64_t fence = 0; /* a permit has none: NETMUTEX_FENCE=0 */
    int err, sig;

    if (l->has_m)
        netmutex_fence(&l->m, &fence);
    else if (l->has_rw)
        netmutex_rwlock_fence(&l->rw, &fence);
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
    if ((err = command_start(c, fence)) != 0) {
        cli_say("the process for the command was gone before it could start: %s",
                strerror(err));
        command_dismiss(c, CLI_EX_OSERR);
        return CLI_EX_OSERR;
    }
    start_forwarding();
    return shell_status(supervise(o, c, lost));
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

/* What is set up before the lock is asked for; 0 or an exit code. */
static int prepare(const struct cli_opts *o, const struct cli_command *c, struct lock *l)
{
    int err;

    if ((err = make_pipe()) != 0) {
        cli_say("pipe: %s", strerror(err));
        return CLI_EX_OSERR;
    }
    if ((err = init_lock(o, l)) != 0) {
        cli_say("%s: %s", o->shown_name, netmutex_strerror(err));
        return cli_exit_code(err);
    }
    if ((err = take_signals(o)) != 0 || (err = cli_watch_command(c)) != 0) {
        cli_say("cannot set up signal handling: %s", strerror(err));
        destroy_lock(l);
        return CLI_EX_OSERR;
    }
    return 0;
}

/* Takes the lock and runs the command under it; the exit code. */
static int lock_and_run(const struct cli_opts *o, struct cli_command *c)
{
    struct timespec deadline;
    struct lock l;
    int err, rc, lost = 0;

    deadline_after(o->has_timeout ? o->timeout_s : 0, &deadline);
    if ((rc = prepare(o, c, &l)) != 0)
        return rc;
    err = acquire(o, &l, &deadline);
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
        rc = run_locked(o, &l, c, &lost);
        release(o, &l, &lost);
    }
    destroy_lock(&l);
    return lost ? CLI_EX_LOST : rc;
}

/* The holder that `status` shows: this host and the command's pid (the
 * library adds our thread's id). */
static int configure_for(struct cli_opts *o, pid_t pid)
{
    char host[256], holder[320];

    if (gethostname(host, sizeof host) != 0)
        strcpy(host, "?");
    host[sizeof host - 1] = '\0';
    snprintf(holder, sizeof holder, "%s:%ld", host, (long)pid);
    return cli_configure(o, holder);
}

int cli_run(struct cli_opts *o)
{
    struct cli_command c;
    int rc = command_fork(o, &c);

    if (rc != 0)
        return rc;
    /* Writing the fence to a command process that died must fail with
     * EPIPE, not kill us while we hold the lock.  The child keeps the
     * disposition we started with. */
    signal(SIGPIPE, SIG_IGN);
    if ((rc = configure_for(o, c.pid)) == 0)
        rc = lock_and_run(o, &c);
    /* Not started (no lock, a signal, an error): it must not outlive us. */
    if (c.go >= 0)
        command_dismiss(&c, rc);
    return rc;
}

/* -F, in the keeper (nofork.c): what cli_run does once the command's
 * process exists, that process being our parent's, C->pid, which waits on
 * C->go for the word: the fence, or the exit code to leave with. */
int cli_run_keeper(struct cli_opts *o, struct cli_command *c)
{
    int rc;

    sigs.o = o;
    sigs.tell = c->go;
    signal(SIGPIPE, SIG_IGN);
    if ((rc = configure_for(o, c->pid)) == 0)
        rc = lock_and_run(o, c);
    if (c->go >= 0)
        command_dismiss(c, rc);
    return rc;
}
