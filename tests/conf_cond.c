/*
 * conf_cond.c -- selected pthread condition variables, in plain pthread C:
 * built through <netmutex/pthread.h> and relinked with --wrap (a plain
 * build would fail the cross-process checks by design).  The mutex and the
 * condition variables are statics, selected by FILE:SYMBOL.
 *
 *   - producer/consumer: PAIRS producer and PAIRS consumer processes hand
 *     ITEMS items each through a one-item box in shared memory, guarded by
 *     the selected mutex and signalled through the selected nonempty and
 *     nonfull; every item must arrive, once;
 *   - a selected condition variable waited on with an unselected mutex:
 *     EINVAL, every time, and one line on stderr for all of them;
 *   - timedwait and clockwait on a selected condition variable time out
 *     (ETIMEDOUT, not before the deadline, the mutex held again), on the
 *     clock the condition variable was initialized with;
 *   - an unselected condition variable stays process-local, with a
 *     selected mutex and with an unselected one;
 *   - cancellation: a thread cancelled in a wait, on an unselected or a
 *     selected condition variable with the selected mutex, runs its
 *     clean-up handler holding the mutex, which it can unlock (pthread's
 *     promise); one asleep in an untimed wait, or a timed one whose
 *     deadline is far off, on a selected condition variable that nothing
 *     signals is cancelled there and then, leaves the condition (no key of
 *     it left), and a signal afterwards wakes the next waiter; lock,
 *     signal and unlock, not cancellation points, are not cancelled
 *     inside;
 *   - at the end, no key of a condition variable is left on the server.
 *
 * Every fork happens before this process starts a thread or touches a
 * mutex (see conf_xproc.c).
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

#define PAIRS 2
#define ITEMS 40

static pthread_mutex_t box_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t nonempty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t nonfull = PTHREAD_COND_INITIALIZER;
static pthread_cond_t mono;                 /* pthread_cond_init: CLOCK_MONOTONIC */
static pthread_cond_t lonely = PTHREAD_COND_INITIALIZER;   /* selected, bad mutex */
static pthread_mutex_t plain_lock = PTHREAD_MUTEX_INITIALIZER;  /* not selected */
static pthread_cond_t plain_cond = PTHREAD_COND_INITIALIZER;    /* not selected */

typedef struct shared {
    int full;           /* the box holds an item */
    long item;
    long sum;           /* of the items consumed */
    long taken;         /* items consumed */
} shared_t;

static int produce(shared_t *sh, long first)
{
    for (long i = first; i < first + ITEMS; i++) {
        if (pthread_mutex_lock(&box_lock) != 0)
            return 1;
        while (sh->full) {
            if (pthread_cond_wait(&nonfull, &box_lock) != 0)
                return 2;
        }
        sh->item = i;
        sh->full = 1;
        if (pthread_cond_signal(&nonempty) != 0 || pthread_mutex_unlock(&box_lock) != 0)
            return 3;
    }
    return 0;
}

static int consume(shared_t *sh)
{
    for (int i = 0; i < ITEMS; i++) {
        if (pthread_mutex_lock(&box_lock) != 0)
            return 1;
        while (!sh->full) {
            if (pthread_cond_wait(&nonempty, &box_lock) != 0)
                return 2;
        }
        sh->sum += sh->item;
        sh->taken++;
        sh->full = 0;
        if (pthread_cond_signal(&nonfull) != 0 || pthread_mutex_unlock(&box_lock) != 0)
            return 3;
    }
    return 0;
}

