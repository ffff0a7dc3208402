/* keys.c -- building the keys of a mutex. */
#include "nm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"

static const char key_suffix[NM_NKEYS][NM_KEY_SUFFIX_ROOM] = { "", ":m", ":q", ":w" };

int nm_keys_build(const nm_config_t *cfg, const char *name, size_t name_len,
                  char **keys, size_t *len)
{
    size_t klen = cfg->prefix_len + 1 + name_len + 1, stride = klen + NM_KEY_SUFFIX_ROOM;
    char *k = malloc(NM_NKEYS * stride);
    if (!k)
        return ENOMEM;
    memcpy(k, cfg->prefix, cfg->prefix_len);
    k[cfg->prefix_len] = '{';
    memcpy(k + cfg->prefix_len + 1, name, name_len);
    k[klen - 1] = '}';
    for (int i = 1; i < NM_NKEYS; i++) {
        memcpy(k + i * stride, k, klen);
        memcpy(k + i * stride + klen, key_suffix[i], NM_KEY_SUFFIX_ROOM);
    }
    k[klen] = '\0';
    *keys = k;
    *len = klen;
    return 0;
}

void nm_keys_put(const char *keys, size_t len, int n, const char **argv, size_t *lens)
{
    for (int i = 0; i < n; i++) {
        argv[i] = keys + i * (len + NM_KEY_SUFFIX_ROOM);
        lens[i] = len + strlen(key_suffix[i]);
    }
}
