/*
 * conf_rwlock.c -- selected pthread read-write locks, in plain pthread C:
 * built through <netmutex/pthread.h> and relinked with --wrap (a plain
 * build would fail the cross-process checks by design).  NETMUTEX_RWLOCKS
 * selects the static `table` (PTHREAD_RWLOCK_INITIALIZER) by FILE:SYMBOL
 * and `index_lock` (pthread_rwlock_init, writers preferred) by SYMBOL;
 * `plain` is not selected.
 *
 *   - writers exclude each other and readers across processes: WRITERS
 *     processes add to a counter in shared memory under the write lock,
 *     READERS processes check it under the read lock, each side checking
 *     that nobody of the other side is inside; every update must arrive;
 *   - readers share across processes: two processes take the read lock
 *     and each waits until the other holds it too;
 *   - while another process reads, trywrlock is EBUSY, timedwrlock times
 *     out (ETIMEDOUT, not before its deadline), tryrdlock succeeds;
 *   - a thread's own holds answer as glibc's: EDEADLK for wrlock and
 *     rdlock over its write lock, EBUSY for trywrlock and tryrdlock over
 *     it, a read lock taken again;
 *   - a lock destroyed while a thread that exited holds it: 0, as glibc
 *     (undefined for pthread), the hold kept until the process exits;
 *   - the lock held is on the server, and nothing is left there after;
 *   - an unselected read-write lock stays process-local: no key on the
 *     server, and another process's write lock does not keep it.
 *
 * Every fork happens before this process starts a thread (conf_xproc.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conf_harness.h"

#define WRITERS 3
#define READERS 2
#define ROUNDS 15

static pthread_rwlock_t table = PTHREAD_RWLOCK_INITIALIZER;
pthread_rwlock_t index_lock;                                  /* init'd in main */
static pthread_rwlock_t plain = PTHREAD_RWLOCK_INITIALIZER;   /* not selected */
static pthread_rwlock_t gone = PTHREAD_RWLOCK_INITIALIZER;    /* destroyed held */

typedef struct shared {
    long counter;      /* WRITERS * ROUNDS at the end */
    int writing;       /* atomic: writers inside */
    int reading;       /* atomic: readers inside */
    int overlaps;      /* atomic: a side found the other inside */
    int both;          /* atomic: readers holding at once (sharing check) */
    int go;            /* atomic: the parent's turn is over */
} shared_t;

static void nap_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static int reap(pid_t pid)
{
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Waits up to MS (scaled) for *FLAG to reach WANT. */
static int wait_for(int *flag, int want, unsigned int ms)
{
    for (unsigned int i = 0; i < conf_ms(ms); i++) {
        if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) >= want)
            return 1;
        nap_ms(1);
    }
    return 0;
}

static int writer(shared_t *sh, pthread_rwlock_t *rw)
{
    for (int i = 0; i < ROUNDS; i++) {
        if (pthread_rwlock_wrlock(rw) != 0)
            return 1;
        if (__atomic_add_fetch(&sh->writing, 1, __ATOMIC_ACQ_REL) != 1 ||
            __atomic_load_n(&sh->reading, __ATOMIC_ACQUIRE) != 0)
            __atomic_add_fetch(&sh->overlaps, 1, __ATOMIC_RELAXED);
        long seen = sh->counter;
        nap_ms(1);
        sh->counter = seen + 1;
        __atomic_sub_fetch(&sh->writing, 1, __ATOMIC_ACQ_REL);
        if (pthread_rwlock_unlock(rw) != 0)
            return 2;
    }
    return 0;
}

static int reader(shared_t *sh, pthread_rwlock_t *rw)
{
    for (int i = 0; i < ROUNDS; i++) {
        if (pthread_rwlock_rdlock(rw) != 0)
            return 1;
        __atomic_add_fetch(&sh->reading, 1, __ATOMIC_ACQ_REL);
        if (__atomic_load_n(&sh->writing, __ATOMIC_ACQUIRE) != 0)
            __atomic_add_fetch(&sh->overlaps, 1, __ATOMIC_RELAXED);
        nap_ms(1);
        __atomic_sub_fetch(&sh->reading, 1, __ATOMIC_ACQ_REL);
        if (pthread_rwlock_unlock(rw) != 0)
            return 2;
    }
    return 0;
}

