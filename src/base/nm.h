/*
 * nm.h -- definitions shared by every file of the library.
 *
 * Internal functions are prefixed nm_ and are not exported: the library is
 * built with -fvisibility=hidden and an export list of netmutex_* only.
 */
#ifndef NM_H
#define NM_H

#include <ac_config.h>

#include <stddef.h>
#include <stdint.h>

#include "netmutex.h"

/* A broken or unreachable connection.  Internal only: the API turns it into
 * EAGAIN (trylock), ETIMEDOUT (timed waits), a retry (lock) or EIO (unlock). */
#define NM_ECONN ECONNRESET
/* Internal only: a trylock asked a caching holder to give the lock back
 * (lease.c), and the holder answered that a thread of it holds the lock. */
#define NM_EASKED EINPROGRESS
#define NM_EHELD EALREADY

#define NM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NM_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif /* NM_H */
