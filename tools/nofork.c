/*
 * nofork.c -- `netmutex -F NAME COMMAND`: the command is exec'd in place,
 * keeping our pid, as flock(1)'s -F does; a keeper process holds the lock.
 *
 * The library's holds belong to the process that took them, renewed by
 * its background thread, and a forked child holds nothing: so the keeper
 * must take the lock itself, and must exist before the library is even
 * configured.  We (the command's process-to-be) fork it first, through an
 * intermediate process that exits at once, so that the keeper is not our
 * child: the command never sees a child it did not start, nor waits for
 * it.  The keeper does what a normal run does (run.c, cli_run_keeper): it
 * configures the library, with our pid as the holder's, takes the lock,
 * and tells us over a pipe the fence, or the exit code a normal run would
 * give (a conflict, an error, a signal while waiting), with its messages
 * on stderr.  Told the fence, we exec the command with NETMUTEX_FENCE set;
 * told a code, we exit with it.
 *
 * The keeper then watches our pid through a pidfd (pidfd_open, Linux 5.3;
 * without it, a look every 100 ms, /proc telling a zombie) and releases
 * the lock when the process ends; if it ends before the command started,
 * the keeper leaves the queue, or releases, and exits.  A lost lease gets
 * the --on-lost signal sent to the command, and signals sent to the keeper
 * are passed on as a normal run passes them on.  The keeper holds /dev/null
 * as its stdin and stdout, so a reader of the command's output sees its
 * end with the command's, and closes the other descriptors it inherited
 * (a pipe or a file lock of the caller's is the command's alone); it keeps
 * stderr, where a normal run's messages go (a lost lease, a failed
 * release, -v), until it has released.  The exit status is the command's
 * own: the keeper cannot change it.
 */
#include "ac_config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

/* A pidfd of this process, -1 where the kernel has none (ENOSYS). */
static int pidfd_self(void)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, getpid(), 0);
#else
    return -1;
#endif
}

/* Without a pidfd: a process that exists and is not a zombie.  Should its
 * pid be reaped and reused between two looks, the keeper would watch the
 * newcomer: the limit of kernels before 5.3. */
static int pid_alive(pid_t pid)
{
    char path[64], buf[512];
    ssize_t n;
    int fd;

    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return errno != ENOENT;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 1;
    buf[n] = '\0';
    /* "pid (comm) S ...": the state follows the last parenthesis. */
    char *p = strrchr(buf, ')');
    return p == NULL || p[1] == '\0' || (p[2] != 'Z' && p[2] != 'X');
}

int cli_command_gone(const struct cli_command *c)
{
    if (c->pidfd >= 0) {
        struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
        return poll(&p, 1, 0) > 0;
    }
    return !pid_alive(c->pid);
}

/* Through the pidfd when there is one: never a process that took over the
 * pid of the command's. */
void cli_command_signal(const struct cli_command *c, int sig)
{
#ifdef SYS_pidfd_send_signal
    if (c->in_place && c->pidfd >= 0 &&
        syscall(SYS_pidfd_send_signal, c->pidfd, sig, NULL, 0) == 0)
        return;
#endif
    kill(c->pid, sig);
}

static void *watch_thread(void *arg)
{
    const struct cli_command *c = arg;

    while (!cli_command_gone(c)) {
        struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
        poll(&p, c->pidfd >= 0 ? 1 : 0, c->pidfd >= 0 ? -1 : 100);
    }
    cli_run_command_gone();
    return NULL;
}

/* A copy of the watched command: the thread may outlive the caller's
 * frames, as the keeper exits while the thread still looks. */
static struct cli_command watched;

int cli_watch_command(const struct cli_command *c)
{
    pthread_t t;
    int err;

    if (!c->in_place)
        return 0;
    watched = *c;
    if ((err = pthread_create(&t, NULL, watch_thread, &watched)) != 0)
        return err;
    pthread_detach(t);
    return 0;
}

/* The keeper's stdin and stdout: /dev/null; and of the descriptors it
 * inherited, only stderr and C's (see the top of this file). */
static void keeper_fds(const struct cli_command *c)
{
    int fd = open("/dev/null", O_RDWR);

    if (fd >= 0) {
        dup2(fd, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        if (fd > STDERR_FILENO)
            close(fd);
    }
    /* Read the list, then close: closing while reading it would skip. */
    for (;;) {
        int extra[64], n = 0;
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;

        if (d == NULL)
            return;
        while (n < 64 && (e = readdir(d)) != NULL) {
            fd = atoi(e->d_name);
            if (fd > STDERR_FILENO && fd != dirfd(d) && fd != c->go && fd != c->pidfd)
                extra[n++] = fd;
        }
        closedir(d);
        if (n == 0)
            return;
        for (int i = 0; i < n; i++)
            close(extra[i]);
    }
}

/* In the intermediate process: forks the keeper and exits.  The keeper
 * returns the exit code of its run, which nobody reads. */
static int start_keeper(struct cli_opts *o, struct cli_command *c)
{
    pid_t k = fork();

    if (k == 0) {
        keeper_fds(c);
        return cli_run_keeper(o, c);
    }
    if (k < 0) {
        struct cli_go msg = { .rc = CLI_EX_OSERR };
        cli_say("fork: %s", strerror(errno));
        (void)!write(c->go, &msg, sizeof msg);
    }
    _exit(0);
}

/* Waits for the keeper's word on FD: execs the command, or gives the exit
 * code. */
static int await_keeper(const struct cli_opts *o, int fd)
{
    struct cli_go msg;

    if (cli_read_full(fd, &msg, sizeof msg) != 0) {
        cli_say("the process keeping %s ended before it had the lock", o->shown_name);
        close(fd);
        return CLI_EX_OSERR;
    }
    close(fd);
    if (msg.rc != 0)
        return msg.rc;
    cli_exec_command(o, msg.fence);
}

int cli_run_nofork(struct cli_opts *o)
{
    struct cli_command c = { .pid = getpid(), .in_place = 1 };
    int fds[2];

    /* CLOEXEC: the command never sees the pipe or the pidfd. */
    if (pipe2(fds, O_CLOEXEC) != 0) {
        cli_say("pipe: %s", strerror(errno));
        return CLI_EX_OSERR;
    }
    c.pidfd = pidfd_self();
    c.go = fds[1];
    fflush(NULL);               /* nothing buffered may be written twice */
    pid_t mid = fork();
    if (mid == 0) {
        close(fds[0]);
        return start_keeper(o, &c);
    }
    close(fds[1]);
    if (c.pidfd >= 0)
        close(c.pidfd);
    if (mid < 0) {
        cli_say("fork: %s", strerror(errno));
        close(fds[0]);
        return CLI_EX_OSERR;
    }
    while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
        continue;
    return await_keeper(o, fds[0]);
}
