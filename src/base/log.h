/*
 * log.h -- the library's few words to people: why a lock cannot be taken,
 * which server refused and how.  A library that blocks or refuses in
 * silence leaves its users guessing, so the causes that need a person's
 * attention are written as one line each, to stderr or to the logger the
 * application set (netmutex_set_log), filtered by level.
 */
#ifndef NM_LOG_H
#define NM_LOG_H

#include "netmutex.h"

/* Whether messages of LEVEL (NETMUTEX_LOG_*) are written. */
int nm_log_enabled(int level);

#endif /* NM_LOG_H */
