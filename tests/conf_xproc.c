/*
 * conf_xproc.c -- cross-process checks of selected pthread mutexes, in
 * plain pthread C: built through <netmutex/pthread.h> and relinked with
 * --wrap (a plain build would fail them by design: a process-local mutex
 * does not exclude other processes).
 *
 *   - exclusion: WORKERS forked processes do an unprotected
 *     read-modify-write of a counter in shared memory under conf_counter;
 *     every increment must survive;
 *   - robustness: a process that dies holding the robust conf_robust hands
 *     the next locker EOWNERDEAD, once its lease has run out.
 *
 * Every fork happens before this process starts a thread (GCC 12's ASan is
 * not fork-safe otherwise): the parent touches no mutex until its
 * children are done.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf_harness.h"

#define WORKERS 4
#define ROUNDS 150

pthread_mutex_t conf_counter = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t conf_robust;

static int bump(volatile long *counter)
{
    for (int i = 0; i < ROUNDS; i++) {
        if (pthread_mutex_lock(&conf_counter) != 0)
            return 1;
        long seen = *counter;
        sched_yield();          /* invite a lost update */
        *counter = seen + 1;
        if (pthread_mutex_unlock(&conf_counter) != 0)
            return 1;
    }
    return 0;
}

/* Runs FN in a child; its exit status, or -1. */
static pid_t spawn(int (*fn)(volatile long *), volatile long *arg)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn(arg));
    return pid;
}

static int reap(pid_t pid)
{
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void check_exclusion(volatile long *counter)
{
    pid_t pids[WORKERS];
    int failed = 0;
    for (int i = 0; i < WORKERS; i++)
        pids[i] = spawn(bump, counter);
    for (int i = 0; i < WORKERS; i++)
        failed += reap(pids[i]) != 0;
    conf_ok(failed == 0, "exclusion: every worker's lock and unlock succeeded (%d failed)",
            failed);
    conf_ok(*counter == (long)WORKERS * ROUNDS, "exclusion: counter %ld, want %ld", *counter,
            (long)WORKERS * ROUNDS);
}

/* Dies holding the mutex: no unlock, no exit handlers. */
static int die_holding(volatile long *locked)
{
    *locked = pthread_mutex_lock(&conf_robust) == 0;
    return 0;
}

static void check_robust(volatile long *locked)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    conf_eq(pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST), 0, "robust: setrobust");
    conf_eq(pthread_mutex_init(&conf_robust, &a), 0, "robust: init");
    pthread_mutexattr_destroy(&a);
    conf_eq(reap(spawn(die_holding, locked)), 0, "robust: a child locks and exits");
    conf_ok(*locked == 1, "robust: the child held it when it died");
    conf_check_backing("conf_robust", 1);
    conf_eq(pthread_mutex_lock(&conf_robust), EOWNERDEAD, "robust: next lock");
    conf_eq(pthread_mutex_consistent(&conf_robust), 0, "robust: consistent");
    conf_eq(pthread_mutex_unlock(&conf_robust), 0, "robust: unlock");
    conf_eq(pthread_mutex_lock(&conf_robust), 0, "robust: lock once repaired");
    conf_eq(pthread_mutex_unlock(&conf_robust), 0, "robust: unlock");
    conf_eq(pthread_mutex_destroy(&conf_robust), 0, "robust: destroy");
}

int main(void)
{
    conf_setup("conf_counter,conf_robust", 300);
    volatile long *shared = mmap(NULL, 2 * sizeof(long), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return 99;
    check_exclusion(&shared[0]);
    check_robust(&shared[1]);
    return conf_done();
}
