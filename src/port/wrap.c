/*
 * wrap.c -- the link route: __wrap_pthread_* for programs relinked with
 * -Wl,--wrap=pthread_mutex_lock,... (the list netmutex-wrap.pc hands out).
 *
 * The program's own objects call these instead of the C library; shared
 * libraries it uses, the C library itself and libnetmutex do not.  A
 * mutex that NETMUTEX_MUTEXES or netmutex_wrap_register selected is a
 * network mutex (core.c), a condition variable that NETMUTEX_CONDS
 * selects a netmutex condition (condsel.h), and a read-write lock that
 * NETMUTEX_RWLOCKS selects a netmutex read-write lock (rwsel.h); any other goes straight to
 * __real_pthread_*, after a NULL check and two loads -- plus, only when
 * some mutex is selected at all, a lock-free table probe (select.c).
 * The calls themselves are calls.def's, made by route.inc as the source
 * route's are; this file has what is the link route's own: which port a
 * mutex has, its init and destroy, netmutex_wrap_register.
 */
#include "real.h"   /* first: it has no .c of its own to show it compiles alone */

#include "condsel.h"
#include "core.h"
#include "rwsel.h"
#include "select.h"

#include <errno.h>

/* Declared in <netmutex/pthread.h>, which this file cannot include: its
 * renames would turn pthread_mutex_t into the source route's type. */
NETMUTEX_API int netmutex_wrap_register(pthread_mutex_t *m, const char *name);

/* The port of M into *P (NULL: not selected); EINVAL for a NULL M, or
 * why its port could not be made. */
static inline int resolve(pthread_mutex_t *m, nm_port_t **p)
{
    int err;
    if (!m)
        return EINVAL;
    *p = nm_select_port(m, &err);
    return err;
}

int netmutex_wrap_register(pthread_mutex_t *m, const char *name)
{
    return nm_select_register(m, name);
}

/* A selection stays with the address: the mutex's port is made again on
 * first use after a new init. */
static int mutex_init_(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
    return m ? __real_pthread_mutex_init(m, attr) : EINVAL;
}

static int mutex_destroy_(pthread_mutex_t *m)
{
    if (!m)
        return EINVAL;
    int err = nm_select_drop(m);
    return err ? err : __real_pthread_mutex_destroy(m);
}

/* Every call of calls.def, __wrap_pthread_NAME for pthread_NAME. */
#define NM_MUTEX_T pthread_mutex_t
#define NM_ROUTE_FN(name) __wrap_pthread_##name
#define NM_ROUTE_LOCAL(m) (m)
#include "route.inc"
