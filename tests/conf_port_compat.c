/*
 * conf_port_compat.c -- what the source route (<netmutex/pthread.h>) adds
 * to pthread, beyond conf_mutex's conformance checks: NULL arguments,
 * FILE:LINE and FILE:SYMBOL selection of static mutexes (the latter found
 * in the symbol table, with the source route's larger type),
 * netmutex_pthread_setname, the recursive cond_wait refusal and the unlock
 * errors pthread has not.
 */
#include <errno.h>
#include <stdlib.h>

#include <netmutex/pthread.h>

#include "conf_port.h"

static NmRedis *redis;

/* Selected by its FILE:LINE in main (no symbol: it is static). */
static pthread_mutex_t by_line = PTHREAD_MUTEX_INITIALIZER; static const int by_line_at = __LINE__;

/* Selected by FILE:SYMBOL in main. */
static pthread_mutex_t by_symbol = PTHREAD_MUTEX_INITIALIZER;

static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

static int held_in_redis(const char *name)
{
    return conf_held_in_redis(redis, name);
}

static int released_in_redis(const char *name)
{
    return conf_released_in_redis(redis, name);
}

static void test_null(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int v;

    conf_check_null_calls();
    nm_assert_rc(pthread_mutexattr_init(NULL), EINVAL);
    nm_assert_rc(pthread_mutexattr_destroy(NULL), EINVAL);
    nm_assert_rc(pthread_mutexattr_settype(NULL, PTHREAD_MUTEX_NORMAL), EINVAL);
    nm_assert_rc(pthread_mutexattr_gettype(NULL, &v), EINVAL);
    nm_assert_rc(pthread_mutexattr_setrobust(NULL, PTHREAD_MUTEX_ROBUST), EINVAL);
    nm_assert_rc(pthread_mutexattr_getrobust(NULL, &v), EINVAL);
    nm_assert_rc(netmutex_pthread_setname(NULL, "x"), EINVAL);
    nm_assert_rc(netmutex_pthread_setname(&m, NULL), EINVAL);
    nm_assert_rc(netmutex_pthread_setname(&m, ""), EINVAL);
}

static void test_file_line(void)
{
    nm_assert_rc(pthread_mutex_lock(&by_line), 0);
    g_assert_true(held_in_redis("port:by-line"));
    nm_assert_rc(pthread_mutex_unlock(&by_line), 0);
    g_assert_true(released_in_redis("port:by-line"));
}

static void test_file_symbol(void)
{
    nm_assert_rc(pthread_mutex_lock(&by_symbol), 0);
    g_assert_true(held_in_redis("port:by-symbol"));
    nm_assert_rc(pthread_mutex_unlock(&by_symbol), 0);
    g_assert_true(released_in_redis("port:by-symbol"));
}

static void test_setname(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    char *name = nm_test_name("m");

    nm_assert_rc(pthread_mutex_lock(&m), 0);          /* local so far */
    g_assert_false(held_in_redis(name));
    nm_assert_rc(netmutex_pthread_setname(&m, name), EBUSY);
    nm_assert_rc(pthread_mutex_unlock(&m), 0);
    nm_assert_rc(netmutex_pthread_setname(&m, name), 0);
    nm_assert_rc(pthread_mutex_lock(&m), 0);
    g_assert_true(held_in_redis(name));
    nm_assert_rc(netmutex_pthread_setname(&m, "other"), EBUSY);
    nm_assert_rc(pthread_mutex_destroy(&m), EBUSY);
    nm_assert_rc(pthread_mutex_unlock(&m), 0);
    nm_assert_rc(pthread_mutex_destroy(&m), 0);
    g_free(name);
}

static int cond_wait_other(void *m)
{
    struct timespec ts;
    nm_deadline(&ts, CLOCK_REALTIME, 10);
    return pthread_cond_timedwait(&cond, m, &ts);
}

