/*
 * unit_keys.c -- the Redis keys of a mutex (src/server/keys.c), without a server:
 * the {<16-hex FNV-1a>} hash tag against published FNV-1a values and the
 * example of docs/deployment.md, the layout of the lock key and of a waiter's grant
 * list, binary names, the one-slot promise of Redis Cluster mode, which
 * keys a listing takes for lock keys, and a condition's keys.
 */
#include "ac_config.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "nm.h"
#include "keys.h"
#include "slot.h"

static const char token[] = "0123456789abcdef0123456789abcdef";

static void expect_tag(const char *name, size_t len, const char *want)
{
    char tag[NM_KEY_TAG_LEN + 1];
    memset(tag, 'X', sizeof tag);
    nm_keys_tag(name, len, tag);
    g_assert_cmpstr(tag, ==, want);
}

/* 64-bit FNV-1a's published values, and docs/deployment.md "Redis key schema". */
static void test_tag_known(void)
{
    expect_tag("", 0, "cbf29ce484222325");
    expect_tag("a", 1, "af63dc4c8601ec8c");
    expect_tag("foobar", 6, "85944171f73967e8");
    expect_tag("jobs", 4, "41b90dde29446fdd");
    /* Bytes, not C strings: a NUL and a high byte count as themselves. */
    expect_tag("a\0b", 3, "e5d29919042666b2");
    expect_tag("\xff", 1, "af64724c8602eb6e");
    expect_tag("{a}b", 4, "0a97035b72570bc2");
}

static nm_config_t config_with_prefix(const char *prefix)
{
    nm_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.prefix = (char *)prefix;
    cfg.prefix_len = strlen(prefix);
    return cfg;
}

/* docs/deployment.md: the name "jobs" has the lock key netmutex:{41b90dde29446fdd}jobs. */
static void test_build_readme_example(void)
{
    nm_config_t cfg = config_with_prefix("netmutex:");
    char *keys;
    size_t len, glen;

    g_assert_cmpint(nm_keys_build(&cfg, "jobs", 4, token, &keys, &len), ==, 0);
    g_assert_cmpuint(len, ==, strlen("netmutex:{41b90dde29446fdd}jobs"));
    g_assert_cmpstr(keys, ==, "netmutex:{41b90dde29446fdd}jobs");
    const char *grant = nm_keys_grant(keys, len, &glen);
    g_assert_cmpuint(glen, ==, len + 3 + NM_TOKEN_LEN);
    g_assert_cmpmem(grant, glen, "netmutex:{41b90dde29446fdd}jobs:g:"
                    "0123456789abcdef0123456789abcdef", glen);
    free(keys);
}

/* Every key a script is given, in lib.lua's order K, P, Q, W, H, G; P,
 * the fence floor, is named after the slot tag of K's slot. */
static void test_build_declared_order(void)
{
    const char *k = "netmutex:{41b90dde29446fdd}jobs";
    char *floor = g_strdup_printf("netmutex:{%s}fence", nm_slot_tag(nm_slot_of(k, strlen(k))));
    const char *const want[NM_KEY_COUNT] = {
        k, floor, "netmutex:{41b90dde29446fdd}jobs:q",
        "netmutex:{41b90dde29446fdd}jobs:w", "netmutex:{41b90dde29446fdd}jobs:h",
        "netmutex:{41b90dde29446fdd}jobs:g:0123456789abcdef0123456789abcdef",
    };
    nm_config_t cfg = config_with_prefix("netmutex:");
    char *keys;
    size_t len, klen;

    g_assert_cmpint(nm_keys_build(&cfg, "jobs", 4, token, &keys, &len), ==, 0);
    for (int i = 0; i < NM_KEY_COUNT; i++) {
        const char *key = nm_keys_get(keys, len, (nm_key_t)i, &klen);
        g_assert_cmpmem(key, klen, want[i], strlen(want[i]));
        g_assert_cmpint(key[klen], ==, '\0');
    }
    g_assert_cmpuint(nm_slot_of(floor, strlen(floor)), ==, nm_slot_of(k, strlen(k)));
    g_free(floor);
    free(keys);
}

/* A read-write lock's keys: its own tag ('r' and the digest), in
 * rwlock.lua's order, all in the slot of its floor; without a token, no
 * grant list. */
