/*
 * stats_board.c -- this process's statistics key on the servers
 * (stats_board.h): SET with an expiry, so that a dead process's summary
 * is gone within seconds, DEL when the publishing stops, and GET for a
 * reader (list.c finds the keys), each where the key lives (routed.h).
 * The key is named by keys.c; the value's format is local/stats.c's.
 */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keys.h"
#include "reply.h"
#include "routed.h"
#include "stats_board.h"

/* This host's name, as the key says it (no NUL, at most 63 bytes). */
static void host_of(char *out, size_t size)
{
    if (gethostname(out, size - 1) != 0 || !out[0])
        snprintf(out, size, "unknown");
    out[size - 1] = '\0';
}

/* Runs ARGV, whose second word is the key, where the key lives
 * (routed.h, which notes the outcome); the reply in *OUT if OUT is not
 * NULL.  The key is best effort: a broken connection is EAGAIN, to try
 * again at the next publishing or listing. */
static int command(nm_config_t *cfg, int argc, const char **argv, const size_t *lens,
                   int64_t deadline, redisReply **out)
{
    nm_routed_t q = { .key = argv[1], .key_len = lens[1], .argc = argc, .argv = argv,
                      .lens = lens };
    redisReply *r = NULL;
    int err = nm_routed_call(cfg, &q, deadline, &r, NULL);
    if (out && !err)
        *out = r;
    else if (r)
        freeReplyObject(r);
    return err == NM_ECONN ? EAGAIN : err;
}

static char *key_of(const nm_config_t *cfg, size_t *len)
{
    char host[64];
    host_of(host, sizeof host);
    return nm_keys_stats(cfg, host, (long)getpid(), len);
}

int nm_stats_board_put(nm_config_t *cfg, const char *value, size_t len, unsigned int ttl_ms,
                       int64_t deadline)
{
    size_t klen;
    char *key = key_of(cfg, &klen), ttl[16];
    if (!key)
        return ENOMEM;
    snprintf(ttl, sizeof ttl, "%u", ttl_ms);
    const char *argv[] = { "SET", key, value, "PX", ttl };
    size_t lens[] = { 3, klen, len, 2, strlen(ttl) };
    int err = command(cfg, 5, argv, lens, deadline, NULL);
    free(key);
    return err;
}

int nm_stats_board_remove(nm_config_t *cfg, int64_t deadline)
{
    size_t klen;
    char *key = key_of(cfg, &klen);
    if (!key)
        return ENOMEM;
    const char *argv[] = { "DEL", key };
    size_t lens[] = { 3, klen };
    int err = command(cfg, 2, argv, lens, deadline, NULL);
    free(key);
    return err;
}

int nm_stats_board_get(nm_config_t *cfg, const char *key, size_t len, int64_t deadline,
                       char **text, size_t *text_len)
{
    const char *argv[] = { "GET", key };
    size_t lens[] = { 3, len };
    redisReply *r;
    int err = command(cfg, 2, argv, lens, deadline, &r);
    if (err)
        return err;
    if (r->type == REDIS_REPLY_NIL)
        err = ENOENT;
    else if (r->type != REDIS_REPLY_STRING)
        err = EPROTO;
    else if (!(*text = malloc(r->len + 1)))
        err = ENOMEM;
    else {
        memcpy(*text, r->str, r->len);
        (*text)[r->len] = '\0';
        *text_len = r->len;
    }
    freeReplyObject(r);
    return err;
}
