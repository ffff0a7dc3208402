/* keys.c -- building the keys of a mutex, a condition variable and a
 * read-write lock. */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "slot.h"

#define GRANT_SUFFIX ":g:"
#define GRANT_SUFFIX_LEN 3

/* The siblings' suffixes, in nm_key_t's order. */
static const char *const suffix[NM_KEY_COUNT] = {
    [NM_KEY_QUEUE] = ":q", [NM_KEY_WAITERS] = ":w", [NM_KEY_MARKER] = ":h",
    [NM_KEY_GRANT] = GRANT_SUFFIX,
};
#define FLOOR_NAME "fence"

/* The length of sibling WHICH (a suffixed key) for a lock key of LEN. */
static size_t sibling_length(size_t len, nm_key_t which)
{
    return len + strlen(suffix[which]) + (which == NM_KEY_GRANT ? NM_TOKEN_LEN : 0);
}

/* The length of key WHICH for a lock key of LEN bytes, the floor key at
 * FLOOR (it holds no NUL: the prefix is a C string, the slot tag
 * alphanumeric). */
static size_t key_length(size_t len, const char *floor, nm_key_t which)
{
    if (which == NM_KEY_LOCK)
        return len;
    if (which == NM_KEY_FLOOR)
        return strlen(floor);
    return sibling_length(len, which);
}

/* <prefix>{<slot tag>}fence for the slot of lock key K (LEN bytes) at W. */
static size_t write_floor(char *w, const nm_config_t *cfg, const char *k, size_t len)
{
    const char *tag = nm_slot_tag(nm_slot_of(k, len));
    memcpy(w, cfg->prefix, cfg->prefix_len);
    w += cfg->prefix_len;
    *w++ = '{';
    memcpy(w, tag, strlen(tag));
    w += strlen(tag);
    *w++ = '}';
    memcpy(w, FLOOR_NAME, strlen(FLOOR_NAME));
    return cfg->prefix_len + strlen(tag) + 2 + strlen(FLOOR_NAME);
}

/* The siblings of lock key K (LEN bytes), NUL-terminated one after the
 * other at W, in nm_key_t's order; the grant list's is TOKEN's. */
static void write_siblings(char *w, const char *k, size_t len, const char *token)
{
    for (int i = NM_KEY_QUEUE; i < NM_KEY_COUNT; i++) {
        size_t n = strlen(suffix[i]);
        memcpy(w, k, len);
        memcpy(w + len, suffix[i], n);
        if (i == NM_KEY_GRANT) /* no token: zeros, never sent */
            memcpy(w + len + n, token ? token : "00000000000000000000000000000000",
                   NM_TOKEN_LEN);
        w += sibling_length(len, (nm_key_t)i) + 1;
    }
}

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
    size_t total = klen + 1 + cfg->prefix_len + NM_SLOT_TAG_MAX + 3 + strlen(FLOOR_NAME);
    for (int i = NM_KEY_QUEUE; i < NM_KEY_COUNT; i++)
        total += sibling_length(klen, (nm_key_t)i) + 1;
    char *k = calloc(total, 1), *w = k;
    if (!k)
        return ENOMEM;
    memcpy(w, cfg->prefix, cfg->prefix_len);
    w += cfg->prefix_len;
    *w++ = '{';
    nm_keys_tag(name, name_len, w);
    w += NM_KEY_TAG_LEN;
    *w++ = '}';
    memcpy(w, name, name_len);
    w = k + klen + 1;
    w += write_floor(w, cfg, k, klen) + 1;
    write_siblings(w, k, klen, token);
    *keys = k;
    *len = klen;
    return 0;
}

const char *nm_keys_get(const char *keys, size_t len, nm_key_t which, size_t *key_len)
{
    const char *k = keys, *floor = keys + len + 1;
    for (int i = 0; i < (int)which; i++)
        k += key_length(len, floor, (nm_key_t)i) + 1;
    *key_len = key_length(len, floor, which);
    return k;
}

size_t nm_keys_size(const char *keys, size_t len)
{
    return len + 1 + strlen(keys + len + 1) + 1;
}

