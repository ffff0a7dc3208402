/*
 * condsel.c -- a wait on a selected condition variable.  Its mutex must be
 * selected too: a netmutex condition is guarded by a netmutex, and a
 * process-local mutex cannot keep out a signaller of another process.  A
 * selected condition variable waited on with an unselected mutex is a
 * configuration error, so the wait returns EINVAL and says why, once
 * (netmutex_log): ported code rarely checks what a wait returns.
 */
#include "condsel.h"

#include "netmutex.h"

int nm_cond_wait_selected(pthread_cond_t *c, netmutex_cond_t *nc, nm_port_t *p,
                          pthread_mutex_t *local, nm_port_wait_t how)
{
    static int told;
    if (p)
        return nm_port_netcond_wait(p, local, nc, c, how);
    if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED)) {
        int old = nm_port_nocancel();
        netmutex_log(NETMUTEX_LOG_ERROR, "pthread_cond_wait: the condition variable at %p is "
                     "selected (NETMUTEX_CONDS) but its mutex at %p is not "
                     "(NETMUTEX_MUTEXES): select both; EINVAL (reported once)",
                     (void *)c, (void *)local);
        nm_port_recancel(old);
    }
    return EINVAL;
}

/* Not a cancellation point in pthread, so none here either (core.h). */
int nm_cond_signal_selected(netmutex_cond_t *nc, int all)
{
    int old = nm_port_nocancel();
    int err = all ? netmutex_cond_broadcast(nc) : netmutex_cond_signal(nc);
    nm_port_recancel(old);
    return err;
}
