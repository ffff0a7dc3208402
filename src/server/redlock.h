/*
 * redlock.h -- what the answers of N independent servers mean (quorum
 * mode).  Pure functions over the votes quorum.c collected; lease.c and
 * status.c make the calls, these decide.  They read a configuration and
 * numbers and return a verdict the caller applies: nothing here knows a
 * lease (lease.c applies the verdict to one), so the votes are tested
 * alone.
 */
#ifndef NM_REDLOCK_H
#define NM_REDLOCK_H

#include <stdint.h>

#include "quorum.h"
#include "settings.h"

/* The margin a grant's validity loses to clock drift between us and the
 * servers: drift_factor * lease + drift_ms. */
int64_t nm_redlock_drift(const nm_config_t *cfg, unsigned int lease_ms);

/* What the answers to acquire.lua came to (nm_redlock_granted).  A grant's
 * fields are set only with 0, the wait's only with EBUSY; the rest are 0. */
typedef struct nm_verdict {
    long long fence;      /* granted: the largest fence of the quorum */
    int owner_died;       /* granted: the previous holder's lease expired */
    int64_t sent_at;      /* granted: when the granted requests left */
    long long raise_to;   /* granted: the fence every granting server's
                             counter must be raised to first (0: they all
                             agree already) */
    long long pttl;       /* EBUSY: how long to wait before trying again */
    int split;            /* EBUSY: some servers granted, too few (the
                             caller counts the splits in a row) */
} nm_verdict_t;

/* The answers V to acquire.lua for a lease of LEASE_MS under CFG, after
 * SPLITS split votes in a row.  0: a quorum granted in time.  EBUSY: no
 * quorum; the wait is short and random after a split vote, its bound
 * doubling with every split in a row.  ENOTRECOVERABLE.  NM_ECONN, EACCES,
 * EPROTO: fewer than a quorum answered.  *OUT says the rest.  Whatever it
 * says, any grant that is not kept must be released everywhere. */
int nm_redlock_granted(const nm_config_t *cfg, unsigned int lease_ms, unsigned int splits,
                       const nm_votes_t *v, nm_verdict_t *out);

/* The answers to a call that returns 1 (done) or something else per server
 * (release.lua: 2 also means done; renew.lua and fence.lua: {1} or 1).
 * 0: a quorum did it; ENOLCK: enough answered, too few did; EIO: fewer than
 * a quorum answered. */
int nm_redlock_done(const nm_config_t *cfg, const nm_votes_t *v);

/* The answers to break.lua: 0 (held somewhere), ENOENT, or EAGAIN (fewer
 * than a quorum answered; the reachable ones were freed anyway). */
int nm_redlock_broken(const nm_config_t *cfg, const nm_votes_t *v);

#endif /* NM_REDLOCK_H */
