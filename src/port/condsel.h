/*
 * condsel.h -- the pthread condition variable calls, for both routes
 * (condsel.c): a condition variable that NETMUTEX_CONDS selects is a netmutex
 * condition, waited on with a selected mutex (core.c); any other is the
 * real one.  A pthread_cond_t keeps its type on both routes, so both find
 * a selection by address alone (select.c).  Inline, so an unselected
 * condition variable costs a test and one call over the real call.
 */
#ifndef NM_PORT_CONDSEL_H
#define NM_PORT_CONDSEL_H

#include <ac_config.h>

#include <errno.h>
#include <pthread.h>

#include "core.h"
#include "real.h"
#include "select.h"

/* The wait on C with the mutex whose port is P (NULL: not selected) and
 * whose real mutex is LOCAL. */
int nm_cond_wait_selected(pthread_cond_t *c, netmutex_cond_t *nc, nm_port_t *p,
                          pthread_mutex_t *local, nm_port_wait_t how);
/* Signal (ALL: broadcast) the netmutex condition NC of a selected one. */
int nm_cond_signal_selected(netmutex_cond_t *nc, int all);

static inline int nm_cond_wait(pthread_cond_t *c, nm_port_t *p, pthread_mutex_t *local,
                               nm_port_wait_t how)
{
    int err;
    netmutex_cond_t *nc = nm_select_cond(c, &err);
    if (err)
        return err;
    return nc ? nm_cond_wait_selected(c, nc, p, local, how)
              : nm_port_cond_wait_any(p, local, c, how);
}

static inline int nm_cond_signal(pthread_cond_t *c, int all)
{
    int err;
    if (!c)
        return EINVAL;
    netmutex_cond_t *nc = nm_select_cond(c, &err);
    if (err)
        return err;
    if (nc)
        return nm_cond_signal_selected(nc, all);
    return all ? __real_pthread_cond_broadcast(c) : __real_pthread_cond_signal(c);
}

/* A selection stays with the address: the netmutex condition is made
 * again on first use after a new init. */
static inline int nm_cond_init(pthread_cond_t *c, const pthread_condattr_t *attr)
{
    return c ? __real_pthread_cond_init(c, attr) : EINVAL;
}

static inline int nm_cond_destroy(pthread_cond_t *c)
{
    if (!c)
        return EINVAL;
    int err = nm_select_cond_drop(c);
    return err ? err : __real_pthread_cond_destroy(c);
}

#endif /* NM_PORT_CONDSEL_H */
