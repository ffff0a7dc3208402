/*
 * attr.c -- pthread_mutexattr_* for the source route.  Attributes
 * stay real pthread ones (a network mutex reads its type and robustness
 * from the real mutex they initialized); these only turn the NULL
 * pointers that glibc would crash on into EINVAL.
 */
#define NETMUTEX_PTHREAD_DECLARE_ONLY
#include <ac_config.h>

#include <errno.h>

#include "netmutex/pthread.h"

int netmutex_pthread_mutexattr_init(pthread_mutexattr_t *attr)
{
    return attr ? pthread_mutexattr_init(attr) : EINVAL;
}

int netmutex_pthread_mutexattr_destroy(pthread_mutexattr_t *attr)
{
    return attr ? pthread_mutexattr_destroy(attr) : EINVAL;
}

int netmutex_pthread_mutexattr_settype(pthread_mutexattr_t *attr, int type)
{
    return attr ? pthread_mutexattr_settype(attr, type) : EINVAL;
}

int netmutex_pthread_mutexattr_gettype(const pthread_mutexattr_t *attr, int *type)
{
    return attr && type ? pthread_mutexattr_gettype(attr, type) : EINVAL;
}

int netmutex_pthread_mutexattr_setrobust(pthread_mutexattr_t *attr, int robust)
{
    return attr ? pthread_mutexattr_setrobust(attr, robust) : EINVAL;
}

int netmutex_pthread_mutexattr_getrobust(const pthread_mutexattr_t *attr, int *robust)
{
    return attr && robust ? pthread_mutexattr_getrobust(attr, robust) : EINVAL;
}
