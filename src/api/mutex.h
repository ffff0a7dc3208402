/*
 * mutex.h -- what mutex.c offers the other files of its layer: a
 * condition's wait (cond.c) checks the mutex it is given through here, as
 * the opaque netmutex_t's slots are mutex.c's alone (opaque.h), and a
 * rwlock (rwlock.c) sets the library up through here.
 */
#ifndef NM_API_MUTEX_H
#define NM_API_MUTEX_H

#include "netmutex.h"

/* Whether the calling thread holds M, once: 0 with M's lease in *LEASE_MS
 * (0: the configured one), EPERM if it does not hold M, EINVAL for a bad
 * M or a recursive mutex locked more than once (a wait would unlock it
 * once and sleep holding it). */
int nm_mutex_wait_check(netmutex_t *m, unsigned int *lease_ms);

/* The library's set-up, once per process, before a call uses the registry
 * or the background thread: its jobs registered, its fork handlers
 * installed (rwlock.c's calls come through here as mutex.c's do). */
void nm_library_init(void);

#endif /* NM_API_MUTEX_H */
