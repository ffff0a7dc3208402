/*
 * sentinel.h -- finding the master through Redis Sentinel, for a
 * redis-sentinel:// URL (url.h has the form).
 *
 * Such a URL is one server of the configuration whose address is not known
 * in advance.  Dialing it asks the sentinels in turn for MASTERNAME's
 * address (SENTINEL get-master-addr-by-name), each within its share of the
 * time left, so a silent sentinel costs only its share; it then dials that
 * address with the URL's user, password and db and confirms with ROLE that
 * the node is a master (a sentinel that has not heard of a failover yet
 * names a demoted one).  The credentials before the '@' belong to the data
 * nodes; the sentinels get the query's, or none.
 *
 * Following failovers.  A connection is dropped and re-dialed (so the
 * sentinels are asked again) when it fails, when a write is refused with
 * READONLY (reply.c) and when ROLE says replica.  That alone is not enough:
 * after SENTINEL FAILOVER the old master takes writes until the sentinels
 * reconfigure it, which can take seconds, and a process that keeps its
 * connections there would go on granting locks the new master never sees.
 * So a connection in use is also checked against the master the sentinels
 * name now, asked again at most every NM_SENTINEL_RECHECK_MS (less often
 * while none of them answers).
 *
 * Each master the sentinels name gets a generation, one more than the one
 * before: releases sent while an older one was named are sent again to
 * the newer (journal.h), which the background thread asks the sentinels
 * about every NM_SENTINEL_RECHECK_MS while such releases are recent.
 */
#ifndef NM_SENTINEL_H
#define NM_SENTINEL_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "settings.h"

#define NM_SENTINEL_RECHECK_MS 250

typedef struct nm_sentinel nm_sentinel_t;

/* Gives each redis-sentinel:// server of SERVERS its state (what the
 * sentinels said), NULL until then.  0 or ENOMEM. */
int nm_sentinel_attach(nm_server_t *servers, size_t n);

void nm_sentinel_free(nm_sentinel_t *st);

/* Dials SRV's master by UNTIL (monotonic ms): connected, authenticated,
 * confirmed a master.  0 with *OUT; NM_ECONN (no sentinel answered, the
 * master did not, or none named a master), EACCES (credentials refused),
 * EPROTO, ENOMEM; CAUSE says why in words. */
int nm_sentinel_dial(const nm_server_t *srv, int64_t until, redisContext **out, char *cause,
                     size_t size);

/* Whether C, dialed for SRV, no longer leads to the master the sentinels
 * name (asking them again, within DEADLINE, when the last answer is older
 * than NM_SENTINEL_RECHECK_MS).  0 for any other kind of server. */
int nm_sentinel_moved(const nm_config_t *cfg, const nm_server_t *srv, const redisContext *c,
                      int64_t deadline);

/* The generation of the master the sentinels of SRV named last (see
 * above), without asking them: 0 before any answer, or for any other kind
 * of server. */
uint64_t nm_sentinel_master_gen(const nm_server_t *srv);

/* The same, asking the sentinels first if their last answer is older than
 * NM_SENTINEL_RECHECK_MS (within half of what DEADLINE leaves). */
uint64_t nm_sentinel_recheck(const nm_config_t *cfg, const nm_server_t *srv, int64_t deadline);

#endif /* NM_SENTINEL_H */
