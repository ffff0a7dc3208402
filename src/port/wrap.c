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

#define WRAP_API NETMUTEX_API
WRAP_API int __wrap_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr);
WRAP_API int __wrap_pthread_mutex_destroy(pthread_mutex_t *m);
WRAP_API int __wrap_pthread_mutex_lock(pthread_mutex_t *m);
WRAP_API int __wrap_pthread_mutex_trylock(pthread_mutex_t *m);
WRAP_API int __wrap_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime);
WRAP_API int __wrap_pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clockid,
                                            const struct timespec *abstime);
WRAP_API int __wrap_pthread_mutex_unlock(pthread_mutex_t *m);
WRAP_API int __wrap_pthread_mutex_consistent(pthread_mutex_t *m);
WRAP_API int __wrap_pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *attr);
WRAP_API int __wrap_pthread_cond_destroy(pthread_cond_t *c);
WRAP_API int __wrap_pthread_cond_signal(pthread_cond_t *c);
WRAP_API int __wrap_pthread_cond_broadcast(pthread_cond_t *c);
WRAP_API int __wrap_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
WRAP_API int __wrap_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                           const struct timespec *abstime);
WRAP_API int __wrap_pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m,
                                           clockid_t clockid, const struct timespec *abstime);
WRAP_API int __wrap_pthread_rwlock_init(pthread_rwlock_t *rw, const pthread_rwlockattr_t *attr);
WRAP_API int __wrap_pthread_rwlock_destroy(pthread_rwlock_t *rw);
WRAP_API int __wrap_pthread_rwlock_rdlock(pthread_rwlock_t *rw);
WRAP_API int __wrap_pthread_rwlock_tryrdlock(pthread_rwlock_t *rw);
WRAP_API int __wrap_pthread_rwlock_timedrdlock(pthread_rwlock_t *rw,
                                               const struct timespec *abstime);
WRAP_API int __wrap_pthread_rwlock_clockrdlock(pthread_rwlock_t *rw, clockid_t clockid,
                                               const struct timespec *abstime);
WRAP_API int __wrap_pthread_rwlock_wrlock(pthread_rwlock_t *rw);
WRAP_API int __wrap_pthread_rwlock_trywrlock(pthread_rwlock_t *rw);
WRAP_API int __wrap_pthread_rwlock_timedwrlock(pthread_rwlock_t *rw,
                                               const struct timespec *abstime);
WRAP_API int __wrap_pthread_rwlock_clockwrlock(pthread_rwlock_t *rw, clockid_t clockid,
                                               const struct timespec *abstime);
WRAP_API int __wrap_pthread_rwlock_unlock(pthread_rwlock_t *rw);

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

static inline int lock_with(pthread_mutex_t *m, nm_port_wait_t how)
{
    nm_port_t *p;
    int err = resolve(m, &p);
    return err ? err : nm_port_lock_any(p, m, how);
}

static inline int cond_with(pthread_cond_t *c, pthread_mutex_t *m, nm_port_wait_t how)
{
    nm_port_t *p;
    int err = c ? resolve(m, &p) : EINVAL;
    return err ? err : nm_cond_wait(c, p, m, how);
}

int netmutex_wrap_register(pthread_mutex_t *m, const char *name)
{
    return nm_select_register(m, name);
}

/* A selection stays with the address: the mutex's port is made again on
 * first use after a new init. */
int __wrap_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
    return m ? __real_pthread_mutex_init(m, attr) : EINVAL;
}

int __wrap_pthread_mutex_destroy(pthread_mutex_t *m)
{
    if (!m)
        return EINVAL;
    int err = nm_select_drop(m);
    return err ? err : __real_pthread_mutex_destroy(m);
}

int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
    return lock_with(m, (nm_port_wait_t){ NM_PORT_FOREVER, NULL });
}

int __wrap_pthread_mutex_trylock(pthread_mutex_t *m)
{
    return lock_with(m, (nm_port_wait_t){ NM_PORT_TRY, NULL });
}

int __wrap_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
    return lock_with(m, (nm_port_wait_t){ NM_PORT_DEFAULT_CLOCK, abstime });
}

