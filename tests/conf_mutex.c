/*
 * conf_mutex.c -- POSIX conformance checks of pthread_mutex_* and of
 * condition variables, in plain pthread C.
 *
 * tests/Makefile.am builds this one source three ways: plain (checks the
 * checks against the C library), through <netmutex/pthread.h> on the
 * compiler line, and as the plain object relinked with --wrap.  In the
 * last two the conf_* globals below except conf_local are selected, so
 * they are network mutexes, and conf_check_backing asserts so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "conf_harness.h"

pthread_mutex_t conf_normal = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t conf_recursive = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
pthread_mutex_t conf_errorcheck = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
pthread_mutex_t conf_dyn;
pthread_mutex_t conf_dyn_recursive;
pthread_mutex_t conf_dyn_errorcheck;
pthread_mutex_t conf_cv = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t conf_local = PTHREAD_MUTEX_INITIALIZER;

#define SELECTED "conf_normal,conf_recursive,conf_errorcheck,conf_dyn," \
                 "conf_dyn_recursive,conf_dyn_errorcheck,conf_cv"

/* ---- the same call from another thread -------------------------------- */

enum op { TRYLOCK, UNLOCK, TIMEDLOCK, CLOCKLOCK, BADLOCK };

struct call {
    pthread_mutex_t *m;
    enum op op;
    unsigned int ms;
    int result;
    long late_ms;      /* how long after the deadline an ETIMEDOUT came */
};

static int timed(struct call *c, clockid_t clock)
{
    struct timespec deadline, now;
    conf_deadline(&deadline, clock, c->ms);
    int err = clock == CLOCK_REALTIME ? pthread_mutex_timedlock(c->m, &deadline)
                                      : pthread_mutex_clocklock(c->m, clock, &deadline);
    clock_gettime(clock, &now);
    c->late_ms = conf_diff_ms(&now, &deadline);
    return err;
}

static void *run_call(void *arg)
{
    struct call *c = arg;
    struct timespec bad = { 0, 1000000000L };
    switch (c->op) {
    case TRYLOCK: c->result = pthread_mutex_trylock(c->m); break;
    case UNLOCK: c->result = pthread_mutex_unlock(c->m); break;
    case TIMEDLOCK: c->result = timed(c, CLOCK_REALTIME); break;
    case CLOCKLOCK: c->result = timed(c, CLOCK_MONOTONIC); break;
    case BADLOCK: c->result = pthread_mutex_timedlock(c->m, &bad); break;
    }
    /* Whatever this thread got, it gives back. */
    if (c->op != UNLOCK && (c->result == 0 || c->result == EOWNERDEAD))
        pthread_mutex_unlock(c->m);
    return NULL;
}

static struct call other(pthread_mutex_t *m, enum op op, unsigned int ms)
{
    struct call c = { m, op, ms, -1, 0 };
    pthread_t t;
    if (pthread_create(&t, NULL, run_call, &c) == 0)
        pthread_join(t, NULL);
    return c;
}

static int other_try(pthread_mutex_t *m)
{
    return other(m, TRYLOCK, 0).result;
}

/* ---- per type ---------------------------------------------------------- */

static void check_normal(pthread_mutex_t *m, const char *name)
{
    conf_eq(pthread_mutex_lock(m), 0, "%s: lock", name);
    conf_check_backing(name, 1);
    conf_eq(pthread_mutex_trylock(m), EBUSY, "%s: trylock by the owner", name);
    conf_eq(other_try(m), EBUSY, "%s: trylock by another thread", name);
    conf_eq(pthread_mutex_unlock(m), 0, "%s: unlock", name);
    conf_check_backing(name, 0);
    conf_eq(other_try(m), 0, "%s: trylock by another thread once free", name);
    conf_eq(pthread_mutex_trylock(m), 0, "%s: trylock when free", name);
    conf_eq(pthread_mutex_unlock(m), 0, "%s: unlock after trylock", name);
}

static void check_errorcheck(pthread_mutex_t *m, const char *name)
{
    conf_eq(pthread_mutex_lock(m), 0, "%s: lock", name);
    conf_check_backing(name, 1);
    conf_eq(pthread_mutex_lock(m), EDEADLK, "%s: relock by the owner", name);
    conf_eq(pthread_mutex_trylock(m), EBUSY, "%s: trylock by the owner", name);
    conf_eq(other(m, UNLOCK, 0).result, EPERM, "%s: unlock by another thread", name);
    conf_eq(pthread_mutex_unlock(m), 0, "%s: unlock", name);
    conf_eq(pthread_mutex_unlock(m), EPERM, "%s: unlock when unlocked", name);
    conf_check_backing(name, 0);
}

