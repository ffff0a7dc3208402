/* waitfor.c -- the wait-for graph's keys on the servers (waitfor.h), each
 * request sent where its key lives and its outcome noted by routed.h. */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "keys.h"
#include "reply.h"
#include "routed.h"
#include "script.h"
#include "waitfor.h"

/* ---- the record's text ---------------------------------------------------
 * "<seq> <kind><len>:<name>" for the wait, then " <kind><len>:<name>" for
 * each hold: any byte of a name is safe. */

char *nm_waitrec_format(const nm_waitrec_t *r, size_t *len)
{
    size_t n = 24 + 24 + r->wait_len;
    for (size_t i = 0; i < r->nheld; i++)
        n += 24 + r->held_len[i];
    char *t = malloc(n), *w = t;
    if (!t)
        return NULL;
    w += sprintf(w, "%lld %c%zu:", r->seq, r->wait_kind, r->wait_len);
    memcpy(w, r->wait, r->wait_len);
    w += r->wait_len;
    for (size_t i = 0; i < r->nheld; i++) {
        w += sprintf(w, " %c%zu:", r->held_kind[i], r->held_len[i]);
        memcpy(w, r->held[i], r->held_len[i]);
        w += r->held_len[i];
    }
    *len = (size_t)(w - t);
    return t;
}

/* One "<kind><len>:<name>" at *P (before END): 0 and *P past it. */
static int parse_item(const char **p, const char *end, char *kind, const char **name,
                      size_t *len)
{
    const char *s = *p;
    if (s >= end || *s < 'a' || *s > 'z')
        return EPROTO;
    *kind = *s++;
    size_t n = 0;
    const char *digits = s;
    while (s < end && *s >= '0' && *s <= '9' && s - digits < 8)
        n = n * 10 + (size_t)(*s++ - '0');
    if (s == digits || s >= end || *s != ':' || (size_t)(end - s - 1) < n)
        return EPROTO;
    *name = s + 1;
    *len = n;
    *p = s + 1 + n;
    return 0;
}

int nm_waitrec_parse(const char *text, size_t len, nm_waitrec_t *r)
{
    const char *p = text, *end = text + len;
    memset(r, 0, sizeof *r);
    long long seq = 0;
    const char *digits = p;
    while (p < end && *p >= '0' && *p <= '9' && p - digits < 18)
        seq = seq * 10 + (*p++ - '0');
    if (p == digits || p >= end || *p++ != ' ')
        return EPROTO;
    r->seq = seq;
    if (parse_item(&p, end, &r->wait_kind, &r->wait, &r->wait_len) != 0)
        return EPROTO;
    while (p < end) {
        char kind;
        const char *name;
        size_t n;
        if (*p++ != ' ' || parse_item(&p, end, &kind, &name, &n) != 0)
            return EPROTO;
        if (r->nheld < NM_WAITREC_HELD_MAX) {
            r->held_kind[r->nheld] = kind;
            r->held[r->nheld] = name;
            r->held_len[r->nheld++] = n;
        }
    }
    return 0;
}

int nm_waitrec_holds(const nm_waitrec_t *r, const char *name, size_t len)
{
    return nm_waitrec_blocks(r, NM_WAIT_MUTEX, name, len);
}

/* Whether a hold of kind HELD keeps a wait of kind WAIT out. */
static int conflicts(char wait, char held)
{
    if (wait == NM_WAIT_MUTEX)
        return held == NM_WAIT_MUTEX;
    if (wait == NM_WAIT_WRITE)
        return held == NM_WAIT_READ || held == NM_WAIT_WRITE;
    return wait == NM_WAIT_READ && held == NM_WAIT_WRITE;
}

int nm_waitrec_blocks(const nm_waitrec_t *r, char kind, const char *name, size_t len)
{
    for (size_t i = 0; i < r->nheld; i++)
        if (conflicts(kind, r->held_kind[i]) && r->held_len[i] == len &&
            memcmp(r->held[i], name, len) == 0)
            return 1;
    return 0;
}

/* Whether a hold of KIND is a read-write lock's (its holders in a set). */
static int rw_kind(char kind)
{
    return kind == NM_WAIT_READ || kind == NM_WAIT_WRITE;
}

/* ---- requests ------------------------------------------------------------ */

/* One command about KEY where it lives (routed.h: the one server, the
 * master, or the node of KEY's slot), within the I/O timeout. */
static int command(nm_config_t *cfg, const char *key, size_t key_len, int argc,
                   const char **argv, const size_t *lens, redisReply **out)
{
    nm_routed_t q = { .key = key, .key_len = key_len, .argc = argc, .argv = argv,
                      .lens = lens };
    return nm_routed_call(cfg, &q, nm_now_ms() + (int64_t)cfg->io_timeout_ms, out, NULL);
}

static int command_done(nm_config_t *cfg, const char *key, size_t key_len, int argc,
                        const char **argv, const size_t *lens)
{
    redisReply *r;
    int err = command(cfg, key, key_len, argc, argv, lens, &r);
    if (!err)
        freeReplyObject(r);
    return err;
}

