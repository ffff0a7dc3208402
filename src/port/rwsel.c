/*
 * rwsel.c -- the calls on a selected read-write lock: netmutex's, with
 * cancellation disabled (core.h; no pthread_rwlock_* call is a
 * cancellation point).  Errors are pthread's, as netmutex_rwlock_*(3)
 * gives them; of its unlock's two codes that pthread has not, ENOLCK (the
 * hold's lease was lost: another holder may have overlapped it) is
 * returned and EIO (released here, the server could not be told, the hold
 * runs out by itself) breaks no exclusion and becomes 0, each logged once:
 * ported code rarely checks what an unlock returns.
 */
#include "rwsel.h"

#include "netmutex.h"

static int lock_read(netmutex_rwlock_t *nrw, nm_port_wait_t how)
{
    switch (how.clock) {
    case NM_PORT_FOREVER: return netmutex_rwlock_rdlock(nrw);
    case NM_PORT_TRY: return netmutex_rwlock_tryrdlock(nrw);
    case NM_PORT_DEFAULT_CLOCK: return netmutex_rwlock_timedrdlock(nrw, how.abstime);
    default: return netmutex_rwlock_clockrdlock(nrw, how.clock, how.abstime);
    }
}

static int lock_write(netmutex_rwlock_t *nrw, nm_port_wait_t how)
{
    switch (how.clock) {
    case NM_PORT_FOREVER: return netmutex_rwlock_wrlock(nrw);
    case NM_PORT_TRY: return netmutex_rwlock_trywrlock(nrw);
    case NM_PORT_DEFAULT_CLOCK: return netmutex_rwlock_timedwrlock(nrw, how.abstime);
    default: return netmutex_rwlock_clockwrlock(nrw, how.clock, how.abstime);
    }
}

int nm_rwlock_lock_selected(netmutex_rwlock_t *nrw, nm_rw_side_t side, nm_port_wait_t how)
{
    int old = nm_port_nocancel();
    int err = side == NM_RW_WRITE ? lock_write(nrw, how) : lock_read(nrw, how);
    nm_port_recancel(old);
    return err;
}

/* Once per code and process, as core.c does for a mutex. */
static void tell_once(int *told, const char *what)
{
    if (!__atomic_exchange_n(told, 1, __ATOMIC_RELAXED))
        netmutex_log(NETMUTEX_LOG_WARN, "pthread_rwlock_unlock: %s (reported once)", what);
}

int nm_rwlock_unlock_selected(netmutex_rwlock_t *nrw)
{
    static int told_lost, told_io;
    int old = nm_port_nocancel();
    int err = netmutex_rwlock_unlock(nrw);
    if (err == ENOLCK)
        tell_once(&told_lost, "a selected read-write lock's hold was lost before its unlock "
                              "(ENOLCK): another holder may have overlapped it");
    if (err == EIO) {
        tell_once(&told_io, "the server could not be told of a selected read-write lock's "
                            "release; the hold runs out by itself");
        err = 0;
    }
    nm_port_recancel(old);
    return err;
}
