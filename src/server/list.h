/* list.h -- the locks held under the key prefix (netmutex_list,
 * netmutex_list_shared). */
#ifndef NM_LIST_H
#define NM_LIST_H

#include "netmutex.h"

/* Calls FN for every name under the configured prefix whose whole name
 * PATTERN (a Redis glob, checked by the caller) matches and that is held
 * now, in byte order, with its netmutex_status; fills *INFO (zeroed by
 * the caller, may be NULL).  0, ECANCELED (FN returned non-zero), EAGAIN,
 * EACCES, EPROTO, ENOTSUP, EINVAL (the configuration), ENOMEM. */
int nm_list(const char *pattern, netmutex_list_fn fn, void *arg, netmutex_list_info_t *info);

/* The same for the read-write locks and semaphores held now (a write
 * lock, a read share or a permit), in byte order of the names, a rwlock
 * before a semaphore of the same name, with nm_shared_status's answer.
 * ENOTSUP in quorum mode; else as nm_list. */
int nm_list_shared(const char *pattern, netmutex_list_shared_fn fn, void *arg,
                   netmutex_list_info_t *info);

/* The waits deadlock detection published (waitfor.h), found where
 * nm_list looks, each handed to FN in byte order of the waiters' ids. */
int nm_list_waits(netmutex_waits_fn fn, void *arg, netmutex_list_info_t *info);

/* Every process's published statistics (stats_board.h) under the
 * configured prefix: FN with each text (LEN bytes, NUL-terminated,
 * valid during the call), in byte order of the keys; fills *INFO as
 * nm_list.  Errors as nm_list's. */
int nm_list_stats(int (*fn)(const char *text, size_t len, void *arg), void *arg,
                  netmutex_list_info_t *info);

#endif /* NM_LIST_H */
