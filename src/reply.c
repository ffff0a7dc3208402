/* reply.c -- checking and unpacking Redis replies. */
#include "nm.h"

#include <errno.h>
#include <string.h>

#include "reply.h"

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
        starts_with(s, len, "ERR AUTH") || starts_with(s, len, "ERR DB index"))
        return EACCES;
    if (starts_with(s, len, "NOSCRIPT"))
        return ENOENT;
    /* A server still loading its data set, or stuck in a long script, will
     * answer later: the same as not answering now. */
    if (starts_with(s, len, "LOADING") || starts_with(s, len, "BUSY") ||
        starts_with(s, len, "MASTERDOWN") || starts_with(s, len, "TRYAGAIN"))
        return NM_ECONN;
    return EPROTO;
}

int nm_get_reply(redisContext *c, redisReply **out)
{
    void *raw = NULL;
    if (redisGetReply(c, &raw) != REDIS_OK || raw == NULL)
        return c->err == REDIS_ERR_OOM ? ENOMEM : NM_ECONN;
    redisReply *r = raw;
    if (r->type == REDIS_REPLY_ERROR) {
        int err = nm_reply_error_errno(r);
        freeReplyObject(r);
        return err;
    }
    *out = r;
    return 0;
}

int nm_call(redisContext *c, int argc, const char **argv, const size_t *lens,
            redisReply **out)
{
    if (redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK)
        return c->err == REDIS_ERR_OOM ? ENOMEM : NM_ECONN;
    return nm_get_reply(c, out);
}

int nm_reply_expect_status(const redisReply *r, const char *status)
{
    if (r->type != REDIS_REPLY_STATUS || r->str == NULL || strcmp(r->str, status) != 0)
        return EPROTO;
    return 0;
}

int nm_reply_integer(const redisReply *r, long long *out)
{
    if (r->type != REDIS_REPLY_INTEGER)
        return EPROTO;
    *out = r->integer;
    return 0;
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