static void test_rwlock_keys(void)
{
    const char *k = "netmutex:{r41b90dde29446fdd}jobs";
    char *floor = g_strdup_printf("netmutex:{%s}fence", nm_slot_tag(nm_slot_of(k, strlen(k))));
    const char *const want[NM_RKEY_COUNT] = {
        k, floor, "netmutex:{r41b90dde29446fdd}jobs:q",
        "netmutex:{r41b90dde29446fdd}jobs:w", "netmutex:{r41b90dde29446fdd}jobs:s",
        "netmutex:{r41b90dde29446fdd}jobs:g:0123456789abcdef0123456789abcdef",
    };
    nm_config_t cfg = config_with_prefix("netmutex:");
    size_t lens[NM_RKEY_COUNT];
    char *keys;

    g_assert_cmpint(nm_keys_rwlock(&cfg, "jobs", 4, token, &keys, lens), ==, 0);
    for (int i = 0; i < NM_RKEY_COUNT; i++) {
        const char *key = nm_keys_rwlock_get(keys, lens, (nm_rkey_t)i);
        g_assert_cmpmem(key, lens[i], want[i], strlen(want[i]));
        g_assert_cmpint(key[lens[i]], ==, '\0');
        g_assert_cmpuint(nm_slot_of(key, lens[i]), ==, nm_slot_of(k, strlen(k)));
    }
    free(keys);
    g_assert_cmpint(nm_keys_rwlock(&cfg, "a}{b", 4, NULL, &keys, lens), ==, 0);
    g_assert_cmpuint(lens[NM_RKEY_GRANT], ==, 0);
    const char *s = nm_keys_rwlock_get(keys, lens, NM_RKEY_SHARES);
    g_assert_true(g_str_has_suffix(s, "}a}{b:s"));
    g_assert_cmpuint(nm_slot_of(s, lens[NM_RKEY_SHARES]), ==, nm_slot_of(keys, lens[0]));
    free(keys);
    g_free(floor);
}

/* A semaphore's keys: the rwlock's order under the tag 's' and the
 * digest, all in one slot. */
static void test_sem_keys(void)
{
    const char *k = "netmutex:{s41b90dde29446fdd}jobs";
    char *floor = g_strdup_printf("netmutex:{%s}fence", nm_slot_tag(nm_slot_of(k, strlen(k))));
    const char *const want[NM_RKEY_COUNT] = {
        k, floor, "netmutex:{s41b90dde29446fdd}jobs:q",
        "netmutex:{s41b90dde29446fdd}jobs:w", "netmutex:{s41b90dde29446fdd}jobs:s",
        "netmutex:{s41b90dde29446fdd}jobs:g:0123456789abcdef0123456789abcdef",
    };
    nm_config_t cfg = config_with_prefix("netmutex:");
    size_t lens[NM_RKEY_COUNT];
    char *keys;

    g_assert_cmpint(nm_keys_sem(&cfg, "jobs", 4, token, &keys, lens), ==, 0);
    for (int i = 0; i < NM_RKEY_COUNT; i++) {
        const char *key = nm_keys_rwlock_get(keys, lens, (nm_rkey_t)i);
        g_assert_cmpmem(key, lens[i], want[i], strlen(want[i]));
        g_assert_cmpint(key[lens[i]], ==, '\0');
        g_assert_cmpuint(nm_slot_of(key, lens[i]), ==, nm_slot_of(k, strlen(k)));
    }
    free(keys);
    g_free(floor);
}

/* Without a token the lock key is built all the same, NUL-terminated. */
static void test_build_without_token(void)
{
    nm_config_t cfg = config_with_prefix("app/");
    char *keys;
    size_t len;

    g_assert_cmpint(nm_keys_build(&cfg, "x", 1, NULL, &keys, &len), ==, 0);
    g_assert_cmpuint(len, ==, strlen(keys));
    g_assert_true(g_str_has_prefix(keys, "app/{"));
    g_assert_true(g_str_has_suffix(keys, "}x"));
    free(keys);
}

/* An empty prefix and an empty name are still well-formed keys. */
static void test_build_empty(void)
{
    nm_config_t cfg = config_with_prefix("");
    char *keys;
    size_t len;

    g_assert_cmpint(nm_keys_build(&cfg, "", 0, token, &keys, &len), ==, 0);
    g_assert_cmpstr(keys, ==, "{cbf29ce484222325}");
    g_assert_cmpuint(len, ==, NM_KEY_TAG_LEN + 2);
    free(keys);
}

/* Any byte of a name is kept as it is, and every key of it shares the
 * slot of the tag alone, braces and NULs in the name included. */