int nm_keys_full(const char *keys, size_t len, const char *token, char **full)
{
    size_t head = nm_keys_size(keys, len), total = head;
    for (int i = NM_KEY_QUEUE; i < NM_KEY_COUNT; i++)
        total += sibling_length(len, (nm_key_t)i) + 1;
    char *k = calloc(total, 1);
    if (!k)
        return ENOMEM;
    memcpy(k, keys, head);
    write_siblings(k + head, keys, len, token);
    *full = k;
    return 0;
}

const char *nm_keys_grant(const char *keys, size_t len, size_t *grant_len)
{
    return nm_keys_get(keys, len, NM_KEY_GRANT, grant_len);
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

char *nm_keys_match(const nm_config_t *cfg, const char *pattern)
{
    size_t plen = strlen(pattern);
    char *out = malloc(2 * cfg->prefix_len + NM_KEY_TAG_LEN + 3 + plen), *w = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < cfg->prefix_len; i++) {
        if (strchr("*?[]\\", cfg->prefix[i]))
            *w++ = '\\';
        *w++ = cfg->prefix[i];
    }
    *w++ = '{';
    memset(w, '?', NM_KEY_TAG_LEN);
    w += NM_KEY_TAG_LEN;
    *w++ = '}';
    memcpy(w, pattern, plen + 1);
    return out;
}

int nm_keys_name_of(const nm_config_t *cfg, const char *key, size_t len, const char **name,
                    size_t *name_len)
{
    size_t head = cfg->prefix_len + NM_KEY_TAG_LEN + 2;
    char tag[NM_KEY_TAG_LEN + 1];
    if (len <= head || len - head > NETMUTEX_NAME_MAX ||
        memcmp(key, cfg->prefix, cfg->prefix_len) != 0 || key[cfg->prefix_len] != '{' ||
        key[head - 1] != '}' || memchr(key + head, '\0', len - head))
        return 0;
    nm_keys_tag(key + head, len - head, tag);
    if (memcmp(key + cfg->prefix_len + 1, tag, NM_KEY_TAG_LEN) != 0)
        return 0;
    *name = key + head;
    *name_len = len - head;
    return 1;
}

/* ---- conditions ---- */

static const char *const cond_suffix[NM_CKEY_COUNT] = { ":cw", ":cs", ":ch", ":cg:" };

int nm_keys_cond(const nm_config_t *cfg, const char *name, size_t name_len,
                 const char *token, char **keys, size_t lens[NM_CKEY_COUNT])
{
    size_t base = cfg->prefix_len + NM_KEY_TAG_LEN + 3 + name_len, total = 0;
    int n = token ? NM_CKEY_COUNT : NM_CKEY_GRANT;
    for (int i = 0; i < NM_CKEY_COUNT; i++) {
        lens[i] = i < n ? base + strlen(cond_suffix[i]) + (i == NM_CKEY_GRANT ? NM_TOKEN_LEN : 0)
                        : 0;
        total += lens[i] + 1;
    }
    char *k = calloc(total, 1), *w = k;
    if (!k)
        return ENOMEM;
    for (int i = 0; i < n; i++) {
        memcpy(w, cfg->prefix, cfg->prefix_len);
        w[cfg->prefix_len] = '{';
        w[cfg->prefix_len + 1] = 'c';
        nm_keys_tag(name, name_len, w + cfg->prefix_len + 2);
        w[base - name_len - 1] = '}';
        memcpy(w + base - name_len, name, name_len);
        memcpy(w + base, cond_suffix[i], strlen(cond_suffix[i]));
        if (i == NM_CKEY_GRANT)
            memcpy(w + base + strlen(cond_suffix[i]), token, NM_TOKEN_LEN);
        w += lens[i] + 1;
    }
    *keys = k;
    return 0;
}

const char *nm_keys_cond_get(const char *keys, const size_t lens[NM_CKEY_COUNT],
                             nm_ckey_t which)
{
    for (int i = 0; i < (int)which; i++)
        keys += lens[i] + 1;
    return keys;
}

