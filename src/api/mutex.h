/*
 * mutex.h -- what mutex.c offers the other files of its layer: a
 * condition's wait (cond.c) checks the mutex it is given through here, as
 * the opaque netmutex_t's slots are mutex.c's alone (opaque.h), and a
 * rwlock (rwlock.c) sets the library up through here.
 */
#ifndef NM_API_MUTEX_H
#define NM_API_MUTEX_H

#include "netmutex.h"
#include "script.h"

/* Whether the calling thread holds M, once: 0 with M's lease in *LEASE_MS
 * (0: the configured one), EPERM if it does not hold M, EINVAL for a bad
 * M or a recursive mutex locked more than once (a wait would unlock it
 * once and sleep holding it). */
int nm_mutex_wait_check(netmutex_t *m, unsigned int *lease_ms);

/* A condition's wait and wake-up send a request of their own with the
 * mutex's (lease.h, riders): one round trip for both.
 *
 * nm_mutex_unlock_riding unlocks M, held once by the calling thread, and
 * gives its lease back to the servers with RIDER (if not NULL) going
 * first and TRAILER (if not NULL) last -- never kept cached: the thread
 * goes to sleep, and the next locker is most likely the signaller,
 * another process perhaps.  *RODE 1: done, the unlock's answer returned
 * (netmutex_unlock's).  When the lease is to go to a local waiter instead
 * (the cohort), nothing is done: *RODE 0, M still held, and RIDER is the
 * caller's to send before it unlocks.
 *
 * nm_mutex_lock_riding locks M with RIDER going first when the lock is to
 * come from the servers: *RODE 1, netmutex_lock's answer returned.  When
 * it would come from this process (a lease kept here, or another thread
 * of ours at it), nothing is done: *RODE 0, and RIDER is the caller's to
 * send before it locks. */
int nm_mutex_unlock_riding(netmutex_t *m, nm_script_call_t *rider, nm_trailer_t *trailer,
                           int *rode);
int nm_mutex_lock_riding(netmutex_t *m, nm_script_call_t *rider, int *rode);

/* The library's set-up, once per process, before a call uses the registry
 * or the background thread: its jobs registered, its fork handlers
 * installed (rwlock.c's calls come through here as mutex.c's do). */
void nm_library_init(void);

#endif /* NM_API_MUTEX_H */