static void test_cond_refusals(void)
{
    pthread_mutex_t m;
    pthread_mutexattr_t a;
    struct timespec bad = { 0, -1 };
    char *name = nm_test_name("m");

    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    nm_assert_rc(pthread_mutex_init(&m, &a), 0);
    pthread_mutexattr_destroy(&a);
    nm_assert_rc(netmutex_pthread_setname(&m, name), 0);
    nm_assert_rc(pthread_cond_wait(&cond, &m), EPERM);      /* not held */
    nm_assert_rc(pthread_mutex_lock(&m), 0);
    nm_assert_rc(nm_call_run(cond_wait_other, &m, nm_ms(5000)), EPERM);
    nm_assert_rc(pthread_cond_timedwait(&cond, &m, &bad), EINVAL);
    nm_assert_rc(pthread_cond_clockwait(&cond, &m, CLOCK_PROCESS_CPUTIME_ID, &bad), EINVAL);
    nm_assert_rc(pthread_mutex_lock(&m), 0);
    /* Depth 2: pthread leaves it undefined, we refuse. */
    nm_assert_rc(pthread_cond_wait(&cond, &m), EPERM);
    nm_assert_rc(pthread_mutex_unlock(&m), 0);
    g_assert_true(held_in_redis(name));
    nm_assert_rc(pthread_mutex_unlock(&m), 0);
    g_assert_true(released_in_redis(name));
    nm_assert_rc(pthread_mutex_destroy(&m), 0);
    g_free(name);
}

/* Locks a fresh mutex named for the running test; the caller unlocks. */
static void lock_named(pthread_mutex_t *m, char **name)
{
    *name = nm_test_name("m");
    nm_assert_rc(pthread_mutex_init(m, NULL), 0);
    nm_assert_rc(netmutex_pthread_setname(m, *name), 0);
    nm_assert_rc(pthread_mutex_lock(m), 0);
}

/* After an unlock that had trouble: the mutex works again. */
static void works_again(pthread_mutex_t *m, char *name)
{
    nm_assert_rc(pthread_mutex_trylock(m), 0);
    nm_assert_rc(pthread_mutex_unlock(m), 0);
    nm_assert_rc(pthread_mutex_destroy(m), 0);
    g_free(name);
}

/* A lease lost while held (here: broken by an administrator) is reported
 * by unlock, as netmutex_unlock does. */
static void test_unlock_lost(void)
{
    pthread_mutex_t m;
    char *name;

    lock_named(&m, &name);
    nm_assert_rc(netmutex_break(name), 0);
    nm_assert_rc(pthread_mutex_unlock(&m), ENOLCK);
    works_again(&m, name);
}

/* The server gone at unlock: released here, the key expires by itself;
 * pthread_mutex_unlock says 0 (netmutex_unlock would say EIO). */
static void test_unlock_unreachable(void)
{
    pthread_mutex_t m;
    char *name;

    lock_named(&m, &name);
    nm_redis_stop(redis);
    nm_assert_rc(pthread_mutex_unlock(&m), 0);
    nm_redis_restart(redis);
    works_again(&m, name);
}

int main(int argc, char **argv)
{
    char *sel;
    int rc;

    nm_test_init(&argc, &argv);
    sel = g_strdup_printf("conf_port_compat.c:%d=port:by-line,"
                          "conf_port_compat.c:by_symbol=port:by-symbol", by_line_at);
    g_setenv("NETMUTEX_MUTEXES", sel, TRUE);
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/port/compat/null", test_null);
    g_test_add_func("/port/compat/file-line", test_file_line);
    g_test_add_func("/port/compat/file-symbol", test_file_symbol);
    g_test_add_func("/port/compat/setname", test_setname);
    g_test_add_func("/port/compat/cond-refusals", test_cond_refusals);
    g_test_add_func("/port/compat/unlock-lost", test_unlock_lost);
    g_test_add_func("/port/compat/unlock-unreachable", test_unlock_unreachable);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    g_free(sel);
    return rc;
}