static void test_build_binary_one_slot(void)
{
    static const char *const names[] = { "}x", "{a}b", "{", "}", "a{b}c", "{}", "a\0{z}" };
    static const size_t lens[] = { 2, 4, 1, 1, 5, 2, 5 };
    nm_config_t cfg = config_with_prefix("netmutex:");

    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        char *keys, tag[NM_KEY_TAG_LEN + 1];
        size_t len, glen;
        g_assert_cmpint(nm_keys_build(&cfg, names[i], lens[i], token, &keys, &len), ==, 0);
        nm_keys_tag(names[i], lens[i], tag);
        g_assert_cmpuint(len, ==, cfg.prefix_len + NM_KEY_TAG_LEN + 2 + lens[i]);
        g_assert_cmpmem(keys + len - lens[i], lens[i], names[i], lens[i]);
        unsigned int slot = nm_crc16(tag, NM_KEY_TAG_LEN) % NM_SLOTS;
        g_assert_cmpuint(nm_slot_of(keys, len), ==, slot);
        const char *grant = nm_keys_grant(keys, len, &glen);
        g_assert_cmpmem(grant, len, keys, len);
        g_assert_cmpuint(nm_slot_of(grant, glen), ==, slot);
        free(keys);
    }
}

/* nm_keys_grant_for builds the same grant list from a lock key alone. */
static void test_grant_for(void)
{
    nm_config_t cfg = config_with_prefix("netmutex:");
    char *keys, *g;
    size_t len, glen, glen2;

    g_assert_cmpint(nm_keys_build(&cfg, "q\0r", 3, token, &keys, &len), ==, 0);
    const char *grant = nm_keys_grant(keys, len, &glen);
    g = nm_keys_grant_for(keys, len, token, &glen2);
    g_assert_nonnull(g);
    g_assert_cmpmem(g, glen2, grant, glen);
    free(g);
    free(keys);
}

/* What a lease keeps (the lock key and floor, nm_keys_size) rebuilds,
 * with the token, every key nm_keys_build gave, byte for byte. */
static void test_full_from_kept(void)
{
    nm_config_t cfg = config_with_prefix("netmutex:");
    char *keys, *kept, *full;
    size_t len;

    g_assert_cmpint(nm_keys_build(&cfg, "a{b}\0c", 7, token, &keys, &len), ==, 0);
    size_t size = nm_keys_size(keys, len);
    size_t floor_len;
    nm_keys_get(keys, len, NM_KEY_FLOOR, &floor_len);
    g_assert_cmpuint(size, ==, len + 1 + floor_len + 1);
    kept = g_memdup2(keys, size);
    g_assert_cmpint(nm_keys_full(kept, len, token, &full), ==, 0);
    for (int i = 0; i < NM_KEY_COUNT; i++) {
        size_t a, b;
        const char *ka = nm_keys_get(keys, len, (nm_key_t)i, &a);
        const char *kb = nm_keys_get(full, len, (nm_key_t)i, &b);
        g_assert_cmpmem(ka, a, kb, b);
        g_assert_cmpint(kb[b], ==, '\0');
    }
    free(full);
    g_free(kept);
    free(keys);
}

/* The longest prefix the configuration accepts with a long name. */
static void test_build_long(void)
{
    char prefix[NM_PREFIX_MAX + 1];
    memset(prefix, 'p', NM_PREFIX_MAX);
    prefix[NM_PREFIX_MAX] = '\0';
    nm_config_t cfg = config_with_prefix(prefix);
    size_t name_len = 100000;
    char *name = g_malloc(name_len), *keys;
    size_t len, glen;
    memset(name, 'n', name_len);

    g_assert_cmpint(nm_keys_build(&cfg, name, name_len, token, &keys, &len), ==, 0);
    g_assert_cmpuint(len, ==, NM_PREFIX_MAX + NM_KEY_TAG_LEN + 2 + name_len);
    g_assert_cmpint(keys[len], ==, '\0');
    const char *grant = nm_keys_grant(keys, len, &glen);
    g_assert_cmpmem(grant + len, 3 + NM_TOKEN_LEN, ":g:" "0123456789abcdef0123456789abcdef",
                    3 + NM_TOKEN_LEN);
    free(keys);
    g_free(name);
}

/* Listing: the lock key of a name is one, whatever bytes the name holds;
 * its siblings, its slot's floor, another prefix's keys and a key whose
 * tag is not its name's are not. */
