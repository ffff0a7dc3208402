/* keys.c -- building the keys of a mutex. */
#include "nm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"

#define GRANT_SUFFIX ":g:"
#define GRANT_SUFFIX_LEN 3

int nm_keys_build(const nm_config_t *cfg, const char *name, size_t name_len,
                  const char *token, char **keys, size_t *len)
{
    size_t klen = cfg->prefix_len + 1 + name_len + 1;
    char *k = calloc(2 * klen + GRANT_SUFFIX_LEN + NM_TOKEN_LEN + 2, 1);
    if (!k)
        return ENOMEM;
    memcpy(k, cfg->prefix, cfg->prefix_len);
    k[cfg->prefix_len] = '{';
    memcpy(k + cfg->prefix_len + 1, name, name_len);
    k[klen - 1] = '}';
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
