/*
 * rwsel.h -- the pthread read-write lock calls, for both routes
 * (rwsel.c): a read-write lock that NETMUTEX_RWLOCKS selects is a netmutex
 * read-write lock (netmutex_rwlock_init(3)); any other is the real one.
 * A pthread_rwlock_t keeps its type on both routes, so both find a
 * selection by address alone (select.c).  Inline, so an unselected lock
 * costs a test and one call over the real call.
 */
#ifndef NM_PORT_RWSEL_H
#define NM_PORT_RWSEL_H

#include <ac_config.h>

#include <errno.h>
#include <pthread.h>

#include "core.h"
#include "real.h"
#include "select.h"

/* Which side of the lock a call takes. */
typedef enum nm_rw_side { NM_RW_READ, NM_RW_WRITE } nm_rw_side_t;

/* The lock of SIDE on the selected lock NRW, waiting as HOW says. */
int nm_rwlock_lock_selected(netmutex_rwlock_t *nrw, nm_rw_side_t side, nm_port_wait_t how);
/* The unlock of the selected lock NRW. */
int nm_rwlock_unlock_selected(netmutex_rwlock_t *nrw);

static inline int nm_rwlock_lock_real(pthread_rwlock_t *rw, nm_rw_side_t side,
                                      nm_port_wait_t how)
{
    int w = side == NM_RW_WRITE;
    switch (how.clock) {
    case NM_PORT_FOREVER:
        return w ? __real_pthread_rwlock_wrlock(rw) : __real_pthread_rwlock_rdlock(rw);
    case NM_PORT_TRY:
        return w ? __real_pthread_rwlock_trywrlock(rw) : __real_pthread_rwlock_tryrdlock(rw);
    case NM_PORT_DEFAULT_CLOCK:
        return w ? __real_pthread_rwlock_timedwrlock(rw, how.abstime)
                 : __real_pthread_rwlock_timedrdlock(rw, how.abstime);
    default:
        return w ? __real_pthread_rwlock_clockwrlock(rw, how.clock, how.abstime)
                 : __real_pthread_rwlock_clockrdlock(rw, how.clock, how.abstime);
    }
}

static inline int nm_rwlock_lock(pthread_rwlock_t *rw, nm_rw_side_t side, nm_port_wait_t how)
{
    int err;
    if (!rw)
        return EINVAL;
    netmutex_rwlock_t *nrw = nm_select_rwlock(rw, &err);
    if (err)
        return err;
    return nrw ? nm_rwlock_lock_selected(nrw, side, how) : nm_rwlock_lock_real(rw, side, how);
}

static inline int nm_rwlock_unlock(pthread_rwlock_t *rw)
{
    int err;
    if (!rw)
        return EINVAL;
    netmutex_rwlock_t *nrw = nm_select_rwlock(rw, &err);
    if (err)
        return err;
    return nrw ? nm_rwlock_unlock_selected(nrw) : __real_pthread_rwlock_unlock(rw);
}

/* A selection stays with the address: the netmutex read-write lock is
 * made again on first use after a new init, with the new init's kind. */
static inline int nm_rwlock_init(pthread_rwlock_t *rw, const pthread_rwlockattr_t *attr)
{
    return rw ? __real_pthread_rwlock_init(rw, attr) : EINVAL;
}

static inline int nm_rwlock_destroy(pthread_rwlock_t *rw)
{
    if (!rw)
        return EINVAL;
    int err = nm_select_rwlock_drop(rw);
    return err ? err : __real_pthread_rwlock_destroy(rw);
}

#endif /* NM_PORT_RWSEL_H */
