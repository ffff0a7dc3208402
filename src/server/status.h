/* status.h -- reading what the servers know about a mutex (netmutex_status),
 * and about a read-write lock or a semaphore (netmutex_rwlock_status,
 * netmutex_sem_status). */
#ifndef NM_STATUS_H
#define NM_STATUS_H

#include <stddef.h>

#include "netmutex.h"

/* Fills *ST for NAME (validated by the caller).  0, EAGAIN (fewer than a
 * quorum of servers answered), EACCES, EPROTO, ENOMEM. */
int nm_status(const char *name, size_t name_len, netmutex_status_t *st);

/* Fills *ST for the read-write lock (SEM 0) or the semaphore (SEM 1) NAME
 * (validated by the caller).  0, ENOTSUP (quorum mode), EAGAIN, EACCES,
 * EPROTO, ENOMEM. */
int nm_shared_status(int sem, const char *name, size_t name_len, netmutex_shared_status_t *st);

#endif /* NM_STATUS_H */
