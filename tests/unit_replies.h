/*
 * unit_replies.h -- redisReply objects built by hand for the unit tests,
 * allocated as hiredis allocates them, so freeReplyObject() (and the
 * library's own nm_votes_clear) frees them.
 */
#ifndef NM_UNIT_REPLIES_H
#define NM_UNIT_REPLIES_H

#include <glib.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static inline redisReply *ur_new(int type)
{
    redisReply *r = calloc(1, sizeof *r);
    g_assert_nonnull(r);
    r->type = type;
    return r;
}

static inline redisReply *ur_int(long long v)
{
    redisReply *r = ur_new(REDIS_REPLY_INTEGER);
    r->integer = v;
    return r;
}

/* A string-like reply (STRING, STATUS, ERROR) of LEN bytes at S. */
static inline redisReply *ur_bytes(int type, const char *s, size_t len)
{
    redisReply *r = ur_new(type);
    r->str = malloc(len + 1);
    g_assert_nonnull(r->str);
    memcpy(r->str, s, len);
    r->str[len] = '\0';
    r->len = len;
    return r;
}

static inline redisReply *ur_str(int type, const char *s)
{
    return ur_bytes(type, s, strlen(s));
}

/* An array of N replies, given as arguments (taken over). */
static inline redisReply *ur_array(size_t n, ...)
{
    redisReply *r = ur_new(REDIS_REPLY_ARRAY);
    va_list ap;
    r->elements = n;
    r->element = n ? calloc(n, sizeof *r->element) : NULL;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        r->element[i] = va_arg(ap, redisReply *);
    va_end(ap);
    return r;
}

#endif /* NM_UNIT_REPLIES_H */
