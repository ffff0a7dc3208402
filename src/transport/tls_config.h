/*
 * tls_config.h -- a configuration's TLS settings, read once (tls_config.c).
 */
#ifndef NM_TLS_CONFIG_H
#define NM_TLS_CONFIG_H

#include <stddef.h>

#include "tls.h"

/* The TLS state for SERVERS (N of them, sentinels included) from USER's
 * fields and the environment: *OUT NULL when no server uses TLS.  Each TLS
 * server gets a pointer to it.  0, EINVAL (logged), ENOMEM. */
struct netmutex_config;
struct nm_server;
int nm_tls_configure(const struct netmutex_config *user, struct nm_server *servers, size_t n,
                     nm_tls_t **out);

#endif /* NM_TLS_CONFIG_H */