static void check_exclusion(shared_t *sh, pthread_rwlock_t *rw, const char *what)
{
    pid_t pids[WRITERS + READERS];
    int failed = 0;
    memset(sh, 0, sizeof *sh);
    for (int i = 0; i < WRITERS + READERS; i++) {
        fflush(stdout);
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(i < WRITERS ? writer(sh, rw) : reader(sh, rw));
    }
    for (int i = 0; i < WRITERS + READERS; i++) {
        int rc = reap(pids[i]);
        failed += rc != 0;
        if (rc != 0)
            printf("# %s %d exited with %d\n", i < WRITERS ? "writer" : "reader", i, rc);
    }
    conf_ok(failed == 0, "%s: every process's calls succeeded (%d failed)", what, failed);
    conf_ok(sh->counter == (long)WRITERS * ROUNDS, "%s: counter %ld, want %ld", what,
            sh->counter, (long)WRITERS * ROUNDS);
    conf_eq(sh->overlaps, 0, "%s: no writer overlapped anybody", what);
}

/* A child reader: takes the read lock, says so, waits until the other
 * reader (READERS in all) holds it too, and until the parent's checks are
 * over; exits 0 when it saw both. */
static int sharing_reader(shared_t *sh, pthread_rwlock_t *rw, int readers)
{
    if (pthread_rwlock_rdlock(rw) != 0)
        return 1;
    __atomic_add_fetch(&sh->both, 1, __ATOMIC_ACQ_REL);
    int saw = wait_for(&sh->both, readers, 10000);
    wait_for(&sh->go, 1, 20000);
    return (pthread_rwlock_unlock(rw) != 0 ? 4 : 0) | (saw ? 0 : 8);
}

static void check_sharing(shared_t *sh)
{
    pid_t pids[2];
    struct timespec deadline, now;
    memset(sh, 0, sizeof *sh);
    for (int i = 0; i < 2; i++) {
        fflush(stdout);
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(sharing_reader(sh, &table, 2));
    }
    conf_ok(wait_for(&sh->both, 2, 10000), "sharing: two processes hold the read lock at once");
    conf_ok(conf_count_keys("{r*") > 0, "sharing: the shares are on the server");
    conf_eq(pthread_rwlock_trywrlock(&table), EBUSY, "sharing: trywrlock is EBUSY");
    conf_deadline(&deadline, CLOCK_REALTIME, conf_ms(150));
    conf_eq(pthread_rwlock_timedwrlock(&table, &deadline), ETIMEDOUT,
            "sharing: timedwrlock times out");
    clock_gettime(CLOCK_REALTIME, &now);
    conf_ok(conf_diff_ms(&now, &deadline) >= 0, "sharing: not before the deadline (%ld ms)",
            conf_diff_ms(&now, &deadline));
    conf_deadline(&deadline, CLOCK_MONOTONIC, conf_ms(100));
    conf_eq(pthread_rwlock_clockwrlock(&table, CLOCK_MONOTONIC, &deadline), ETIMEDOUT,
            "sharing: clockwrlock times out");
    conf_eq(pthread_rwlock_tryrdlock(&table), 0, "sharing: a third reader gets in");
    conf_eq(pthread_rwlock_unlock(&table), 0, "sharing: the third reader unlocks");
    __atomic_store_n(&sh->go, 1, __ATOMIC_RELEASE);
    conf_eq(reap(pids[0]) | reap(pids[1]), 0, "sharing: both readers saw each other");
    conf_eq(pthread_rwlock_trywrlock(&table), 0, "sharing: trywrlock once they left");
    conf_eq(pthread_rwlock_unlock(&table), 0, "sharing: unlock");
}

