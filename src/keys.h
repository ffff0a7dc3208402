/*
 * keys.h -- the Redis keys of one mutex (src/lua/lib.lua has the schema).
 *
 * All four live in one allocation, each followed by room for the longest
 * suffix, so key I starts at I * (len + NM_KEY_SUFFIX_ROOM), where LEN is
 * the length of the first.  Keys are passed to Redis with explicit lengths,
 * so any byte of the name is safe.
 */
#ifndef NM_KEYS_H
#define NM_KEYS_H

#include <stddef.h>

#include "config.h"

/* K, then K:m, K:q and K:w. */
enum { NM_KEY_LOCK, NM_KEY_META, NM_KEY_QUEUE, NM_KEY_WAITING, NM_NKEYS };
#define NM_KEY_SUFFIX_ROOM 3

/* Builds the keys of NAME under CFG's prefix: <prefix>{<name>}, then its
 * suffixed siblings.  *KEYS is malloc'ed; *LEN is the first key's length.
 * 0 or ENOMEM. */
int nm_keys_build(const nm_config_t *cfg, const char *name, size_t name_len,
                  char **keys, size_t *len);

/* Points ARGV/LENS at the first N (<= NM_NKEYS) keys. */
void nm_keys_put(const char *keys, size_t len, int n, const char **argv, size_t *lens);

#endif /* NM_KEYS_H */