static void check_recursive(pthread_mutex_t *m, const char *name)
{
    conf_eq(pthread_mutex_lock(m), 0, "%s: lock", name);
    conf_eq(pthread_mutex_lock(m), 0, "%s: relock (count 2)", name);
    conf_eq(pthread_mutex_trylock(m), 0, "%s: trylock by the owner (count 3)", name);
    conf_eq(other_try(m), EBUSY, "%s: trylock by another thread", name);
    conf_eq(other(m, UNLOCK, 0).result, EPERM, "%s: unlock by another thread", name);
    conf_eq(pthread_mutex_unlock(m), 0, "%s: unlock (count 2)", name);
    conf_eq(pthread_mutex_unlock(m), 0, "%s: unlock (count 1)", name);
    conf_check_backing(name, 1);
    conf_eq(other_try(m), EBUSY, "%s: still held at count 1", name);
    conf_eq(pthread_mutex_unlock(m), 0, "%s: unlock (count 0)", name);
    conf_check_backing(name, 0);
    conf_eq(other_try(m), 0, "%s: free at count 0", name);
    conf_eq(pthread_mutex_unlock(m), EPERM, "%s: unlock when unlocked", name);
}

static void check_timed(pthread_mutex_t *m, const char *name)
{
    struct call c;
    conf_eq(pthread_mutex_lock(m), 0, "%s: lock", name);
    c = other(m, TIMEDLOCK, conf_ms(200));
    conf_eq(c.result, ETIMEDOUT, "%s: timedlock while held", name);
    conf_ok(c.late_ms >= 0, "%s: ETIMEDOUT not before the deadline (%ld ms)", name, c.late_ms);
    c = other(m, CLOCKLOCK, conf_ms(200));
    conf_eq(c.result, ETIMEDOUT, "%s: clocklock(CLOCK_MONOTONIC) while held", name);
    conf_ok(c.late_ms >= 0, "%s: ETIMEDOUT not before the deadline (%ld ms)", name, c.late_ms);
    conf_eq(other(m, BADLOCK, 0).result, EINVAL, "%s: timedlock, tv_nsec 1e9, held", name);
    conf_eq(pthread_mutex_unlock(m), 0, "%s: unlock", name);
    conf_eq(other(m, TIMEDLOCK, conf_ms(5000)).result, 0, "%s: timedlock when free", name);
    conf_eq(other(m, CLOCKLOCK, conf_ms(5000)).result, 0, "%s: clocklock when free", name);
}

/* ---- init, destroy, attributes ------------------------------------------ */

static void init_typed(pthread_mutex_t *m, int type, const char *name)
{
    pthread_mutexattr_t a;
    int got = -1;
    conf_eq(pthread_mutexattr_init(&a), 0, "%s: mutexattr_init", name);
    conf_eq(pthread_mutexattr_settype(&a, 0x7fff), EINVAL, "%s: settype(bogus)", name);
    conf_eq(pthread_mutexattr_settype(&a, type), 0, "%s: settype", name);
    conf_eq(pthread_mutexattr_gettype(&a, &got), 0, "%s: gettype", name);
    conf_ok(got == type, "%s: gettype gives what settype set", name);
    conf_eq(pthread_mutex_init(m, &a), 0, "%s: init", name);
    conf_eq(pthread_mutexattr_destroy(&a), 0, "%s: mutexattr_destroy", name);
}

static void check_lifecycle(pthread_mutex_t *m, const char *name)
{
    conf_eq(pthread_mutex_init(m, NULL), 0, "%s: init with default attributes", name);
    conf_eq(pthread_mutex_lock(m), 0, "%s: lock", name);
    conf_eq(pthread_mutex_destroy(m), EBUSY, "%s: destroy while locked", name);
    conf_eq(pthread_mutex_unlock(m), 0, "%s: unlock", name);
    conf_eq(pthread_mutex_destroy(m), 0, "%s: destroy", name);
    conf_eq(pthread_mutex_init(m, NULL), 0, "%s: init again", name);
    check_normal(m, name);
    check_timed(m, name);
    conf_eq(pthread_mutex_destroy(m), 0, "%s: destroy again", name);
}