int __wrap_pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clockid,
                                   const struct timespec *abstime)
{
    return clockid < 0 ? EINVAL : lock_with(m, (nm_port_wait_t){ clockid, abstime });
}

int __wrap_pthread_mutex_unlock(pthread_mutex_t *m)
{
    nm_port_t *p;
    int err = resolve(m, &p);
    return err ? err : nm_port_unlock_any(p, m);
}

int __wrap_pthread_mutex_consistent(pthread_mutex_t *m)
{
    nm_port_t *p;
    int err = resolve(m, &p);
    return err ? err : nm_port_consistent_any(p, m);
}

int __wrap_pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *attr)
{
    return nm_cond_init(c, attr);
}

int __wrap_pthread_cond_destroy(pthread_cond_t *c)
{
    return nm_cond_destroy(c);
}

int __wrap_pthread_cond_signal(pthread_cond_t *c)
{
    return nm_cond_signal(c, 0);
}

int __wrap_pthread_cond_broadcast(pthread_cond_t *c)
{
    return nm_cond_signal(c, 1);
}

int __wrap_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    return cond_with(c, m, (nm_port_wait_t){ NM_PORT_FOREVER, NULL });
}

int __wrap_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  const struct timespec *abstime)
{
    return cond_with(c, m, (nm_port_wait_t){ NM_PORT_DEFAULT_CLOCK, abstime });
}

int __wrap_pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clockid,
                                  const struct timespec *abstime)
{
    return clockid < 0 ? EINVAL : cond_with(c, m, (nm_port_wait_t){ clockid, abstime });
}

int __wrap_pthread_rwlock_init(pthread_rwlock_t *rw, const pthread_rwlockattr_t *attr)
{
    return nm_rwlock_init(rw, attr);
}

int __wrap_pthread_rwlock_destroy(pthread_rwlock_t *rw)
{
    return nm_rwlock_destroy(rw);
}

int __wrap_pthread_rwlock_rdlock(pthread_rwlock_t *rw)
{
    return nm_rwlock_lock(rw, NM_RW_READ, (nm_port_wait_t){ NM_PORT_FOREVER, NULL });
}

int __wrap_pthread_rwlock_tryrdlock(pthread_rwlock_t *rw)
{
    return nm_rwlock_lock(rw, NM_RW_READ, (nm_port_wait_t){ NM_PORT_TRY, NULL });
}

int __wrap_pthread_rwlock_timedrdlock(pthread_rwlock_t *rw, const struct timespec *abstime)
{
    return nm_rwlock_lock(rw, NM_RW_READ, (nm_port_wait_t){ NM_PORT_DEFAULT_CLOCK, abstime });
}

int __wrap_pthread_rwlock_clockrdlock(pthread_rwlock_t *rw, clockid_t clockid,
                                      const struct timespec *abstime)
{
    return clockid < 0 ? EINVAL
                       : nm_rwlock_lock(rw, NM_RW_READ, (nm_port_wait_t){ clockid, abstime });
}

int __wrap_pthread_rwlock_wrlock(pthread_rwlock_t *rw)
{
    return nm_rwlock_lock(rw, NM_RW_WRITE, (nm_port_wait_t){ NM_PORT_FOREVER, NULL });
}

int __wrap_pthread_rwlock_trywrlock(pthread_rwlock_t *rw)
{
    return nm_rwlock_lock(rw, NM_RW_WRITE, (nm_port_wait_t){ NM_PORT_TRY, NULL });
}

int __wrap_pthread_rwlock_timedwrlock(pthread_rwlock_t *rw, const struct timespec *abstime)
{
    return nm_rwlock_lock(rw, NM_RW_WRITE, (nm_port_wait_t){ NM_PORT_DEFAULT_CLOCK, abstime });
}

int __wrap_pthread_rwlock_clockwrlock(pthread_rwlock_t *rw, clockid_t clockid,
                                      const struct timespec *abstime)
{
    return clockid < 0 ? EINVAL
                       : nm_rwlock_lock(rw, NM_RW_WRITE, (nm_port_wait_t){ clockid, abstime });
}

int __wrap_pthread_rwlock_unlock(pthread_rwlock_t *rw)
{
    return nm_rwlock_unlock(rw);
}