static int reap(pid_t pid)
{
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void check_producer_consumer(shared_t *sh)
{
    pid_t pids[2 * PAIRS];
    int failed = 0;
    long want = 0;
    for (int i = 0; i < 2 * PAIRS; i++) {
        long first = 1 + (long)(i / 2) * ITEMS;
        fflush(stdout);
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(i % 2 ? consume(sh) : produce(sh, first));
        if (i % 2 == 0)
            want += ITEMS * first + (long)ITEMS * (ITEMS - 1) / 2;
    }
    for (int i = 0; i < 2 * PAIRS; i++) {
        int rc = reap(pids[i]);
        failed += rc != 0;
        if (rc != 0)
            printf("# %s %d exited with %d\n", i % 2 ? "consumer" : "producer", i / 2, rc);
    }
    conf_ok(failed == 0, "producer/consumer: every process's calls succeeded (%d failed)",
            failed);
    conf_ok(sh->taken == (long)PAIRS * ITEMS, "producer/consumer: %ld items taken, want %ld",
            sh->taken, (long)PAIRS * ITEMS);
    conf_ok(sh->sum == want, "producer/consumer: items sum to %ld, want %ld", sh->sum, want);
}

/* In a child whose stderr goes to a file: waits on the selected lonely
 * with the unselected plain_lock, three times; exits with the number of
 * waits that did not return EINVAL. */
static int lonely_waits(void)
{
    int bad = 0;
    struct timespec ts;
    if (pthread_mutex_lock(&plain_lock) != 0)
        return 100;
    bad += pthread_cond_wait(&lonely, &plain_lock) != EINVAL;
    conf_deadline(&ts, CLOCK_REALTIME, 50);
    bad += pthread_cond_timedwait(&lonely, &plain_lock, &ts) != EINVAL;
    conf_deadline(&ts, CLOCK_MONOTONIC, 50);
    bad += pthread_cond_clockwait(&lonely, &plain_lock, CLOCK_MONOTONIC, &ts) != EINVAL;
    bad += pthread_mutex_unlock(&plain_lock) != 0;
    return bad;
}

static void check_unselected_mutex(void)
{
    char path[] = "/tmp/conf_cond_errXXXXXX";
    int fd = mkstemp(path);
    char buf[8192];
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fd < 0 ? -1 : fork();
    if (pid == 0) {
        dup2(fd, 2);
        _exit(lonely_waits());
    }
    conf_eq(reap(pid), 0, "selected condition, unselected mutex: every wait returns EINVAL");
    ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    int lines = 0;
    for (char *p = buf; (p = strstr(p, "NETMUTEX_CONDS")) != NULL; p = strchr(p, '\n')) {
        lines++;
        if (!strchr(p, '\n'))
            break;
    }
    conf_ok(lines == 1, "selected condition, unselected mutex: reported once (%d lines)",
            lines);
    if (lines != 1)
        printf("# stderr:\n# %s\n", buf);
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
}

/* A wait that times out returns ETIMEDOUT at the deadline, not before,
 * with the mutex held again. */
static void check_timeout(pthread_cond_t *c, clockid_t clock, int clockwait, const char *what)
{
    struct timespec deadline, now;
    unsigned int ms = conf_ms(200);
    conf_eq(pthread_mutex_lock(&box_lock), 0, "%s: lock", what);
    conf_deadline(&deadline, clock, ms);
    int rc = clockwait ? pthread_cond_clockwait(c, &box_lock, clock, &deadline)
                       : pthread_cond_timedwait(c, &box_lock, &deadline);
    clock_gettime(clock, &now);
    conf_eq(rc, ETIMEDOUT, "%s: ETIMEDOUT", what);
    conf_ok(conf_diff_ms(&now, &deadline) >= 0, "%s: not before the deadline (%ld ms after)",
            what, conf_diff_ms(&now, &deadline));
    conf_check_backing("box_lock", 1);
    conf_eq(pthread_mutex_unlock(&box_lock), 0, "%s: unlock", what);
}

static void check_timeouts(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    conf_eq(pthread_cond_init(&mono, &attr), 0, "init a CLOCK_MONOTONIC condition");
    pthread_condattr_destroy(&attr);
    check_timeout(&nonempty, CLOCK_REALTIME, 0, "timedwait, CLOCK_REALTIME");
    check_timeout(&mono, CLOCK_MONOTONIC, 0, "timedwait, CLOCK_MONOTONIC");
    check_timeout(&nonempty, CLOCK_MONOTONIC, 1, "clockwait, CLOCK_MONOTONIC");
    conf_eq(pthread_cond_destroy(&mono), 0, "destroy the CLOCK_MONOTONIC condition");
}

typedef struct handoff {
    pthread_mutex_t *m;
    int ready;
    int rc;
} handoff_t;

static void *waiter(void *arg)
{
    handoff_t *h = arg;
    struct timespec ts;
    conf_deadline(&ts, CLOCK_REALTIME, conf_ms(5000));
    pthread_mutex_lock(h->m);
    h->rc = 0;
    while (!h->ready && h->rc == 0)
        h->rc = pthread_cond_timedwait(&plain_cond, h->m, &ts);
    pthread_mutex_unlock(h->m);
    return NULL;
}

/* A thread of this process waits on the unselected plain_cond, and the
 * main thread signals it: today's process-local behaviour. */
static void check_local(pthread_mutex_t *m, const char *what)
{
    handoff_t h = { m, 0, -1 };
    pthread_t t;
    conf_eq(pthread_create(&t, NULL, waiter, &h), 0, "%s: start a waiter", what);
    pthread_mutex_lock(m);
    h.ready = 1;
    conf_eq(pthread_cond_signal(&plain_cond), 0, "%s: signal", what);
    pthread_mutex_unlock(m);
    pthread_join(t, NULL);
    conf_eq(h.rc, 0, "%s: the waiter woke", what);
    conf_eq(pthread_cond_broadcast(&plain_cond), 0, "%s: broadcast, nobody waiting", what);
}

/* ---- cancellation ------------------------------------------------------ */

/* AddressSanitizer does not see the C library unwind a cancelled thread:
 * the frames it leaves keep their poisoned redzones, and the clean-up
 * handler's own calls are reported on them (a false positive, known
 * upstream).  The waits' checks need that unwinding, so they are skipped
 * there; ThreadSanitizer follows it. */
#if defined(__SANITIZE_ADDRESS__)
#define CONF_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONF_ASAN 1
#endif
#endif
/* ThreadSanitizer follows an unwinding that starts at a cancellation point
 * of the C library's, but not one that starts inside its own interceptor
 * of poll(2), where a wait on a selected condition sleeps: the locks the
 * clean-up handler takes are not seen, and its accesses are reported as
 * races (a false positive).  Those waits' checks are skipped there. */
#if defined(__SANITIZE_THREAD__)
#define CONF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CONF_TSAN 1
#endif
#endif

typedef struct victim {
    pthread_cond_t *cond;  /* to wait on */
    int timed;             /* wait in timed rounds (of round_ms), else untimed */
    int pending;           /* cancelled before it waits (or calls) */
    int started;           /* atomic: it holds box_lock, or is ready */
    int sent;              /* atomic: it has been cancelled */
    int returned;          /* what a wait returned, had it returned */
    int progress;          /* cancel_caller: how far it got */
    int cleaned;           /* atomic: the clean-up handler ran */
    int held;              /* ... with box_lock's key in redis (conf_key_exists) */
    int unlocked;          /* ... and its pthread_mutex_unlock returned this */
    unsigned int round_ms; /* a timed round (scaled); 0: 100 ms */
} victim_t;

static void nap_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static void wait_flag(int *flag)
{
    while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE))
        nap_ms(1);
}

