/*
 * conf_port.h -- checks shared by conf_port_compat.c and conf_port_wrap.c.
 * Included after <netmutex/pthread.h>, so pthread_mutex_t is whichever
 * type the including program's route gives it.
 */
#ifndef CONF_PORT_H
#define CONF_PORT_H

#include <errno.h>

#include "fixture.h"

/* True if mutex NAME's lock key is in R. */
static inline int conf_held_in_redis(NmRedis *r, const char *name)
{
    char *token = nm_token_of(r, name);
    int held = token != NULL;
    g_free(token);
    return held;
}

/* True if mutex NAME's lock key is gone from R, or kept there by a process
 * that caches it (lease caching: an unlock leaves the lease in place until
 * another process asks for it). */
static inline int conf_released_in_redis(NmRedis *r, const char *name)
{
    netmutex_status_t st;
    g_assert_cmpint(netmutex_status(name, &st), ==, 0);
    return !st.held || st.cached;
}

/* Every mapped call with a NULL mutex, condition variable or read-write
 * lock: EINVAL, not a crash.  glibc declares the arguments nonnull, and on the link route
 * its declarations are what the calls see: so the NULLs go through
 * volatile pointers (the compiler must neither warn nor assume) and
 * UBSan's check of that attribute is off here (these calls are the
 * point). */
__attribute__((no_sanitize("nonnull-attribute")))
static inline void conf_check_null_calls(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    pthread_mutex_t *volatile nullm = NULL;
    pthread_cond_t *volatile nullc = NULL;
    pthread_rwlock_t *volatile nullrw = NULL;
    struct timespec ts = { 0, 0 };

    nm_assert_rc(pthread_mutex_init(nullm, NULL), EINVAL);
    nm_assert_rc(pthread_mutex_destroy(nullm), EINVAL);
    nm_assert_rc(pthread_mutex_lock(nullm), EINVAL);
    nm_assert_rc(pthread_mutex_trylock(nullm), EINVAL);
    nm_assert_rc(pthread_mutex_timedlock(nullm, &ts), EINVAL);
    nm_assert_rc(pthread_mutex_clocklock(nullm, CLOCK_MONOTONIC, &ts), EINVAL);
    nm_assert_rc(pthread_mutex_unlock(nullm), EINVAL);
    nm_assert_rc(pthread_mutex_consistent(nullm), EINVAL);
    nm_assert_rc(pthread_cond_wait(nullc, &m), EINVAL);
    nm_assert_rc(pthread_cond_wait(&c, nullm), EINVAL);
    nm_assert_rc(pthread_cond_timedwait(&c, nullm, &ts), EINVAL);
    nm_assert_rc(pthread_cond_clockwait(nullc, &m, CLOCK_MONOTONIC, &ts), EINVAL);
    nm_assert_rc(pthread_cond_signal(nullc), EINVAL);
    nm_assert_rc(pthread_cond_broadcast(nullc), EINVAL);
    nm_assert_rc(pthread_cond_init(nullc, NULL), EINVAL);
    nm_assert_rc(pthread_cond_destroy(nullc), EINVAL);
    nm_assert_rc(pthread_rwlock_init(nullrw, NULL), EINVAL);
    nm_assert_rc(pthread_rwlock_destroy(nullrw), EINVAL);
    nm_assert_rc(pthread_rwlock_rdlock(nullrw), EINVAL);
    nm_assert_rc(pthread_rwlock_tryrdlock(nullrw), EINVAL);
    nm_assert_rc(pthread_rwlock_timedrdlock(nullrw, &ts), EINVAL);
    nm_assert_rc(pthread_rwlock_clockrdlock(nullrw, CLOCK_MONOTONIC, &ts), EINVAL);
    nm_assert_rc(pthread_rwlock_wrlock(nullrw), EINVAL);
    nm_assert_rc(pthread_rwlock_trywrlock(nullrw), EINVAL);
    nm_assert_rc(pthread_rwlock_timedwrlock(nullrw, &ts), EINVAL);
    nm_assert_rc(pthread_rwlock_clockwrlock(nullrw, CLOCK_MONOTONIC, &ts), EINVAL);
    nm_assert_rc(pthread_rwlock_unlock(nullrw), EINVAL);
}

#endif /* CONF_PORT_H */
