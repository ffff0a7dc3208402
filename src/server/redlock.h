/*
 * redlock.h -- what the answers of N independent servers mean (quorum
 * mode).  Pure functions over the votes quorum.c collected; lease.c and
 * status.c make the calls, these decide.
 */
#ifndef NM_REDLOCK_H
#define NM_REDLOCK_H

#include <stdint.h>

#include "lease.h"
#include "quorum.h"
#include "settings.h"

/* The margin a grant's validity loses to clock drift between us and the
 * servers: drift_factor * lease + drift_ms. */
int64_t nm_redlock_drift(const nm_config_t *cfg, unsigned int lease_ms);

/* The answers to acquire.lua.  0: a quorum granted L in time; L's fence,
 * owner_died and sent_at are set, and *RAISE_TO is the fence every granting
 * server's counter must be raised to first (0: they all agree already).
 * EBUSY: no quorum; *PTTL is how long to wait before trying again (short and
 * random after a split vote).  ENOTRECOVERABLE.  NM_ECONN, EACCES, EPROTO:
 * fewer than a quorum answered.  Whatever it says, any grant that is not
 * kept must be released everywhere. */
int nm_redlock_granted(nm_lease_t *l, const nm_votes_t *v, long long *raise_to,
                       long long *pttl);

/* The answers to a call that returns 1 (done) or something else per server
 * (release.lua: 2 also means done; renew.lua and fence.lua: {1} or 1).
 * 0: a quorum did it; ENOLCK: enough answered, too few did; EIO: fewer than
 * a quorum answered. */
int nm_redlock_done(const nm_config_t *cfg, const nm_votes_t *v);

/* The answers to break.lua: 0 (held somewhere), ENOENT, or EAGAIN (fewer
 * than a quorum answered; the reachable ones were freed anyway). */
int nm_redlock_broken(const nm_config_t *cfg, const nm_votes_t *v);

#endif /* NM_REDLOCK_H */
