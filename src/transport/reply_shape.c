/* reply_shape.c -- checking and unpacking Redis replies (reply_shape.h). */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "reply_shape.h"

#define NON_LOCAL "Script attempted to access a non local key"

static int starts_with(const char *s, size_t len, const char *word)
{
    size_t n = strlen(word);
    return len >= n && memcmp(s, word, n) == 0;
}

int nm_reply_error_errno(const redisReply *r)
{
    const char *s = r->str ? r->str : "";
    size_t len = r->str ? r->len : 0;

    if (starts_with(s, len, "NOAUTH") || starts_with(s, len, "WRONGPASS") ||
        starts_with(s, len, "NOPERM") || starts_with(s, len, "ERR invalid password") ||
        starts_with(s, len, "ERR AUTH") || starts_with(s, len, "ERR DB index") ||
        /* Redis 7 answers a long command from a client that has not
         * authenticated with this (and closes the connection). */
        starts_with(s, len, "ERR Protocol error: unauthenticated"))
        return EACCES;
    if (starts_with(s, len, "NOSCRIPT"))
        return ENOENT;
    /* A server still loading its data set, or stuck in a long script, will
     * answer later: the same as not answering now. */
    if (starts_with(s, len, "LOADING") || starts_with(s, len, "BUSY") ||
        starts_with(s, len, "MASTERDOWN") || starts_with(s, len, "CLUSTERDOWN"))
        return NM_ECONN;
    /* A migration under way: the keys are split between two nodes.  The
     * "non local key" error comes from a script that touched a key its
     * caller did not declare; ours declare every key (lib.lua), so it
     * should not happen, and if it does it is as retryable as TRYAGAIN. */
    if (starts_with(s, len, "TRYAGAIN") ||
        memmem(s, len, NON_LOCAL, sizeof NON_LOCAL - 1) != NULL)
        return NM_ETRYAGAIN;
    /* A master demoted by a failover refuses writes, and ends a blocked
     * BLPOP: the connection leads to the wrong node, so it is dropped and
     * the next dial finds the master (sentinel.h). */
    if (starts_with(s, len, "READONLY") || starts_with(s, len, "UNBLOCKED"))
        return NM_ECONN;
    if (starts_with(s, len, "MOVED ") || starts_with(s, len, "ASK "))
        return NM_EREDIRECT;
    return EPROTO;
}

/* The text of the calling thread's last error reply. */
static __thread char last_error[160];

const char *nm_reply_last_error(void)
{
    return last_error;
}

int nm_reply_check(redisReply *r, redisReply **out)
{
    if (r->type == REDIS_REPLY_ERROR) {
        int err = nm_reply_error_errno(r);
        snprintf(last_error, sizeof last_error, "%.*s", (int)NM_MIN(r->len, 159), r->str);
        freeReplyObject(r);
        return err;
    }
    *out = r;
    return 0;
}

int nm_reply_expect_status(const redisReply *r, const char *status)
{
    if (r->type != REDIS_REPLY_STATUS || r->str == NULL || strcmp(r->str, status) != 0)
        return EPROTO;
    return 0;
}

int nm_reply_is_nil(const redisReply *r)
{
    return r->type == REDIS_REPLY_NIL;
}

int nm_reply_integer(const redisReply *r, long long *out)
{
    if (r->type != REDIS_REPLY_INTEGER)
        return EPROTO;
    *out = r->integer;
    return 0;
}

int nm_reply_array(const redisReply *r, size_t *n)
{
    if (r->type != REDIS_REPLY_ARRAY)
        return EPROTO;
    *n = r->elements;
    return 0;
}

int nm_reply_integer_at(const redisReply *r, size_t at, long long *out)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements <= at)
        return EPROTO;
    return nm_reply_integer(r->element[at], out);
}

int nm_reply_integers(const redisReply *r, long long *out, size_t n)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < n)
        return EPROTO;
    for (size_t i = 0; i < n; i++)
        if (nm_reply_integer(r->element[i], &out[i]))
            return EPROTO;
    return 0;
}

int nm_reply_string(const redisReply *r, const char **str, size_t *len)
{
    if ((r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) || !r->str)
        return EPROTO;
    *str = r->str;
    *len = r->len;
    return 0;
}

int nm_reply_strings(const redisReply *r, const char **strs, size_t *lens, size_t n)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < n)
        return EPROTO;
    for (size_t i = 0; i < n; i++)
        if (nm_reply_string(r->element[i], &strs[i], &lens[i]))
            return EPROTO;
    return 0;
}

int nm_reply_scan(const redisReply *r, char cursor[NM_SCAN_CURSOR_MAX],
                  redisReply *const **keys, size_t *n)
{
    const char *c;
    size_t len;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        nm_reply_string(r->element[0], &c, &len) || len == 0 || len >= NM_SCAN_CURSOR_MAX ||
        strspn(c, "0123456789") != len || r->element[1]->type != REDIS_REPLY_ARRAY)
        return EPROTO;
    for (size_t i = 0; i < r->element[1]->elements; i++)
        if (r->element[1]->element[i]->type != REDIS_REPLY_STRING)
            return EPROTO;
    memcpy(cursor, c, len);
    cursor[len] = '\0';
    *keys = r->element[1]->element;
    *n = r->element[1]->elements;
    return 0;
}

int nm_reply_grant(const redisReply *r, size_t at, const char **token, size_t *len,
                   long long *claim)
{
    if (r->type != REDIS_REPLY_ARRAY)
        return EPROTO;
    if (r->elements <= at)
        return ENOENT;
    if (r->elements < at + 2 || nm_reply_string(r->element[at], token, len) ||
        nm_reply_integer(r->element[at + 1], claim))
        return EPROTO;
    return 0;
}
