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

/* The hash tag of every key of a name: 16 lowercase hex digits of a 64-bit
 * FNV-1a digest of the name's bytes, NUL-terminated in TAG. */
#define NM_KEY_TAG_LEN 16
void nm_keys_tag(const char *name, size_t name_len, char tag[NM_KEY_TAG_LEN + 1]);

/* Builds the lock key <prefix>{<tag>}<name> under CFG's prefix and, after
 * it, the grant list <prefix>{<tag>}<name>:g:<TOKEN> (TOKEN may be NULL when
 * no grant is awaited).  The prefix holds no brace and the tag is hex, so
 * Redis Cluster hashes the tag alone: every key of a name is in one slot,
 * whatever bytes the name holds.  *KEYS is malloc'ed; *LEN is the lock
 * key's length.  0 or ENOMEM. */
int nm_keys_build(const nm_config_t *cfg, const char *name, size_t name_len,
                  const char *token, char **keys, size_t *len);

/* The grant list's name in KEYS (of lock key length LEN), and its length. */
const char *nm_keys_grant(const char *keys, size_t len, size_t *grant_len);

/* The grant list of waiter TOKEN for lock key KEY (of length LEN),
 * malloc'ed, with its length in *GRANT_LEN; NULL when out of memory. */
char *nm_keys_grant_for(const char *key, size_t len, const char *token, size_t *grant_len);

#endif /* NM_KEYS_H */