/* A thread's own holds, as glibc answers them. */
static void check_own(pthread_rwlock_t *rw, const char *what)
{
    struct timespec ts;
    conf_eq(pthread_rwlock_wrlock(rw), 0, "%s: wrlock", what);
    conf_ok(conf_count_keys("{r*") > 0, "%s: the write lock is on the server", what);
    conf_eq(pthread_rwlock_wrlock(rw), EDEADLK, "%s: wrlock again: EDEADLK", what);
    conf_eq(pthread_rwlock_rdlock(rw), EDEADLK, "%s: rdlock over it: EDEADLK", what);
    conf_eq(pthread_rwlock_trywrlock(rw), EBUSY, "%s: trywrlock over it: EBUSY", what);
    conf_eq(pthread_rwlock_tryrdlock(rw), EBUSY, "%s: tryrdlock over it: EBUSY", what);
    conf_deadline(&ts, CLOCK_REALTIME, 50);
    conf_eq(pthread_rwlock_timedrdlock(rw, &ts), EDEADLK, "%s: timedrdlock: EDEADLK", what);
    conf_eq(pthread_rwlock_unlock(rw), 0, "%s: unlock", what);
    conf_eq(pthread_rwlock_rdlock(rw), 0, "%s: rdlock", what);
    conf_eq(pthread_rwlock_rdlock(rw), 0, "%s: rdlock again", what);
    conf_eq(pthread_rwlock_unlock(rw), 0, "%s: unlock one", what);
    conf_eq(pthread_rwlock_unlock(rw), 0, "%s: unlock the other", what);
    ts.tv_nsec = -1;
    conf_eq(pthread_rwlock_timedwrlock(rw, &ts), EINVAL, "%s: timedwrlock, bad time", what);
}

/* The unselected lock: another process's write lock is its own. */
static void check_unselected(void)
{
    int up[2], down[2];
    char c = 0;
    conf_eq(pipe(up) | pipe(down), 0, "unselected: pipes");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = pthread_rwlock_wrlock(&plain);
        if (write(up[1], "x", 1) != 1 || read(down[0], &c, 1) != 1)
            rc = 100;
        _exit(rc | pthread_rwlock_unlock(&plain));
    }
    conf_ok(read(up[0], &c, 1) == 1, "unselected: another process holds its write lock");
    conf_eq(pthread_rwlock_trywrlock(&plain), 0, "unselected: trywrlock here is 0");
    conf_eq(conf_count_keys("{r*"), 0, "unselected: no key on the server");
    conf_eq(pthread_rwlock_unlock(&plain), 0, "unselected: unlock");
    conf_ok(write(down[1], "y", 1) == 1, "unselected: let the other go");
    conf_eq(reap(pid), 0, "unselected: the other process unlocked");
    close(up[0]);
    close(up[1]);
    close(down[0]);
    close(down[1]);
}

static void *read_and_exit(void *arg)
{
    *(int *)arg = pthread_rwlock_rdlock(&gone);
    return NULL;
}

/* In a child: a thread takes the read lock of gone and exits; destroy
 * returns 0 as glibc's does, and the hold stays (another trywrlock of
 * this process's is EBUSY).  Exits with the number of surprises. */
static int destroy_held(void)
{
    pthread_t t;
    int rc = -1, bad = 0;
    if (pthread_create(&t, NULL, read_and_exit, &rc) != 0 || pthread_join(t, NULL) != 0)
        return 100;
    bad += rc != 0;
    bad += pthread_rwlock_destroy(&gone) != 0;
    bad += pthread_rwlock_init(&gone, NULL) != 0;
    bad += pthread_rwlock_trywrlock(&gone) != EBUSY;
    bad += conf_count_keys("{r*}rw_gone*") <= 0;
    return bad;
}

static void check_destroy_held(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(destroy_held());
    conf_eq(reap(pid), 0, "destroyed while held: 0, the hold kept while the process lives");
    int left = 1;
    for (unsigned int i = 0; i < conf_ms(10000) / 10 && left; i++) {
        if ((left = conf_count_keys("{r*}rw_gone*")) != 0)
            nap_ms(10);
    }
    conf_eq(left, 0, "destroyed while held: the hold ended with its process");
}

int main(void)
{
    pthread_rwlockattr_t attr;
    setenv("NETMUTEX_RWLOCKS", "conf_rwlock.c:table,index_lock=rw_index,"
           "conf_rwlock.c:gone=rw_gone", 0);
    conf_setup("", 120);
    shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    conf_eq(pthread_rwlock_init(&index_lock, &attr), 0, "init index_lock");
    pthread_rwlockattr_destroy(&attr);
    check_exclusion(sh, &table, "static, preferring readers");
    check_exclusion(sh, &index_lock, "initialized, preferring writers");
    check_sharing(sh);
    check_unselected();
    check_own(&table, "own holds");
    check_destroy_held();
    conf_eq(pthread_rwlock_destroy(&index_lock), 0, "destroy index_lock");
    conf_eq(pthread_rwlock_destroy(&table), 0, "destroy table");
    int left = conf_count_keys("{r*");
    conf_ok(left == 0, "nothing of the read-write locks is left on the server (%d keys)", left);
    return conf_done();
}
