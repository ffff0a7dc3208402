/*
 * fuzz_names.c -- the fuzz target of names of every kind: the checks of
 * netmutex_init, netmutex_rwlock_init, netmutex_sem_init and
 * netmutex_cond_init, and the keys built from a name under a prefix.
 *
 * The input's first line is the key prefix, the rest the name (any bytes;
 * a NUL ends it, as for a C caller).  A name the calls take must give keys
 * that name it again: the lock key's name is the name (nm_keys_name_of,
 * nm_keys_shared_name_of), whatever bytes it holds, and a name they refuse
 * must have been empty or too long.  Nothing here dials: handles are made
 * and destroyed, keys built and read back.
 */
#include "ac_config.h"

#include "fuzz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netmutex.h"

#include "config.h"
#include "keys.h"
#include "token.h"

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "fuzz_names: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                \
        }                                                                           \
    } while (0)

static const char token[NM_TOKEN_LEN + 1] = "0123456789abcdef0123456789abcdef";

/* The four kinds of handle take NAME or refuse it, all alike. */
static void handles(const char *name, size_t len)
{
    int want = len > 0 && len <= NETMUTEX_NAME_MAX ? 0 : EINVAL;
    netmutex_t m;
    netmutex_rwlock_t rw;
    netmutex_sem_t s;
    netmutex_cond_t c;
    CHECK(netmutex_init(&m, name, NULL) == want);
    if (!want)
        CHECK(netmutex_destroy(&m) == 0);
    CHECK(netmutex_rwlock_init(&rw, name, NULL) == want);
    if (!want)
        CHECK(netmutex_rwlock_destroy(&rw) == 0);
    CHECK(netmutex_sem_init(&s, name, 3, NULL) == want);
    if (!want)
        CHECK(netmutex_sem_destroy(&s) == 0);
    CHECK(netmutex_cond_init(&c, name, NULL) == want);
    if (!want)
        CHECK(netmutex_cond_destroy(&c) == 0);
}

static void mutex_keys(const nm_config_t *cfg, const char *name, size_t len)
{
    char *keys, *full = NULL, *grant;
    size_t klen, glen, n;
    const char *found;
    if (nm_keys_build(cfg, name, len, token, &keys, &klen) != 0)
        return;
    CHECK(nm_keys_name_of(cfg, keys, klen, &found, &n) == 1);
    CHECK(n == len && memcmp(found, name, len) == 0);
    for (int k = 0; k < NM_KEY_COUNT; k++) {
        const char *key = nm_keys_get(keys, klen, (nm_key_t)k, &n);
        CHECK(key && strlen(key) == n);
        /* A sibling is never taken for a lock key. */
        CHECK(k == NM_KEY_LOCK || !nm_keys_name_of(cfg, key, n, &found, &n));
    }
    CHECK(nm_keys_full(keys, klen, token, &full) == 0);
    CHECK(memcmp(full, keys, nm_keys_size(keys, klen)) == 0);
    if ((grant = nm_keys_grant_for(keys, klen, token, &glen))) {
        const char *g = nm_keys_grant(full, klen, &n);
        CHECK(n == glen && memcmp(g, grant, n) == 0);
    }
    free(grant);
    free(full);
    free(keys);
}

static void shared_keys(const nm_config_t *cfg, const char *name, size_t len)
{
    size_t lens[NM_RKEY_COUNT], clens[NM_CKEY_COUNT], n;
    char *keys, kind;
    const char *found;
    for (int sem = 0; sem < 2; sem++) {
        int err = sem ? nm_keys_sem(cfg, name, len, token, &keys, lens)
                      : nm_keys_rwlock(cfg, name, len, token, &keys, lens);
        if (err)
            continue;
        const char *k = nm_keys_rwlock_get(keys, lens, NM_RKEY_LOCK);
        CHECK(nm_keys_shared_name_of(cfg, k, lens[NM_RKEY_LOCK], &kind, &found, &n) == 1);
        CHECK(kind == (sem ? 's' : 'r') && n == len && memcmp(found, name, len) == 0);
        free(keys);
    }
    if (nm_keys_cond(cfg, name, len, token, &keys, clens) == 0) {
        char *g = nm_keys_cond_grant_for(keys, clens, token, NM_TOKEN_LEN, &n);
        CHECK(!g || (n == clens[NM_CKEY_GRANT] &&
                     !memcmp(g, nm_keys_cond_get(keys, clens, NM_CKEY_GRANT), n)));
        free(g);
        free(keys);
    }
}

/* The keys built from NAME as a pattern, a waiter's id, a pair of names. */
static void other_keys(const nm_config_t *cfg, const char *name, size_t len)
{
    char *k, tag[NM_KEY_TAG_LEN + 1];
    size_t n;
    const char *id;
    nm_keys_tag(name, len, tag);
    CHECK(strlen(tag) == NM_KEY_TAG_LEN);
    free(nm_keys_match(cfg, name));
    free(nm_keys_match_shared(cfg, name, ":s"));
    free(nm_keys_held_by(cfg, name, len, &n));
    free(nm_keys_rw_held_by(cfg, name, len, &n));
    if ((k = nm_keys_waiter(cfg, name, len, &n))) {
        size_t id_len;
        CHECK(nm_keys_waiter_of(cfg, k, n, &id, &id_len) == (len > 0));
        CHECK(!len || (id_len == len && memcmp(id, name, len) == 0));
        free(k);
    }
    for (int claim = 0; claim < 2; claim++)
        if (nm_keys_order(cfg, name, len / 2, name + len / 2, len - len / 2, claim, &k, &n) == 0)
            free(k);
    if ((k = nm_keys_stats(cfg, name, 42, &n))) {
        CHECK(nm_keys_is_stats(cfg, k, n));
        CHECK(!nm_keys_name_of(cfg, k, n, &id, &n));
        free(k);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    nm_fuzz_quiet_log();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    char *prefix = nm_fuzz_line(&p, end);
    char *name = malloc((size_t)(end - p) + 1);
    /* Nothing is dialled: the URL only has to be valid. */
    netmutex_config_t user = { .url = "unix:///nonexistent/fuzz_names.sock",
                               .key_prefix = prefix };
    nm_config_t *cfg;
    if (name) {
        memcpy(name, p, (size_t)(end - p));
        name[end - p] = '\0';
        handles(name, strnlen(name, NETMUTEX_NAME_MAX + 1));
    }
    if (name && nm_config_build(&user, &cfg) == 0) {
        size_t len = strnlen(name, NETMUTEX_NAME_MAX + 1);
        if (len > 0 && len <= NETMUTEX_NAME_MAX) {
            mutex_keys(cfg, name, len);
            shared_keys(cfg, name, len);
        }
        other_keys(cfg, name, strlen(name));
        nm_config_unref(cfg);
    }
    free(name);
    free(prefix);
    return 0;
}
