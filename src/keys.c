/* keys.c -- building the keys of a mutex. */
#include "nm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"

#define GRANT_SUFFIX ":g:"
#define GRANT_SUFFIX_LEN 3

/* The hash tag depends on the name's bytes only through a digest, so no
 * name (one that holds '{' or '}' included) can move a key of its own to
 * another cluster slot.  FNV-1a: it only has to spread names and be the
 * same everywhere, not resist an adversary (a collision shares a slot, it
 * never shares a lock: the whole key still holds the name). */
void nm_keys_tag(const char *name, size_t name_len, char tag[NM_KEY_TAG_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < name_len; i++) {
        h ^= (unsigned char)name[i];
        h *= 1099511628211ull;
    }
    for (int i = NM_KEY_TAG_LEN - 1; i >= 0; i--, h >>= 4)
        tag[i] = hex[h & 15];
    tag[NM_KEY_TAG_LEN] = '\0';
}

int nm_keys_build(const nm_config_t *cfg, const char *name, size_t name_len,
                  const char *token, char **keys, size_t *len)
{
    size_t klen = cfg->prefix_len + NM_KEY_TAG_LEN + 2 + name_len;
    char *k = calloc(2 * klen + GRANT_SUFFIX_LEN + NM_TOKEN_LEN + 2, 1), *w = k;
    if (!k)
        return ENOMEM;
    memcpy(w, cfg->prefix, cfg->prefix_len);
    w += cfg->prefix_len;
    *w++ = '{';
    nm_keys_tag(name, name_len, w);
    w += NM_KEY_TAG_LEN;
    *w++ = '}';
    memcpy(w, name, name_len);
    if (token) {
        char *g = k + klen + 1;
        memcpy(g, k, klen);
        memcpy(g + klen, GRANT_SUFFIX, GRANT_SUFFIX_LEN);
        memcpy(g + klen + GRANT_SUFFIX_LEN, token, NM_TOKEN_LEN);
    }
    *keys = k;
    *len = klen;
    return 0;
}

const char *nm_keys_grant(const char *keys, size_t len, size_t *grant_len)
{
    *grant_len = len + GRANT_SUFFIX_LEN + NM_TOKEN_LEN;
    return keys + len + 1;
}

char *nm_keys_grant_for(const char *key, size_t len, const char *token, size_t *grant_len)
{
    char *g = malloc(len + GRANT_SUFFIX_LEN + NM_TOKEN_LEN);
    if (!g)
        return NULL;
    memcpy(g, key, len);
    memcpy(g + len, GRANT_SUFFIX, GRANT_SUFFIX_LEN);
    memcpy(g + len + GRANT_SUFFIX_LEN, token, NM_TOKEN_LEN);
    *grant_len = len + GRANT_SUFFIX_LEN + NM_TOKEN_LEN;
    return g;
}
