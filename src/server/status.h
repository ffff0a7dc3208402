/* status.h -- reading what the servers know about a mutex (netmutex_status). */
#ifndef NM_STATUS_H
#define NM_STATUS_H

#include <stddef.h>

#include "netmutex.h"

/* Fills *ST for NAME (validated by the caller).  0, EAGAIN (fewer than a
 * quorum of servers answered), EACCES, EPROTO, ENOMEM. */
int nm_status(const char *name, size_t name_len, netmutex_status_t *st);

#endif /* NM_STATUS_H */
