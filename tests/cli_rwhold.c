/*
 * cli_rwhold.c -- for the netmutex(1) tests, a read-write lock held as
 * long as a test wants, with nothing else beside it (netmutex(1)'s
 * exclusive runs hold the mutex too): `cli_rwhold NAME r|w` takes the read lock (r)
 * or the write lock (w) of the read-write lock NAME on the server
 * NETMUTEX_URL names, waiting as long as it takes, writes "held" on
 * stdout once it holds it, and keeps it until SIGTERM or SIGINT, then
 * unlocks and exits 0 (1 when a call failed, 2 on a usage error).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <netmutex.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    netmutex_rwlock_t rw;
    struct sigaction sa;
    sigset_t block, old;
    int err;

    if (argc != 3 || (strcmp(argv[2], "r") != 0 && strcmp(argv[2], "w") != 0)) {
        fprintf(stderr, "usage: cli_rwhold NAME r|w\n");
        return 2;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* Blocked until the lock is held, then waited for with sigsuspend:
     * a signal that came meanwhile is not lost. */
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &old);
    err = netmutex_rwlock_init(&rw, argv[1], NULL);
    if (err == 0)
        err = argv[2][0] == 'r' ? netmutex_rwlock_rdlock(&rw) : netmutex_rwlock_wrlock(&rw);
    if (err != 0) {
        fprintf(stderr, "cli_rwhold: %s: %s\n", argv[1], netmutex_strerror(err));
        return 1;
    }
    printf("held\n");
    fflush(stdout);
    while (!stop)
        sigsuspend(&old);
    err = netmutex_rwlock_unlock(&rw);
    netmutex_rwlock_destroy(&rw);
    if (err != 0) {
        fprintf(stderr, "cli_rwhold: unlock %s: %s\n", argv[1], netmutex_strerror(err));
        return 1;
    }
    return 0;
}