static void test_name_of(void)
{
    nm_config_t cfg = config_with_prefix("netmutex:");
    static const char *const names[] = { "jobs", "x{y}:q", "a:q", "\xff\x01" };
    const char *name;
    size_t len, klen, n;
    char *keys;

    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        g_assert_cmpint(nm_keys_build(&cfg, names[i], strlen(names[i]), token, &keys, &len), ==, 0);
        g_assert_cmpint(nm_keys_name_of(&cfg, keys, len, &name, &n), ==, 1);
        g_assert_cmpmem(name, n, names[i], strlen(names[i]));
        for (int k = NM_KEY_FLOOR; k < NM_KEY_COUNT; k++) {
            const char *key = nm_keys_get(keys, len, (nm_key_t)k, &klen);
            g_assert_cmpint(nm_keys_name_of(&cfg, key, klen, &name, &n), ==, 0);
        }
        nm_config_t other = config_with_prefix("netmutex:x");
        g_assert_cmpint(nm_keys_name_of(&other, keys, len, &name, &n), ==, 0);
        free(keys);
    }
    /* docs/deployment.md's key, its tag changed by one digit, or empty. */
    const char *bad[] = { "netmutex:{41b90dde29446fde}jobs", "netmutex:{41b90dde29446fdd}",
                          "netmutex:{41b90dde29446fdd", "netmutex:41b90dde29446fddjobs" };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        g_assert_cmpint(nm_keys_name_of(&cfg, bad[i], strlen(bad[i]), &name, &n), ==, 0);
}

/* The MATCH pattern quotes the prefix's glob characters. */
static void test_match(void)
{
    nm_config_t cfg = config_with_prefix("t*x?[]\\:");
    char *m = nm_keys_match(&cfg, "al*");
    g_assert_cmpstr(m, ==, "t\\*x\\?\\[\\]\\\\:{????????????????}al*");
    free(m);
}

/* Listing read-write locks and semaphores: K, S and Q of either name it,
 * with its kind, whatever bytes the name holds (a name ending in ":s"
 * too); W, G, the floor, a mutex's or a condition's keys and a tag that is
 * not the name's do not.  The MATCH patterns quote the prefix and end with
 * the key's suffix. */
static void test_shared_name_of(void)
{
    nm_config_t cfg = config_with_prefix("netmutex:");
    static const char *const names[] = { "jobs", "x{y}:s", "a:q", "\xff\x01" };
    const char *name;
    size_t lens[NM_RKEY_COUNT], len, n;
    char kind, *keys;

    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        for (int sem = 0; sem < 2; sem++) {
            g_assert_cmpint(sem ? nm_keys_sem(&cfg, names[i], strlen(names[i]), token, &keys,
                                              lens)
                                : nm_keys_rwlock(&cfg, names[i], strlen(names[i]), token,
                                                 &keys, lens),
                            ==, 0);
            for (int k = 0; k < NM_RKEY_COUNT; k++) {
                const char *key = nm_keys_rwlock_get(keys, lens, (nm_rkey_t)k);
                int want = k == NM_RKEY_LOCK || k == NM_RKEY_SHARES || k == NM_RKEY_QUEUE;
                kind = 0;
                g_assert_cmpint(nm_keys_shared_name_of(&cfg, key, lens[k], &kind, &name, &n),
                                ==, want);
                if (want) {
                    g_assert_cmpint(kind, ==, sem ? 's' : 'r');
                    g_assert_cmpmem(name, n, names[i], strlen(names[i]));
                }
            }
            free(keys);
        }
        g_assert_cmpint(nm_keys_build(&cfg, names[i], strlen(names[i]), token, &keys, &len), ==, 0);
        g_assert_cmpint(nm_keys_shared_name_of(&cfg, keys, len, &kind, &name, &n), ==, 0);
        free(keys);
    }
    const char *bad[] = { "netmutex:{r41b90dde29446fde}jobs", "netmutex:{r41b90dde29446fdd}",
                          "netmutex:{c41b90dde29446fdd}jobs", "netmutex:{x41b90dde29446fdd}jobs" };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        g_assert_cmpint(nm_keys_shared_name_of(&cfg, bad[i], strlen(bad[i]), &kind, &name, &n),
                        ==, 0);
    g_assert_cmpint(nm_keys_shared_name_of(&cfg, "netmutex:{r41b90dde29446fdd}jobs", 32, &kind,
                                           &name, &n), ==, 1);
    nm_config_t odd = config_with_prefix("t*x:");
    char *m = nm_keys_match_shared(&odd, "al*", ":s");
    g_assert_cmpstr(m, ==, "t\\*x:{[rs]????????????????}al*:s");
    free(m);
}

/* A condition's keys (docs/deployment.md): {c<tag>}, then :cw, :cs, :ch
 * and the waiter's :cg:<token>, all in one slot, none a mutex's; the CG
 * of another waiter, built from the keys alone, is what that waiter
 * builds for itself. */
