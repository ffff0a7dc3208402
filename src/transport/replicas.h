/*
 * replicas.h -- replica acknowledgement (netmutex_config_t.min_replicas):
 * an acquisition counts only once WAIT, on the connection that took the
 * lock, confirmed that enough replicas have it.
 *
 * Redis replicates asynchronously: a master that fails right after granting
 * a lock may be replaced by a replica that never saw the grant, and the
 * lock is free there while its holder goes on.  WAIT narrows that window: a
 * grant that N replicas acknowledged survives the failover if the replica
 * promoted is one of them.  It is no consensus: the failover may still
 * promote a replica outside the N (or one that lost the write by
 * restarting), and a grant that WAIT could not confirm may still reach
 * the replicas later.  The holder's renewal then finds the key gone and
 * reports the lease lost (renew.h): never silently.
 */
#ifndef NM_REPLICAS_H
#define NM_REPLICAS_H

#include <stdint.h>

#include "settings.h"

/* After a grant on the calling thread's connection to server 0 of CFG:
 * 0 if CFG asks for no acknowledgement or WAIT confirmed min_replicas
 * replicas within replica_timeout_ms (and DEADLINE); NM_ECONN if fewer
 * did (reported once until enough do again) or the connection failed.
 * The caller gives the grant back then. */
int nm_replicas_confirm(nm_config_t *cfg, int64_t deadline);

#endif /* NM_REPLICAS_H */
