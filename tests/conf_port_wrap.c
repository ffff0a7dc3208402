/*
 * conf_port_wrap.c -- what the link route (libnetmutex-wrap, linked with
 * the --wrap list) adds to pthread, beyond conf_mutex's conformance
 * checks: NULL arguments, netmutex_wrap_register and its end at destroy,
 * selection by symbol of a dynamically initialized global.
 */
#define _GNU_SOURCE
#include <errno.h>

#define NETMUTEX_PTHREAD_DECLARE_ONLY
#include <netmutex/pthread.h>

#include "conf_port.h"

static NmRedis *redis;

/* Selected by NETMUTEX_MUTEXES (main), initialized by pthread_mutex_init. */
pthread_mutex_t port_global;

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

    conf_check_null_calls();
    nm_assert_rc(netmutex_wrap_register(NULL, "x"), EINVAL);
    nm_assert_rc(netmutex_wrap_register(&m, NULL), EINVAL);
    nm_assert_rc(netmutex_wrap_register(&m, ""), EINVAL);
}

static void test_register(void)
{
    pthread_mutex_t m;
    char *name = nm_test_name("m");

    nm_assert_rc(pthread_mutex_init(&m, NULL), 0);
    nm_assert_rc(pthread_mutex_lock(&m), 0);          /* local so far */
    g_assert_false(held_in_redis(name));
    nm_assert_rc(netmutex_wrap_register(&m, name), EBUSY);
    nm_assert_rc(pthread_mutex_unlock(&m), 0);
    nm_assert_rc(netmutex_wrap_register(&m, name), 0);
    nm_assert_rc(pthread_mutex_lock(&m), 0);
    g_assert_true(held_in_redis(name));
    nm_assert_rc(netmutex_wrap_register(&m, "other"), EBUSY);
    nm_assert_rc(pthread_mutex_destroy(&m), EBUSY);
    nm_assert_rc(pthread_mutex_unlock(&m), 0);
    nm_assert_rc(pthread_mutex_destroy(&m), 0);
    /* The registration ended with the mutex: the same address is local. */
    nm_assert_rc(pthread_mutex_init(&m, NULL), 0);
    nm_assert_rc(pthread_mutex_lock(&m), 0);
    g_assert_false(held_in_redis(name));
    nm_assert_rc(pthread_mutex_unlock(&m), 0);
    nm_assert_rc(pthread_mutex_destroy(&m), 0);
    g_free(name);
}

/* An environment selection outlives destroy: a global destroyed and
 * initialized again is still the same network mutex. */
static void test_global(void)
{
    for (int round = 0; round < 2; round++) {
        nm_assert_rc(pthread_mutex_init(&port_global, NULL), 0);
        nm_assert_rc(pthread_mutex_lock(&port_global), 0);
        g_assert_true(held_in_redis("port:global"));
        nm_assert_rc(pthread_mutex_unlock(&port_global), 0);
        g_assert_true(released_in_redis("port:global"));
        nm_assert_rc(pthread_mutex_destroy(&port_global), 0);
    }
}

static void test_recursive_cond(void)
{
    pthread_mutex_t m = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    char *name = nm_test_name("m");

    /* Held by the caller itself, as a local recursive mutex. */
    nm_assert_rc(pthread_mutex_lock(&m), 0);
    nm_assert_rc(netmutex_wrap_register(&m, name), EBUSY);
    nm_assert_rc(pthread_mutex_unlock(&m), 0);
    nm_assert_rc(netmutex_wrap_register(&m, name), 0);
    nm_assert_rc(pthread_mutex_lock(&m), 0);
    nm_assert_rc(pthread_mutex_lock(&m), 0);
    nm_assert_rc(pthread_cond_wait(&c, &m), EPERM);
    nm_assert_rc(pthread_mutex_unlock(&m), 0);
    nm_assert_rc(pthread_mutex_unlock(&m), 0);
    nm_assert_rc(pthread_mutex_unlock(&m), EPERM);
    nm_assert_rc(pthread_mutex_destroy(&m), 0);
    g_free(name);
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    g_setenv("NETMUTEX_MUTEXES", "port_global=port:global", TRUE);
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/port/wrap/null", test_null);
    g_test_add_func("/port/wrap/register", test_register);
    g_test_add_func("/port/wrap/global", test_global);
    g_test_add_func("/port/wrap/recursive-cond", test_recursive_cond);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
