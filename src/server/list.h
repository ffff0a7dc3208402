/* list.h -- the locks held under the key prefix (netmutex_list). */
#ifndef NM_LIST_H
#define NM_LIST_H

#include "netmutex.h"

/* Calls FN for every name under the configured prefix whose whole name
 * PATTERN (a Redis glob, checked by the caller) matches and that is held
 * now, in byte order, with its netmutex_status; fills *INFO (zeroed by
 * the caller, may be NULL).  0, ECANCELED (FN returned non-zero), EAGAIN,
 * EACCES, EPROTO, ENOTSUP, EINVAL (the configuration), ENOMEM. */
int nm_list(const char *pattern, netmutex_list_fn fn, void *arg, netmutex_list_info_t *info);

#endif /* NM_LIST_H */