/* pthread_cond_wait's promise: the mutex is held again when the clean-up
 * handlers of a cancelled waiter run. */
static void victim_cleanup(void *arg)
{
    victim_t *v = arg;
    v->held = conf_key_exists("box_lock");
    v->unlocked = pthread_mutex_unlock(&box_lock);
    __atomic_store_n(&v->cleaned, 1, __ATOMIC_RELEASE);
}

static void *cancel_waiter(void *arg)
{
    victim_t *v = arg;
    int rc = 0;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    if (pthread_mutex_lock(&box_lock) != 0)
        return NULL;
    pthread_cleanup_push(victim_cleanup, v);
    __atomic_store_n(&v->started, 1, __ATOMIC_RELEASE);
    if (v->pending)
        wait_flag(&v->sent);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    while (rc == 0 || rc == ETIMEDOUT) {
        struct timespec ts;
        conf_deadline(&ts, CLOCK_REALTIME, conf_ms(v->round_ms ? v->round_ms : 100));
        rc = v->timed ? pthread_cond_timedwait(v->cond, &box_lock, &ts)
                      : pthread_cond_wait(v->cond, &box_lock);
    }
    v->returned = rc;
    pthread_cleanup_pop(1);
    return NULL;
}

/* A waiter on COND, cancelled while it waits (PENDING: before it waits). */
static void check_cancel_wait(pthread_cond_t *cond, int timed, int pending, const char *what)
{
    victim_t v = { cond, timed, pending, 0, 0, -1, 0, 0, -1, -1, 0 };
    pthread_t t;
    void *res = NULL;
    if (pthread_create(&t, NULL, cancel_waiter, &v) != 0) {
        conf_ok(0, "%s: start the waiter", what);
        return;
    }
    wait_flag(&v.started);
    if (!pending)
        pthread_mutex_lock(&box_lock);   /* the waiter is in its wait */
    pthread_cancel(t);
    __atomic_store_n(&v.sent, 1, __ATOMIC_RELEASE);
    if (!pending)
        pthread_mutex_unlock(&box_lock);
    pthread_join(t, &res);
    conf_ok(res == PTHREAD_CANCELED, "%s: cancelled (a wait returned %d)", what, v.returned);
    conf_ok(v.cleaned && v.held >= 1, "%s: the clean-up handler ran with box_lock held in "
            "redis (%d)", what, v.held);
    conf_eq(v.unlocked, 0, "%s: the clean-up handler unlocked box_lock", what);
    int rc = pthread_mutex_trylock(&box_lock);
    conf_eq(rc, 0, "%s: box_lock is free afterwards", what);
    if (rc == 0)
        pthread_mutex_unlock(&box_lock);
}