char *nm_keys_cond_grant_for(const char *keys, const size_t lens[NM_CKEY_COUNT],
                             const char *token, size_t token_len, size_t *len)
{
    /* CW is <base>:cw, CG <base>:cg:<token>. */
    size_t base = lens[NM_CKEY_WAITERS] - strlen(cond_suffix[NM_CKEY_WAITERS]);
    size_t tail = strlen(cond_suffix[NM_CKEY_GRANT]);
    if (token_len != NM_TOKEN_LEN)
        return NULL;
    char *g = malloc(base + tail + NM_TOKEN_LEN + 1);
    if (!g)
        return NULL;
    memcpy(g, keys, base);
    memcpy(g + base, cond_suffix[NM_CKEY_GRANT], tail);
    memcpy(g + base + tail, token, NM_TOKEN_LEN);
    g[base + tail + NM_TOKEN_LEN] = '\0';
    *len = base + tail + NM_TOKEN_LEN;
    return g;
}

/* ---- read-write locks ---- */

static const char *const rw_suffix[NM_RKEY_COUNT] = {
    [NM_RKEY_QUEUE] = ":q", [NM_RKEY_WAITERS] = ":w", [NM_RKEY_SHARES] = ":s",
    [NM_RKEY_GRANT] = GRANT_SUFFIX,
};

/* The keys of a lock with a share set under tag letter KIND ('r' a
 * read-write lock, 's' a semaphore). */
static int keys_shares(const nm_config_t *cfg, char kind, const char *name, size_t name_len,
                       const char *token, char **keys, size_t lens[NM_RKEY_COUNT])
{
    size_t klen = cfg->prefix_len + NM_KEY_TAG_LEN + 3 + name_len;
    size_t total = klen + 1 + cfg->prefix_len + NM_SLOT_TAG_MAX + 3 + strlen(FLOOR_NAME) + 1;
    int n = token ? NM_RKEY_COUNT : NM_RKEY_GRANT;
    for (int i = NM_RKEY_QUEUE; i < NM_RKEY_COUNT; i++)
        total += klen + strlen(rw_suffix[i]) + (i == NM_RKEY_GRANT ? NM_TOKEN_LEN : 0) + 1;
    char *k = calloc(total, 1), *w = k;
    if (!k)
        return ENOMEM;
    memcpy(w, cfg->prefix, cfg->prefix_len);
    w[cfg->prefix_len] = '{';
    w[cfg->prefix_len + 1] = kind;
    nm_keys_tag(name, name_len, w + cfg->prefix_len + 2);
    w[klen - name_len - 1] = '}';
    memcpy(w + klen - name_len, name, name_len);
    lens[NM_RKEY_LOCK] = klen;
    w += klen + 1;
    lens[NM_RKEY_FLOOR] = write_floor(w, cfg, k, klen);
    w += lens[NM_RKEY_FLOOR] + 1;
    for (int i = NM_RKEY_QUEUE; i < NM_RKEY_COUNT; i++) {
        lens[i] = 0;
        if (i >= n)
            continue;
        size_t sl = strlen(rw_suffix[i]);
        memcpy(w, k, klen);
        memcpy(w + klen, rw_suffix[i], sl);
        if (i == NM_RKEY_GRANT)
            memcpy(w + klen + sl, token, NM_TOKEN_LEN);
        lens[i] = klen + sl + (i == NM_RKEY_GRANT ? NM_TOKEN_LEN : 0);
        w += lens[i] + 1;
    }
    *keys = k;
    return 0;
}

int nm_keys_rwlock(const nm_config_t *cfg, const char *name, size_t name_len,
                   const char *token, char **keys, size_t lens[NM_RKEY_COUNT])
{
    return keys_shares(cfg, 'r', name, name_len, token, keys, lens);
}

int nm_keys_sem(const nm_config_t *cfg, const char *name, size_t name_len, const char *token,
                char **keys, size_t lens[NM_RKEY_COUNT])
{
    return keys_shares(cfg, 's', name, name_len, token, keys, lens);
}

const char *nm_keys_rwlock_get(const char *keys, const size_t lens[NM_RKEY_COUNT],
                               nm_rkey_t which)
{
    for (int i = 0; i < (int)which; i++)
        keys += lens[i] + 1;
    return keys;
}

