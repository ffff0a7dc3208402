/*
 * log.h -- the library's few words to people: why a lock cannot be taken,
 * which server refused and how.  A library that blocks or refuses in
 * silence leaves its users guessing, so the causes that need a person's
 * attention are written to stderr, one line each, filtered by the level
 * NETMUTEX_LOG names (off, error, warn, info, debug; default warn).
 */
#ifndef NM_LOG_H
#define NM_LOG_H

#include "config.h"

enum nm_log_level { NM_LOG_OFF, NM_LOG_ERROR, NM_LOG_WARN, NM_LOG_INFO, NM_LOG_DEBUG };

/* Whether messages of LEVEL are written. */
int nm_log_enabled(enum nm_log_level level);

/* Writes "netmutex: <level>: <message>" to stderr, if LEVEL is enabled. */
void nm_log(enum nm_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* SRV as a URL for messages, its password masked: "redis://:***@host:6379". */
void nm_server_describe(const nm_server_t *srv, char *buf, size_t size);

#endif /* NM_LOG_H */
