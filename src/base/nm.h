/*
 * nm.h -- definitions shared by every file of the library.
 *
 * Internal functions are prefixed nm_ and are not exported: the library is
 * built with -fvisibility=hidden and an export list of netmutex_* only.
 */
#ifndef NM_H
#define NM_H

#include <ac_config.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "netmutex.h"

/* ---- internal result codes ------------------------------------------------
 * Below the API, a function returns 0, an errno value it means as such
 * (EBUSY, EPROTO, ...), or one of these codes for what only another part
 * of the library understands.  Each lies at NM_ECODE_BASE + n, far above
 * any errno value, so a code is never taken for an errno (the EAGAIN of a
 * system call, say) nor an errno for a code, and netmutex_errname() names
 * none of them.  The calls that produce a code handle it where they can;
 * every public call of src/api/ passes its result through
 * nm_errno_public() as well, so one that gets through still becomes the
 * documented errno given below ("public") rather than reach the caller. */
#define NM_ECODE_BASE 0x4e4d00 /* "NM" */

/* A broken or unreachable connection, or no answer in time.  The calls
 * turn it into EAGAIN (trylock, status, break), ETIMEDOUT (timed waits), a
 * retry (lock) or EIO (unlock, extend).  Public: EAGAIN. */
#define NM_ECONN (NM_ECODE_BASE + 1)
/* A trylock asked a caching holder to give the lock back (lease.c).
 * Public: EBUSY, what a trylock says when no answer comes. */
#define NM_EASKED (NM_ECODE_BASE + 2)
/* The caching holder asked answered that a thread of it holds the lock
 * (lease.c).  Public: EBUSY. */
#define NM_EHELD (NM_ECODE_BASE + 3)
/* A script's fast path needs every key of the name (lease.c), and is
 * called again with them; asked for again, EPROTO.  Public: EPROTO. */
#define NM_EKEYS (NM_ECODE_BASE + 4)
/* A cluster node could not be dialed, nothing was sent
 * (cluster_route.c), which reads the map again or gives NM_ECONN.
 * Public: EAGAIN. */
#define NM_EUNDIALED (NM_ECODE_BASE + 5)
/* MOVED / ASK: a cluster node does not serve the key's slot (reply.h);
 * cluster_route.c follows it, and outside cluster mode it is an answer we
 * do not understand.  Public: EPROTO. */
#define NM_EREDIRECT (NM_ECODE_BASE + 6)
/* TRYAGAIN, or a script refused a key as "non local": the slot is being
 * migrated (reply.h); cluster_route.c retries, and outside cluster mode
 * the lock calls say EPROTO.  Public: EAGAIN, what a dial that met it
 * (AUTH, SELECT or INFO answered so) returned before these codes had
 * values of their own. */
#define NM_ETRYAGAIN (NM_ECODE_BASE + 7)
/* A queued waiter was woken as a deputy of another's grant (lease.c,
 * lib.lua's Waiting): it waits one claim more, then looks.  Never leaves
 * the wait.  Public: EBUSY. */
#define NM_EDEPUTY (NM_ECODE_BASE + 8)
/* One past the last code: the codes are NM_ECODE_BASE + 1 .. NM_ECODE_END - 1. */
#define NM_ECODE_END (NM_ECODE_BASE + 9)

/* Whether RC is one of the codes above. */
static inline int nm_errno_internal(int rc)
{
    return rc > NM_ECODE_BASE && rc < NM_ECODE_END;
}

/* RC as a caller may see it: an internal code becomes its public errno
 * (above), anything else is returned as it is. */
static inline int nm_errno_public(int rc)
{
    switch (rc) {
    case NM_ECONN:
    case NM_EUNDIALED:
    case NM_ETRYAGAIN:
        return EAGAIN;
    case NM_EASKED:
    case NM_EHELD:
    case NM_EDEPUTY:
        return EBUSY;
    case NM_EKEYS:
    case NM_EREDIRECT:
        return EPROTO;
    default:
        return rc;
    }
}

#define NM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NM_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif /* NM_H */