char *nm_keys_match_shared(const nm_config_t *cfg, const char *pattern, const char *end)
{
    size_t plen = strlen(pattern), slen = strlen(end);
    char *out = malloc(2 * cfg->prefix_len + NM_KEY_TAG_LEN + 7 + plen + slen), *w = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < cfg->prefix_len; i++) {
        if (strchr("*?[]\\", cfg->prefix[i]))
            *w++ = '\\';
        *w++ = cfg->prefix[i];
    }
    memcpy(w, "{[rs]", 5);
    w += 5;
    memset(w, '?', NM_KEY_TAG_LEN);
    w += NM_KEY_TAG_LEN;
    *w++ = '}';
    memcpy(w, pattern, plen);
    memcpy(w + plen, end, slen + 1);
    return out;
}

int nm_keys_shared_name_of(const nm_config_t *cfg, const char *key, size_t len, char *kind,
                           const char **name, size_t *name_len)
{
    static const char *const ends[] = { "", ":s", ":q" };
    size_t head = cfg->prefix_len + NM_KEY_TAG_LEN + 3;
    char tag[NM_KEY_TAG_LEN + 1];
    if (len <= head || memcmp(key, cfg->prefix, cfg->prefix_len) != 0 ||
        key[cfg->prefix_len] != '{' || key[head - 1] != '}' ||
        (key[cfg->prefix_len + 1] != 'r' && key[cfg->prefix_len + 1] != 's') ||
        memchr(key + head, '\0', len - head))
        return 0;
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        size_t slen = strlen(ends[i]), n = len - head;
        if (n <= slen || n - slen > NETMUTEX_NAME_MAX ||
            memcmp(key + len - slen, ends[i], slen) != 0)
            continue;
        nm_keys_tag(key + head, n - slen, tag);
        if (memcmp(key + cfg->prefix_len + 2, tag, NM_KEY_TAG_LEN) != 0)
            continue;
        *kind = key[cfg->prefix_len + 1];
        *name = key + head;
        *name_len = n - slen;
        return 1;
    }
    return 0;
}

/* <prefix>{d<tag of WHAT>}<MARK><WHAT>, or <prefix>{d}<MARK> when WHAT is
 * NULL. */
static char *deadlock_key(const nm_config_t *cfg, const char *mark, const char *what,
                          size_t what_len, size_t *len)
{
    size_t mark_len = strlen(mark);
    size_t n = cfg->prefix_len + 3 + (what ? NM_KEY_TAG_LEN + what_len : 0) + mark_len;
    char *k = malloc(n + 1), *w = k;
    if (!k)
        return NULL;
    memcpy(w, cfg->prefix, cfg->prefix_len);
    w += cfg->prefix_len;
    *w++ = '{';
    *w++ = 'd';
    if (what) {
        nm_keys_tag(what, what_len, w);
        w += NM_KEY_TAG_LEN;
    }
    *w++ = '}';
    memcpy(w, mark, mark_len);
    w += mark_len;
    if (what) {
        memcpy(w, what, what_len);
        w += what_len;
    }
    *w = '\0';
    *len = n;
    return k;
}

char *nm_keys_waiter(const nm_config_t *cfg, const char *id, size_t id_len, size_t *len)
{
    return deadlock_key(cfg, "w:", id, id_len, len);
}

char *nm_keys_held_by(const nm_config_t *cfg, const char *name, size_t name_len, size_t *len)
{
    return deadlock_key(cfg, "h:", name, name_len, len);
}

char *nm_keys_rw_held_by(const nm_config_t *cfg, const char *name, size_t name_len,
                         size_t *len)
{
    return deadlock_key(cfg, "r:", name, name_len, len);
}

char *nm_keys_wait_seq(const nm_config_t *cfg, size_t *len)
{
    return deadlock_key(cfg, "seq", NULL, 0, len);
}

char *nm_keys_match_waiters(const nm_config_t *cfg)
{
    char *out = malloc(2 * cfg->prefix_len + NM_KEY_TAG_LEN + 8), *w = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < cfg->prefix_len; i++) {
        if (strchr("*?[]\\", cfg->prefix[i]))
            *w++ = '\\';
        *w++ = cfg->prefix[i];
    }
    *w++ = '{';
    *w++ = 'd';
    memset(w, '?', NM_KEY_TAG_LEN);
    w += NM_KEY_TAG_LEN;
    memcpy(w, "}w:*", 5);
    return out;
}

