/*
 * core.h -- a selected mutex (core.c), for both routes: a netmutex plus
 * the process's real pthread mutex, locked in that order.  Holding the
 * real mutex too is what lets a process-local condition variable work on a
 * cluster-wide mutex; core.c says how.  The source route (compat.c) and
 * the link route (wrap.c) differ only in how they find a mutex's port.
 */
#ifndef NM_PORT_CORE_H
#define NM_PORT_CORE_H

#include <ac_config.h>

#include <pthread.h>
#include <time.h>

#include "netmutex.h"
#include "real.h"

typedef struct nm_port {
    netmutex_t net;     /* the cluster-wide lock */
    pthread_t owner;    /* atomic; meaningful while owned is 1 */
    int owned;          /* atomic */
    unsigned int depth; /* read and written by the owner only */
} nm_port_t;

/* How to wait: NM_PORT_FOREVER has no deadline, NM_PORT_TRY never waits,
 * NM_PORT_DEFAULT_CLOCK is the deadline of the timed calls (timedlock:
 * CLOCK_REALTIME; cond_timedwait: the condition variable's clock), and a
 * real clock id is that of the clock calls (clocklock, cond_clockwait). */
#define NM_PORT_FOREVER ((clockid_t)-1)
#define NM_PORT_TRY ((clockid_t)-2)
#define NM_PORT_DEFAULT_CLOCK ((clockid_t)-3)

typedef struct nm_port_wait {
    clockid_t clock;
    const struct timespec *abstime;
} nm_port_wait_t;

/* None of netmutex's calls is cancellation-safe (netmutex(3)): a thread
 * cancelled inside one would leave the library's state half changed.  Of
 * the pthread calls the layer stands for, only the condition waits are
 * cancellation points, so the layer reaches netmutex with cancellation
 * disabled, and its waits act on a cancellation only where the mutex is
 * held, as pthread's do before the clean-up handlers run (core.c). */
static inline int nm_port_nocancel(void)
{
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    return old;
}

static inline void nm_port_recancel(int old)
{
    pthread_setcancelstate(old, NULL);
}

/* A port named NAME whose type and robustness are read from REAL. */
int nm_port_create(nm_port_t **out, const char *name, const pthread_mutex_t *real);
/* EBUSY while locked; frees P otherwise. */
int nm_port_free(nm_port_t *p);
int nm_port_lock(nm_port_t *p, pthread_mutex_t *local, nm_port_wait_t how);
int nm_port_unlock(nm_port_t *p, pthread_mutex_t *local);
int nm_port_consistent(nm_port_t *p);
int nm_port_cond_wait(nm_port_t *p, pthread_mutex_t *local, pthread_cond_t *c,
                      nm_port_wait_t how);
/* The wait on a selected condition variable REAL, whose netmutex
 * condition is NC; NM_PORT_DEFAULT_CLOCK is REAL's clock. */
int nm_port_netcond_wait(nm_port_t *p, pthread_mutex_t *local, netmutex_cond_t *nc,
                         const pthread_cond_t *real, nm_port_wait_t how);
/* EBUSY when a thread of this process holds REAL (as a plain mutex). */
int nm_port_idle(pthread_mutex_t *real);

/* The calls on a mutex whose port is P, or the real calls when P is NULL
 * (not selected).  Inline, so that the link route's wrappers, which pass
 * a constant HOW, reduce to a test and one call for an unselected mutex. */
static inline int nm_port_lock_any(nm_port_t *p, pthread_mutex_t *local, nm_port_wait_t how)
{
    if (p)
        return nm_port_lock(p, local, how);
    switch (how.clock) {
    case NM_PORT_FOREVER: return __real_pthread_mutex_lock(local);
    case NM_PORT_TRY: return __real_pthread_mutex_trylock(local);
    case NM_PORT_DEFAULT_CLOCK: return __real_pthread_mutex_timedlock(local, how.abstime);
    default: return __real_pthread_mutex_clocklock(local, how.clock, how.abstime);
    }
}

static inline int nm_port_unlock_any(nm_port_t *p, pthread_mutex_t *local)
{
    return p ? nm_port_unlock(p, local) : __real_pthread_mutex_unlock(local);
}

static inline int nm_port_consistent_any(nm_port_t *p, pthread_mutex_t *local)
{
    return p ? nm_port_consistent(p) : __real_pthread_mutex_consistent(local);
}

static inline int nm_port_cond_wait_any(nm_port_t *p, pthread_mutex_t *local,
                                        pthread_cond_t *c, nm_port_wait_t how)
{
    if (p)
        return nm_port_cond_wait(p, local, c, how);
    switch (how.clock) {
    case NM_PORT_FOREVER: return __real_pthread_cond_wait(c, local);
    case NM_PORT_DEFAULT_CLOCK: return __real_pthread_cond_timedwait(c, local, how.abstime);
    default: return __real_pthread_cond_clockwait(c, local, how.clock, how.abstime);
    }
}

#endif /* NM_PORT_CORE_H */
