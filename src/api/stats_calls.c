/*
 * stats_calls.c -- netmutex_stats, netmutex_stats_reset, netmutex_set_stats:
 * argument checks over the local layer's table (local/stats.h).
 */
#include "nm.h"

#include <errno.h>

#include "mutex.h"
#include "stats.h"
#include "watchdog.h"

int netmutex_set_stats(int mode)
{
    nm_library_init();
    int err = nm_stats_set_mode(mode);
    /* The publishing job runs on the background thread: start it now,
     * so that it publishes from now on. */
    if (!err && mode == NETMUTEX_STATS_PUBLISH)
        nm_watchdog_poke();
    return err;
}

int netmutex_stats(netmutex_stats_fn fn, void *arg)
{
    if (!fn)
        return EINVAL;
    nm_library_init();
    return nm_stats_snapshot(fn, arg);
}

int netmutex_stats_reset(void)
{
    nm_library_init();
    nm_stats_reset();
    return 0;
}
