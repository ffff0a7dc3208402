/*
 * sites_off.c -- sites.h's calls without NETMUTEX_CALL_SITES: the lock
 * calls name no site, and an order's is a return address.
 */
#include <netmutex/pthread.h>

#include "sites.h"

int sites_off_forward(pthread_mutex_t *a, pthread_mutex_t *b, int *line)
{
    int rc = pthread_mutex_lock(a);
    if (rc)
        return rc;
    *line = __LINE__; rc = pthread_mutex_lock(b);
    if (!rc)
        rc = pthread_mutex_unlock(b);
    int ra = pthread_mutex_unlock(a);
    return rc ? rc : ra;
}

int sites_off_reverse(pthread_mutex_t *a, pthread_mutex_t *b, int *line)
{
    return sites_off_forward(b, a, line);
}

int sites_off_lock(pthread_mutex_t *m)
{
    return pthread_mutex_lock(m);
}

int sites_off_unlock(pthread_mutex_t *m)
{
    return pthread_mutex_unlock(m);
}
