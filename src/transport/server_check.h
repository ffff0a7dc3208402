/*
 * server_check.h -- refusing servers that cannot keep a lock.
 *
 * A Redis with a memory limit and an eviction policy other than noeviction
 * may delete a held lock key to make room (allkeys-* evict any key,
 * volatile-* any key with an expiry, which every lock key has), and then a
 * second process acquires while the first believes it holds the lock.  So
 * every new connection reads INFO memory (which works where CONFIG is
 * disabled) and refuses such a server, unless the user said the risk is
 * acceptable (netmutex_config_t.allow_eviction, NETMUTEX_ALLOW_EVICTION=1).
 * A server that hides INFO cannot be checked: it is used, with a warning.
 */
#ifndef NM_SERVER_CHECK_H
#define NM_SERVER_CHECK_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "settings.h"

/* 0 if SRV (just dialed on C) may hold locks, ENOTSUP if it may evict them
 * (logged once per configuration), or a connection error. */
int nm_server_check(redisContext *c, const nm_config_t *cfg, const nm_server_t *srv,
                    int64_t deadline);

#endif /* NM_SERVER_CHECK_H */