static void check_local(void)
{
    conf_eq(pthread_mutex_lock(&conf_local), 0, "conf_local: lock");
    conf_ok(conf_key_exists("conf_local") <= 0, "conf_local: unselected, not in redis");
    conf_eq(other_try(&conf_local), EBUSY, "conf_local: trylock by another thread");
    conf_eq(pthread_mutex_unlock(&conf_local), 0, "conf_local: unlock");
}

/* ---- condition variables on a (selected) mutex -------------------------- */

#define QCAP 4
#define ITEMS 300

static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static int queue[QCAP], qlen, producer_errors;

static void *producer(void *arg)
{
    for (int i = 1; i <= ITEMS; i++) {
        producer_errors += pthread_mutex_lock(&conf_cv) != 0;
        while (qlen == QCAP)
            producer_errors += pthread_cond_wait(&not_full, &conf_cv) != 0;
        queue[qlen++] = i;
        pthread_cond_signal(&not_empty);
        producer_errors += pthread_mutex_unlock(&conf_cv) != 0;
    }
    return arg;
}

static void check_producer_consumer(void)
{
    pthread_t t;
    long sum = 0;
    int got = 0, errors = 0;
    conf_eq(pthread_create(&t, NULL, producer, NULL), 0, "cond: start the producer");
    while (got < ITEMS) {
        errors += pthread_mutex_lock(&conf_cv) != 0;
        while (qlen == 0)
            errors += pthread_cond_wait(&not_empty, &conf_cv) != 0;
        sum += queue[--qlen];
        got++;
        pthread_cond_signal(&not_full);
        errors += pthread_mutex_unlock(&conf_cv) != 0;
    }
    pthread_join(t, NULL);
    conf_ok(errors == 0 && producer_errors == 0, "cond: no call failed (%d, %d)", errors,
            producer_errors);
    conf_ok(sum == (long)ITEMS * (ITEMS + 1) / 2, "cond: every item arrived once (sum %ld)", sum);
}

static void check_timedwait(int use_clock)
{
    struct timespec deadline, now;
    clockid_t clock = use_clock ? CLOCK_MONOTONIC : CLOCK_REALTIME;
    const char *what = use_clock ? "clockwait" : "timedwait";
    conf_eq(pthread_mutex_lock(&conf_cv), 0, "cond %s: lock", what);
    conf_deadline(&deadline, clock, conf_ms(150));
    int err = use_clock ? pthread_cond_clockwait(&never, &conf_cv, clock, &deadline)
                        : pthread_cond_timedwait(&never, &conf_cv, &deadline);
    clock_gettime(clock, &now);
    conf_eq(err, ETIMEDOUT, "cond %s: nobody signals", what);
    conf_ok(conf_diff_ms(&now, &deadline) >= 0, "cond %s: not before the deadline", what);
    conf_eq(other_try(&conf_cv), EBUSY, "cond %s: the mutex is held again", what);
    conf_check_backing("conf_cv", 1);
    conf_eq(pthread_mutex_unlock(&conf_cv), 0, "cond %s: unlock", what);
}

int main(void)
{
    conf_setup(SELECTED, 300);
    check_normal(&conf_normal, "conf_normal");
    check_timed(&conf_normal, "conf_normal");
    check_errorcheck(&conf_errorcheck, "conf_errorcheck");
    check_recursive(&conf_recursive, "conf_recursive");
    init_typed(&conf_dyn_errorcheck, PTHREAD_MUTEX_ERRORCHECK, "conf_dyn_errorcheck");
    check_errorcheck(&conf_dyn_errorcheck, "conf_dyn_errorcheck");
    init_typed(&conf_dyn_recursive, PTHREAD_MUTEX_RECURSIVE, "conf_dyn_recursive");
    check_recursive(&conf_dyn_recursive, "conf_dyn_recursive");
    check_lifecycle(&conf_dyn, "conf_dyn");
    check_local();
    check_producer_consumer();
    check_timedwait(0);
    check_timedwait(1);
    conf_eq(pthread_mutex_destroy(&conf_dyn_recursive), 0, "conf_dyn_recursive: destroy");
    conf_eq(pthread_mutex_destroy(&conf_dyn_errorcheck), 0, "conf_dyn_errorcheck: destroy");
    return conf_done();
}
