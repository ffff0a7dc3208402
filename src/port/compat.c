/*
 * compat.c -- the source route: the netmutex_pthread_* calls that
 * <netmutex/pthread.h> renames the pthread mutex calls to.
 *
 * A netmutex_pthread_mutex_t embeds the real pthread mutex.  Its first use
 * decides, once, what it is: a network mutex if NETMUTEX_MUTEXES selects
 * its symbol or the FILE:LINE of its initializer, a plain local mutex
 * otherwise; netmutex_pthread_setname() overrides that.  The decision is
 * kept in nmp_port (LOCAL or the port), so an unselected mutex costs one
 * load and a compare over the real call.  pthread_mutex_init gives a
 * mutex no FILE:LINE: only its symbol (a global) or setname selects it.
 * Condition variables and read-write locks keep their types:
 * NETMUTEX_CONDS and NETMUTEX_RWLOCKS select them by address, as on the
 * link route (condsel.h, rwsel.h).  The calls themselves are calls.def's,
 * made by route.inc as the link route's are; this file has what is the
 * source route's own: a mutex's first use, its init and destroy.
 */
#define NETMUTEX_PTHREAD_DECLARE_ONLY
#include "condsel.h"
#include "core.h"
#include "rwsel.h"
#include "select.h"
#include "spec.h"

#include <errno.h>

#include "netmutex/pthread.h"

static char local_mark;
#define LOCAL ((void *)&local_mark)

/* First use: select or not, and publish the answer; a thread that loses
 * the race to publish takes the winner's. */
static nm_port_t *decide(netmutex_pthread_mutex_t *m, int *err)
{
    const char *name = nm_select_name(m, m->nmp_file, m->nmp_line);
    nm_port_t *p = NULL;
    void *expected = NULL;
    if (name && (*err = nm_port_create(&p, name, &m->nmp_local)) != 0)
        return NULL;
    if (__atomic_compare_exchange_n(&m->nmp_port, &expected, p ? (void *)p : LOCAL, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return p;
    if (p)
        nm_port_free(p);
    return expected == LOCAL ? NULL : expected;
}

/* The port of M into *P (NULL: a local mutex); EINVAL for a NULL M, or
 * why its port could not be made. */
static int resolve(netmutex_pthread_mutex_t *m, nm_port_t **p)
{
    int err = 0;
    if (!m)
        return EINVAL;
    void *v = __atomic_load_n(&m->nmp_port, __ATOMIC_ACQUIRE);
    *p = v == LOCAL ? NULL : v ? v : decide(m, &err);
    return err;
}

int netmutex_pthread_setname(netmutex_pthread_mutex_t *m, const char *name)
{
    nm_port_t *p;
    int err;
    if (!m || !nm_port_name_ok(name))
        return EINVAL;
    if ((err = nm_port_idle(&m->nmp_local)) != 0 ||
        (err = nm_port_create(&p, name, &m->nmp_local)) != 0)
        return err;
    void *old = __atomic_exchange_n(&m->nmp_port, p, __ATOMIC_ACQ_REL);
    if (old && old != LOCAL && (err = nm_port_free(old)) != 0) {
        __atomic_store_n(&m->nmp_port, old, __ATOMIC_RELEASE);
        nm_port_free(p);
    }
    if (!err)
        netmutex_log(NETMUTEX_LOG_INFO, "netmutex_pthread_setname: the mutex at %p is '%s'",
                     (void *)m, name);
    return err;
}

static int mutex_init_(netmutex_pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
    if (!m)
        return EINVAL;
    int err = __real_pthread_mutex_init(&m->nmp_local, attr);
    if (!err) {
        m->nmp_file = NULL;
        m->nmp_line = 0;
        m->nmp_port = NULL;
    }
    return err;
}

/* The port goes first: a locked network mutex is EBUSY before anything
 * is torn down.  The next use after a new init decides again. */
static int mutex_destroy_(netmutex_pthread_mutex_t *m)
{
    if (!m)
        return EINVAL;
    void *p = __atomic_load_n(&m->nmp_port, __ATOMIC_ACQUIRE);
    int err = p && p != LOCAL ? nm_port_free(p) : 0;
    if (err)
        return err;
    __atomic_store_n(&m->nmp_port, NULL, __ATOMIC_RELEASE);
    return __real_pthread_mutex_destroy(&m->nmp_local);
}

/* Every call of calls.def, netmutex_pthread_NAME for pthread_NAME. */
#define NM_MUTEX_T netmutex_pthread_mutex_t
#define NM_ROUTE_FN(name) netmutex_pthread_##name
#define NM_ROUTE_LOCAL(m) (&(m)->nmp_local)
#include "route.inc"
