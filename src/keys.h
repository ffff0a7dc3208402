/*
 * keys.h -- the Redis keys of one mutex (src/lua/lib.lua has the schema).
 *
 * Scripts are given the lock key alone and derive its siblings.  The one
 * key the library itself uses besides it is a waiter's grant list, which
 * it waits on with BLPOP.  Both live in one allocation: the lock key, NUL,
 * then the grant list's name.  Keys are passed to Redis with explicit
 * lengths, so any byte of the name is safe.
 */
#ifndef NM_KEYS_H
#define NM_KEYS_H

#include <stddef.h>

#include "config.h"
#include "token.h"

/* Builds <prefix>{<name>} under CFG's prefix and, after it, the grant list
 * <prefix>{<name>}:g:<TOKEN> (TOKEN may be NULL when no grant is awaited).
 * *KEYS is malloc'ed; *LEN is the lock key's length.  0 or ENOMEM. */
int nm_keys_build(const nm_config_t *cfg, const char *name, size_t name_len,
                  const char *token, char **keys, size_t *len);

/* The grant list's name in KEYS (of lock key length LEN), and its length. */
const char *nm_keys_grant(const char *keys, size_t len, size_t *grant_len);

#endif /* NM_KEYS_H */
