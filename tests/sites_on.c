/*
 * sites_on.c -- sites.h's calls with NETMUTEX_CALL_SITES: every lock call
 * names this file and its line.  A line stored with __LINE__ is the line
 * of the call beside it.
 */
#define NETMUTEX_CALL_SITES
#include <netmutex/pthread.h>

#include <errno.h>
#include <time.h>

#include "sites.h"

/* Unlocks B then A; RC, or the first unlock's error. */
static int unlock_both(pthread_mutex_t *a, pthread_mutex_t *b, int rc)
{
    int rb = pthread_mutex_unlock(b), ra = pthread_mutex_unlock(a);
    return rc ? rc : rb ? rb : ra;
}

int sites_on_forward(pthread_mutex_t *a, pthread_mutex_t *b, int *line)
{
    int rc = pthread_mutex_lock(a);
    if (rc)
        return rc;
    *line = __LINE__; rc = pthread_mutex_lock(b);
    return rc ? (pthread_mutex_unlock(a), rc) : unlock_both(a, b, 0);
}

int sites_on_reverse(pthread_mutex_t *a, pthread_mutex_t *b, int *line)
{
    int rc = pthread_mutex_lock(b);
    if (rc)
        return rc;
    *line = __LINE__; rc = pthread_mutex_lock(a);
    return rc ? (pthread_mutex_unlock(b), rc) : unlock_both(b, a, 0);
}

int sites_on_cond(pthread_mutex_t *a, pthread_mutex_t *b, int *line, int *wait_line)
{
    static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    struct timespec until;
    int rc = pthread_mutex_lock(a);
    if (rc)
        return rc;
    *line = __LINE__; rc = pthread_mutex_lock(b);
    if (rc)
        return pthread_mutex_unlock(a), rc;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 10 * 1000 * 1000;
    if (until.tv_nsec >= 1000 * 1000 * 1000) {
        until.tv_sec++;
        until.tv_nsec -= 1000 * 1000 * 1000;
    }
    *wait_line = __LINE__; rc = pthread_cond_timedwait(&cv, a, &until);
    return unlock_both(a, b, rc == ETIMEDOUT ? 0 : rc ? rc : -1);
}

/* The local mutex is also locked through a pointer to the function: the
 * name not followed by a call is still the function, without a site. */
int sites_on_no_hold(pthread_mutex_t *held)
{
    static pthread_mutex_t local = PTHREAD_MUTEX_INITIALIZER;
    int (*lock_fn)(pthread_mutex_t *) = &pthread_mutex_lock;
    int rc = pthread_mutex_lock(&local);
    if (!rc)
        rc = pthread_mutex_unlock(&local);
    if (!rc)
        rc = lock_fn(&local);
    if (!rc)
        rc = pthread_mutex_unlock(&local);
    if (!rc && pthread_mutex_trylock(held) == 0)
        rc = -1;
    return rc;
}