/* Joins T, which sets *DONE (atomic) as it ends, within a bound (scaled);
 * a thread still waiting on COND then is woken by broadcasts until it
 * ends, so that a failure does not hang the program.  1 when it ended in
 * time. */
static int join_bounded(pthread_t t, int *done, pthread_cond_t *cond, void **res)
{
    int in_time = 0;
    for (unsigned int ms = 0; ms < conf_ms(10000) && !in_time; ms += 5) {
        in_time = __atomic_load_n(done, __ATOMIC_ACQUIRE);
        if (!in_time)
            nap_ms(5);
    }
    while (!__atomic_load_n(done, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&box_lock);
        pthread_cond_broadcast(cond);
        pthread_mutex_unlock(&box_lock);
        nap_ms(50);
    }
    pthread_join(t, res);
    return in_time;
}

typedef struct sleeper {
    int started;    /* atomic: it holds box_lock */
    int go;         /* under box_lock: its predicate */
    int rc;         /* what its last wait returned */
    int done;       /* atomic: it returned */
} sleeper_t;

static void *sleeper(void *arg)
{
    sleeper_t *s = arg;
    pthread_mutex_lock(&box_lock);
    __atomic_store_n(&s->started, 1, __ATOMIC_RELEASE);
    s->rc = 0;
    while (!s->go && s->rc == 0)
        s->rc = pthread_cond_wait(&nonempty, &box_lock);
    pthread_mutex_unlock(&box_lock);
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* A waiter asleep in one wait on the selected nonempty (TIMED: with a
 * deadline far off), which nothing signals, is cancelled there: its wait
 * ends at once, not at a signal or the deadline (LTP's
 * pthread_cond_wait/2-3, pthread_cond_timedwait/2-6), its clean-up handler
 * holds box_lock and unlocks it, and it leaves the condition: no key of
 * it is left, and a signal afterwards wakes the next waiter. */
static void check_cancel_sleep(int timed, const char *what)
{
    victim_t v = { &nonempty, timed, 0, 0, 0, -1, 0, 0, -1, -1, 600000 };
    sleeper_t s = { 0, 0, -1, 0 };
    pthread_t t, u;
    void *res = NULL;
    if (pthread_create(&t, NULL, cancel_waiter, &v) != 0) {
        conf_ok(0, "%s: start the waiter", what);
        return;
    }
    wait_flag(&v.started);
    pthread_mutex_lock(&box_lock);   /* the waiter sleeps in its wait */
    pthread_cancel(t);
    pthread_mutex_unlock(&box_lock);
    conf_ok(join_bounded(t, &v.cleaned, &nonempty, &res), "%s: the wait ended while nothing signalled",
            what);
    conf_ok(res == PTHREAD_CANCELED, "%s: cancelled (a wait returned %d)", what, v.returned);
    conf_ok(v.cleaned && v.held >= 1, "%s: the clean-up handler ran with box_lock held in "
            "redis (%d)", what, v.held);
    conf_eq(v.unlocked, 0, "%s: the clean-up handler unlocked box_lock", what);
    int left = conf_count_keys("{c*}conf_cond.c:nonempty:*");
    conf_ok(left == 0, "%s: the waiter left the condition (%d keys)", what, left);
    if (pthread_create(&u, NULL, sleeper, &s) != 0) {
        conf_ok(0, "%s: start another waiter", what);
        return;
    }
    wait_flag(&s.started);
    pthread_mutex_lock(&box_lock);   /* it sleeps in its wait */
    s.go = 1;
    conf_eq(pthread_cond_signal(&nonempty), 0, "%s: signal", what);
    pthread_mutex_unlock(&box_lock);
    conf_ok(join_bounded(u, &s.done, &nonempty, &res), "%s: the signal woke the next waiter", what);
    conf_eq(s.rc, 0, "%s: its wait returned 0", what);
    int rc = pthread_mutex_trylock(&box_lock);
    conf_eq(rc, 0, "%s: box_lock is free afterwards", what);
    if (rc == 0)
        pthread_mutex_unlock(&box_lock);
}

/* Lock, signal and unlock with a cancellation pending: none is a
 * cancellation point, so the next one acts on it. */
static void *cancel_caller(void *arg)
{
    victim_t *v = arg;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    __atomic_store_n(&v->started, 1, __ATOMIC_RELEASE);
    wait_flag(&v->sent);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    if (pthread_mutex_lock(&box_lock) == 0)
        v->progress = 1;
    if (pthread_cond_signal(&nonempty) == 0 && pthread_cond_broadcast(&nonfull) == 0)
        v->progress++;
    if (pthread_mutex_unlock(&box_lock) == 0)
        v->progress++;
    pthread_testcancel();
    v->progress = 100;
    return NULL;
}

static void check_cancel_calls(void)
{
    victim_t v = { NULL, 0, 1, 0, 0, -1, 0, 0, -1, -1, 0 };
    pthread_t t;
    void *res = NULL;
    if (pthread_create(&t, NULL, cancel_caller, &v) != 0) {
        conf_ok(0, "cancellation pending: start the thread");
        return;
    }
    wait_flag(&v.started);
    pthread_cancel(t);
    __atomic_store_n(&v.sent, 1, __ATOMIC_RELEASE);
    pthread_join(t, &res);
    conf_ok(res == PTHREAD_CANCELED && v.progress == 3, "cancellation pending: lock, signal "
            "and unlock returned, pthread_testcancel acted (got to %d of 3)", v.progress);
}

static void check_cancel(void)
{
#ifdef CONF_ASAN
    (void)check_cancel_wait;
    (void)check_cancel_sleep;
    conf_ok(1, "cancelled waits # SKIP AddressSanitizer loses track of a cancelled "
            "thread's unwinding");
#else
    check_cancel_wait(&plain_cond, 0, 0, "cancelled in a wait on an unselected condition");
    check_cancel_wait(&plain_cond, 1, 0, "cancelled in a timedwait on an unselected condition");
#ifdef CONF_TSAN
    (void)check_cancel_sleep;
    conf_ok(1, "cancelled waits on a selected condition # SKIP ThreadSanitizer does not "
            "follow an unwinding that starts in its poll interceptor");
#else
    check_cancel_wait(&nonempty, 1, 0, "cancelled in a timedwait on a selected condition");
    check_cancel_wait(&nonempty, 0, 1, "cancelled before a wait on a selected condition");
    check_cancel_sleep(0, "cancelled asleep in a wait on a selected condition");
    check_cancel_sleep(1, "cancelled asleep in a timedwait on a selected condition");
#endif
#endif
    check_cancel_calls();
}

int main(void)
{
    setenv("NETMUTEX_CONDS", "conf_cond.c:nonempty,conf_cond.c:nonfull,conf_cond.c:mono,"
           "conf_cond.c:lonely", 0);
    conf_setup("conf_cond.c:box_lock=box_lock", 120);
    shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(sh, 0, sizeof *sh);
    check_producer_consumer(sh);
    check_unselected_mutex();
    check_timeouts();
    check_local(&box_lock, "unselected condition, selected mutex");
    check_local(&plain_lock, "unselected condition, unselected mutex");
    check_cancel();
    int left = conf_count_keys("{c*");
    conf_ok(left == 0, "nothing of the condition variables is left on the server (%d keys)",
            left);
    return conf_done();
}
