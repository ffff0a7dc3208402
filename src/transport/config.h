/*
 * config.h -- configurations built and shared: one built from the API,
 * the environment and the defaults, reference counted, and the current
 * one of the process.  What a configuration holds is settings.h's.
 *
 * A configuration is immutable once built and reference counted: a thread
 * that dialed with it, and a lock acquired under it, keep their reference,
 * so netmutex_configure() can replace the current one without pulling it
 * from under anybody.  Building one makes the state its servers' kind
 * needs (cluster_state.h, sentinel.h), which therefore include
 * settings.h, never this.
 */
#ifndef NM_CONFIG_H
#define NM_CONFIG_H

#include <stdint.h>

#include "netmutex.h"
#include "settings.h"

/* Builds a configuration from USER (may be NULL), falling back to the
 * environment and the defaults.  EINVAL, ENOMEM. */
int nm_config_build(const netmutex_config_t *user, nm_config_t **out);

nm_config_t *nm_config_ref(nm_config_t *cfg);
void nm_config_unref(nm_config_t *cfg);

/* A new reference to the current configuration, built from the environment
 * on first use.  Errors of nm_config_build. */
int nm_config_current(nm_config_t **out);

/* Whether PREFIX is a valid key prefix: at most NM_PREFIX_MAX bytes, no
 * brace. */
int nm_config_valid_prefix(const char *prefix);

/* The current configuration's prefix, or, while there is none, the one
 * the next would take from the environment (NETMUTEX_PREFIX, else the
 * default), without building it: a new string in *OUT.  EINVAL (the
 * environment's is not valid), ENOMEM. */
int nm_config_prefix(char **out);

/* The generation of the current configuration, 0 if there is none yet: a
 * cheap way for a thread to notice that its connections are stale. */
uint64_t nm_config_current_generation(void);

/* Makes CFG (consumed; NULL to forget) the current configuration, unless
 * BUSY(), called under the same lock, says a lock is held: then EBUSY. */
int nm_config_replace(nm_config_t *cfg, int (*busy)(void));

/* pthread_atfork hooks (parent and child alike release the lock). */
void nm_config_before_fork(void);
void nm_config_after_fork(void);

#endif /* NM_CONFIG_H */