int nm_waitfor_seq(nm_config_t *cfg, long long *seq)
{
    size_t klen;
    char *key = nm_keys_wait_seq(cfg, &klen);
    if (!key)
        return ENOMEM;
    const char *argv[2] = { "INCR", key };
    size_t lens[2] = { 4, klen };
    redisReply *r;
    int err = command(cfg, key, klen, 2, argv, lens, &r);
    if (!err) {
        err = nm_reply_integer(r, seq);
        freeReplyObject(r);
    }
    free(key);
    return err;
}

/* SET KEY VALUE PX TTL_MS. */
static int set_px(nm_config_t *cfg, const char *key, size_t klen, const char *value,
                  size_t vlen, unsigned int ttl_ms)
{
    char ttl[16];
    snprintf(ttl, sizeof ttl, "%u", ttl_ms);
    const char *argv[5] = { "SET", key, value, "PX", ttl };
    size_t lens[5] = { 3, klen, vlen, 2, strlen(ttl) };
    return command_done(cfg, key, klen, 5, argv, lens);
}

/* Script ID with NARGS words ARGV (the key, KEY, first) where command()
 * would send it, within the I/O timeout, for its effect only. */
static int script_done(nm_config_t *cfg, nm_script_t id, int nargs, const char **argv,
                       const size_t *lens)
{
    nm_routed_t q = { .key = argv[0], .key_len = lens[0], .argc = nargs, .argv = argv,
                      .lens = lens, .script = 1, .id = id, .nkeys = 1 };
    redisReply *r;
    int err = nm_routed_call(cfg, &q, nm_now_ms() + (int64_t)cfg->io_timeout_ms, &r, NULL);
    if (!err)
        freeReplyObject(r);
    return err;
}

/* SADD KEY ID and PEXPIRE KEY TTL_MS, in one script (add.lua): the set
 * lives as long as its newest member's record, and a process that dies
 * right after the SADD must not leave a set that never expires. */
static int add_px(nm_config_t *cfg, const char *key, size_t klen, const char *id,
                  size_t idlen, unsigned int ttl_ms)
{
    char ttl[16];
    snprintf(ttl, sizeof ttl, "%u", ttl_ms);
    const char *argv[4] = { key, "s", id, ttl };
    size_t lens[4] = { klen, 1, idlen, strlen(ttl) };
    return script_done(cfg, NM_SCRIPT_ADD, 4, argv, lens);
}

/* The key naming the holders of R's hold I. */
static char *hold_key(nm_config_t *cfg, const nm_waitrec_t *r, size_t i, size_t *klen)
{
    return rw_kind(r->held_kind[i]) ? nm_keys_rw_held_by(cfg, r->held[i], r->held_len[i], klen)
                                    : nm_keys_held_by(cfg, r->held[i], r->held_len[i], klen);
}

int nm_waitfor_publish(nm_config_t *cfg, const char *id, const char *text, size_t len,
                       const nm_waitrec_t *r, unsigned int ttl_ms)
{
    size_t klen, idlen = strlen(id);
    char *key = nm_keys_waiter(cfg, id, idlen, &klen);
    if (!key)
        return ENOMEM;
    int err = set_px(cfg, key, klen, text, len, ttl_ms);
    free(key);
    for (size_t i = 0; i < r->nheld && !err; i++) {
        key = hold_key(cfg, r, i, &klen);
        if (!key)
            return ENOMEM;
        err = rw_kind(r->held_kind[i]) ? add_px(cfg, key, klen, id, idlen, ttl_ms)
                                       : set_px(cfg, key, klen, id, idlen, ttl_ms);
        free(key);
    }
    return err;
}

/* CMD KEY, KEY consumed (NULL: out of memory): *R the reply. */
static int keyed(nm_config_t *cfg, const char *cmd, char *key, size_t klen, redisReply **r)
{
    const char *argv[2] = { cmd, key };
    size_t lens[2] = { strlen(cmd), klen };
    if (!key)
        return ENOMEM;
    int err = command(cfg, key, klen, 2, argv, lens, r);
    free(key);
    return err;
}

/* GET KEY: *TEXT malloc'ed (NULL: no such key). */
static int get(nm_config_t *cfg, char *key, size_t klen, char **text, size_t *len)
{
    redisReply *r;
    *text = NULL;
    *len = 0;
    int err = keyed(cfg, "GET", key, klen, &r);
    if (err)
        return err;
    if (r->type == REDIS_REPLY_STRING) {
        *text = malloc(r->len + 1);
        if (*text) {
            memcpy(*text, r->str, r->len);
            (*text)[r->len] = '\0';
            *len = r->len;
        } else {
            err = ENOMEM;
        }
    } else if (r->type != REDIS_REPLY_NIL) {
        err = EPROTO;
    }
    freeReplyObject(r);
    return err;
}

int nm_waitfor_record(nm_config_t *cfg, const char *id, size_t id_len, char **text,
                      size_t *len)
{
    size_t klen = 0;
    char *key = nm_keys_waiter(cfg, id, id_len, &klen);
    return get(cfg, key, klen, text, len);
}