int nm_keys_waiter_of(const nm_config_t *cfg, const char *key, size_t len, const char **id,
                      size_t *id_len)
{
    size_t head = cfg->prefix_len + NM_KEY_TAG_LEN + 5; /* {d<tag>}w: */
    char tag[NM_KEY_TAG_LEN + 1];
    if (len <= head || memcmp(key, cfg->prefix, cfg->prefix_len) != 0 ||
        memcmp(key + cfg->prefix_len, "{d", 2) != 0 || memcmp(key + head - 3, "}w:", 3) != 0 ||
        memchr(key + head, '\0', len - head))
        return 0;
    nm_keys_tag(key + head, len - head, tag);
    if (memcmp(key + cfg->prefix_len + 2, tag, NM_KEY_TAG_LEN) != 0)
        return 0;
    *id = key + head;
    *id_len = len - head;
    return 1;
}

/* ---- lock-order checking's keys (keys.h) ---- */

static int bytes_before(const char *a, size_t a_len, const char *b, size_t b_len)
{
    int c = memcmp(a, b, a_len < b_len ? a_len : b_len);
    return c < 0 || (c == 0 && a_len < b_len);
}

int nm_keys_order(const nm_config_t *cfg, const char *a, size_t a_len, const char *b,
                  size_t b_len, int claim, char **key, size_t *len)
{
    const char *sep = claim ? "<>" : ">";
    size_t sep_len = strlen(sep);
    if (claim && bytes_before(b, b_len, a, a_len)) {
        const char *t = a;
        size_t t_len = a_len;
        a = b, a_len = b_len, b = t, b_len = t_len;
    }
    char *joined = malloc(a_len + 1 + b_len);
    size_t n = cfg->prefix_len + 2 + NM_KEY_TAG_LEN + 1 + a_len + sep_len + b_len;
    char *w = malloc(n + 1);
    if (!joined || !w) {
        free(joined);
        free(w);
        return ENOMEM;
    }
    memcpy(joined, a, a_len);
    joined[a_len] = '\0';
    memcpy(joined + a_len + 1, b, b_len);
    memcpy(w, cfg->prefix, cfg->prefix_len);
    w[cfg->prefix_len] = '{';
    w[cfg->prefix_len + 1] = claim ? 'i' : 'o';
    nm_keys_tag(joined, a_len + 1 + b_len, w + cfg->prefix_len + 2);
    free(joined);
    char *p = w + cfg->prefix_len + 2 + NM_KEY_TAG_LEN;
    *p++ = '}';
    memcpy(p, a, a_len);
    memcpy(p + a_len, sep, sep_len);
    memcpy(p + a_len + sep_len, b, b_len);
    w[n] = '\0';
    *key = w;
    *len = n;
    return 0;
}

/* ---- a process's published statistics (stats_board.c) ---- */

char *nm_keys_stats(const nm_config_t *cfg, const char *host, long pid, size_t *len)
{
    size_t hlen = strlen(host), size = cfg->prefix_len + 6 + hlen + 1 + 24;
    char *out = malloc(size);
    if (!out)
        return NULL;
    memcpy(out, cfg->prefix, cfg->prefix_len);
    int n = snprintf(out + cfg->prefix_len, size - cfg->prefix_len, "stats:%s:%ld", host, pid);
    *len = cfg->prefix_len + (size_t)n;
    return out;
}

char *nm_keys_stats_match(const nm_config_t *cfg)
{
    char *out = malloc(2 * cfg->prefix_len + 8), *w = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < cfg->prefix_len; i++) {
        if (strchr("*?[]\\", cfg->prefix[i]))
            *w++ = '\\';
        *w++ = cfg->prefix[i];
    }
    memcpy(w, "stats:*", 8);
    return out;
}

int nm_keys_is_stats(const nm_config_t *cfg, const char *key, size_t len)
{
    return len > cfg->prefix_len + 6 && memcmp(key, cfg->prefix, cfg->prefix_len) == 0 &&
           memcmp(key + cfg->prefix_len, "stats:", 6) == 0;
}