static void test_cond(void)
{
    nm_config_t cfg = config_with_prefix("netmutex:");
    static const char *const want[NM_CKEY_COUNT] = {
        "netmutex:{c41b90dde29446fdd}jobs:cw", "netmutex:{c41b90dde29446fdd}jobs:cs",
        "netmutex:{c41b90dde29446fdd}jobs:ch",
        "netmutex:{c41b90dde29446fdd}jobs:cg:0123456789abcdef0123456789abcdef"
    };
    char *keys, *other, *g;
    size_t lens[NM_CKEY_COUNT], olens[NM_CKEY_COUNT], glen;

    g_assert_cmpint(nm_keys_cond(&cfg, "jobs", 4, token, &keys, lens), ==, 0);
    unsigned int slot = nm_slot_of(want[0], strlen(want[0]));
    for (int i = 0; i < NM_CKEY_COUNT; i++) {
        const char *k = nm_keys_cond_get(keys, lens, (nm_ckey_t)i);
        g_assert_cmpuint(lens[i], ==, strlen(want[i]));
        g_assert_cmpstr(k, ==, want[i]);
        g_assert_cmpuint(nm_slot_of(k, lens[i]), ==, slot);
    }
    /* A signaller's keys have no CG; it builds the chosen waiter's. */
    g_assert_cmpint(nm_keys_cond(&cfg, "jobs", 4, NULL, &other, olens), ==, 0);
    g_assert_cmpuint(olens[NM_CKEY_GRANT], ==, 0);
    g = nm_keys_cond_grant_for(other, olens, token, NM_TOKEN_LEN, &glen);
    g_assert_nonnull(g);
    g_assert_cmpmem(g, glen, want[NM_CKEY_GRANT], strlen(want[NM_CKEY_GRANT]));
    g_assert_null(nm_keys_cond_grant_for(other, olens, token, NM_TOKEN_LEN - 1, &glen));
    free(g);
    free(other);
    free(keys);
}

/* An order's key and a pair's claim key: the prefix, the kind letter and
 * the tag of the two names joined by a NUL, then the names; the claim is
 * the same whichever order the pair is given in. */
static void test_order(void)
{
    nm_config_t cfg = config_with_prefix("netmutex:");
    char *k1, *k2, *c1, *c2, tag[NM_KEY_TAG_LEN + 1];
    size_t n1, n2, m1, m2;
    g_assert_cmpint(nm_keys_order(&cfg, "m:a", 3, "r:b", 3, 0, &k1, &n1), ==, 0);
    g_assert_cmpint(nm_keys_order(&cfg, "r:b", 3, "m:a", 3, 0, &k2, &n2), ==, 0);
    nm_keys_tag("m:a\0r:b", 7, tag);
    char *want = g_strdup_printf("netmutex:{o%s}m:a>r:b", tag);
    g_assert_cmpstr(k1, ==, want);
    g_assert_cmpuint(n1, ==, strlen(want));
    g_assert_cmpstr(k1, !=, k2);
    g_assert_cmpint(nm_keys_order(&cfg, "m:a", 3, "r:b", 3, 1, &c1, &m1), ==, 0);
    g_assert_cmpint(nm_keys_order(&cfg, "r:b", 3, "m:a", 3, 1, &c2, &m2), ==, 0);
    g_free(want);
    want = g_strdup_printf("netmutex:{i%s}m:a<>r:b", tag);
    g_assert_cmpstr(c1, ==, want);
    g_assert_cmpstr(c2, ==, want);
    g_assert_cmpuint(m2, ==, strlen(want));
    g_free(want);
    free(k1), free(k2), free(c1), free(c2);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/unit/keys/tag/known", test_tag_known);
    g_test_add_func("/unit/keys/build/readme-example", test_build_readme_example);
    g_test_add_func("/unit/keys/build/declared-order", test_build_declared_order);
    g_test_add_func("/unit/keys/build/without-token", test_build_without_token);
    g_test_add_func("/unit/keys/build/empty", test_build_empty);
    g_test_add_func("/unit/keys/build/binary-one-slot", test_build_binary_one_slot);
    g_test_add_func("/unit/keys/build/long", test_build_long);
    g_test_add_func("/unit/keys/rwlock/declared-order", test_rwlock_keys);
    g_test_add_func("/unit/keys/sem/declared-order", test_sem_keys);
    g_test_add_func("/unit/keys/grant-for", test_grant_for);
    g_test_add_func("/unit/keys/full-from-kept", test_full_from_kept);
    g_test_add_func("/unit/keys/list/name-of", test_name_of);
    g_test_add_func("/unit/keys/list/match", test_match);
    g_test_add_func("/unit/keys/list/shared-name-of", test_shared_name_of);
    g_test_add_func("/unit/keys/lockdep/order", test_order);
    g_test_add_func("/unit/keys/cond", test_cond);
    return g_test_run();
}