int nm_waitfor_holder(nm_config_t *cfg, const char *name, size_t name_len, char **text,
                      size_t *len)
{
    size_t klen = 0;
    char *key = nm_keys_held_by(cfg, name, name_len, &klen);
    return get(cfg, key, klen, text, len);
}

void nm_waitfor_ids_free(char **ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* SMEMBERS KEY (consumed) into *IDS, sorted. */
static int members(nm_config_t *cfg, char *key, size_t klen, char ***ids, size_t *n)
{
    redisReply *r;
    int err = keyed(cfg, "SMEMBERS", key, klen, &r);
    if (err)
        return err;
    if (r->type != REDIS_REPLY_ARRAY)
        err = EPROTO;
    else if (r->elements && !(*ids = calloc(r->elements, sizeof **ids)))
        err = ENOMEM;
    for (size_t i = 0; !err && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_STRING || memchr(e->str, '\0', e->len))
            continue;
        if (!((*ids)[*n] = strndup(e->str, e->len)))
            err = ENOMEM;
        else
            ++*n;
    }
    freeReplyObject(r);
    if (!err && *n)
        qsort(*ids, *n, sizeof **ids, by_bytes);
    if (err) {
        nm_waitfor_ids_free(*ids, *n);
        *ids = NULL;
        *n = 0;
    }
    return err;
}

int nm_waitfor_holders(nm_config_t *cfg, char kind, const char *name, size_t name_len,
                       char ***ids, size_t *n)
{
    size_t klen = 0, len;
    char *one;
    *ids = NULL;
    *n = 0;
    if (rw_kind(kind)) {
        char *key = nm_keys_rw_held_by(cfg, name, name_len, &klen);
        return members(cfg, key, klen, ids, n);
    }
    int err = nm_waitfor_holder(cfg, name, name_len, &one, &len);
    if (err || !one)
        return err;
    if (!(*ids = malloc(sizeof **ids))) {
        free(one);
        return ENOMEM;
    }
    (*ids)[0] = one;
    *n = 1;
    return 0;
}

int nm_waitfor_blocker(nm_config_t *cfg, const nm_waitrec_t *r, char **id)
{
    char **ids;
    size_t n;
    *id = NULL;
    int err = nm_waitfor_holders(cfg, r->wait_kind, r->wait, r->wait_len, &ids, &n);
    for (size_t i = 0; !err && !*id && i < n; i++) {
        char *text;
        size_t len;
        nm_waitrec_t h;
        if (nm_waitfor_record(cfg, ids[i], strlen(ids[i]), &text, &len) != 0 || !text)
            continue;
        if (nm_waitrec_parse(text, len, &h) == 0 &&
            nm_waitrec_blocks(&h, r->wait_kind, r->wait, r->wait_len)) {
            *id = ids[i];
            ids[i] = NULL;
        }
        free(text);
    }
    if (!err)
        nm_waitfor_ids_free(ids, n);
    return err;
}

const char *nm_waitfor_kind_word(char kind)
{
    switch (kind) {
    case NM_WAIT_MUTEX: return "lock";
    case NM_WAIT_READ: return "read";
    case NM_WAIT_WRITE: return "write";
    default: return NULL;
    }
}

/* DEL KEY, or SREM KEY ID for a read-write lock's set. */
static void forget_hold(nm_config_t *cfg, const nm_waitrec_t *r, size_t i, const char *id)
{
    size_t klen;
    char *key = hold_key(cfg, r, i, &klen);
    if (!key)
        return;
    int rw = rw_kind(r->held_kind[i]);
    const char *argv[3] = { rw ? "SREM" : "DEL", key, id };
    size_t lens[3] = { rw ? 4 : 3, klen, strlen(id) };
    command_done(cfg, key, klen, rw ? 3 : 2, argv, lens);
    free(key);
}

void nm_waitfor_delete(nm_config_t *cfg, const char *id, const nm_waitrec_t *r)
{
    size_t klen, idlen = strlen(id);
    for (size_t i = 0; i < r->nheld; i++) {
        char *v;
        size_t vlen;
        if (rw_kind(r->held_kind[i])) {
            forget_hold(cfg, r, i, id);
            continue;
        }
        if (r->held_kind[i] != NM_WAIT_MUTEX ||
            nm_waitfor_holder(cfg, r->held[i], r->held_len[i], &v, &vlen) != 0 || !v)
            continue;
        /* Not atomic: a holder that took it over meanwhile publishes its
         * key again at its next renewal. */
        if (vlen == idlen && memcmp(v, id, idlen) == 0)
            forget_hold(cfg, r, i, id);
        free(v);
    }
    char *key = nm_keys_waiter(cfg, id, idlen, &klen);
    if (key) {
        const char *argv[2] = { "DEL", key };
        size_t lens[2] = { 3, klen };
        command_done(cfg, key, klen, 2, argv, lens);
        free(key);
    }
}
